"""The exact aggregated MILP of a chain of identical blocks (issue 18, item 3).

The direct MILP (:mod:`.direct`) has a stage and a strategy column per layer,
so its size grows with the layers and its relaxation is full of equivalent
solutions. On a chain ``[prefix] + N identical blocks + [suffix]``
(:func:`~.chain_blocks.block_chain`) this model describes stage ``i`` by

- ``c[i,k]``: how many blocks of stage ``i`` use strategy ``k`` (integer);
- ``pi[i,P]``: the stage's in-stage layout pattern ``P = (U, f, h)``
  (binary, one per stage; an EMPTY pattern where the prefix or the suffix
  alone may form stage 0 or the last stage), with its least resharding cost
  (:func:`~.chain_blocks.layout_patterns`);
- ``sp[k]``, ``ss[k]``: the prefix's and the suffix's strategy (binary);

and the products the costs need as exact transportation blocks (Alpa's edge
variables): ``Tp`` (prefix layout x stage 0's first body layout or EMPTY),
``Ts`` (the last stage's last body layout or EMPTY x suffix layout) and per
boundary ``Q`` (the last layer's layout of stage ``b`` x the first of
``b+1``). With one-hot margins a transportation block has exactly one
solution, the product. Rows (``N`` the body blocks, ``need`` from
:meth:`~.chain_blocks.Pattern.need`, ``UB[i,l]`` the most blocks of layout
``l`` that fit stage ``i``'s memory)::

    sum_P pi[i,P] = 1                    sum_{i,k} c[i,k] = N
    sum_{k in l} c[i,k] >= sum_P need(P,l)·pi[i,P]
    sum_{k in l} c[i,k] <= UB[i,l]·sum_{P contains l} pi[i,P]
    p[i] = sum_k A[k]·c[i,k] + sum_P cost(P)·pi[i,P] + (prefix / suffix time and resharding)
    g[i] = sum_k G[k]·c[i,k] + ...      memory[i] = sum_k (W[k] + inflight_i·H[k])·c[i,k] + ... + work[i] <= cap
    sum_{k: X[k] >= L} c[i,k] <= N·z[i,L]      work[i] >= L·z[i,L]      (every level L > 0 of X)
    work[0] >= sum_k X_prefix[k]·sp[k]         work[P-1] >= sum_k X_suffix[k]·ss[k]
    o[b] = sum R'_{tier(b)}·Q[b]        min sum p + sum o + (c-1)·bottleneck + sync_max + T0

Exactness. (1) Every plan of the configuration maps to a point of this
model whose objective is at most the plan's time: per stage take the counts,
``U`` the layouts used, ``f`` and ``h`` the first and last body layouts; the
pattern's cost is at most the stage's resharding (triangle inequality,
:mod:`.chain_blocks`), and every other term (times, syncs and memory are sums
over layers of identical per-block arrays; the prefix/suffix edges and the
cross-stage transfers depend only on the layouts at the stage ends, which the
pattern keeps) is equal. (2) Every integer point decodes
(:meth:`BlockFormulation.assignment`, blocks grouped along the pattern's path)
to a plan whose stage times, transfers, syncs and memory are exactly the
model's ``p``, ``o``, ``g`` and memory rows (the working set ``work[i]`` is at
least the largest ``X`` of the stage's layers: ``z[i,L]`` is forced to 1 by any
block of working set ``>= L``; ``work`` enters only the memory row, so a point
exists iff the stored memory plus that largest ``X`` fits, as in
:func:`~autopar_opt.cost.tables.stage_memory`), so its time is at most the
objective, with equality at an optimum. Hence the two optima are equal, the
decoded optimum is an optimal plan, and the model's dual bound is a valid
lower bound for every plan of the configuration. ``tests/unit/formulations/test_block_milp.py``
checks both directions against the direct MILP and brute force.

Two additions make HiGHS fast without changing the optimum: the stage-size
cut (``m[i]`` integer, ``p[i] >= F_i(m)``, :meth:`_Builder._size_rows`) and
the time unit of the ``p``, ``o``, ``g`` columns (the slowest block strategy's
time is 1; the objective coefficients convert back to seconds), since HiGHS's
feasibility tolerances are absolute. Its size depends on ``pp``, the
strategies, the layouts and (through ``m``) linearly on ``N``, not on the
per-layer products of the direct MILP.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from autopar_opt.core.assignment import Assignment
from autopar_opt.core.matrix import MatrixForm
from autopar_opt.core.result import ProblemClass, SolveResult
from autopar_opt.cost.tables import CostTables
from autopar_opt.formulations.base import FormulationError, MatrixBacked, check_tables, start_assignment
from autopar_opt.formulations.block_floors import StageFloor, layer_bytes, stage_floors
from autopar_opt.formulations.chain_blocks import (BlockChain, Pattern, best_path, block_chain,
                                                   collapse, layout_patterns)
from autopar_opt.ir.hardware import GIB, MEM_EPS
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.strategies import layout_ids
from autopar_opt.core.memory_budget import MemoryBudget, ModelSize, OverBudget

EMPTY = -1   #: the pattern of a stage without body blocks


class _Model:
    """Columns and rows accumulated one at a time (COO)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.integ: list[bool] = []
        self.cost: dict[int, float] = {}
        self.rows: list[dict[int, float]] = []
        self.rlo: list[float] = []
        self.rhi: list[float] = []
        self.rnames: list[str] = []

    def col(self, name: str, hi: float = math.inf, integer: bool = False) -> int:
        self.names.append(name)
        self.lo.append(0.0)
        self.hi.append(hi)
        self.integ.append(integer)
        return len(self.names) - 1

    def row(self, name: str, terms: dict[int, float], lo: float, hi: float) -> None:
        self.rows.append(terms)
        self.rnames.append(name)
        self.rlo.append(lo)
        self.rhi.append(hi)

    def size(self) -> ModelSize:
        """Rows, columns and entries of :meth:`matrix` (an upper bound on its non-zeros:
        terms that sum to zero are dropped there)."""
        return ModelSize(len(self.rows), len(self.names), sum(len(t) for t in self.rows))

    def matrix(self, offset: float) -> MatrixForm:
        r = [i for i, t in enumerate(self.rows) for a in t.values() if a != 0.0]
        c = [j for t in self.rows for j, a in t.items() if a != 0.0]
        v = [a for t in self.rows for a in t.values() if a != 0.0]
        A = sp.csr_array((v, (r, c)), shape=(len(self.rows), len(self.names)))
        cost = np.zeros(len(self.names))
        for j, a in self.cost.items():
            cost[j] = a
        return MatrixForm(c=cost, A=A, row_lo=np.asarray(self.rlo, float), row_hi=np.asarray(self.rhi, float),
                          col_lo=np.asarray(self.lo, float), col_hi=np.asarray(self.hi, float),
                          integrality=np.asarray(self.integ, bool), offset=offset,
                          columns=self.names, row_names=self.rnames)


def _add(terms: dict[int, float], col: int, a: float) -> None:
    terms[col] = terms.get(col, 0.0) + float(a)


@dataclass
class BlockFormulation(MatrixBacked):
    """The aggregated MILP of one configuration: matrix, decoding, warm starts."""

    tables: CostTables
    chain: BlockChain
    patterns: list[Pattern]
    matrix: MatrixForm
    pi: list[dict[int, int]]          # stage -> pattern index (or EMPTY) -> column
    c: np.ndarray                     # [stage, body strategy] -> column
    sp: list[int]                     # prefix strategy columns
    ss: list[int]                     # suffix strategy columns
    Tp: dict[tuple[int, int], int]    # (prefix layout, body layout or EMPTY) -> column
    Ts: dict[tuple[int, int], int]    # (body layout or EMPTY, suffix layout) -> column
    Q: list[dict[tuple, int]]         # boundary -> ((kind, layout), (kind, layout)) -> column
    defs: dict[int, dict[int, float]] = field(default_factory=dict)   # p/o/g column -> its terms
    tops: tuple[int, int] = (0, 0)    # bottleneck, sync_max columns
    times: list[int] = field(default_factory=list)   # p and o columns (under the bottleneck)
    syncs: list[int] = field(default_factory=list)   # g columns (under sync_max)
    sizes: list[tuple[int, dict[int, int]]] = field(default_factory=list)  # stage -> (m, {m: d})
    #: per stage: the work[i] column and {working-set level (GiB): z[i,L] column}
    work: list[tuple[int, dict[float, int]]] = field(default_factory=list)
    symmetry: bool = False
    problem_class: ProblemClass = ProblemClass.milp

    # ---- decoding ---------------------------------------------------------
    def assignment(self, x: np.ndarray) -> Assignment:
        """The plan of a raw column vector: blocks grouped along each stage's pattern path."""
        if x is None or len(x) != self.matrix.num_cols:
            raise FormulationError("no solution vector of this matrix to decode")
        ch, pp = self.chain, self.tables.pp
        stage, choice = [0] * ch.prefix, []
        if ch.prefix:
            choice.append(int(np.argmax(x[self.sp])))
        for i in range(pp):
            pat = max(self.pi[i], key=lambda P: x[self.pi[i][P]])
            counts = np.rint(x[self.c[i]]).astype(int)
            seq = [] if pat == EMPTY else _sequence(self.patterns[pat], counts, ch)
            stage += [i] * len(seq)
            choice += seq
        if ch.suffix:
            stage.append(pp - 1)
            choice.append(int(np.argmax(x[self.ss])))
        if len(stage) != self.tables.num_layers:
            raise FormulationError("the block counts do not add up to the body (not a solution)")
        return Assignment(stage, choice)

    def uses_relaxed(self, x: np.ndarray) -> bool:
        """Whether a stage of ``x`` takes a relaxed pattern (its time may differ from the model's)."""
        return any(P != EMPTY and self.patterns[P].relaxed and x[col] > 0.5
                   for stage in self.pi for P, col in stage.items())

    def invert(self, result: SolveResult) -> Assignment | None:
        return self.assignment(result.solution) if result.has_solution else None

    def decode_values(self, x: np.ndarray) -> Plan:
        return self.tables.plan_of(self.assignment(x))

    # ---- warm starts ------------------------------------------------------
    def start_vector(self, start: Plan | Assignment) -> np.ndarray:
        """Every column from a plan or an assignment (its pattern per stage; the
        model's objective there is at most the plan's time, see module doc)."""
        asg = start_assignment(self.tables, start)
        ch, pp, n = self.chain, self.tables.pp, self.tables.num_layers
        body = range(ch.start, ch.start + ch.count)
        if (ch.prefix and asg.stage[0] != 0) or (ch.suffix and asg.stage[n - 1] != pp - 1):
            raise FormulationError("warm start puts the prefix or suffix in another stage")
        x = np.zeros(self.matrix.num_cols)
        index = {(p.mask, p.f, p.h, p.relaxed): j for j, p in enumerate(self.patterns)}
        first, last = {}, {}
        for i in range(pp):
            ks = [asg.choice[u] for u in body if asg.stage[u] == i]
            for k in ks:
                x[self.c[i][k]] += 1
            if ks:
                mask = sum({1 << int(ch.gid[k]) for k in ks})
                f, h = int(ch.gid[ks[0]]), int(ch.gid[ks[-1]])
                P = index.get((mask, f, h, False), index.get(((1 << ch.num_layouts) - 1, f, h, True)))
                first[i], last[i] = ("body", int(ch.gid[ks[0]])), ("body", int(ch.gid[ks[-1]]))
            else:
                P, first[i], last[i] = EMPTY, None, None
            size, d = self.sizes[i]
            if P not in self.pi[i] or len(ks) not in d:
                raise FormulationError(f"warm start's stage {i} does not fit the block model")
            x[self.pi[i][P]] = 1.0
            x[size], x[d[len(ks)]] = len(ks), 1.0
        lp = layout_ids(self.tables.strategies[0]) if ch.prefix else []
        ls = layout_ids(self.tables.strategies[n - 1]) if ch.suffix else []
        if ch.prefix:
            kp = asg.choice[0]
            x[self.sp[kp]] = 1.0
            x[self.Tp[(lp[kp], EMPTY if first[0] is None else first[0][1])]] = 1.0
            if first[0] is None:
                last[0] = ("prefix", lp[kp])
        if ch.suffix:
            ksf = asg.choice[n - 1]
            x[self.ss[ksf]] = 1.0
            x[self.Ts[(EMPTY if last[pp - 1] is None else last[pp - 1][1], ls[ksf])]] = 1.0
            if first[pp - 1] is None:
                first[pp - 1] = ("suffix", ls[ksf])
        for b in range(pp - 1):
            x[self.Q[b][(last[b], first[b + 1])]] = 1.0
        for col, terms in self.defs.items():
            x[col] = sum(a * x[j] for j, a in terms.items())
        X = self.tables.working_bytes
        for i, (wcol, levels) in enumerate(self.work):
            xs = [float(X[u][asg.choice[u]]) / GIB for u in range(n) if asg.stage[u] == i]
            top = max(xs, default=0.0)
            x[wcol] = top
            for L, col in levels.items():
                x[col] = 1.0 if top >= L else 0.0
        x[self.tops[0]] = max(x[j] for j in self.times)
        x[self.tops[1]] = max(x[j] for j in self.syncs)
        return x

    def set_warm_start(self, start: Plan | Assignment) -> None:
        """Attach ``start`` as the HiGHS start (none when it does not fit the model)."""
        try:
            self.matrix.start = self.start_vector(start)
        except (FormulationError, KeyError):
            self.matrix.start = None


def _sequence(pat: Pattern, counts: np.ndarray, ch: BlockChain) -> list[int]:
    """The stage's strategies in order: the blocks of each layout together, along
    the pattern's path (the blocks of ``f`` split between both ends of a closed
    path; a relaxed pattern takes the least path through the layouts it uses)."""
    gid = ch.gid
    path = pat.path
    if pat.relaxed:
        used = {int(gid[k]) for k in range(len(counts)) if counts[k] > 0}
        path = best_path(ch.reshard, used, pat.f, pat.h)
    blocks = {l: [k for k in range(len(counts)) if gid[k] == l for _ in range(max(counts[k], 0))]
              for l in set(path)}
    split = path[0] == path[-1] and len(path) > 1
    seq: list[int] = []
    for pos, l in enumerate(path):
        if split and l == pat.f:
            seq += blocks[l][:1] if pos == 0 else blocks[l][1:]
        else:
            seq += blocks[l]
    return seq


def build_blocks(tables: CostTables, exact_upto: int | None = None,
                 floors: list[StageFloor] | None = None, ub: float = math.inf,
                 budget: MemoryBudget | None = None) -> BlockFormulation:
    """The aggregated MILP of ``tables`` (FormulationError when it is not a block
    chain); with ``exact_upto``, stages of more layouts than that take relaxed
    patterns (:func:`~.chain_blocks.layout_patterns`); with ``ub`` (the time of a
    plan the caller keeps), stage sizes that cannot beat it are left out
    (:meth:`_Builder._size_bound`): the model then finds every plan better than
    ``ub``, and its bound is valid for ``min(optimum, ub)``. ``budget``: the model is
    counted once its rows are listed, before the matrix and the solver's copy
    (:class:`OverBudget` past it; the block model's size does not grow with the number
    of layers, only with the layouts' patterns)."""
    check_tables(tables)
    t0 = time.perf_counter()
    chain, why = block_chain(tables)
    if chain is None:
        raise FormulationError(f"the block MILP needs a chain of identical blocks: {why}")
    if floors is None:
        floors = stage_floors(tables, chain)
    builder = _Builder(tables, chain, layout_patterns(chain.reshard, exact_upto), floors, ub)
    builder.budget = budget
    form = builder.build()
    form.matrix.compile_s = time.perf_counter() - t0
    return form


class _Builder:
    """Columns and rows of :class:`BlockFormulation` (the rows of the module doc)."""

    #: the memory budget checked before the matrix is made (None: no check)
    budget: MemoryBudget | None = None

    def __init__(self, tables: CostTables, chain: BlockChain, patterns: list[Pattern],
                 floors: list[StageFloor], ub: float = math.inf) -> None:
        self.t, self.ch, self.pats, self.m, self.floors = tables, chain, patterns, _Model(), floors
        self.ub = ub
        self.pp, self.n, self.b = tables.pp, tables.num_layers, chain.start
        self.K = len(tables.strategies[self.b])
        self.nl = chain.num_layouts
        self.members = [np.flatnonzero(chain.gid == l) for l in range(self.nl)]
        self.gp = np.asarray(layout_ids(tables.strategies[0])) if chain.prefix else None
        self.gs = np.asarray(layout_ids(tables.strategies[self.n - 1])) if chain.suffix else None
        pp = self.pp
        self.P = [dict() for _ in range(pp)]     # stage time terms
        self.G = [dict() for _ in range(pp)]     # stage sync terms
        self.M = [dict() for _ in range(pp)]     # stage memory terms (GiB)
        self.odefs: dict[int, dict[int, float]] = {}   # boundary -> transfer time terms
        #: time unit of the p, o, g columns: the slowest block strategy is 1 (HiGHS's
        #: tolerances are absolute; stage times of 1e-3 s lost 1e-6 s to them)
        self.S = 1.0 / max(float(np.max(tables.time[self.b])), 1e-12)
        self.cut: dict[int, dict[int, float]] = {}     # stage -> size-cut terms
        self.sizes: list[tuple[int, dict[int, int]]] = []

    def mem(self, u: int, i: int) -> np.ndarray:
        return layer_bytes(self.t, u, i) / GIB

    def layer(self, i: int, u: int, cols) -> None:
        """Time, sync and memory of layer ``u`` in stage ``i`` on its strategy columns."""
        for k, col in enumerate(cols):
            _add(self.P[i], col, self.S * self.t.time[u][k])
            _add(self.G[i], col, self.S * self.t.sync[u][k])
            _add(self.M[i], col, self.mem(u, i)[k])

    def build(self) -> BlockFormulation:
        m, t, ch, pp, N = self.m, self.t, self.ch, self.pp, self.ch.count
        cap = float(t.capacity_bytes) / GIB + MEM_EPS   # the allowance of `fits` and the DP
        p = [m.col(f"p[{i}]") for i in range(pp)]
        o = [m.col(f"o[{b}]") for b in range(pp - 1)]
        g = [m.col(f"g[{i}]") for i in range(pp)]
        bott, smax = m.col("bottleneck"), m.col("sync_max")
        c = np.zeros((pp, self.K), dtype=np.int64)
        UB = np.zeros((pp, self.nl), dtype=np.int64)
        for i in range(pp):
            per = self.mem(self.b, i)
            ub = [N if a <= 0 else min(N, math.floor(cap / a + 1e-9)) for a in per]
            c[i] = [m.col(f"c[{i},{k}]", hi=float(ub[k]), integer=True) for k in range(self.K)]
            UB[i] = [max(ub[k] for k in self.members[l]) for l in range(self.nl)]
        pi = [self._patterns(i, UB[i]) for i in range(pp)]
        work = self._working_set(c)
        m.row("body_count", {int(j): 1.0 for j in c.ravel()}, N, N)
        for i in range(pp):
            m.row(f"pattern_onehot[{i}]", {col: 1.0 for col in pi[i].values()}, 1.0, 1.0)
            self._layout_rows(i, c[i], pi[i], UB[i])
            self.layer(i, self.b, c[i])
            for j, col in pi[i].items():
                if j != EMPTY and self.pats[j].cost:
                    _add(self.P[i], col, self.S * self.pats[j].cost)
        self._size_rows(c, pi)
        ends = [self._ends(i, pi[i]) for i in range(pp)]     # (first, last) layout weights
        sp_cols, Tp = self._prefix(pi[0], ends[0]) if ch.prefix else ([], {})
        ss_cols, Ts = self._suffix(pi[pp - 1], ends[pp - 1]) if ch.suffix else ([], {})
        Q = [self._boundary(b, ends[b][1], ends[b + 1][0], o[b]) for b in range(pp - 1)]
        for u, cols, i in ((0, sp_cols, 0), (self.n - 1, ss_cols, pp - 1)):
            X = np.asarray(t.working_bytes[u], float) / GIB if cols else np.zeros(0)
            if np.any(X > 0):   # work[i] >= X of the prefix's (suffix's) strategy
                row = {work[i][0]: 1.0}
                for k, j in enumerate(cols):
                    _add(row, j, -float(X[k]))
                m.row(f"work_{'prefix' if u == 0 else 'suffix'}", row, 0.0, math.inf)
        defs = {}
        for i in range(pp):
            defs[p[i]], defs[g[i]] = self.P[i], self.G[i]
            m.row(f"stage_time[{i}]", {p[i]: 1.0, **{j: -a for j, a in self.P[i].items()}}, 0.0, 0.0)
            m.row(f"stage_sync[{i}]", {g[i]: 1.0, **{j: -a for j, a in self.G[i].items()}}, 0.0, 0.0)
            m.row(f"stage_memory[{i}]", self.M[i], -math.inf, cap)
        for i in range(pp):   # the stage-size cut, with the prefix/suffix time of the stage
            row = {p[i]: 1.0, **{j: -a for j, a in self.cut[i].items()}}
            for u, cols in ((0, sp_cols), (self.n - 1, ss_cols)):
                if cols and i == (0 if u == 0 else pp - 1):
                    for k, j in enumerate(cols):
                        _add(row, j, -self.S * float(t.time[u][k]))
            m.row(f"stage_floor[{i}]", row, 0.0, math.inf)
        for b in range(pp - 1):
            defs[o[b]] = self.odefs[b]
        for name, top, cols in (("bottleneck_ge", bott, p + o), ("sync_max_ge", smax, g)):
            for j in cols:
                m.row(f"{name}[{m.names[j]}]", {top: 1.0, j: -1.0}, 0.0, math.inf)
        for j in p + o:
            m.cost[j] = 1.0 / self.S
        m.cost[bott] = float(t.rounds - 1) / self.S
        m.cost[smax] = 1.0 / self.S
        if self.budget is not None:        # counted from the row dicts, before the matrix
            size = m.size()
            why = self.budget.refuses(size, "the block MILP")
            if why:
                raise OverBudget(size, why)
        matrix = m.matrix(float(t.params.iteration_overhead_s))
        return BlockFormulation(t, ch, self.pats, matrix, pi, c, sp_cols, ss_cols, Tp, Ts, Q,
                                defs=defs, tops=(bott, smax), times=p + o, syncs=g, sizes=self.sizes,
                                work=work)

    def _working_set(self, c: np.ndarray) -> list[tuple[int, dict[float, int]]]:
        """``work[i]`` (GiB, in stage ``i``'s memory row) and, per level ``L > 0`` of the
        body's working sets ``X``, a binary ``z[i,L]`` that any block of working set
        ``>= L`` in the stage forces to 1 (``sum_{X[k] >= L} c[i,k] <= N·z[i,L]``),
        with ``work[i] >= L·z[i,L]``: the epigraph of the stage's largest ``X``."""
        m, N = self.m, self.ch.count
        X = np.asarray(self.t.working_bytes[self.b], float) / GIB
        levels = sorted({float(v) for v in X if v > 0})
        out = []
        for i in range(self.pp):
            wcol = m.col(f"work[{i}]")
            _add(self.M[i], wcol, 1.0)
            z = {}
            for j, L in enumerate(levels):
                col = m.col(f"z_work[{i},{j}]", hi=1.0, integer=True)
                m.row(f"work_level[{i},{j}]", {**{int(c[i][k]): 1.0 for k in np.flatnonzero(X >= L)},
                                               col: -float(N)}, -math.inf, 0.0)
                m.row(f"work_ge[{i},{j}]", {wcol: 1.0, col: -L}, 0.0, math.inf)
                z[L] = col
            out.append((wcol, z))
        return out

    def _size_rows(self, c: np.ndarray, pi: list[dict[int, int]]) -> None:
        """The stage-size cut: ``d[i,m] = [stage i holds m blocks]`` (binary, one per
        stage) and ``p[i] >= sum_m F_i(m)·d[i,m]`` + the prefix/suffix time in it, with
        ``F_i(m)`` the least time of ``m`` blocks whose memory fits stage ``i``
        beside the least prefix/suffix memory there (:mod:`.block_floors`: exact
        integer knapsack). Valid: every plan's ``p[i]`` is at least its blocks'
        time (resharding ``>= 0``), and those blocks fit that memory."""
        m, ch, pp = self.m, self.ch, self.pp
        for i in range(pp):
            F = self.floors[i].F
            lo = 0 if EMPTY in pi[i] else 1
            keep = np.isfinite(F) & (self._size_bound(i, F) <= self.ub * (1 + 1e-9))
            d = {k: m.col(f"d[{i},{k}]", hi=1.0, integer=True) for k in range(lo, ch.count + 1) if keep[k]}
            m.row(f"size_onehot[{i}]", {col: 1.0 for col in d.values()}, 1.0, 1.0)
            size = m.col(f"m[{i}]", hi=float(ch.count), integer=True)
            m.row(f"size_count[{i}]", {**{int(j): 1.0 for j in c[i]}, size: -1.0}, 0.0, 0.0)
            m.row(f"size_of[{i}]", {size: 1.0, **{col: -float(k) for k, col in d.items()}}, 0.0, 0.0)
            self.cut[i] = {col: self.S * float(F[k]) for k, col in d.items() if F[k]}
            self.sizes.append((size, d))

    def _size_bound(self, i: int, F: np.ndarray) -> np.ndarray:
        """A lower bound on the time of every plan whose stage ``i`` holds ``m``
        blocks, per ``m``: ``T0 + q + (N-m)·a + (c-1)·max(q, (N-m)·a/(pp-1))`` with
        ``q = F_i(m)`` + the least prefix/suffix time of the stage and ``a`` the
        least block time (every term of the objective is ``>= 0``). Sizes whose
        bound exceeds the caller's incumbent (``ub``) cannot hold a better plan:
        they get no ``d`` column (the incumbent itself always keeps its sizes)."""
        t, ch, pp, N = self.t, self.ch, self.pp, self.ch.count
        q = F.copy()
        if ch.prefix and i == 0:
            q = q + float(np.min(t.time[0]))
        if ch.suffix and i == pp - 1:
            q = q + float(np.min(t.time[self.n - 1]))
        rest = (N - np.arange(N + 1)) * float(np.min(t.time[self.b]))
        top = np.maximum(q, rest / (pp - 1)) if pp > 1 else q
        # sizes the stage cannot hold have q = inf: their bound is inf (with one
        # micro-batch 0 * inf would be NaN and print a RuntimeWarning on the user's stderr)
        finite = np.isfinite(q)
        top = np.where(finite, top, 0.0)
        bound = float(t.params.iteration_overhead_s) + np.where(finite, q, 0.0) + rest \
            + (t.rounds - 1) * top
        return np.where(finite, bound, np.inf)

    def _patterns(self, i: int, UB: np.ndarray) -> dict[int, int]:
        """Pattern columns of stage ``i``: those whose least block counts fit
        (memory bound ``UB``, ``N`` blocks); EMPTY where the prefix or suffix
        alone may form the stage."""
        ch, pp, out = self.ch, self.pp, {}
        for j, P in enumerate(self.pats):
            need = [(l, P.need(l)) for l in P.layouts()]
            if all(k <= UB[l] for l, k in need) and sum(k for _, k in need) <= ch.count:
                out[j] = self.m.col(f"pi[{i},{j}]", hi=1.0, integer=True)
        if pp > 1 and ((i == 0 and ch.prefix) or (i == pp - 1 and ch.suffix)):
            out[EMPTY] = self.m.col(f"pi[{i},empty]", hi=1.0, integer=True)
        return out

    def _layout_rows(self, i: int, c: np.ndarray, pi: dict[int, int], UB: np.ndarray) -> None:
        for l in range(self.nl):
            lo = {int(c[k]): 1.0 for k in self.members[l]}
            hi = dict(lo)
            for j, col in pi.items():
                if j == EMPTY:
                    continue
                pat = self.pats[j]
                need = pat.need(l)
                if need:
                    lo[col] = -float(need)
                # the layouts a pattern allows, not only those it needs: a relaxed pattern
                # needs only its ends but may use any layout (session 32: its middle layouts
                # were capped at 0, so the relaxation cut off plans and its bound could exceed
                # the optimum, 0.0772611 s against 0.0772435 s)
                if pat.mask >> l & 1:
                    hi[col] = -float(UB[l])
            self.m.row(f"layout_min[{i},{l}]", lo, 0.0, math.inf)
            self.m.row(f"layout_max[{i},{l}]", hi, -math.inf, 0.0)

    def _ends(self, i: int, pi: dict[int, int]):
        """``({("body", l): terms}, {...})``: the weights of stage ``i``'s first and
        last body layout (sums of pattern columns)."""
        first = {("body", l): {} for l in range(self.nl)}
        last = {("body", l): {} for l in range(self.nl)}
        for j, col in pi.items():
            if j != EMPTY:
                first[("body", self.pats[j].f)][col] = 1.0
                last[("body", self.pats[j].h)][col] = 1.0
        return first, last

    def _transport(self, name: str, src: dict, dst: dict, skip=lambda x, y: False) -> dict:
        """Columns ``X[x,y]`` with ``sum_y X = src[x]`` and ``sum_x X = dst[y]``
        (src/dst map a key to the terms of its weight)."""
        m = self.m
        X = {(x, y): m.col(f"{name}[{x},{y}]", hi=1.0) for x in src for y in dst if not skip(x, y)}
        for side, weights in ((0, src), (1, dst)):
            for key, terms in weights.items():
                row = {col: 1.0 for xy, col in X.items() if xy[side] == key}
                for j, a in terms.items():
                    _add(row, j, -a)
                m.row(f"{name}_{'src' if side == 0 else 'dst'}[{key}]", row, 0.0, 0.0)
        return X

    def _prefix(self, pi0: dict[int, int], ends0):
        t, m, gp = self.t, self.m, self.gp
        sp_cols = [m.col(f"sp[{k}]", hi=1.0, integer=True) for k in range(len(t.strategies[0]))]
        m.row("prefix_onehot", {j: 1.0 for j in sp_cols}, 1.0, 1.0)
        src = {a: {sp_cols[k]: 1.0 for k in np.flatnonzero(gp == a)} for a in range(int(gp.max()) + 1)}
        dst = {l: ends0[0][("body", l)] for l in range(self.nl)}
        if EMPTY in pi0:
            dst[EMPTY] = {pi0[EMPTY]: 1.0}
        X = self._transport("Tp", src, dst)
        self.layer(0, 0, sp_cols)
        R = collapse(t.reshard[0], gp, self.ch.gid)
        for (a, l), col in X.items():
            if l != EMPTY and R[a, l]:
                _add(self.P[0], col, self.S * R[a, l])
        if EMPTY in pi0:   # a stage 0 of the prefix alone ends with the prefix's layout
            ends0[1].update({("prefix", a): {X[(a, EMPTY)]: 1.0} for a in src})
        return sp_cols, X

    def _suffix(self, pil: dict[int, int], endsl):
        t, m, gs, u, last = self.t, self.m, self.gs, self.n - 1, self.pp - 1
        ss_cols = [m.col(f"ss[{k}]", hi=1.0, integer=True) for k in range(len(t.strategies[u]))]
        m.row("suffix_onehot", {j: 1.0 for j in ss_cols}, 1.0, 1.0)
        src = {l: endsl[1][("body", l)] for l in range(self.nl)}
        if EMPTY in pil:
            src[EMPTY] = {pil[EMPTY]: 1.0}
        dst = {a: {ss_cols[k]: 1.0 for k in np.flatnonzero(gs == a)} for a in range(int(gs.max()) + 1)}
        X = self._transport("Ts", src, dst)
        self.layer(last, u, ss_cols)
        R = collapse(t.reshard[u - 1], self.ch.gid, gs)
        for (l, a), col in X.items():
            if l != EMPTY and R[l, a]:
                _add(self.P[last], col, self.S * R[l, a])
        if EMPTY in pil:   # a last stage of the suffix alone starts with the suffix's layout
            endsl[0].update({("suffix", a): {X[(EMPTY, a)]: 1.0} for a in dst})
        return ss_cols, X

    def _boundary(self, b: int, exits: dict, entries: dict, o_col: int) -> dict:
        """``Q[b]``: the layouts on both sides of boundary ``b``, and ``o[b]``'s terms."""
        t, ch = self.t, self.ch
        src = t.cross_intra if t.boundary_intra[b] else t.cross_inter
        gids = {"body": ch.gid, "prefix": self.gp, "suffix": self.gs}
        edge = {("body", "body"): ch.body_edge, ("prefix", "body"): 0, ("body", "suffix"): self.n - 2}
        mats = {kinds: collapse(src[e], gids[kinds[0]], gids[kinds[1]]) for kinds, e in edge.items()
                if gids[kinds[0]] is not None and gids[kinds[1]] is not None}
        X = self._transport(f"Q{b}", exits, entries, skip=lambda x, y: (x[0], y[0]) not in mats)
        terms: dict[int, float] = {}
        for (x, y), col in X.items():
            cost = mats[(x[0], y[0])][x[1], y[1]]
            if cost:
                _add(terms, col, self.S * cost)
        self.odefs[b] = terms
        self.m.row(f"transfer_time[{b}]", {o_col: 1.0, **{j: -a for j, a in terms.items()}}, 0.0, 0.0)
        return X
