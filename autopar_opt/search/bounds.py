"""Cheap valid lower bounds and memory infeasibility proofs for one configuration.

Used to skip configurations that cannot beat the incumbent (docs/DESIGN.md §3,
"Outer search") while still recording a valid bound for the certificate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from autopar_opt.cost.tables import CostTables
from autopar_opt.ir.strategies import cp_degree_ok, tp_degree_ok
from autopar_opt.solvers.dp.common import fit_limit


@dataclass(frozen=True)
class ConfigBound:
    """A lower bound on one configuration's optimum, with why."""

    value: float                 # +inf when infeasibility is proven
    infeasible_reason: str = ""
    #: least memory per device any plan of this configuration needs; inf when no plan
    #: exists whatever the memory (a layer without a valid strategy)
    least_memory_bytes: float = 0.0


def _batch_split_reason(tables, layer=None) -> str:
    """Why a micro-batch splits over none of the data-parallel degrees the space allows
    ``layer`` (``dp = devices per stage / (tp·cp)``, each dividing the micro-batch's
    samples, with the layer's own tp and cp rules: :func:`~autopar_opt.ir.strategies.
    enumerate_strategies`), with the fix; empty when some degree divides it (the layer
    lacks strategies for another reason). QA round 12: the layer's rules were left out, so
    8 GPUs, 7 samples and 4 heads (tp 8, hence dp 1, is no tp of the layer) gave no reason."""
    space, d, m = tables.space, tables.devices_per_stage, tables.microbatch_samples
    if space is None:
        return ""
    tps = [t for t in (space.tp_degrees or range(1, d + 1)) if d % t == 0   # None: any
           and not (space.tp_within_node and t > tables.cluster.gpus_per_node)
           and (layer is None or tp_degree_ok(layer, t))]
    cps = [cp for cp in space.cp_degrees if cp == 1 or layer is None or (
        layer.supports_cp and cp_degree_ok(tables.training.seq_len, cp))]
    dps = sorted({d // (tp * cp) for tp in tps for cp in cps if d % (tp * cp) == 0}, reverse=True)
    if not dps or any(m % dp == 0 for dp in dps):
        return ""
    capped = layer is not None and layer.max_tp < d
    own = f", tp dividing {layer.name}'s max_tp {layer.max_tp}" if capped else ""
    wider = "larger pp_degrees" if capped else "larger tp_degrees or pp_degrees"
    return (f": {m} sample(s) split over none of the data-parallel degrees the space allows "
            f"({', '.join(map(str, dps))} = devices per stage / (tp x cp){own}); use a global "
            f"batch whose micro-batches hold a multiple of {min(dps)} samples (global_batch_size = "
            f"micro-batches x dp x samples), {wider}, or fewer GPUs")

def analytic_lower_bound(tables: CostTables) -> ConfigBound:
    """A valid lower bound on T for every plan of this configuration.

    With ``P = Σ_i p_i`` over ``pp`` stages, ``max_i p_i ≥ P/pp``, so
    ``T ≥ P + (c-1)·P/pp + max_i g_i`` and ``P ≥ Σ_u min_k A[u,k]`` (resharding
    and transfers are non-negative); ``max_i g_i ≥ max_u min_k G[u,k]``.

    Memory: stage ``i`` needs ``Σ_u (W + inflight_i·H) + max_u X``
    (:func:`~autopar_opt.cost.tables.stage_memory`); every layer sits in
    some stage whose in-flight count is at least ``min_i inflight_i``, so
    each single layer must fit alone with its own working set,
    ``min_k (W + m·H + X) ≤ capacity``, and, since the stage of any layer ``u``
    holds at least ``min_k X[u]``, ``Σ_u min_k (W + m·H) + max_u min_k X ≤
    pp·capacity``. Either violation proves infeasibility (bound ``+inf``).
    """
    pp, c = tables.pp, tables.rounds
    m = min(tables.inflight)
    lim = fit_limit(tables)   # the allowance of `fits`: what it accepts is never proven infeasible
    seen: dict[tuple, tuple[float, float, float]] = {}   # layers of one class share their arrays

    def minima(w, h, x) -> tuple[float, float, float]:
        key = (id(w), id(h), id(x))
        if key not in seen:
            seen[key] = ((float(np.min(w + m * h + x)), float(np.min(w + m * h)), float(np.min(x)))
                         if len(w) else (math.inf, math.inf, -math.inf))
        return seen[key]
    mins = [minima(w, h, x) for w, h, x in zip(tables.weight_bytes, tables.act_bytes,
                                               tables.working_bytes)]
    per_layer_mem = [v[0] for v in mins]
    stored = [v[1] for v in mins]
    held = max((v[2] for v in mins if v[2] > -math.inf), default=0.0)
    if any(len(s) == 0 for s in tables.strategies):
        lacking = [tables.graph.layers[u] for u, s in enumerate(tables.strategies) if not s]
        bad = [layer.name for layer in lacking[:3]]
        # no amount of memory makes this configuration feasible: no memory figure (inf),
        # so it cannot drag "the least memory any plan needs" down to 0 (issue 33)
        return ConfigBound(math.inf, f"no valid strategy for layer(s) {', '.join(bad)} "
                                     f"with {tables.devices_per_stage} devices per stage and "
                                     f"{tables.microbatch_samples} samples per micro-batch"
                                     + _batch_split_reason(tables, lacking[0]), math.inf)
    least = max(max(per_layer_mem), (sum(stored) + held) / pp)
    if max(per_layer_mem) > lim:
        u = int(np.argmax(per_layer_mem))
        # on the scale of a plan's peak memory, as the summary's "GiB usable" (QA round 12)
        return ConfigBound(math.inf, f"layer {tables.graph.layers[u].name} alone needs "
                                     f"{tables.peak_gib(per_layer_mem[u]):.2f} GiB per device at its "
                                     f"peak (with the runtime reserve and allocator overhead), more "
                                     f"than the {tables.usable_gib:.2f} GiB usable", least)
    if sum(stored) + held > pp * lim:
        return ConfigBound(math.inf, f"the layers need at least "
                                     f"{tables.peak_gib((sum(stored) + held) / pp):.2f} GiB per device "
                                     f"on average over {pp} stage(s) at the peak (with the runtime "
                                     f"reserve and allocator overhead), more than the "
                                     f"{tables.usable_gib:.2f} GiB usable", least)
    fast: dict[int, float] = {}

    def smallest(a) -> float:
        if id(a) not in fast:
            fast[id(a)] = float(np.min(a))
        return fast[id(a)]
    total = sum(smallest(a) for a in tables.time)
    sync = max(smallest(g) for g in tables.sync)
    alpha = 1 + (c - 1) / pp
    value = max(total * alpha + sync,
                memory_lagrangian(tables, alpha, m, pp * lim - held)) \
        + tables.params.iteration_overhead_s
    if tables.uniform_keys is not None:
        return _keyed(tables, value, least)
    return ConfigBound(value, "", least)


#: Multipliers tried by :func:`memory_lagrangian` (s per byte): a log grid wide enough
#: for step times of 1 ms-1,000 s against per-layer memory of 1 kB-1 TB, refined by
#: golden-section search around the best grid point. Any multiplier gives a valid bound;
#: the grid only decides how close to the best one it gets.
LAGRANGE_GRID = np.logspace(-22.0, -2.0, 121)
LAGRANGE_REFINE = 40


def memory_lagrangian(tables: CostTables, alpha: float, inflight: float, budget: float) -> float:
    """A lower bound on ``alpha·Σ_u A[u, k_u] + Σ_u G[u, k_u] / pp`` over assignments that
    fit in memory, so on ``T - T0`` (``T ≥ alpha·P + max_i g_i``, ``g_i = Σ_{u in i} G``
    (docs/DESIGN.md §3) and ``max_i g_i ≥ Σ_u G / pp``).

    Every feasible plan has ``Σ_u M[u, k_u] ≤ budget`` with ``M = W + m·H`` (``m`` the
    least in-flight count; the stage-memory sum of :func:`analytic_lower_bound`'s
    infeasibility proof, ``budget = pp·limit - max_u min_k X``). Relaxing that one row
    with a multiplier ``λ ≥ 0`` (Lagrangian relaxation; Fisher 1981, Management Science
    27(1)) gives, for every ``λ``,

        alpha·Σ_u A[u, k_u]  ≥  Σ_u min_k (alpha·A[u, k] + λ·M[u, k]) - λ·budget,

    a concave function of ``λ`` whose maximum is the bound. At ``λ = 0`` it is the
    memory-blind bound (every layer at its fastest strategy); where memory binds it
    charges each layer the time it must give up to fit: Mixtral-8x22B on 128 H100,
    pp = 2, c = 4, interleaved vp = 28: 6.63 s memory-blind, 9.03 s here, 9.33 s the
    configuration's optimum. Layers that share their arrays (identical layers) are
    counted once per class."""
    pp = tables.pp
    classes: dict[tuple[int, ...], list] = {}
    for a, g, w, h in zip(tables.time, tables.sync, tables.weight_bytes, tables.act_bytes):
        entry = classes.setdefault((id(a), id(g), id(w), id(h)), [a, g, w, h, 0])
        entry[4] += 1
    if not classes or not math.isfinite(budget):
        return -math.inf
    terms = [(*_frontier(alpha * np.asarray(a, dtype=float) + np.asarray(g, dtype=float) / pp,
                         np.asarray(w, dtype=float) + inflight * np.asarray(h, dtype=float)), n)
             for a, g, w, h, n in classes.values()]

    def dual(lams: np.ndarray) -> np.ndarray:
        out = -lams * budget
        for a, mem, n in terms:
            out = out + n * np.min(a[:, None] + mem[:, None] * lams[None, :], axis=0)
        return np.where(np.isnan(out), -np.inf, out)
    with np.errstate(invalid="ignore", over="ignore"):
        grid = dual(LAGRANGE_GRID)
        i = int(np.argmax(grid))
        best = float(grid[i])
        lo = LAGRANGE_GRID[max(i - 1, 0)]
        hi = LAGRANGE_GRID[min(i + 1, len(LAGRANGE_GRID) - 1)]
        ratio = (math.sqrt(5) - 1) / 2
        for _ in range(LAGRANGE_REFINE):          # golden-section on the concave dual
            x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
            f1, f2 = dual(np.array([x1, x2]))
            best = max(best, float(f1), float(f2))
            if f1 < f2:
                lo = x1
            else:
                hi = x2
    return best


def _frontier(time: np.ndarray, mem: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The strategies no other beats in both time and memory (the only ones a
    ``min_k (time + λ·mem)`` with ``λ ≥ 0`` can pick), so the dual costs the frontier's
    size per multiplier, not the strategy count."""
    ok = np.isfinite(time) & np.isfinite(mem)
    if not ok.any():
        return np.array([math.inf]), np.array([0.0])
    t, m = time[ok], mem[ok]
    order = np.lexsort((t, m))                   # by memory, then time
    t, m = t[order], m[order]
    keep = t < np.minimum.accumulate(np.concatenate(([math.inf], t[:-1])))
    return t[keep], m[keep]


def _keyed(tables: CostTables, free_value: float, least: float) -> ConfigBound:
    """Under a target: the least bound over its key families
    (:func:`autopar_opt.solvers.dp.uniform.key_bound`, the same rule per family), its
    block-recomputation families included (:func:`~autopar_opt.solvers.dp.uniform.
    searched_families`: the bound holds for every plan the space holds); ``+inf`` when no
    family has a plan that fits."""
    from autopar_opt.solvers.dp.uniform import family_bound, searched_families

    families = searched_families(tables)
    value = min((family_bound(tables, f) for f in families), default=math.inf)
    if math.isinf(value):
        who = tables.space.runs_on.framework if tables.space and tables.space.runs_on else "the target"
        why = ("no setting " + who + " accepts gives every layer a strategy" if not families else
               f"no plan {who} can run fits: every uniform tp/cp/sp/ZeRO/ep/etp/recompute setting "
               "has a layer that fits alone in no strategy, or needs more memory than the stages hold")
        return ConfigBound(math.inf, why, least)
    return ConfigBound(max(value, free_value), "", least)
