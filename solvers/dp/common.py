"""Shared pieces of the DP fallback: pricing an assignment
(:class:`~autopar_opt.core.assignment.Assignment`) from the tables, and proven
memory/time bounds.

Pricing follows exactly the semantics of :func:`autopar_opt.cost.evaluate.evaluate`
(docs/DESIGN.md §3): ``p_i = Σ A + Σ R`` over in-stage edges, an edge that crosses
stages adds ``R'`` at *every* boundary it crosses (relayed), ``g_i = Σ G``,
memory ``Σ W + inflight_i·Σ H + max X`` (X the working set of the layer in
flight, :func:`~autopar_opt.cost.tables.stage_memory`); latency from
:func:`autopar_opt.cost.evaluate.pipeline_latency` plus the constant
``params.iteration_overhead_s``.
"""

from __future__ import annotations

import time

import numpy as np

from autopar_opt.core.assignment import Assignment  # noqa: F401 (the DP's answer type)
from autopar_opt.cost.tables import (  # noqa: F401 (fits re-exported: the DPs' feasibility test)
    CostTables, fits, stage_memory)
from autopar_opt.ir.hardware import GIB, MEM_EPS  # noqa: F401  (MEM_EPS re-exported: the DPs' allowance)


def stage_terms(tables: CostTables, a: Assignment) -> tuple[list[float], list[float], list[float], list[float]]:
    """Per-stage ``p``, per-boundary ``o``, per-stage ``g`` and per-stage memory (bytes)."""
    pp = tables.pp
    p, g = [0.0] * pp, [0.0] * pp
    for u, (i, k) in enumerate(zip(a.stage, a.choice)):
        p[i] += float(tables.time[u][k])
        g[i] += float(tables.sync[u][k])
    o = [0.0] * max(pp - 1, 0)
    for e, (u, v) in enumerate(tables.edges):
        su, sv = a.stage[u], a.stage[v]
        ku, kv = a.choice[u], a.choice[v]
        if su == sv:
            p[su] += float(tables.reshard[e][ku, kv])
        for b in range(su, sv):
            o[b] += float(tables.cross(e, b)[ku, kv])
    return p, o, g, stage_memory(tables, a.stage, a.choice)


def iteration_time(tables: CostTables, a: Assignment) -> float:
    """Objective of docs/DESIGN.md §3 (+ the constant overhead) for ``a``."""
    p, o, g, _ = stage_terms(tables, a)
    return tables.latency(p, o, g) + tables.params.iteration_overhead_s


def fit_limit(tables: CostTables) -> float:
    """Memory (bytes) above which :func:`least_memory` proves that no plan fits: the
    limit of :func:`fits` (capacity plus ``MEM_EPS`` GiB), widened by a relative 1e-12
    for the different order of the two sums. Review finding F3: the proof used
    ``capacity·(1 + 1e-12)`` (0.03 bytes at 32 GiB), under the 1.07-byte allowance, so a
    plan that ``fits`` and ``evaluate`` accept could be declared infeasible."""
    return (tables.capacity_bytes + MEM_EPS * GIB) * (1 + 1e-12)


def layer_memory(tables: CostTables, stage: int) -> list[np.ndarray]:
    """``W + inflight_stage·H`` per layer and strategy (bytes), the stored part of
    the stage memory (the working set ``X`` adds its maximum); ``+inf`` for a
    strategy the stage may not use (free stage sizes: another device count,
    :meth:`~autopar_opt.cost.tables.CostTables.allowed_in_stage`), so that no
    DP ever fits it there."""
    m = tables.inflight[stage]
    allowed = tables.allowed_in_stage(stage)
    # identical layers share their cost arrays (one per layer class) and share the
    # result here too, so that everything built on it can work once per class; the
    # arrays are read-only by convention like the tables' own
    memo: dict[tuple[int, int, int], np.ndarray] = {}
    out = []
    for u, (w, h) in enumerate(zip(tables.weight_bytes, tables.act_bytes)):
        ok = None if allowed is None else allowed[u]
        key = (id(w), id(h), id(ok))
        if key not in memo:
            x = w + m * h
            memo[key] = x if ok is None else np.where(ok, x, np.inf)
        out.append(memo[key])
    return out


class DPTimeout(Exception):
    """Raised inside a DP pass (or a bound it is building) when its deadline has passed."""


def past(deadline: float | None) -> bool:
    """True once ``deadline`` (a ``time.monotonic()`` value; None: never) has passed."""
    return deadline is not None and time.monotonic() > deadline


def least_memory(tables: CostTables) -> float:
    """Least possible peak stage memory (bytes) over all contiguous partitions.

    Stored memory is separable per layer once the stage is fixed; with the
    working set the least memory of a layer range in stage ``i`` is, over the
    levels ``L`` of :func:`working_levels`, the least of ``L`` plus the sum of
    per-layer minima among strategies with ``X <= L`` (:func:`least_range_memory`);
    a min-max partition DP over (prefix, stage) is then exact. O(n²·pp), each
    stage one numpy pass over the (end, start) matrix (issue 18: the Python
    loops took ~1.4 s per search on a 128-layer, 32-stage model).
    Used for the infeasibility message and as a proof of infeasibility.
    """
    return _least_memory_partition(tables)[0]


def least_memory_plan(tables: CostTables) -> Assignment | None:
    """The plan of :func:`least_memory`: the min-max partition, every layer on its
    least-memory strategy in its stage; None when ``pp > n`` or no plan fits.

    It fits whenever any plan fits (its peak is the least possible), and costs
    what :func:`least_memory` costs (milliseconds on 128 layers × 32 stages), so the
    chain DP returns it when its deadline passes before a beam pass found a plan
    (issue 15: a time-limited DP still answers with a feasible plan)."""
    need, cuts, levels = _least_memory_partition(tables)
    if cuts is None or need > fit_limit(tables):
        return None
    stage, choice = [0] * tables.num_layers, [0] * tables.num_layers
    for i, (lo, hi, L) in enumerate(zip(cuts, cuts[1:], levels)):
        mem = layer_memory(tables, i)
        for u in range(lo, hi):
            m = np.where(tables.working_bytes[u] <= L, mem[u], np.inf)
            stage[u], choice[u] = i, int(np.argmin(m))
    return Assignment(stage, choice)


def working_levels(tables: CostTables, mem: list[np.ndarray], with_time: bool = False) -> np.ndarray:
    """Working-set levels ``L`` that a stage's least memory (or, ``with_time``, its
    least time within a memory budget) can need: the ``X`` of the points of each
    layer's (stored memory, working set) Pareto front, or of its (time, stored
    memory, working set) front. A stage's least memory is
    ``min_L (Σ_u min_{k: X<=L} m[u,k] + L)`` over the first set only (any other
    level gives the same sum as the next lower one and costs more); the least
    time needs the second (a faster strategy of larger ``X`` may be the one used)."""
    levels: set[float] = set()
    seen: set[tuple[int, int]] = set()
    for u, (m, x) in enumerate(zip(mem, tables.working_bytes)):
        key = (id(m), id(x)) if not with_time else (id(m), id(x), id(tables.time[u]))
        if key in seen or not len(m):
            continue
        seen.add(key)
        ok = np.isfinite(m)
        mv, xv = m[ok], np.asarray(x, float)[ok]
        if with_time:
            tv = np.asarray(tables.time[u], float)[ok]
            idx = np.arange(len(mv))
            for k in idx:
                worse = (tv <= tv[k]) & (mv <= mv[k]) & (xv <= xv[k]) & (
                    (tv < tv[k]) | (mv < mv[k]) | (xv < xv[k]) | (idx < k))
                if not worse.any():
                    levels.add(float(xv[k]))
            continue
        order = np.lexsort((mv, xv))
        best = np.inf
        for a, b in zip(mv[order], xv[order]):
            if a < best:
                best = a
                levels.add(float(b))
    return np.array(sorted(levels)) if levels else np.zeros(1)


def least_range_memory(tables: CostTables, stage: int) -> tuple[np.ndarray, np.ndarray]:
    """``span[e, s]``: the least memory (bytes) of layers ``[s, e)`` in ``stage``,
    stored plus the largest working set (``+inf`` where a layer has no usable
    strategy or ``s >= e``), and ``level[e, s]`` the working-set level reaching it."""
    n = tables.num_layers
    mem = layer_memory(tables, stage)
    span = np.full((n + 1, n + 1), np.inf)
    level = np.zeros((n + 1, n + 1))
    for L in working_levels(tables, mem):
        mins = np.array([float(np.min(m[x <= L])) if np.any(x <= L) else np.inf
                         for m, x in zip(mem, tables.working_bytes)])
        # a layer with no strategy the stage may use (free stage sizes) costs +inf
        # there: range sums count those separately instead of subtracting infinities
        finite = np.isfinite(mins)
        pref = np.concatenate([[0.0], np.cumsum(np.where(finite, mins, 0.0))])
        bad = np.concatenate([[0], np.cumsum(~finite)])
        cur = pref[:, None] - pref[None, :] + L
        cur[bad[:, None] > bad[None, :]] = np.inf
        better = cur < span
        span[better] = cur[better]
        level[better] = L
    return span, level


def _least_memory_partition(tables: CostTables
                            ) -> tuple[float, list[int] | None, list[float] | None]:
    """:func:`least_memory`, the stage boundaries ``[0, e_0, …, n]`` of a partition
    that reaches it and each stage's working-set level there (None, None when
    ``pp > n`` or the value is infinite). A range's memory is exact with the
    working set (:func:`least_range_memory`)."""
    n, pp = tables.num_layers, tables.pp
    if pp > n:
        return float("inf"), None, None
    pos = np.arange(n + 1)
    before = pos[None, :] < pos[:, None]           # [end, start]: start < end
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    parent = []
    memo: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}   # equal in-flight count, group and devices agree
    keys = []
    for i in range(pp):
        key = (tables.inflight[i], None if tables.stage_devices is None else tables.stage_key(i))
        if key not in memo:
            memo[key] = least_range_memory(tables, i)
        keys.append(key)
        span = memo[key][0]
        cand = np.maximum(best[None, :], span)
        cand[~(before & (pos[None, :] >= i))] = np.inf
        parent.append(cand.argmin(axis=1))
        nxt = cand.min(axis=1)
        nxt[(pos < i + 1) | (pos > n - (pp - 1 - i))] = np.inf
        best = nxt
    if not np.isfinite(best[n]):
        return float(best[n]), None, None
    cuts = [n]
    for i in range(pp - 1, -1, -1):
        cuts.append(int(parent[i][cuts[-1]]))
    cuts = cuts[::-1]
    levels = [float(memo[keys[i]][1][hi, lo]) for i, (lo, hi) in enumerate(zip(cuts, cuts[1:]))]
    return float(best[n]), cuts, levels


def simple_lower_bound(tables: CostTables) -> float:
    """A proven lower bound on the optimum (used when the DP is cut short).

    ``Σp ≥ Σ_u min_k A`` and ``max p ≥ Σp / pp``; transfers and sync ≥ 0.
    """
    total = sum(float(t.min()) for t in tables.time)
    bott = max(total / max(tables.pp, 1), max(float(t.min()) for t in tables.time))
    return total + (tables.rounds - 1) * bott + tables.params.iteration_overhead_s


def infeasible_message(tables: CostTables) -> str:
    """Say how much memory the least-memory plan needs against the capacity."""
    if tables.pp > tables.num_layers:
        return f"pp={tables.pp} stages cannot each hold a layer of a {tables.num_layers}-layer model"
    need = least_memory(tables)
    # on the scale of a plan's peak memory, as the summary's "GiB usable" (QA round 12)
    return (f"no plan fits: the least memory any plan needs is {tables.peak_gib(need):.3f} GiB per "
            f"device on its fullest stage (its peak: with the runtime reserve and allocator "
            f"overhead), against {tables.usable_gib:.3f} GiB usable")
