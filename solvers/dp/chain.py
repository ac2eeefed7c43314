"""Exact label-setting DP for chains (and the fixed-order heuristic for DAGs with pp > 1).

Problem (docs/DESIGN.md §3, one outer configuration ``(pp, c, schedule)``): split the
layers, in order, into exactly ``pp`` non-empty contiguous stages and give
every layer a strategy ``k_u``, minimising

    T = Σ_i p_i + Σ_i o_i + (c−1)·max(max_i p_i, max_i o_i) + max_i g_i (+ constant)

subject to ``Σ_{u∈i} W[u,k_u] + inflight_i·Σ_{u∈i} H[u,k_u] + max_{u∈i} X[u,k_u] ≤ capacity``
per stage (``X`` the working set of the layer in flight,
:func:`~autopar_opt.cost.tables.stage_memory`).

Labels. The max terms and the memory knapsack make a scalar DP inexact, so
the DP carries *labels* (Pareto / dominance DP, the multi-criteria form of the
Alpa [Zheng et al. 2022, Sec. 5.2] and Piper [Tarnawski et al. 2021]
bottleneck DPs). A state is ``(u, i, k)`` = layer ``u`` is the last layer
processed, it lies in stage ``i`` with strategy ``k``; a label is

    (S, M, pc, G, gc, mem, ws)

``S`` = Σ of all ``p`` and ``o`` so far (current stage included), ``M`` = the
running max of closed stages' ``p``, of the ``o``'s and of the current ``pc``,
``pc`` / ``gc`` / ``mem`` the current stage's time, sync and stored memory,
``ws`` the largest working set of its layers so far (a label is kept only while
``mem + ws ≤ capacity``), ``G`` the
running max of ``g`` including ``gc``. Storing ``M = max(M_closed, pc)`` loses
nothing since ``pc`` only grows. Transitions: stay in stage ``i`` (add
``A + R``) or open stage ``i+1`` (add ``o = R'`` at boundary ``i``).

Dominance (exact): label 1 dominates label 2 at the same state if
``mem1 ≤ mem2``, ``mem1 + ws1 ≤ mem2 + ws2`` (:mod:`~autopar_opt.solvers.dp.dominance`:
then every completion that fits after label 2 fits after label 1) and ``S1 + (c−1)·max(0, M1−M2, pc1−pc2) + max(0, G1−G2, gc1−gc2) ≤ S2``
(in the last stage without the ``0``s: no later stage can raise the maxima).
For every completion the two final costs differ by at most that expression
because ``max(a1,b1+x,y) − max(a2,b2+x,y) ≤ max(0, a1−a2, b1−b2)``; the relation
is transitive (``max_j(x_j+y_j) ≤ max x + max y``), so a label dominated by any
earlier label (in key order) is dominated by a kept one, and pruning keeps an
optimal label. A label whose memory is below the stage's *safe* level (it can
take the most memory-hungry strategy on every remaining layer beside the largest
working set of any layer) competes without its memory. The completion and
partition bounds below see a label's ``mem + ws`` as its stage memory and no
working set after it: every completion's stage memory is at least that, so
they relax the constraint and stay valid lower bounds; a plan they build
(the stage decomposition's) is kept only if it fits with its working sets.

Symmetry (exact): between two neighbouring layers of one class
(``tables.layer_class``: identical strategies and cost arrays) in one stage the
strategy index may only grow inside a layout (:func:`_sorted_pairs`).

Bounds and threshold deepening (:func:`solve_chain`). An incumbent ``UB`` comes
from cheap beam passes (the full space, and each restriction to one layout on
every layer that has it). Then exact passes run with a threshold ``tau``,
dropping every label whose proven completion bound
(:class:`~autopar_opt.solvers.dp.completion.CompletionBounds`: a backward shortest path
with a Lagrangian relaxation of the memory constraints) exceeds ``tau``:
``tau`` starts at the root bound and grows geometrically up to ``UB``. A pass
that finds a plan of value ``≤ tau`` has found an optimum; a pass that finds
none proves ``optimum > tau``, which is the bound reported if time runs out.
Passes with a tight ``tau`` keep few labels, so the last (successful) pass is
cheap when the bound is good. Exact passes also drop a label when the stages it
leaves cannot hold the remaining layers under the bottleneck its threshold
allows, with each stage's memory kept (:mod:`~autopar_opt.solvers.dp.partition`);
the same decomposition gives a floor under every plan's bottleneck. The exact
integer form of that decomposition (:mod:`~autopar_opt.solvers.dp.stages`: per-stage
knapsacks solved over runs of identical layers) runs first: its bound raises the
root bound and the floor, its split is the first incumbent (the beam passes run
only when it leaves a gap over 0.4 %), and the partition test then uses its
ranges. Where memory
does not bind, the root bound is within about 0.05 % of the optimum and one
speculative exact pass just above it (label-capped) proves the optimum before
any beam pass runs.

Complexity: O(n · pp · K² · L) transitions plus the dominance filter
(:mod:`~autopar_opt.solvers.dp.dominance`: a window of the nearest rows in key
order first, then O(L·kept) for the rest), vectorised with numpy (``n`` layers, ``K`` strategies per
layer, ``L`` labels per state). ``L`` is 1 when memory does not bind and
``c = 1``; in the worst case it is exponential (the memory knapsack is
NP-hard), hence the time limit with the incumbent and the deepening bound.

For a DAG with ``pp > 1`` the same DP over the topological order prices only
the order-consecutive edges; skip edges are left out of the search and the
decoded plan is re-priced exactly. That is a heuristic (the caller marks it).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from autopar_opt.cost.tables import CostTables, symmetric_edges
from autopar_opt.solvers.dp.common import (MEM_EPS, Assignment, DPTimeout, fits, iteration_time,
                                           layer_memory, least_memory_plan, past, working_levels)
from autopar_opt.solvers.dp.completion import CompletionBounds
from autopar_opt.solvers.dp.dominance import dominated
from autopar_opt.solvers.dp.partition import CoverBound
from autopar_opt.solvers.dp.stage_prefix import StagePrefix
from autopar_opt.solvers.dp.stages import StageRanges, least_entry
from autopar_opt.ir.hardware import GIB
from autopar_opt.ir.strategies import layout_ids

# label columns (_CNT: the stage's transformer layers so far under a block-recomputation
# rule, :mod:`~autopar_opt.solvers.dp.stage_prefix`; 0 without one)
_S, _M, _PC, _G, _GC, _MEM, _WS, _CNT = range(8)
_COLS = 8


class _LabelBudget(Exception):
    """Raised inside a speculative exact pass that created more labels than it may."""


@dataclass
class ChainOutcome:
    """Best assignment found (None when none fits), its value (incl. the constant overhead),
    whether the search was exhaustive, labels created, the proven lower bound and
    whether the plan is the deadline's fallback."""

    assignment: Assignment | None
    value: float
    exhaustive: bool
    labels: int
    lower_bound: float = -math.inf
    #: the deadline passed before any pass found a plan: ``assignment`` is the least-memory plan
    fallback: bool = False
    #: ``assignment`` is the stage decomposition's plan (:mod:`~autopar_opt.solvers.dp.stages`)
    decomposition: bool = False


@dataclass
class _Layer:
    """All labels of one layer, per stage: values, strategy, parent (stage, row)."""

    lab: dict[int, np.ndarray]      # stage -> (L, 7)
    k: dict[int, np.ndarray]        # stage -> (L,)
    pstage: dict[int, np.ndarray]   # stage -> (L,) parent's stage
    prow: dict[int, np.ndarray]     # stage -> (L,) parent's row in that stage


class ChainDP:
    """One configuration's label DP; :meth:`run` is one pass (beam or exact under a threshold).

    ``allowed[u]`` restricts layer ``u`` to some strategy indices (all by
    default): the restricted passes give incumbents (:func:`_incumbent`). ``prefix``:
    Megatron's block recomputation over a free split (a layer's strategies depend on
    its position in its stage, :mod:`~autopar_opt.solvers.dp.stage_prefix`), inside
    ``allowed``; restricted copies (``shared``) keep it.
    """

    def __init__(self, tables: CostTables, deadline: float | None,
                 allowed: list[np.ndarray] | None = None, shared: "ChainDP | None" = None,
                 symmetric: bool = True, prefix: StagePrefix | None = None) -> None:
        self.t = tables
        self.prefix = shared.prefix if shared is not None else prefix
        self.n, self.pp, self.c1 = tables.num_layers, tables.pp, float(tables.rounds - 1)
        self.cap = tables.capacity_bytes + MEM_EPS * GIB
        self.deadline = deadline
        self.allowed = allowed or [np.arange(len(a)) for a in tables.time]
        if shared is not None:   # the full space's data and bounds are valid for any restriction
            self.mem, self.edge_of, self.order = shared.mem, shared.edge_of, shared.order
            self.work = shared.work
            self.layout_id = shared.layout_id
            self._bounds: CompletionBounds | None = shared.bounds
            self._cover: CoverBound | None = shared.cover
            self.bott_floor = 0.0   # restricted copies run beam passes: rank as without the floor
            self.sync_floor = 0.0
        else:
            self.mem = [layer_memory(tables, i) for i in range(self.pp)]
            self.work = [np.asarray(x, dtype=float) for x in tables.working_bytes]
            self.edge_of = {(u, v): e for e, (u, v) in enumerate(tables.edges)}
            ids: dict[int, np.ndarray] = {}          # one per layer class (shared lists)
            self.layout_id = [_memo(ids, id(strats), lambda: np.array(layout_ids(strats)))
                              for strats in tables.strategies]
            # a family whose allowed strategies depend on a layer's position in its stage
            # (Megatron's block recomputation, solvers/dp/uniform.py) has no sorted twin
            self.order = (_sorted_pairs(tables, self.layout_id) if symmetric and prefix is None
                          else [None] * tables.num_layers)
            self._bounds = None
            self._cover = None
            #: proven lower bound on every plan's bottleneck max p (partition bound)
            self.bott_floor = 0.0
            #: proven lower bound on every plan's max g: Σ_u min_k G / pp
            self.sync_floor = 0.0
        # memory level under which a label's stage can never overflow (whatever
        # working set it holds or takes: the largest of any usable strategy)
        self.safe = []
        most: dict[tuple[int, int], float] = {}      # identical layers share their arrays
        held: dict[tuple[int, int, int], float] = {}
        for m in self.mem:
            tail = np.cumsum([_memo(most, (id(x), id(ok)), lambda: _finite_max(x[ok]))
                              for x, ok in zip(m, self.allowed)][::-1])[::-1]
            top = max((_memo(held, (id(x), id(y), id(ok)),
                             lambda: float(x[ok][np.isfinite(y[ok])].max(initial=0.0)))
                       for x, y, ok in zip(self.work, m, self.allowed)), default=0.0)
            self.safe.append([self.cap - top - (float(tail[u + 1]) if u + 1 < self.n else 0.0)
                              for u in range(self.n)])
        self.labels = 0
        #: an exact pass raises _LabelBudget once ``labels`` exceeds this (speculative passes)
        self.label_cap = math.inf
        #: beam passes stop at the deadline too (set once an incumbent exists)
        self.beam_stops = False

    @property
    def bounds(self) -> CompletionBounds:
        """Completion bounds, built on first use (within the deadline: raises
        :class:`DPTimeout` when it passes before the unweighted ones are built)."""
        if self._bounds is None:
            # a restriction (a target's key family) with few strategies per layer builds the
            # unweighted tables only: the stage-weighted ones cost pp times as much
            few = sum(len(a) for a in self.allowed) <= 4 * self.n
            self._bounds = CompletionBounds(self.t, self.mem, self.cap, self.edge_of, self.allowed,
                                            self.deadline, weighted=not few)
        return self._bounds

    @property
    def cover(self) -> CoverBound:
        """Stage-partition coverage bound (:mod:`~autopar_opt.solvers.dp.partition`), built on first use."""
        if self._cover is None:
            self._cover = CoverBound(self.t.time, self.mem, self.cap, self.allowed)
        return self._cover

    def stage_range(self, u: int) -> range:
        fixed = self.t.fixed_stage
        if fixed is not None:          # the target fixes the split (DeepSpeed's uniform partition)
            return range(fixed[u], fixed[u] + 1)
        return range(max(0, self.pp - self.n + u), min(u, self.pp - 1) + 1)

    def lower(self, lab: np.ndarray, u: int, i: int, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Proven lower bounds on the final value of every completion of the labels
        ``lab`` at states ``(u, i, k[j])``: ``S + rest + (c−1)·max(M, (pc + rest_p)/(P−i), B₀) + max(G, (gc + rest_g)/(P−i))``,
        the rests from :class:`~autopar_opt.solvers.dp.completion.CompletionBounds`, ``B₀``
        the partition bound on every plan's bottleneck (:attr:`bott_floor`). Also returns
        ``base = S + rest + max(G, …)`` (every completion costs at least ``base + (c−1)·max p``)
        and that ``max(G, …)`` term alone."""
        held = lab[:, _MEM] + lab[:, _WS]   # the stage holds at least this (module docstring)
        rest, rest_p = self.bounds.remaining(u, i, k, held)
        bott = np.maximum(np.maximum(lab[:, _M], (lab[:, _PC] + rest_p) / (self.pp - i)), self.bott_floor)
        sync = np.maximum(lab[:, _G], (lab[:, _GC] + self.bounds.rest_sync[u]) / (self.pp - i))
        base = lab[:, _S] + rest + sync
        low = base + self.c1 * bott
        w = self.bounds.weighted(u, i, k, held, lab[:, _PC], lab[:, _GC])
        if w is not None:
            low = np.maximum(low, lab[:, _S] + w)
        return low, base, sync

    def root_bound(self) -> float:
        """Lower bound on the whole configuration (over every first-layer label)."""
        best = math.inf
        for k in self.allowed[0]:
            lab = self._first(int(k))
            if lab is not None:
                best = min(best, float(self.lower(lab[None, :], 0, 0, np.array([int(k)]))[0][0]))
        return best

    def _first(self, k: int) -> np.ndarray | None:
        m, x = float(self.mem[0][0][k]), float(self.work[0][k])
        if m + x > self.cap:
            return None
        count = 0
        if self.prefix is not None:
            ok, count = self.prefix.opened(0, np.array([k]))
            if not ok[0]:
                return None         # not its strategy in the first position of a stage
        a, g = float(self.t.time[0][k]), float(self.t.sync[0][k])
        return np.array([a, a, a, g, g, m, x, count])

    def run(self, beam: int | None, tau: float) -> tuple[float, Assignment] | None:
        """Best plan of value (without the constant) at most ``tau``, or None.

        Exact when ``beam`` is None: a label is dropped only when dominated or
        when its lower bound exceeds ``tau``. With ``beam`` each state keeps its
        ``beam`` labels of least bound (a heuristic)."""
        ks = [int(k) for k in self.allowed[0] if self._first(int(k)) is not None]
        first = np.array([self._first(k) for k in ks]).reshape(-1, _COLS)
        zeros = np.zeros(len(ks), dtype=int)
        layers = [_Layer({0: first}, {0: np.array(ks, dtype=int)}, {0: zeros}, {0: zeros})]
        for u in range(1, self.n):
            layers.append(self.step(layers[-1], u, beam, tau))
        last = layers[-1].lab.get(self.pp - 1)
        if last is None or not len(last):
            return None
        vals = last[:, _S] + self.c1 * last[:, _M] + last[:, _G]
        row = int(np.argmin(vals))
        if vals[row] > tau * (1 + 1e-9):
            return None
        return float(vals[row]), _decode(layers, self.pp - 1, row)

    def step(self, prev: _Layer, u: int, beam: int | None, tau: float) -> _Layer:
        """All labels of layer ``u`` from those of layer ``u−1`` (vectorised per stage)."""
        lim = tau * (1 + 1e-9)
        out = _Layer({}, {}, {}, {})
        for i in self.stage_range(u):
            if (beam is None or self.beam_stops) and past(self.deadline):
                raise DPTimeout   # a cut first beam pass leaves the least-memory plan (solve_chain)
            cand, k2, pst, prw = self._candidates(prev, u, i)
            if not len(cand):
                continue
            if self.bott_floor > 0 or self.sync_floor > 0:
                # every complete plan has max p ≥ bott_floor and max g ≥ sync_floor: raising
                # M and G to them changes no final value and makes dominance stronger
                cand[:, _M] = np.maximum(cand[:, _M], self.bott_floor)
                cand[:, _G] = np.maximum(cand[:, _G], self.sync_floor)
            if lim < math.inf or beam is not None:
                low, base, sync_lb = self.lower(cand, u, i, k2)
                if lim < math.inf:
                    keep = low <= lim
                    if self.c1 > 0:   # partition bound (module docstring)
                        idx = np.flatnonzero(keep)
                        c = cand[idx]
                        bott = (lim - base[idx]) / self.c1
                        slack = lim - c[:, _S] - sync_lb[idx] - self.c1 * np.maximum(c[:, _M], self.bott_floor)
                        keep[idx] = self.cover.feasible(u, i, c[:, _PC], c[:, _MEM] + c[:, _WS],
                                                        bott, slack)
                    cand, k2, pst, prw, low = cand[keep], k2[keep], pst[keep], prw[keep], low[keep]
                    if not len(cand):
                        continue
            if beam is not None:
                sel = _beam(cand, k2, low, beam)
            else:
                sel = self._pareto(cand, k2, i, u)
            out.lab[i], out.k[i], out.pstage[i], out.prow[i] = cand[sel], k2[sel], pst[sel], prw[sel]
            self.labels += len(sel)
            if self.labels > self.label_cap:
                raise _LabelBudget
        return out

    def _pareto(self, cand: np.ndarray, k2: np.ndarray, i: int, u: int) -> np.ndarray:
        """Indices of the non-dominated labels at layer ``u``, stage ``i``.

        Labels compete within a layout of the last layer: one at strategy ``k``
        can dominate one at ``k' ≥ k`` of the same layout (:func:`~autopar_opt.solvers.dp.dominance.dominated`),
        and of one block-recomputation counter (:mod:`~autopar_opt.solvers.dp.stage_prefix`:
        labels of different counters have different completions)."""
        key = cand[:, _S] + self.c1 * cand[:, _M] + cand[:, _G]
        lay = self.layout_id[u][k2]
        if self.prefix is not None:
            lay = lay * (self.prefix.n + 1) + cand[:, _CNT].astype(int)
        # ties of the key (frequent once M and G are floored) broken so that a dominating
        # label comes first: less memory, then less stage time and sync
        srt = np.lexsort((cand[:, _GC], cand[:, _PC], cand[:, _MEM] + cand[:, _WS], cand[:, _MEM], key, lay))
        cuts = np.flatnonzero(np.diff(lay[srt])) + 1
        keep = []
        for grp in np.split(srt, cuts):
            if len(grp) == 1:
                keep.append(grp)
            else:
                keep.append(grp[~dominated(cand[grp], k2[grp], self.c1, i == self.pp - 1,
                                            self.safe[i][u], self.deadline)])
        return np.concatenate(keep)

    def _candidates(self, prev: _Layer, u: int, i: int):
        """New labels of every state ``(u, i, ·)``: stay in stage ``i`` or open it.

        Returns the label rows, their strategy ``k2`` and their parent (stage, row)."""
        t = self.t
        e = self.edge_of.get((u - 1, u))
        ks = self.allowed[u]
        a2, g2, m2, x2 = t.time[u][ks], t.sync[u][ks], self.mem[i][u][ks], self.work[u][ks]
        blocks, kk, pst, prw = [], [], [], []
        if i in prev.lab:
            P, k1 = prev.lab[i], prev.k[i]
            mem = P[:, _MEM, None] + m2[None, :]
            ws = np.maximum(P[:, _WS, None], x2[None, :])
            ok = mem + ws <= self.cap
            count = P[:, _CNT]
            if self.order[u] is not None:
                ok &= ~self.order[u][np.ix_(k1, ks)]
            if self.prefix is not None:
                may, count = self.prefix.stayed(u, P[:, _CNT].astype(int), ks)
                ok &= may
            rows, cols = np.nonzero(ok)
            if len(rows):
                step = a2[cols] + (t.reshard[e][k1[rows], ks[cols]] if e is not None else 0.0)
                Pr = P[rows]
                pc, gc = Pr[:, _PC] + step, Pr[:, _GC] + g2[cols]
                blocks.append(np.column_stack([Pr[:, _S] + step, np.maximum(Pr[:, _M], pc), pc,
                                               np.maximum(Pr[:, _G], gc), gc, mem[rows, cols],
                                               ws[rows, cols], count[rows]]))
                kk.append(ks[cols])
                pst.append(np.full(len(rows), i))
                prw.append(rows)
        if i - 1 in prev.lab:
            P, k1 = prev.lab[i - 1], prev.k[i - 1]
            room, count = m2 + x2 <= self.cap, 0
            if self.prefix is not None:
                may, count = self.prefix.opened(u, ks)
                room &= may
            fits = np.flatnonzero(room)
            if len(fits):
                rows = np.repeat(np.arange(len(P)), len(fits))
                cols = np.tile(fits, len(P))
                o = t.cross(e, i - 1)[k1[rows], ks[cols]] if e is not None else np.zeros(len(rows))
                Pr, a = P[rows], a2[cols]
                blocks.append(np.column_stack([Pr[:, _S] + o + a, np.maximum(np.maximum(Pr[:, _M], o), a),
                                               a, np.maximum(Pr[:, _G], g2[cols]), g2[cols], m2[cols],
                                               x2[cols], np.full(len(rows), count)]))
                kk.append(ks[cols])
                pst.append(np.full(len(rows), i - 1))
                prw.append(rows)
        if not blocks:
            empty = np.zeros(0, dtype=int)
            return np.zeros((0, _COLS)), empty, empty, empty
        return (np.concatenate(blocks), np.concatenate(kk), np.concatenate(pst),
                np.concatenate(prw))


def _memo(memo: dict, key, fn):
    """``memo[key]``, computed by ``fn()`` on first use."""
    if key not in memo:
        memo[key] = fn()
    return memo[key]


def _finite_max(x: np.ndarray) -> float:
    """Largest finite entry (0 when none): infinite memory marks a strategy the
    stage may not use (free stage sizes), which no label ever takes."""
    fin = x[np.isfinite(x)]
    return float(fin.max()) if fin.size else 0.0


def _beam(cand: np.ndarray, k2: np.ndarray, low: np.ndarray, width: int) -> np.ndarray:
    """Heuristic selection per state: the ``width`` labels with the least completion
    bound (an A*-like estimate of the final value) plus the least-memory label, so
    that a beam pass finds a plan when memory binds."""
    srt = np.lexsort((low, k2))
    ks = k2[srt]
    start = np.r_[0, np.flatnonzero(np.diff(ks)) + 1]
    rank = np.arange(len(srt)) - np.repeat(start, np.diff(np.r_[start, len(srt)]))
    by_mem = np.lexsort((cand[:, _MEM] + cand[:, _WS], k2))
    least = by_mem[np.r_[0, np.flatnonzero(np.diff(k2[by_mem])) + 1]]
    return np.union1d(srt[rank < width], least)


def _decode(layers: list[_Layer], stage: int, row: int) -> Assignment:
    n = len(layers)
    stages, choice = [0] * n, [0] * n
    for u in range(n - 1, -1, -1):
        L = layers[u]
        stages[u], choice[u] = stage, int(L.k[stage][row])
        stage, row = int(L.pstage[stage][row]), int(L.prow[stage][row])
    return Assignment(stages, choice)


def _sorted_pairs(tables: CostTables, layout_id: list[np.ndarray]) -> list[np.ndarray | None]:
    """Symmetry of identical layers: per layer ``u``, ``forbid[k1, k2]`` for the
    in-stage step ``u−1 → u`` (None where the step has no symmetry).

    On the edges of :func:`~autopar_opt.cost.tables.symmetric_edges` (layers
    ``u−1`` and ``u`` with identical strategies and cost arrays) the DP only
    lets the strategy index grow inside a layout (``k2 ≥ k1`` when both have
    the same layout). Exact: resharding and transfers depend on layouts only
    (checked by :func:`~autopar_opt.formulations.direct.collapse`), so sorting
    the strategies inside every maximal same-layout run of identical layers
    of a stage changes no time, sync or memory sum and no edge cost; every plan
    therefore has a sorted twin of equal cost, and the sorted twins pass
    every ``forbid`` test (the MIP's symmetry cuts state the same order).
    """
    order: list[np.ndarray | None] = [None] * tables.num_layers
    for e in symmetric_edges(tables):
        u = tables.edges[e][1]
        lay = layout_id[u]
        k = np.arange(len(lay))
        forbid = (lay[:, None] == lay[None, :]) & (k[None, :] < k[:, None])
        order[u] = forbid if forbid.any() else None
    return order


def _layout_restrictions(tables: CostTables, base: list[np.ndarray] | None = None
                         ) -> list[list[np.ndarray]]:
    """Every layout on every layer that has it (all strategies elsewhere): the
    "uniform tp/sp, free ZeRO and recomputation per layer" plans; inside
    ``base`` (a restriction already in force, e.g. a target's uniform key)."""
    out: dict[tuple, list[np.ndarray]] = {}
    for lay in sorted({s.layout for strats in tables.strategies for s in strats}):
        allowed = []
        for u, strats in enumerate(tables.strategies):
            pool = range(len(strats)) if base is None else base[u].tolist()
            ks = [j for j in pool if strats[j].layout == lay]
            allowed.append(np.array(ks or list(pool), dtype=int))
        out.setdefault(tuple(tuple(a) for a in allowed), allowed)
    return list(out.values())


def _incumbent(tables: CostTables, beam: int, shared: ChainDP, restricted: bool,
               best: tuple[Assignment | None, float] = (None, math.inf)) -> tuple[Assignment | None, float]:
    """Best of ``best`` and of beam passes: over the full space (width ``beam``) or, with
    ``restricted``, over every layout restriction (width ``4·beam``). Values include
    the constant overhead. Every pass stops at the deadline (issue 15: the first
    one too, which on the largest models took longer than the whole time limit);
    ``best`` is then returned as it stands (None when no pass finished)."""
    runs = ([(allowed, 4 * beam) for allowed in _layout_restrictions(tables, shared.allowed)]
            if restricted else [(shared.allowed, beam)])
    for allowed, width in runs:
        if past(shared.deadline):
            return best
        dp = ChainDP(tables, shared.deadline, allowed, shared)
        dp.beam_stops = True
        try:
            found = dp.run(width, math.inf)
        except DPTimeout:
            return best
        if found is not None:
            val = iteration_time(tables, found[1])
            if val < best[1]:
                best = (found[1], val)
    return best


#: Relative step of the first deepening pass (doubled after every failed pass).
_FIRST_STEP = 0.002


def solve_chain(tables: CostTables, deadline: float | None = None, beam: int = 4,
                allowed: list[np.ndarray] | None = None, cutoff: float = math.inf,
                symmetric: bool = True, prefix: StagePrefix | None = None) -> ChainOutcome:
    """Label DP over the layer order (exact for chains; see module docstring).

    1. Incumbent ``UB``: a beam pass over the full space (:func:`_incumbent`).
    2. Root bound: the completion bound of the first layer's labels with the
       partition bound on the bottleneck (:mod:`~autopar_opt.solvers.dp.partition`).
    3. Threshold deepening: exact passes with ``tau_j = tau_{j-1}·(1 + 0.002·2^j)``
       from the root bound, capped at ``UB``. A pass that finds a plan of value
       ``≤ tau`` has found an optimum; one that finds none proves ``optimum > tau``.
       (After a cheap pass, one with fewer than ``n·pp`` labels, the step grows
       by 1.25 only: a pass far above the optimum costs much more than one near it.)
       Before the third pass (the gap is then over 0.6 %) the layout-restricted
       beam passes try to improve ``UB``: where the first passes close the gap
       they are not needed, and they cost as much as a pass.
    If ``deadline`` (``time.monotonic()`` value) passes, every phase stops (the
    bounds being built, the speculative, beam and exact passes): the incumbent, or
    the least-memory plan when no pass has found one (:func:`_cut_short`), is
    returned with ``exhaustive=False`` and the best bound proven so far (``-inf``
    when the deadline came before the root bound).

    ``allowed`` restricts every layer to some strategies (a target's uniform key,
    :mod:`~autopar_opt.solvers.dp.uniform`); ``cutoff`` is a value the caller
    already holds a plan for: once this search proves that nothing here is
    better, it stops and answers ``exhaustive=False`` with ``lower_bound >=
    cutoff`` (and whatever plan it has). ``symmetric`` False switches off the ordering
    rule of identical layers (:func:`_sorted_pairs`): for an ``allowed`` that differs
    between identical layers of one stage by their position (a block-recomputation family).
    ``prefix``: such a family over a free split, its rule carried by the labels
    (:mod:`~autopar_opt.solvers.dp.stage_prefix`; ``allowed`` the union of its sets).
    """
    const = tables.params.iteration_overhead_s
    dp = ChainDP(tables, deadline, allowed, symmetric=symmetric, prefix=prefix)
    inc, ub, lb = None, math.inf, -math.inf
    try:
        shared = _shared_relaxation(dp) if prefix is not None else None
        if shared is None:
            set_bottleneck_floor(dp, math.inf)
            inc, ub, lb = stage_decomposition(dp)
            if prefix is not None:
                _keep_relaxation(dp, inc, ub, lb)
        else:
            inc, ub, lb = shared
        if prefix is not None and dp.c1 > 0:     # the rule's own floor (stage sizes by memory)
            dp.bott_floor = max(dp.bott_floor, prefix.bottleneck)
        if not (inc is not None and lb >= ub * (1 - 1e-9)) and lb < cutoff:
            lb = max(lb, dp.root_bound() + const)    # the decomposition did not close it
    except DPTimeout:
        return _cut_short(tables, inc, ub, dp.labels, lb, inc is not None, dp.allowed, prefix)
    if lb == math.inf:           # the decomposition proved that nothing fits
        return ChainOutcome(None, math.inf, True, dp.labels, math.inf)
    if lb >= cutoff:
        return ChainOutcome(inc, ub, False, dp.labels, lb, decomposition=inc is not None)
    first = inc
    if inc is not None and lb >= ub * (1 - 1e-9):
        return ChainOutcome(inc, ub, True, dp.labels, ub, decomposition=True)
    for rel in _SPECULATIVE_STEPS:
        tau = lb * (1 + rel)
        if tau >= ub:
            break   # the first deepening pass (threshold ub, no label cap) decides
        quick = _speculative_pass(dp, tau - const)
        if quick is None:
            break   # over its label budget: an incumbent first
        if quick[1] is not None:
            val = iteration_time(tables, quick[1])
            return ChainOutcome(quick[1], val, True, dp.labels, val)
        lb = tau    # an exhaustive pass without a plan: optimum > tau
    t_beam = time.monotonic()
    if inc is None or lb * (1 + 2 * _FIRST_STEP) < ub:
        inc, ub = _incumbent(tables, beam, dp, False, (inc, ub))
    t_beam = time.monotonic() - t_beam   # what a beam pass costs here
    # a block-recomputation family over a free split, run under the caller's plan: the
    # deepening passes stop at the cutoff anyway, and the layout-restricted beams (one per
    # layout) cost more than its passes
    restricted = prefix is not None and math.isfinite(cutoff)
    if not restricted and (inc is None or lb < ub * (1 - 1e-9) and lb * (1 + 2 * _FIRST_STEP) < ub):
        inc, ub = _incumbent(tables, beam, dp, True, (inc, ub))   # the gap is wide: try harder now
        restricted = True
    if inc is not None and lb >= ub * (1 - 1e-9):
        return ChainOutcome(inc, ub, True, dp.labels, ub)
    step = _FIRST_STEP
    passes, cheap = 0, True
    while True:
        if not restricted and passes >= 2:
            inc, ub = _incumbent(tables, beam, dp, True, (inc, ub))
            restricted = True
            if lb >= ub * (1 - 1e-9):
                return ChainOutcome(inc, ub, True, dp.labels, ub)
        tau = min(ub, lb * (1 + step)) if math.isfinite(lb) else ub
        if cutoff < ub:
            tau = min(tau, cutoff)
        room = math.inf if deadline is None else deadline - time.monotonic()
        if passes and not cheap and math.isfinite(tau) and tau < ub and room > 3 * t_beam:
            inc, ub = _guided_beam(dp, beam, tau, inc, ub)
            tau = min(tau, ub)
        before = dp.labels
        try:
            found = dp.run(None, tau - const)
        except DPTimeout:
            return _cut_short(tables, inc, ub, dp.labels, lb, inc is not None and inc is first,
                              dp.allowed, prefix)
        passes += 1
        cheap = dp.labels - before < dp.n * dp.pp
        if found is not None:
            val = iteration_time(tables, found[1])
            if val < ub:
                return ChainOutcome(found[1], val, True, dp.labels, val)
        elif tau >= cutoff:      # nothing here beats the caller's plan
            return ChainOutcome(inc, ub, False, dp.labels, max(lb, tau))
        if tau >= ub or not math.isfinite(tau):
            # no plan strictly better than the incumbent: it is optimal (or none exists)
            return ChainOutcome(inc, ub, True, dp.labels, ub)
        lb = max(lb, tau)
        step *= 1.25 if cheap else 2.0   # cheap passes: the optimum may be near, creep up


def _shared_relaxation(dp: ChainDP) -> tuple[Assignment | None, float, float] | None:
    """For a block-recomputation family over a free split: the bounds its search relaxes
    over the union of the two keys' strategies (completion, partition, the stage
    decomposition's bound and floors) are the same for every ``N`` of one key pair, so
    they are built once (on the first ``N``, whose ChainDP is kept) and shared. Returns
    the decomposition's ``(plan, value, bound)`` for this family (its plan kept only if
    it keeps the rule), or None on the first ``N`` (the caller builds them)."""
    cache = dp.t.__dict__.setdefault("_dp_families", {}).setdefault("prefix_dp", {})
    hit = cache.get(id(dp.allowed))
    if hit is None or hit[0].allowed is not dp.allowed or hit[1] is None:
        if hit is None or hit[0].allowed is not dp.allowed:
            cache[id(dp.allowed)] = (dp, None)       # the first N: filled in once it is built
        return None
    first, (plan, value, bound, dp.bott_floor, dp.sync_floor) = hit
    dp._bounds, dp._cover = first._bounds, first._cover
    if plan is not None and not _admissible(dp.t, plan, dp.allowed, dp.prefix):
        plan, value = None, math.inf
    return plan, value, bound


def _keep_relaxation(dp: ChainDP, plan: Assignment | None, value: float, bound: float) -> None:
    """Record the first ``N``'s relaxation for the others (:func:`_shared_relaxation`),
    with its floors before the family's own bottleneck floor raises them."""
    cache = dp.t.__dict__.get("_dp_families", {}).get("prefix_dp", {})
    hit = cache.get(id(dp.allowed))
    if hit is not None and hit[0] is dp and hit[1] is None:
        cache[id(dp.allowed)] = (dp, (plan, value, bound, dp.bott_floor, dp.sync_floor))


def _cut_short(tables: CostTables, inc: Assignment | None, ub: float, labels: int,
               lb: float, decomposition: bool = False,
               allowed: list[np.ndarray] | None = None,
               prefix: StagePrefix | None = None) -> ChainOutcome:
    """The outcome when the deadline passed: the incumbent, or the least-memory plan
    (:func:`~autopar_opt.solvers.dp.common.least_memory_plan`, feasible whenever a
    plan is, milliseconds to build) when no pass finished; the bound ``lb`` as proven."""
    fallback = inc is None
    if fallback:
        inc = least_memory_plan(tables)
        if inc is not None and not _admissible(tables, inc, allowed, prefix):
            inc = None          # outside the restriction or the target's rules: no plan
        ub = iteration_time(tables, inc) if inc is not None else math.inf
    return ChainOutcome(inc, ub, False, labels, lb, fallback=fallback and inc is not None,
                        decomposition=decomposition)


#: Labels per layer and stage a speculative pass may create before it gives up.
_SPECULATIVE_LABELS = 16
#: Thresholds (relative to the root bound) of the speculative passes.
_SPECULATIVE_STEPS = (_FIRST_STEP / 4, _FIRST_STEP)


def _speculative_pass(dp: ChainDP, tau: float) -> tuple[float, Assignment | None] | None:
    """An exact pass at threshold ``tau`` (just above the root bound) before the beam
    passes: where the root bound is tight (memory does not bind) it finds
    the optimum for less than a beam pass costs. Returns None once it has created
    ``_SPECULATIVE_LABELS·n·pp`` labels or the deadline has passed (the passes after
    it then stop at once and :func:`_cut_short` answers), else ``(tau, plan or
    None)``: no plan proves ``optimum > tau``."""
    if not math.isfinite(tau):
        return None
    start = dp.labels
    dp.label_cap = start + _SPECULATIVE_LABELS * dp.n * dp.pp
    try:
        found = dp.run(None, tau)
    except (_LabelBudget, DPTimeout):
        return None
    finally:
        dp.label_cap = math.inf
    return tau, None if found is None else found[1]


def _guided_beam(dp: ChainDP, beam: int, tau: float, inc: Assignment | None,
                 ub: float) -> tuple[Assignment | None, float]:
    """A beam pass under threshold ``tau`` (labels whose bounds, partition test
    included, exceed ``tau`` are dropped before the beam ranks the rest): where the
    unguided beams leave a wide gap (memory binds in every stage) it looks for a
    plan of value ``≤ tau`` among the balanced splits only. Keeps the better plan."""
    const = dp.t.params.iteration_overhead_s
    dp.beam_stops = True
    try:
        found = dp.run(4 * beam, tau - const)
    except DPTimeout:
        return inc, ub
    finally:
        dp.beam_stops = False
    if found is not None:
        val = iteration_time(dp.t, found[1])
        if val < ub:
            return found[1], val
    return inc, ub


def _admissible(tables: CostTables, asg: Assignment, allowed: list[np.ndarray] | None,
                prefix: StagePrefix | None = None) -> bool:
    """Whether ``asg`` uses only ``allowed`` strategies, keeps the block-recomputation
    rule ``prefix`` (the relaxed plans of the stage decomposition and the least-memory
    plan may not) and the target's rules
    (:meth:`~autopar_opt.cost.tables.CostTables.runnable`)."""
    if allowed is not None and not all(k in ok for k, ok in zip(asg.choice, allowed)):
        return False
    if prefix is not None and not prefix.holds(asg.stage, asg.choice):
        return False
    return tables.runnable(asg)


def stage_decomposition(dp: ChainDP) -> tuple[Assignment | None, float, float]:
    """Incumbent, its value and a lower bound from the exact stage-range decomposition
    (:mod:`~autopar_opt.solvers.dp.stages`); raises ``dp.bott_floor`` to its floor.
    ``(None, inf, -inf)`` where the tables are too costly to build (no long runs of
    identical layers) or when the deadline has passed; ``(None, inf, inf)`` when they
    prove that no split fits (no plan fits) (building the tables
    raises :class:`DPTimeout` once it passes).

    With working sets the range function is exact too: a stage whose largest working
    set is ``L`` is a range of strategies with ``X <= L`` within ``capacity - L``, so
    ``f_j(s, e) = min_L f_j^L(s, e)`` over the levels of
    :func:`~autopar_opt.solvers.dp.common.working_levels` (``with_time``: the ``X`` of every
    strategy on a layer's (time, memory, working set) front), each ``f^L`` a decomposition
    of its own; the split then takes every stage's strategies from the level that
    attains its range, so the plan fits. The levels are built only where the relaxed
    decomposition's plan (working sets left out) overflows with its working sets;
    where it fits, or a level's tables are too costly, the relaxed ranges give the
    (valid) bound and their plan if it fits."""
    const = dp.t.params.iteration_overhead_s
    if past(dp.deadline):
        return None, math.inf, -math.inf
    entry = least_entry(dp.t, dp.allowed, dp.edge_of)
    ranges = StageRanges(dp.t.time, dp.mem, dp.cap, dp.allowed, entry, dp.deadline)
    if not ranges.f:
        return None, math.inf, -math.inf
    subs = None
    if any(np.any(x > 0) for x in dp.work):
        # the relaxed decomposition first: where its plan fits with its working sets (they
        # do not bind) it is kept as it is; else the exact per-level one replaces it
        plain = ranges.least_bottleneck()
        relaxed = ranges.plan(ranges.bound(dp.c1)[1]) if math.isfinite(plain) else None
        if relaxed is None or not fits(dp.t, relaxed):
            subs = _level_ranges(dp, entry)
    if subs is not None:
        stack = [np.stack([sub.f[j] for _, sub in subs]) for j in range(dp.pp)]
        ranges.f = [st.min(axis=0) for st in stack]       # exact with the working sets
    floor = ranges.least_bottleneck()
    if not math.isfinite(floor):
        # the range tables are complete (a cut-short build raised DPTimeout above) and no
        # split into pp stages fits them, with the working sets or without (a relaxation):
        # no plan fits the restriction
        return None, math.inf, math.inf
    dp.cover.use_exact(ranges)
    if dp.c1 > 0:
        dp.bott_floor = max(dp.bott_floor, floor)
    value, bott = ranges.bound(dp.c1)
    lb = value + dp.sync_floor + const
    if subs is None:
        plan = ranges.plan(bott)
        if any(np.any(x > 0) for x in dp.work) and plan is not None and not fits(dp.t, plan):
            plan = None      # relaxed ranges: their plan may overflow with its working sets
    else:
        starts = ranges.split(bott)
        plan = None
        if starts is not None:
            stage, choice = [0] * dp.n, [0] * dp.n
            for j, s in enumerate(starts):
                e = starts[j + 1] if j + 1 < dp.pp else dp.n
                sub = subs[int(stack[j][:, s, e].argmin())][1]
                for v, k in zip(range(s, e), sub.stage_choice(j, s, e)):
                    stage[v], choice[v] = j, k
            plan = Assignment(stage, choice)
    if plan is None or not _admissible(dp.t, plan, dp.allowed, dp.prefix):
        return None, math.inf, lb       # (a fixed split: the decomposition's bound only)
    return plan, iteration_time(dp.t, plan), lb


def _level_ranges(dp: ChainDP, entry) -> list[tuple[float, StageRanges]] | None:
    """The decomposition of every working-set level ``L`` (strategies with ``X <= L``,
    capacity less ``L``), or None when one of them is too costly to build."""
    out = []
    # the levels of the strategies the search may use only (a key family's few): a level
    # no allowed strategy has changes no range, and each costs a decomposition of its own
    memo: dict = {}
    usable = [[_shared(memo, _only, m, ok) for m, ok in zip(stage, dp.allowed)] for stage in dp.mem]
    levels = sorted({float(L) for stage in usable for L in working_levels(dp.t, stage, with_time=True)})
    for level in levels:
        memo.clear()      # layers of one class keep sharing their arrays (StageRanges works per class)
        mem = [[_shared(memo, lambda a, b: np.where(b <= level, a, np.inf), m, x)
                for m, x in zip(stage, dp.work)] for stage in dp.mem]
        sub = StageRanges(dp.t.time, mem, dp.cap - level, dp.allowed, entry, dp.deadline)
        if not sub.f:
            return None
        out.append((float(level), sub))
    return out


def _shared(memo: dict, fn, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``fn(a, b)``, computed once per distinct pair of arrays (identical layers share theirs)."""
    key = (id(a), id(b))
    if key not in memo:
        memo[key] = fn(a, b)
    return memo[key]


def _only(m: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """``m`` with ``+inf`` outside the strategy indices ``ok`` (the array itself when
    ``ok`` is every index)."""
    if len(ok) == len(m):
        return m
    out = np.full(len(m), np.inf)
    out[ok] = m[ok]
    return out


def set_bottleneck_floor(dp: ChainDP, ub: float) -> None:
    """Give ``dp`` the partition bound on every plan's bottleneck (searched up to the
    bottleneck a plan of value ``ub`` can have, until the deadline: a bisection cut
    short keeps a lower, still proven, floor) and anchor the coverage grid there."""
    if dp.c1 <= 0:
        return
    hi = ub / dp.c1 if math.isfinite(ub) else 1e9
    floor = dp.cover.least_bottleneck(0.0, hi, deadline=dp.deadline)
    dp.bott_floor = floor
    dp.sync_floor = sum(float(g[ok].min()) for g, ok in zip(dp.t.sync, dp.allowed)) / dp.pp
    dp.cover.set_grid_origin(floor if floor > 0 else hi)
