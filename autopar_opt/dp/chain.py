"""Exact label-setting DP for chains (and the fixed-order heuristic for DAGs with pp > 1).

Problem (DESIGN.md §3, one outer configuration ``(pp, c, schedule)``): split the
layers, in order, into exactly ``pp`` non-empty contiguous stages and give
every layer a strategy ``k_u``, minimising

    T = Σ_i p_i + Σ_i o_i + (c−1)·max(max_i p_i, max_i o_i) + max_i g_i (+ constant)

subject to ``Σ_{u∈i} W[u,k_u] + inflight_i·Σ_{u∈i} H[u,k_u] ≤ capacity`` per stage.

Method. The max terms and the memory knapsack make a scalar DP inexact, so
the DP carries *labels* (Pareto / dominance DP, the multi-criteria form of the
Alpa [Zheng et al. 2022, Sec. 5.2] and Piper [Tarnawski et al. 2021]
bottleneck DPs). A state is ``(u, i, k)`` = layer ``u`` is the last layer
processed, it lies in stage ``i`` with strategy ``k``; a label is

    (S, M, pc, G, gc, mem)

``S`` = Σ of all ``p`` and ``o`` so far (current stage included), ``M`` = the
running max of closed stages' ``p``, of the ``o``'s and of the current ``pc``,
``pc`` / ``gc`` / ``mem`` the current stage's time, sync and memory, ``G`` the
running max of ``g`` including ``gc``. Storing ``M = max(M_closed, pc)`` loses
nothing since ``pc`` only grows. Transitions: stay in stage ``i`` (add
``A + R``) or open stage ``i+1`` (add ``o = R'`` at boundary ``i``).

Dominance (exact): label 1 dominates label 2 at the same state if
``mem1 ≤ mem2`` and ``S1 + (c−1)·max(0, M1−M2, pc1−pc2) + max(0, G1−G2, gc1−gc2) ≤ S2``
(in the last stage without the ``0``s: no later stage can dominate the maxima).
For every completion the two final costs differ by at most that expression
because ``max(a1,b1+x,y) − max(a2,b2+x,y) ≤ max(0, a1−a2, b1−b2)``; the relation
is transitive (sub-additivity of ``max(0,·)``), so pruning dominated labels
keeps an optimal label. Bound pruning: a first pass with a beam of
``beam`` labels per state gives an incumbent ``UB``; the exact pass drops a
label whose lower bound ``S + R_u + (c−1)·max(M, (pc + R_u)/(pp−i)) + G``
(``R_u`` = Σ of the remaining layers' cheapest ``A``) exceeds ``UB``.

Complexity: O(n · pp · K² · L · L') time, where ``n`` layers, ``K`` strategies
per layer, ``L`` labels per state and ``L'`` kept labels checked by the
dominance filter. ``L`` is 1 when memory does not bind and
``c = 1``-like objectives; in the worst case it is exponential (the memory
knapsack is NP-hard), which is why the time limit returns the beam incumbent
with the analytic bound of :func:`~autopar_opt.dp.common.simple_lower_bound`.
Identical layers (``tables.layer_class``) share their cost arrays (built once
per class by the tables); the DP itself does not yet compress runs of
identical layers, so its time is linear in ``n`` times the label counts.

For a DAG with ``pp > 1`` the same DP over the topological order prices only
the order-consecutive edges; skip edges are left out of the search and the
decoded plan is re-priced exactly. That is a heuristic (see
:func:`solve_chain`, ``exact=False``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from autopar_opt.cost.tables import CostTables
from autopar_opt.dp.common import MEM_EPS, Assignment, layer_memory
from autopar_opt.hardware import GIB

# label tuple fields
_S, _M, _PC, _G, _GC, _MEM, _K, _I, _PARENT = range(9)


class DPTimeout(Exception):
    """Raised inside the exact pass when the time limit is reached."""


@dataclass
class ChainOutcome:
    """Best assignment found (None when none fits), its DP value, and whether the search was exhaustive."""

    assignment: Assignment | None
    value: float
    exhaustive: bool
    labels: int


def _dominates(a: tuple, b: tuple, c1: float, last: bool, safe: float) -> bool:
    """Whether label ``a`` is no worse than ``b`` for every completion (module docstring).

    In the last stage no later stage adds a third term to the maxima, so the
    ``0`` in ``max(0, ·)`` is dropped (the difference of the maxima is then at
    most the larger of the component differences, which may be negative).
    """
    if a[_MEM] > max(b[_MEM], safe):
        return False
    floor = -math.inf if last else 0.0
    pen = c1 * max(floor, a[_M] - b[_M], a[_PC] - b[_PC]) + max(floor, a[_G] - b[_G], a[_GC] - b[_GC])
    return a[_S] + pen <= b[_S]


def _key(x: tuple, c1: float) -> float:
    return x[_S] + c1 * x[_M] + x[_G]


def _pareto(cands: list[tuple], c1: float, beam: int | None, last: bool, safe: float) -> list[tuple]:
    """Keep non-dominated labels; with ``beam`` keep the best few by a scalar key.

    Dominance implies a key no larger (``S + (c−1)·M + G``), so after sorting
    by key a label can only be dominated by one before it. ``safe``: a label
    whose memory is at most ``safe`` can finish its stage with any strategies
    within capacity, so its memory need not be compared. The beam also keeps
    the least-memory label so that the beam pass finds a plan when memory binds.
    """
    cands.sort(key=lambda x: _key(x, c1))
    kept: list[tuple] = []
    for cand in cands:
        if not any(_dominates(k, cand, c1, last, safe) for k in kept):
            kept.append(cand)
            if beam is not None and len(kept) >= beam:
                break
    if beam is not None:
        low = min(cands, key=lambda x: x[_MEM])
        if low not in kept:
            kept.append(low)
    return kept


class _ChainDP:
    """One run of the label DP (a beam pass or the exact pass)."""

    def __init__(self, tables: CostTables, deadline: float | None) -> None:
        self.t = tables
        self.n, self.pp, self.c1 = tables.num_layers, tables.pp, float(tables.microbatches - 1)
        self.cap = tables.capacity_bytes + MEM_EPS * GIB
        self.deadline = deadline
        self.mem = [layer_memory(tables, i) for i in range(self.pp)]
        self.edge_of = {(u, v): e for e, (u, v) in enumerate(tables.edges)}
        # memory threshold under which a label's stage can never overflow
        self.safe = []
        for m in self.mem:
            tail = np.cumsum([float(x.max()) for x in m][::-1])[::-1]   # tail[u] = Σ_{v≥u} max mem
            self.safe.append([self.cap - (float(tail[u + 1]) if u + 1 < self.n else 0.0)
                              for u in range(self.n)])
        mins = [float(a.min()) for a in tables.time]
        self.rest = [sum(mins[u + 1:]) for u in range(self.n)]
        self.labels = 0

    def stage_range(self, u: int) -> range:
        return range(max(0, self.pp - self.n + u), min(u, self.pp - 1) + 1)

    def lower(self, lab: tuple, u: int) -> float:
        r = self.rest[u]
        bott = max(lab[_M], (lab[_PC] + r) / (self.pp - lab[_I]))
        return lab[_S] + r + self.c1 * bott + lab[_G]

    def run(self, beam: int | None, ub: float) -> tuple[tuple | None, bool]:
        """Return (best final label, exhaustive) after processing all layers."""
        t = self.t
        layer: dict[tuple[int, int], list[tuple]] = {}
        for k, a in enumerate(t.time[0]):
            m = float(self.mem[0][0][k])
            if m <= self.cap:
                a, g = float(a), float(t.sync[0][k])
                layer[(0, k)] = [(a, a, a, g, g, m, k, 0, None)]
        for u in range(1, self.n):
            layer = self.step(layer, u, beam, ub)
        best = None
        for (i, _k), labs in layer.items():
            if i != self.pp - 1:
                continue
            for lab in labs:
                val = lab[_S] + self.c1 * lab[_M] + lab[_G]
                if best is None or val < best[0]:
                    best = (val, lab)
        return (best[1] if best else None), beam is None

    def step(self, prev: dict, u: int, beam: int | None, ub: float) -> dict:
        t, c1 = self.t, self.c1
        e = self.edge_of.get((u - 1, u))
        A, G = t.time[u], t.sync[u]
        out: dict[tuple[int, int], list[tuple]] = {}
        for i in self.stage_range(u):
            memv = self.mem[i][u]
            for k2 in range(len(A)):
                if beam is None and self.deadline is not None and time.monotonic() > self.deadline:
                    raise DPTimeout   # the beam pass is cheap (≤ beam+1 labels per state) and always finishes
                a2, g2, m2 = float(A[k2]), float(G[k2]), float(memv[k2])
                cands: list[tuple] = []
                for (ip, k1), labs in prev.items():
                    if ip == i:
                        step = a2 + (float(t.reshard[e][k1, k2]) if e is not None else 0.0)
                        for L in labs:
                            mem = L[_MEM] + m2
                            if mem > self.cap:
                                continue
                            pc, gc = L[_PC] + step, L[_GC] + g2
                            cands.append((L[_S] + step, max(L[_M], pc), pc, max(L[_G], gc), gc,
                                          mem, k2, i, L))
                    elif ip == i - 1 and m2 <= self.cap:
                        o = float(t.cross(e, i - 1)[k1, k2]) if e is not None else 0.0
                        for L in labs:
                            cands.append((L[_S] + o + a2, max(L[_M], o, a2), a2, max(L[_G], g2), g2,
                                          m2, k2, i, L))
                if ub < math.inf:
                    lim = ub * (1 + 1e-9)
                    cands = [x for x in cands if self.lower(x, u) <= lim]
                if cands:
                    kept = _pareto(cands, c1, beam, i == self.pp - 1, self.safe[i][u])
                    self.labels += len(kept)
                    out[(i, k2)] = kept
        return out


def _decode(lab: tuple, n: int) -> Assignment:
    stage, choice = [0] * n, [0] * n
    u = n - 1
    while lab is not None:
        stage[u], choice[u] = lab[_I], lab[_K]
        lab, u = lab[_PARENT], u - 1
    return Assignment(stage, choice)


def solve_chain(tables: CostTables, deadline: float | None = None, beam: int = 2) -> ChainOutcome:
    """Label DP over the layer order (exact for chains; see module docstring).

    A beam pass first gives an incumbent; the exact pass then proves optimality.
    If ``deadline`` (``time.monotonic()`` value) passes during the exact pass,
    the beam incumbent is returned with ``exhaustive=False``.
    """
    dp = _ChainDP(tables, deadline)
    try:
        inc, _ = dp.run(beam, math.inf)
    except DPTimeout:
        return ChainOutcome(None, math.inf, False, dp.labels)
    ub = math.inf if inc is None else inc[_S] + dp.c1 * inc[_M] + inc[_G]
    try:
        best, _ = dp.run(None, ub)
    except DPTimeout:
        asg = _decode(inc, dp.n) if inc is not None else None
        return ChainOutcome(asg, ub, False, dp.labels)
    if best is None or (inc is not None and ub < best[_S] + dp.c1 * best[_M] + best[_G]):
        best = inc
    if best is None:
        return ChainOutcome(None, math.inf, True, dp.labels)
    return ChainOutcome(_decode(best, dp.n), best[_S] + dp.c1 * best[_M] + best[_G], True, dp.labels)
