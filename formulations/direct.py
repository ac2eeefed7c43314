"""The formulation of one configuration as a matrix, straight from the cost tables.

The rows are those of the registered families (:mod:`.rows`,
:mod:`.families`, :mod:`.milp`), assembled in two steps:

- a STRUCTURE (:class:`MatrixStructure`): columns, sparsity pattern, the
  constant coefficients and row bounds. It depends only on the
  :class:`~.layout.StructureKey` (:func:`structure_key`): the number of
  layers, the edges, ``pp``, the layout groups of every layer's strategy
  list, which big-M rows are skipped (an edge whose cost matrix is all zero
  has none), the symmetric edges, the boundary tiers and the form;
- COEFFICIENTS: every family's ``fill`` (layer times ``A``, syncs ``G``,
  memory ``(W + inflight·H)``, the working sets ``X`` and capacity, the layout-pair resharding and
  cross matrices with their big-M, ``c - 1`` in the objective and ``T0``).

A :class:`DirectBuilder` caches structures by key, so outer configurations
that share ``pp`` and the strategy layout (other micro-batch counts or
schedules) only refill coefficient arrays: the rebuild-free path of the
HiGHS search. :class:`DirectFormulation` decodes a raw solution vector and
writes warm starts (:meth:`DirectFormulation.assignment_vector`, the one
warm-start writer: the Pyomo model takes its values from it). For the MIQP
the matrix holds the linear families only; :mod:`.pyomo_model` adds the
quadratic ones.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from autopar_opt.core.assignment import Assignment
from autopar_opt.core.matrix import MatrixForm
from autopar_opt.core.result import ProblemClass, SolveResult
from autopar_opt.cost.tables import CostTables
from autopar_opt.formulations.families import sort_symmetric_runs, symmetry_cuts
from autopar_opt.formulations.base import (FormulationError, MatrixBacked, check_tables, price_assignment,
                                            start_assignment)
from autopar_opt.formulations.layout import ColumnLayout, StructureKey
from autopar_opt.formulations.rows import Fill, collect, count, families_of
from autopar_opt.core.memory_budget import MemoryBudget, ModelSize, OverBudget
from autopar_opt.ir.hardware import GIB
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.strategies import layout_ids


def collapse(mat: np.ndarray, gu: np.ndarray, gv: np.ndarray) -> np.ndarray:
    """Strategy-pair matrix -> layout-pair matrix (exact: resharding depends on
    layouts only; checked here so that a cost-model change cannot silently
    break the reduction)."""
    fu = np.unique(gu, return_index=True)[1]
    fv = np.unique(gv, return_index=True)[1]
    out = mat[np.ix_(fu, fv)]
    if not np.allclose(mat, out[np.ix_(gu, gv)], rtol=1e-12, atol=0.0):
        raise FormulationError("resharding cost differs between strategies of one layout")
    return out


def _edge_matrices(tables: CostTables, gid: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Layout-pair ``in``/``intra``/``inter`` matrices of every edge (memoised
    on the shared table arrays)."""
    memo: dict[tuple, np.ndarray] = {}
    out = []
    for e, (u, v) in enumerate(tables.edges):
        mats = {}
        for kind, src in (("in", tables.reshard), ("intra", tables.cross_intra),
                          ("inter", tables.cross_inter)):
            key = (id(src[e]), id(tables.strategies[u]), id(tables.strategies[v]))
            if key not in memo:
                memo[key] = collapse(src[e], gid[u], gid[v])
            mats[kind] = memo[key]
        out.append(mats)
    return out


def structure_key(tables: CostTables, symmetry: bool, form: str = "milp") -> tuple[StructureKey, list[dict]]:
    """The structure key of ``tables`` and the layout-pair edge matrices (MILP only)."""
    ids: dict[int, tuple[int, ...]] = {}
    for strats in tables.strategies:
        if id(strats) not in ids:
            ids[id(strats)] = tuple(layout_ids(strats))
    gid = tuple(ids[id(s)] for s in tables.strategies)
    tiers = tuple("intra" if f else "inter" for f in tables.boundary_intra)
    mats = _edge_matrices(tables, [np.asarray(g) for g in gid]) if form == "milp" else []
    cuts = tuple((e, k, tuple(ks)) for e, k, ks in symmetry_cuts(tables)) if symmetry else ()
    key = StructureKey(n=tables.num_layers, pp=tables.pp, edges=tuple(tables.edges), gid=gid,
                       skip_reshard=tuple(bool(m["in"].max() <= 0) for m in mats),
                       skip_cross=tuple(tuple(bool(m[t].max() <= 0) for t in tiers) for m in mats),
                       sym_cuts=cuts, tiers=tiers, form=form, forbid=_forbidden(tables),
                       uniform=_uniform(tables), fixed=tuple(tables.fixed_stage or ()))
    return key, mats


def _uniform(tables: CostTables) -> tuple[tuple[tuple[int, ...], ...], ...]:
    """The target's uniform keys as a hashable structure (empty: free space)."""
    if tables.uniform_keys is None:
        return ()
    memo: dict[int, tuple] = {}
    return tuple(memo.setdefault(id(k), tuple(tuple(int(v) for v in row) for row in k))
                 for k in tables.uniform_keys)


def _forbidden(tables: CostTables) -> tuple[tuple[int, int, int], ...]:
    """``(u, i, k)`` for every strategy ``k`` of layer ``u`` that stage ``i`` may not
    use (free stage sizes: another device count); empty for congruent stages."""
    out = []
    for i in range(tables.pp):
        allowed = tables.allowed_in_stage(i)
        if allowed is None:
            return ()
        out += [(u, i, int(k)) for u, ok in enumerate(allowed) for k in np.flatnonzero(~ok)]
    return tuple(sorted(out))


@dataclass
class MatrixStructure:
    """Everything of the matrix that does not depend on costs (see module doc)."""

    key: StructureKey
    cols: ColumnLayout
    columns: list[str]
    row_names: list[str]
    blocks: list[tuple[str, list[tuple], slice]]   # (component, row indices, rows)
    template: np.ndarray         # COO values; cost slots are filled per configuration
    row_lo: np.ndarray
    row_hi: np.ndarray
    order: np.ndarray            # COO -> CSR permutation
    csr_rows: np.ndarray         # row of every CSR entry
    csr_cols: np.ndarray
    indptr: np.ndarray           # CSR row pointers of every structural entry
    slots: dict[str, tuple[slice, slice]]
    integrality: np.ndarray
    col_lo: np.ndarray
    col_hi: np.ndarray
    build_s: float = 0.0

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.row_names), len(self.columns)


def build_structure(key: StructureKey) -> MatrixStructure:
    """The structure step: every family's rows (no cost is read)."""
    start = time.perf_counter()
    C = ColumnLayout(key)
    got = collect(C, key)
    order = np.lexsort((got.cols, got.rows))
    rs, cs = got.rows[order], got.cols[order]
    if np.any((rs[1:] == rs[:-1]) & (cs[1:] == cs[:-1])):
        raise RuntimeError("formulation structure has a repeated (row, column) entry")
    nrows = len(got.names)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rs, minlength=nrows))])
    lo, hi, integ = C.bounds()
    return MatrixStructure(key=key, cols=C, columns=C.names(), row_names=got.names,
                           blocks=got.blocks, template=got.vals, row_lo=got.lo, row_hi=got.hi,
                           order=order, csr_rows=rs, csr_cols=cs, indptr=indptr, slots=got.slots,
                           integrality=integ, col_lo=lo, col_hi=hi,
                           build_s=time.perf_counter() - start)


def structure_size(key: StructureKey) -> ModelSize:
    """Rows, columns and structural entries of :func:`build_structure` ``(key)``, counted
    without building it (:func:`~.rows.count`): the memory budget's check before the
    build. The filled matrix drops entries whose cost is zero, so its ``nnz`` is at
    most this count; the structure's arrays hold every entry."""
    C = ColumnLayout(key)
    rows, entries = count(C, key)
    return ModelSize(rows, C.num_cols, entries)


def fill(struct: MatrixStructure, tables: CostTables, mats: list[dict]) -> tuple[MatrixForm, np.ndarray]:
    """The coefficient step: every family's ``fill`` into a copy of the structure.
    Returns the matrix (zero entries dropped) and the CSR-ordered values of every
    structural entry, zeros included (what the Pyomo rows are written from)."""
    nrows, ncols = struct.shape
    F = Fill(tables=tables, key=struct.key, C=struct.cols, mats=mats, slots=struct.slots,
             data=struct.template.copy(), lo=struct.row_lo.copy(), hi=struct.row_hi.copy(),
             c=np.zeros(ncols))
    for fam in families_of(struct.key.form):
        if fam.fill is not None:
            fam.fill(F)
    vals = F.data[struct.order]
    keep = vals != 0
    indptr = np.concatenate([[0], np.cumsum(np.bincount(struct.csr_rows[keep], minlength=nrows))])
    A = sp.csr_array((vals[keep], struct.csr_cols[keep], indptr), shape=(nrows, ncols))
    form = MatrixForm(c=F.c, A=A, row_lo=F.lo, row_hi=F.hi, col_lo=struct.col_lo.copy(),
                      col_hi=struct.col_hi.copy(), integrality=struct.integrality.copy(),
                      offset=F.offset, columns=struct.columns, row_names=struct.row_names)
    return form, vals


@dataclass
class DirectFormulation(MatrixBacked):
    """One configuration's formulation as a matrix: decoding and warm starts."""

    tables: CostTables
    structure: MatrixStructure
    matrix: MatrixForm
    symmetry: bool = True
    cached: bool = False                 # the structure came from the cache
    problem_class: ProblemClass = ProblemClass.milp
    entries: np.ndarray | None = None    # CSR values of every structural entry (see :func:`fill`)

    def stage_assignment(self, x: np.ndarray) -> list[int]:
        """Stage of every layer: the first ``i`` with ``a[u,i] = 1``, else ``P-1``."""
        C = self.structure.cols
        if C.pp == 1:
            return [0] * C.n
        a = np.asarray(x[C.block("a")]).reshape(C.n, C.pp - 1) > 0.5
        return [int(np.argmax(row)) if row.any() else C.pp - 1 for row in a]

    def strategy_choice(self, x: np.ndarray) -> list[int]:
        """Strategy of every layer: the largest ``s[u,k]``."""
        C = self.structure.cols
        s = np.asarray(x[C.block("s")])
        return [int(np.argmax(s[C.koff[u]:C.koff[u + 1]])) for u in range(C.n)]

    def assignment(self, x: np.ndarray) -> Assignment:
        """The :class:`Assignment` of a raw column vector of :attr:`matrix`."""
        if x is None or len(x) != self.matrix.num_cols:
            raise FormulationError("no solution vector of this matrix to decode")
        return Assignment(self.stage_assignment(x), self.strategy_choice(x))

    def invert(self, result: SolveResult) -> Assignment | None:
        """The backend's raw vector as the typed :class:`Assignment`; ``None`` without one."""
        return self.assignment(result.solution) if result.has_solution else None

    def decode_values(self, x: np.ndarray) -> Plan:
        """The plan of a raw column vector (:meth:`CostTables.plan_of`)."""
        return self.tables.plan_of(self.assignment(x))

    def assignment_vector(self, stage: list[int], ks: list[int]) -> np.ndarray:
        """Every column from a stage/strategy assignment, consistently: the one
        warm-start writer (for both forms; the block values are the products
        the families define, priced by :func:`price_assignment`)."""
        C, t = self.structure.cols, self.tables
        pp, x = C.pp, np.zeros(C.num_cols)
        st, kk = np.asarray(stage), np.asarray(ks)
        j = C.koff[:-1] + kk
        for i in range(pp - 1):
            x[C.a(np.arange(C.n), i)] = st <= i
        x[C.s(0, j)] = 1.0
        p, o, g, rin, rx = price_assignment(t, list(stage), list(ks))
        milp = C.form == "milp"
        if milp:
            x[C.w(j, st)] = 1.0
        gid = self.structure.key.gid
        for e, (u, v) in enumerate(t.edges):
            if stage[u] == stage[v]:
                x[C.y(e, stage[u])] = 1.0
            if not milp:
                x[C.rho(e)] = rin[e]
                for ti, tier in enumerate(C.tier_names):
                    x[C.rho_x(e, ti)] = rx[e][tier]
                continue
            x[C.el(e, gid[u][ks[u]], gid[v][ks[v]], int(C.nl[v]))] = 1.0
            if stage[u] == stage[v]:
                x[C.r(e, stage[u])] = rin[e]
            for b in range(stage[u], stage[v]):
                x[C.q(e, b)] = rx[e]["intra" if t.boundary_intra[b] else "inter"]
        x[C.block("p")], x[C.block("o")], x[C.block("g")] = p, o, g
        for u, (i, k) in enumerate(zip(stage, ks)):   # work[i] = max X of the stage (GiB)
            x[C.work(i)] = max(x[C.work(i)], float(t.working_bytes[u][k]) / GIB)
        x[C.bottleneck] = max(p + o)
        x[C.sync_max] = max(g)
        uniform = self.structure.key.uniform
        if uniform:                                    # a target's uniform choice
            chosen: dict[int, int] = {}
            for u, k in enumerate(ks):
                for d, v in enumerate(uniform[u][k]):
                    if v >= 0:
                        chosen[d] = v
            for d, v in C.uni_index:                   # a dimension no layer fixes: any value
                chosen.setdefault(d, v)
            for d, v in chosen.items():
                x[C.uni((d, v))] = 1.0
        return x

    def start_vector(self, start: Plan | Assignment) -> np.ndarray:
        """The warm-start vector of a plan or assignment (sorted into the symmetry
        cuts' order when they are on: same cost, see ``families.symmetry_order``)."""
        asg = start_assignment(self.tables, start)
        stage, ks = asg.stage, asg.choice
        if self.symmetry:
            ks = sort_symmetric_runs(self.tables, stage, ks)
        return self.assignment_vector(stage, ks)

    def set_warm_start(self, start: Plan | Assignment) -> None:
        """Attach ``start`` as :attr:`MatrixForm.start` (HiGHS ``setSolution``)."""
        self.matrix.start = self.start_vector(start)


class DirectBuilder:
    """Builds :class:`DirectFormulation` objects, caching structures by key
    (least recently used first out)."""

    def __init__(self, symmetry: bool = True, max_structures: int = 32, form: str = "milp") -> None:
        self.symmetry = symmetry
        self.form = form
        self.max_structures = max_structures
        self._cache: OrderedDict[StructureKey, MatrixStructure] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def build(self, tables: CostTables, budget: MemoryBudget | None = None) -> DirectFormulation:
        """The formulation of ``tables``; FormulationError as ``build_formulation``.
        With ``budget``, a structure not in the cache is counted first
        (:func:`structure_size`) and :class:`OverBudget` raised, nothing built,
        when it would exceed the budget."""
        check_tables(tables)
        start = time.perf_counter()
        key, mats = structure_key(tables, self.symmetry, self.form)
        struct = self._cache.get(key)
        cached = struct is not None
        if struct is None and budget is not None:
            size = structure_size(key)
            why = budget.refuses(size, "the MILP")
            if why:
                raise OverBudget(size, why)
        if struct is None:
            self.misses += 1
            struct = build_structure(key)
            self._cache[key] = struct
            while len(self._cache) > self.max_structures:
                self._cache.popitem(last=False)
        else:
            self.hits += 1
            self._cache.move_to_end(key)
        matrix, entries = fill(struct, tables, mats)
        matrix.compile_s = time.perf_counter() - start
        return DirectFormulation(tables, struct, matrix, symmetry=self.symmetry, cached=cached,
                                 problem_class=ProblemClass(self.form.upper()), entries=entries)


def build_direct(tables: CostTables, symmetry: bool = True, form: str = "milp",
                 budget: MemoryBudget | None = None) -> DirectFormulation:
    """The formulation of ``tables`` without a cache (see :class:`DirectBuilder`)."""
    return DirectBuilder(symmetry, max_structures=1, form=form).build(tables, budget)
