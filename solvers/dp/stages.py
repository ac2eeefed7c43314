"""Exact stage-range decomposition: integer per-stage knapsacks over runs of identical layers.

The partition bound of :mod:`~autopar_opt.solvers.dp.partition` bounds a stage's
time on a layer range by the LP relaxation of its memory knapsack. When every
stage is memory-bound (each holds as many layers as its weights allow and
recomputes all but a few) the fractional layer that the LP may keep without
recomputation, and a stage boundary the LP may place anywhere, leave the
bound about 2 % under the optimum at 256-1,024 layers (issue 18,
benchmarks/dp/NOTES.md). This module computes the same range function
exactly in integers:

    f_j(s, e) = min Σ_{v∈[s,e)} A[v,k_v]  s.t.  Σ_{v∈[s,e)} m_j[v,k_v] ≤ C

(``m_j = W + inflight_j·H`` the layer memory in stage ``j``, ``C`` the
capacity; in-stage resharding ``≥ 0`` is left out, so ``f_j`` is a lower bound
on the stage time ``p_j`` of every plan whose stage ``j`` holds ``[s, e)``).

Runs of identical layers (issue 18 item 3). ``f_j(s, ·)`` comes from the
Pareto front of (memory, time) over the layers' strategies, extended one layer
at a time. Two starts ``s`` and ``s+1`` inside one run of identical layers
(same time and memory arrays) see the same layers for the first
``runlen(s) − 1`` positions, so row ``s`` copies row ``s+1`` there and only
extends past the end of the run: on a model of repeated transformer blocks
each row costs a constant number of front merges, and the whole table
O(n) merges per stage instead of O(n²) (the work is estimated first; a model
without long runs is left to the LP bound).

Decomposition bound. Every plan has ``T ≥ Σ_j p_j + Σ_j o_j + (c−1)·max_j p_j + max_j g_j`` and ``p_j ≥ f_j(range_j)``, so with
``Ψ_j(s; B) = min_{e: f_j(s,e) ≤ B} f_j(s, e) + Ψ_{j+1}(e)`` (every stage
non-empty, ``Ψ_P(n) = 0``; ``Ψ_j(s)`` also counts the least transfer ``o_{j−1}`` into
stage ``j`` at ``s``, since ``Σ o ≥ 0`` enters ``T`` once)

    T*  ≥  min_B [(c−1)·B + Ψ_0(0; B)] + max g floor,

the minimum over the values ``B`` that ``f`` takes (``Ψ`` only changes there):
:meth:`StageRanges.bound`. The least ``B`` with ``Ψ_0(0; B) < ∞`` is a floor
under every plan's bottleneck. The minimising split, with each stage's
integer knapsack solution (:meth:`StageRanges.plan`), is a plan: priced
exactly it is the incumbent the label DP starts from.


Working sets. The stage memory also holds the largest working set ``X`` of
its layers (:func:`~autopar_opt.cost.tables.stage_memory`); this module
leaves it out. Every plan's stage memory is at least what is modelled here,
so the constraint is relaxed and the bounds stay valid; the chain DP keeps
this module's plan only if it fits with its working sets, and enforces them
exactly in its own labels.
"""

from __future__ import annotations

import math

import numpy as np

from autopar_opt.core.assignment import Assignment
from autopar_opt.solvers.dp.common import DPTimeout, past

#: front merges the table may cost per layer and stage before it is skipped (no long runs)
MAX_MERGES_PER_LAYER = 24
#: matrix entries (stages × (n+1)²) the dense tables may hold (about 100 MB)
MAX_ENTRIES = 12_000_000
#: candidate bottleneck values :meth:`StageRanges.bound` evaluates at most
MAX_CANDIDATES = 128


def _pareto(m: np.ndarray, t: np.ndarray, *extra: np.ndarray):
    """Points of least time for their memory: sorted by memory, time strictly decreasing."""
    if not len(m):
        return (m, t) + extra
    order = np.lexsort((t, m))
    m, t = m[order], t[order]
    keep = t < np.minimum.accumulate(np.r_[np.inf, t[:-1]])
    return (m[keep], t[keep]) + tuple(x[order][keep] for x in extra)


class StageRanges:
    """``f_j(s, e)`` for every stage and layer range (module docstring), ``inf`` where
    the range does not fit or is empty.

    Parameters
    ----------
    time : per layer, the compute time of each strategy (``tables.time``).
    mem : per stage, per layer, the memory of each strategy (``+inf``: not usable there).
    cap : the capacity (bytes, tolerance included).
    allowed : per layer, the strategy indices the search may use.
    entry : per stage ``j``, per layer ``s``, a lower bound on the transfer ``o_{j−1}`` when
        stage ``j`` starts at ``s`` (:func:`least_entry`); ``Ψ_j(s)`` includes it.
    deadline : ``time.monotonic()`` value; building the tables raises
        :class:`~autopar_opt.solvers.dp.common.DPTimeout` once it passes, and
        :meth:`bound` then returns a weaker (still proven) value.
    """

    def __init__(self, time: list[np.ndarray], mem: list[list[np.ndarray]], cap: float,
                 allowed: list[np.ndarray], entry: list[np.ndarray] | None = None,
                 deadline: float | None = None) -> None:
        self.n, self.pp, self.cap = len(time), len(mem), cap
        self.deadline = deadline
        self.time, self.mem, self.allowed = time, mem, allowed
        #: entry[j][s]: least transfer into stage j starting at layer s (0 for stage 0)
        self.entry = entry or [np.zeros(self.n + 1) for _ in range(self.pp)]
        # layers of one class share their arrays: their options are computed once
        memo: dict[tuple[int, int, int], tuple] = {}
        self.opts = [[self._shared_options(j, v, memo) for v in range(self.n)] for j in range(self.pp)]
        #: runfront[j][s]: (memory, time) front of layers [s, s + run[s]) in stage j (None: none fits)
        self.runfront: list[list] = [[None] * self.n for _ in range(self.pp)]
        self._rest: dict[tuple[int, int, int], tuple | None] = {}
        self._cat: dict[tuple[int, int], tuple] = {}
        self.f: list[np.ndarray] = [self._table(j) for j in range(self.pp)] if self.cheap() else []

    def _shared_options(self, j: int, v: int, memo: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`_options`, one object per distinct (memory, time, allowed) arrays."""
        key = (id(self.mem[j][v]), id(self.time[v]), id(self.allowed[v]))
        if key not in memo:
            memo[key] = self._options(j, v)
        return memo[key]

    def _options(self, j: int, v: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Layer ``v``'s useful strategies in stage ``j``: (memory, time, index), Pareto-pruned."""
        ks = np.asarray(self.allowed[v], dtype=np.int64)
        m, t = self.mem[j][v][ks], self.time[v][ks]
        fin = np.isfinite(m) & (m <= self.cap)
        return _pareto(m[fin], t[fin], ks[fin])

    def _runlen(self) -> np.ndarray:
        """Per layer, how many layers from it on are identical to it (time and every stage's memory)."""
        run = np.ones(self.n + 1, dtype=np.int64)
        run[self.n] = 0
        for v in range(self.n - 2, -1, -1):
            same = all(self.opts[j][v] is self.opts[j][v + 1]
                       or (np.array_equal(self.opts[j][v][0], self.opts[j][v + 1][0])
                           and np.array_equal(self.opts[j][v][1], self.opts[j][v + 1][1]))
                       for j in range(self.pp))
            run[v] = run[v + 1] + 1 if same else 1
        return run

    def cheap(self) -> bool:
        """Whether the table costs at most ``MAX_MERGES_PER_LAYER`` merges per layer and stage."""
        self.run = self._runlen()
        merges = sum(self.n - s - (int(self.run[s]) - 1) for s in range(self.n))
        return (merges <= max(MAX_MERGES_PER_LAYER * self.n, 4096)
                and self.pp * (self.n + 1) ** 2 <= MAX_ENTRIES)

    def _table(self, j: int) -> np.ndarray:
        """Dense ``(n+1, n+1)`` matrix of ``f_j(s, e)``, rows from the last start down."""
        n, cap, run = self.n, self.cap, self.run
        F = np.full((n + 1, n + 1), np.inf)
        stored = None    # front of row s+1 at length run[s+1]
        for s in range(n - 1, -1, -1):
            if s % 64 == 0 and past(self.deadline):
                raise DPTimeout
            L = int(run[s]) - 1
            if L > 0:
                F[s, s + 1:s + 1 + L] = F[s + 1, s + 2:s + 2 + L]
                front = stored
            else:
                front = (np.zeros(1), np.zeros(1))
            new_store = None
            e = s + L
            while front is not None and e < n:
                om, ot, _ = self.opts[j][e]
                m = (front[0][:, None] + om[None, :]).ravel()
                t = (front[1][:, None] + ot[None, :]).ravel()
                ok = m <= cap
                if not ok.any():
                    front = None
                    break
                front = _pareto(m[ok], t[ok])
                e += 1
                F[s, e] = front[1][-1]
                if e - s == run[s]:
                    new_store = front
            stored = self.runfront[j][s] = new_store
        return F

    def psi(self, bott: float) -> list[np.ndarray]:
        """``Ψ_j(s; bott)`` for ``j = 0..P`` and the argmin ends (``-1`` where infinite)."""
        nxt = np.full(self.n + 1, np.inf)
        nxt[self.n] = 0.0
        out, ends = [nxt], []
        for j in range(self.pp - 1, -1, -1):
            M = np.where(self.f[j] <= bott, self.f[j] + nxt[None, :], np.inf)
            arg = M.argmin(axis=1)
            nxt = M[np.arange(self.n + 1), arg] + self.entry[j]
            out.append(nxt)
            ends.append(np.where(np.isfinite(nxt), arg, -1))
        self._ends = ends[::-1]
        return out[::-1]

    def least_bottleneck(self) -> float:
        """Least ``max_j f_j(range_j)`` over every split into ``P`` non-empty stages:
        a floor under every plan's bottleneck ``max_j p_j`` (``inf``: nothing fits)."""
        nxt = np.full(self.n + 1, np.inf)
        nxt[self.n] = 0.0
        for j in range(self.pp - 1, -1, -1):
            nxt = np.maximum(self.f[j], nxt[None, :]).min(axis=1)
        return float(nxt[0])

    def bound(self, c1: float) -> tuple[float, float]:
        """``(min_B [c1·B + Ψ_0(0; B)], B*)`` over the values ``B ≥`` the floor that ``f``
        takes (module docstring). The value at the floor caps the scan: a ``B`` with
        ``c1·B + Ψ_0(0; ∞)`` above the best value found cannot improve it. When more than
        ``MAX_CANDIDATES`` values remain, ``B`` is rounded up to a geometric grid and
        ``c1·B`` taken at the grid point below (still a lower bound)."""
        free = float(self.psi(math.inf)[0][0])
        if c1 <= 0:
            return free, math.inf
        floor = self.least_bottleneck()
        if not math.isfinite(floor):
            return math.inf, math.inf
        best, arg = c1 * floor + float(self.psi(floor)[0][0]), floor
        hi = (best - free) / c1
        vals = np.unique(np.concatenate([F[(F > floor) & (F < hi)] for F in self.f]))
        lows = vals
        if len(vals) > MAX_CANDIDATES:
            grid = np.geomspace(vals[0], vals[-1], MAX_CANDIDATES)
            vals, lows = grid, np.r_[floor, grid[:-1]]
        for lo, b in zip(lows, vals):
            if c1 * lo + free >= best:
                break
            if past(self.deadline):   # the scan cut short: only the floor is proven
                return c1 * floor + free, arg
            v = c1 * lo + float(self.psi(float(b))[0][0])
            if v < best:
                best, arg = v, float(b)
        return best, arg

    def range_front(self, j: int, s: int, e: int):
        """(memory, time) front of layers ``[s, e)`` in stage ``j`` (``s < e``): from the
        stored run fronts when the range lies in one run of identical layers (the layers of
        ``[s, e)`` are those of ``[s + run[s] − (e − s), s + run[s])``), else None."""
        end = s + int(self.run[s])
        if e > end:
            return None
        return self.runfront[j][end - (e - s)]

    def tail_time(self, j: int, s: int, e: int, budget: np.ndarray) -> np.ndarray | None:
        """Least time of layers ``[s, e)`` in stage ``j`` within each memory budget
        (exact integer knapsack, resharding left out): the run of identical layers at
        ``s`` from its stored front, and a short rest after it (at most 4 layers) from a
        front built here. None when the rest is longer (the caller keeps the LP bound)."""
        if e <= s:
            return np.zeros(len(budget))
        mid = min(e, s + int(self.run[s]))
        head = self.range_front(j, s, mid)
        if mid == e:
            return _front_time(head, budget)
        if e - mid > 4:
            return None
        key = (j, mid, e)
        if key not in self._rest:
            fm, ft = np.zeros(1), np.zeros(1)
            for v in range(mid, e):
                om, ot, _ = self.opts[j][v]
                m, t = (fm[:, None] + om[None, :]).ravel(), (ft[:, None] + ot[None, :]).ravel()
                ok = m <= self.cap
                fm, ft = _pareto(m[ok], t[ok]) if ok.any() else (np.zeros(0), np.zeros(0))
            self._rest[key] = (fm, ft) if len(fm) <= 64 else None
        rest = self._rest[key]
        if rest is None:
            return None
        best = np.full(len(budget), np.inf)
        for m, t in zip(*rest):
            best = np.minimum(best, t + _front_time(head, budget - m))
        return best

    def tail_ok(self, i: int, u: int, pc: np.ndarray, mem: np.ndarray, bott: float,
                end: np.ndarray, psi_next: np.ndarray, slack: np.ndarray | None) -> np.ndarray:
        """Exact form of the partition test (:meth:`CoverBound.feasible`) for labels at layer
        ``u`` in stage ``i``: some end ``e ≤ end`` of stage ``i`` must have the stage's time
        ``pc + tail_time(u+1, e)`` within ``bott`` and ``Ψ_{i+1}(e; bott)`` finite, and, with
        ``slack``, ``tail_time + Ψ_{i+1}(e) ≤ slack`` (each a lower bound, so no plan of value
        ``≤ τ`` is lost). Ends whose tail has no exact value count as feasible.

        The ends inside the run of identical layers at ``u+1`` are tested at once
        (:meth:`run_times`, the same values as :meth:`tail_time` end by end); the few after
        it one by one."""
        budget = self.cap - mem
        ok = np.zeros(len(pc), dtype=bool)
        need = np.full(len(pc), np.inf)
        last = int(end.max()) if len(end) else u
        lim = bott * (1 + 1e-9) + 1e-15
        s = u + 1
        stop = min(last, s + int(self.run[s])) if s < self.n else s   # last end inside the run
        ends = np.arange(s, stop + 1)
        ends = ends[np.isfinite(psi_next[ends])] if last >= s else ends[:0]
        if len(ends):
            tt = self.run_times(i, s, ends - s, budget)
            fine = (end[None, :] >= ends[:, None]) & (pc[None, :] + tt <= lim)
            need = np.where(fine, tt + psi_next[ends][:, None], np.inf).min(axis=0)
        for e in range(stop + 1, last + 1):
            if not np.isfinite(psi_next[e]):
                continue
            within = end >= e
            tt = self.tail_time(i, s, e, budget)
            if tt is None:
                ok |= within
                continue
            fine = within & (pc + tt <= lim)
            need = np.where(fine, np.minimum(need, tt + psi_next[e]), need)
        ok |= np.isfinite(need) if slack is None else need <= slack * (1 + 1e-9) + 1e-15
        return ok

    def run_times(self, j: int, s: int, ells: np.ndarray, budget: np.ndarray) -> np.ndarray:
        """``(len(ells), N)``: :meth:`tail_time` of layers ``[s, s+ℓ)`` in stage ``j`` for each
        ``ℓ`` of ``ells`` (``0 ≤ ℓ ≤ run[s]``: inside the run of identical layers at ``s``) and
        every budget, in one search. The run's fronts (``runfront[j][end−ℓ]`` for the run
        ending at ``end``) are concatenated once with their memories replaced by exact
        integer ranks, so ``(ℓ, rank)`` keys sort and compare exactly; a budget ``b`` fits
        the entries of rank ``< searchsorted(values, b, 'right')``."""
        out = np.zeros((len(ells), len(budget)))
        pos_ell = ells > 0
        if not pos_ell.any():
            return out
        end = s + int(self.run[s])
        cat = self._cat.get((j, end))
        if cat is None:
            cat = self._cat[(j, end)] = self._concat_run(j, end)
        vals, key, times, offset, width = cat
        if not len(times):          # no length of the run fits the stage
            out[pos_ell] = np.inf
            return out
        rb = np.searchsorted(vals, budget, side="right")                       # (N,)
        ell = ells[pos_ell]
        pos = np.searchsorted(key, ell[:, None] * width + rb[None, :] - 1, side="right") - 1
        valid = pos >= offset[ell][:, None]
        out[pos_ell] = np.where(valid, times[np.maximum(pos, 0)], np.inf)
        return out

    def _concat_run(self, j: int, end: int):
        """The fronts of lengths ``1..`` of the run ending at ``end`` (stage ``j``), concatenated:
        sorted memory values, keys ``ℓ·width + rank``, times, start offset per ``ℓ``, width."""
        first = end - 1
        while first > 0 and self.run[first - 1] == self.run[first] + 1:
            first -= 1
        fronts = [self.runfront[j][end - ell] for ell in range(1, end - first + 1)]
        mems = [f[0] if f is not None else np.zeros(0) for f in fronts]
        times = [f[1] if f is not None else np.zeros(0) for f in fronts]
        vals = np.unique(np.concatenate(mems)) if mems else np.zeros(0)
        width = len(vals) + 1
        sizes = np.array([len(m) for m in mems], dtype=np.int64)
        offset = np.zeros(len(fronts) + 2, dtype=np.int64)
        offset[2:] = np.cumsum(sizes)
        ells = np.repeat(np.arange(1, len(fronts) + 1), sizes)
        key = ells * width + np.searchsorted(vals, np.concatenate(mems)) if len(ells) else np.zeros(0, np.int64)
        return vals, key, np.concatenate(times) if times else np.zeros(0), offset, width

    def split(self, bott: float) -> list[int] | None:
        """Stage starts of a split minimising ``Σ f_j`` with every ``f_j ≤ bott`` (None: none)."""
        psi = self.psi(bott)
        if not math.isfinite(psi[0][0]):
            return None
        starts, s = [], 0
        for j in range(self.pp):
            starts.append(s)
            s = int(self._ends[j][s])
        return starts

    def stage_choice(self, j: int, s: int, e: int) -> list[int]:
        """Strategy indices of layers ``[s, e)`` that attain ``f_j(s, e)`` (fronts with back pointers)."""
        fm, ft = np.zeros(1), np.zeros(1)
        back: list[tuple[np.ndarray, np.ndarray]] = []
        for v in range(s, e):
            om, ot, ok_ = self.opts[j][v]
            m = (fm[:, None] + om[None, :]).ravel()
            t = (ft[:, None] + ot[None, :]).ravel()
            parent = np.repeat(np.arange(len(fm)), len(om))
            k = np.tile(ok_, len(fm))
            ok = m <= self.cap
            fm, ft, parent, k = _pareto(m[ok], t[ok], parent[ok], k[ok])
            back.append((parent, k))
        row, out = len(fm) - 1, []
        for parent, k in reversed(back):
            out.append(int(k[row]))
            row = int(parent[row])
        return out[::-1]

    def plan(self, bott: float) -> Assignment | None:
        """The split of :meth:`split` with every stage's knapsack solution (a feasible plan)."""
        starts = self.split(bott)
        if starts is None:
            return None
        stage, choice = [0] * self.n, [0] * self.n
        for j, s in enumerate(starts):
            e = starts[j + 1] if j + 1 < self.pp else self.n
            for v, k in zip(range(s, e), self.stage_choice(j, s, e)):
                stage[v], choice[v] = j, k
        return Assignment(stage, choice)


def least_entry(tables, allowed: list[np.ndarray], edge_of: dict[tuple[int, int], int]) -> list[np.ndarray]:
    """``entry[j][s]``: the least transfer ``R'`` over the edge ``(s−1, s)`` at boundary
    ``j−1`` over every pair of allowed strategies (0 for stage 0, for ``s = 0`` and
    where the edge does not exist): a lower bound on ``o_{j−1}`` when stage ``j`` starts at ``s``."""
    n, pp = tables.num_layers, tables.pp
    out = [np.zeros(n + 1) for _ in range(pp)]
    memo: dict[tuple[int, int, int], float] = {}     # edges between identical layers share arrays
    for s in range(1, n):
        e = edge_of.get((s - 1, s))
        if e is None:
            continue
        for j in range(1, pp):
            cross = tables.cross(e, j - 1)
            key = (id(cross), id(allowed[s - 1]), id(allowed[s]))
            if key not in memo:
                memo[key] = max(float(cross[np.ix_(allowed[s - 1], allowed[s])].min()), 0.0)
            out[j][s] = memo[key]
    return out


def _front_time(front: tuple[np.ndarray, np.ndarray] | None, budget: np.ndarray) -> np.ndarray:
    """Least time of ``front`` within each memory budget (``inf`` where none fits)."""
    if front is None:
        return np.full(len(budget), np.inf)
    idx = np.searchsorted(front[0], budget, side="right") - 1
    return np.where(idx >= 0, front[1][np.maximum(idx, 0)], np.inf)
