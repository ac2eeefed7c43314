"""Brute-force reference optimum for tiny instances (test oracle, reusable).

Enumerates every pipeline split (contiguous, non-empty ranges of the
topological order, so every edge goes forward) times every combination of
per-layer strategies from :func:`autopar_opt.ir.strategies.enumerate_strategies`
(unpruned: this also checks that the cost tables' dominance pruning never
changes the optimum). Plans are priced from the pure cost functions
(``layer_cost``, ``reshard_time``, ``cross_stage_time``) with numpy
broadcasting over all strategy combinations of one split, using exactly the
semantics of :func:`autopar_opt.cost.evaluate.evaluate`; the winner is re-priced
with ``evaluate`` itself and the two must agree, so a pricing slip here fails
loudly instead of producing a wrong oracle.

It never reads :class:`~autopar_opt.cost.tables.CostTables`, so it is an
independent check of the tables, the formulations and the DP.
"""

from __future__ import annotations

import itertools
import math
from typing import Callable

import numpy as np

from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import CostParams, default_params
from autopar_opt.cost.reshard import cross_stage_time, reshard_time
from autopar_opt.ir.pipeline import boundary_is_intra, inflight_microbatches, interleaved_inflight, tie_tier
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.ir.graph import LayerGraph, LayerKind
from autopar_opt.ir.hardware import Cluster
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.strategies import enumerate_strategies
from autopar_opt.ir.training import Schedule, SearchSpace, Training

#: Refuse instances whose strategy product per split exceeds this many plans.
MAX_COMBINATIONS = 2_000_000


def stage_splits(num_layers: int, pp: int) -> list[tuple[int, ...]]:
    """All ways to cut ``num_layers`` ordered layers into ``pp`` non-empty
    contiguous stages, as the tuple of each layer's stage index."""
    out = []
    for cuts in itertools.combinations(range(1, num_layers), pp - 1):
        bounds = (0, *cuts, num_layers)
        out.append(tuple(i for i in range(pp) for _ in range(bounds[i], bounds[i + 1])))
    return out


def _axis(arr: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """Reshape a 1-D array so that it broadcasts along ``axis`` of ``ndim``."""
    shape = [1] * ndim
    shape[axis] = arr.shape[0]
    return arr.reshape(shape)


def _pair(mat: np.ndarray, u: int, v: int, ndim: int) -> np.ndarray:
    """Reshape a (K_u, K_v) matrix to broadcast along axes u < v of ``ndim``."""
    shape = [1] * ndim
    shape[u], shape[v] = mat.shape
    return mat.reshape(shape)


def _price_split(stage: tuple[int, ...], costs, edges, cross, pp: int, c: int,
                 inflight: list, capacity: float, vp: int = 1,
                 head: int | None = None) -> np.ndarray:
    """Iteration time of every strategy combination for one split (+inf if
    any stage exceeds memory); shape = (K_0, ..., K_{n-1}). ``inflight[i]`` is
    ``(activations held, output-layer logits held)`` of stage ``i`` in whole
    micro-batches; ``head`` the output layer's index; ``vp`` the interleaved
    schedule's virtual stages (evaluate()'s ``Σp/v + Σo + (v·c - 1)·max(p/v, o) + G``)."""
    n = len(stage)
    p = [0.0] * pp
    g = [0.0] * pp
    w = [0.0] * pp
    h = [0.0] * pp
    x = [0.0] * pp      # working set of the layer in flight: the stage's maximum
    for u, (time, sync, wb, ab, xb) in enumerate(costs):
        i = stage[u]
        p[i] = p[i] + _axis(time, u, n)
        g[i] = g[i] + _axis(sync, u, n)
        w[i] = w[i] + _axis(wb, u, n)
        held, held_logits = inflight[i]
        h[i] = h[i] + (held_logits if u == head else held) * _axis(ab, u, n)
        x[i] = np.maximum(x[i], _axis(xb, u, n))
    o = [0.0] * (pp - 1)
    for (u, v), (rin, rcross) in zip(edges, cross):
        if stage[u] == stage[v]:
            p[stage[u]] = p[stage[u]] + _pair(rin, u, v, n)
        for b in range(stage[u], stage[v]):
            o[b] = o[b] + _pair(rcross[b], u, v, n)
    shape = tuple(len(cst[0]) for cst in costs)
    # interleaving: v·c chunk micro-batches through chunk stages of 1/v of each stage's
    # compute and whole boundary sends (Narayanan et al. 2021, Sec. 2.2.2)
    full = [np.broadcast_to(np.asarray(x, dtype=float), shape) for x in
            [t / vp for t in p] + o]
    bottleneck = np.maximum.reduce(full)
    total = sum(full) + (c * vp - 1) * bottleneck
    total = total + np.maximum.reduce([np.broadcast_to(np.asarray(x, dtype=float), shape) for x in g])
    for i in range(pp):
        over = np.broadcast_to(np.asarray(w[i] + h[i] + x[i], dtype=float), shape) > capacity
        total = np.where(over, np.inf, total)
    return total


def brute_force(graph: LayerGraph, cluster: Cluster, training: Training, space: SearchSpace,
                pp: int, c: int, schedule: Schedule = Schedule.one_f_one_b,
                params: CostParams | None = None,
                accept: "Callable[[Plan], bool] | None" = None,
                vp: int = 1, below: float = math.inf) -> tuple[float, Plan] | None:
    """Optimal iteration time and plan for one outer configuration, or None.

    Parameters
    ----------
    graph, cluster, training, space : the instance (keep it tiny: the search
        is exhaustive, ``MAX_COMBINATIONS`` plans per split at most).
    pp, c, schedule : the outer configuration (stages, micro-batches, schedule).
    vp : virtual stages per rank of the interleaved schedule (every split is
        still tried: the exporter's ``accept`` decides which ones a framework runs;
        in-flight memory by :func:`~autopar_opt.ir.pipeline.interleaved_inflight`).
    params : cost parameters (``default_params()`` when None).
    accept : only plans it accepts count (e.g. those a framework's exporter takes):
        the plans of all splits are tried cheapest first until one is accepted.
    below : with ``accept``, only plans cheaper than this iteration time count (a caller
        taking the best of several configurations passes the best so far: a dearer plan
        cannot change its answer, and the acceptor is not asked about it).

    Returns
    -------
    ``(best_time_s, plan)`` where ``best_time_s`` equals
    ``evaluate(plan, ...).iteration_time_s`` (it includes the constant
    ``params.iteration_overhead_s``), or None when no plan fits in memory or
    the configuration admits no plan (pp > layers, no valid strategy).
    """
    params = params or default_params()
    n_dev, n = cluster.num_devices, len(graph.layers)
    if n_dev % pp or training.global_batch_size % c or pp > n:
        return None
    d, b = n_dev // pp, training.global_batch_size // c
    ctx = StageContext(cluster, training, params, d, b, tie_tier=tie_tier(cluster, (d,) * pp))
    strats = [enumerate_strategies(layer, d, b, space, cluster.gpus_per_node, training.seq_len,
                                   training.autocast)
              for layer in graph.layers]
    if any(not s for s in strats) or math.prod(len(s) for s in strats) > MAX_COMBINATIONS:
        if any(not s for s in strats):
            return None
        raise ValueError(f"brute force refused: {math.prod(len(s) for s in strats)} combinations")
    costs = []
    for layer, ss in zip(graph.layers, strats):
        lc = [layer_cost(layer, s, ctx) for s in ss]
        costs.append(tuple(np.array([getattr(x, f) for x in lc], dtype=float)
                           for f in ("time_s", "sync_s", "weight_bytes", "act_bytes", "working_bytes")))
    edges = graph.edge_indices()
    cross = []
    for u, v in edges:
        nbytes = graph.layers[u].output_bytes * b
        lu, lv = [s.layout for s in strats[u]], [s.layout for s in strats[v]]
        rin = np.array([[reshard_time(x, y, nbytes, ctx.stage_tier, ctx.link_efficiency(ctx.stage_tier))
                         for y in lv] for x in lu])
        per_boundary = []
        for k in range(pp - 1):
            intra = boundary_is_intra(k, d, cluster.gpus_per_node)
            tier = pair_link(cluster) if intra else cluster.inter_node
            eff = ctx.link_efficiency(tier)
            per_boundary.append(np.array([[cross_stage_time(x, y, nbytes, tier, cluster.intra_node, eff,
                                                            ctx.params.comm_efficiency)
                                           for y in lv] for x in lu]))
        cross.append((rin, per_boundary))
    vp = vp if schedule is Schedule.interleaved else 1
    if vp > 1:
        inflight = [interleaved_inflight(pp, c, vp, i) for i in range(pp)]
    else:
        inflight = [(m, m) for m in (inflight_microbatches(schedule, pp, c, i) for i in range(pp))]
    head = next((u for u, layer in enumerate(graph.layers) if layer.kind is LayerKind.lm_head), None)
    best: tuple[float, tuple[int, ...], tuple[int, ...]] | None = None
    splits = stage_splits(n, pp)

    def price(stage: tuple[int, ...]) -> np.ndarray:
        return _price_split(stage, costs, edges, cross, pp, c, inflight, ctx.capacity_bytes, vp, head)

    if accept is None:            # one split's prices in memory at a time
        for stage in splits:
            total = price(stage)
            idx = np.unravel_index(int(np.argmin(total)), total.shape)
            value = float(total[idx])
            if math.isfinite(value) and (best is None or value < best[0]):
                best = (value, stage, tuple(int(k) for k in idx))
    else:
        # 1e-9: a plan priced a rounding error above ``below`` is still asked about
        limit = (below - params.iteration_overhead_s) * (1 + 1e-9)
        best = _cheapest_accepted(graph, strats, splits, [price(stage) for stage in splits], pp, c,
                                  schedule, vp, accept, limit)
    if best is None:
        return None
    value, stage, ks = best
    plan = _plan(graph, strats, stage, ks, pp, c, schedule, vp)
    metrics = evaluate(plan, graph, cluster, training, params)
    value += params.iteration_overhead_s
    if not metrics.feasible or not math.isclose(metrics.iteration_time_s, value, rel_tol=1e-9):
        raise AssertionError(f"brute-force pricing {value} disagrees with evaluate "
                             f"{metrics.iteration_time_s} (feasible={metrics.feasible})")
    return metrics.iteration_time_s, plan


def _cheapest_accepted(graph: LayerGraph, strats, splits, totals, pp: int, c: int,
                       schedule: Schedule, vp: int, accept: "Callable[[Plan], bool]",
                       limit: float = math.inf):
    """``(value, split, strategy indices)`` of the cheapest plan ``accept`` takes over every
    split, priced below ``limit``, or None.

    The plans of all splits are tried in one order, cheapest first (ties: the earlier
    split, then the position in the split's array), so the first one accepted is the
    optimum and no dearer plan is asked about. The same answer as trying each split in
    turn and keeping a later split's plan only when strictly cheaper, which walked every
    plan of a split the acceptor never takes before the next split's: DeepSpeed's exporter
    (whose uniform partition gives one split of four layers over two stages) was asked
    about 1.17 million plans of one configuration of test_runnable.py's MoE instance where
    3 were enough."""
    sizes = [t.size for t in totals]
    flat = np.concatenate([t.ravel() for t in totals])
    starts = np.cumsum([0] + sizes)
    kept = np.flatnonzero(flat < limit)        # finite and below the limit, in position order
    for pos in kept[np.argsort(flat[kept], kind="stable")]:
        i = int(np.searchsorted(starts, pos, side="right")) - 1
        ks = tuple(int(k) for k in np.unravel_index(int(pos - starts[i]), totals[i].shape))
        if accept(_plan(graph, strats, splits[i], ks, pp, c, schedule, vp)):
            return float(flat[pos]), splits[i], ks
    return None


def _plan(graph: LayerGraph, strats, stage: tuple[int, ...], ks: tuple[int, ...], pp: int,
          c: int, schedule: Schedule, vp: int = 1) -> Plan:
    names = [layer.name for layer in graph.layers]
    stages = [StagePlan([], []) for _ in range(pp)]
    for u, i in enumerate(stage):
        stages[i].layers.append(names[u])
        stages[i].strategies.append(strats[u][ks[u]])
    return Plan(stages, c, schedule, vp)


def pair_link(cluster):
    """The intra-node link one pair of GPUs has: all of a GPU's NVLinks under NVSwitch,
    ``1/(board - 1)`` of them on a point-to-point board of ``board`` GPUs (a pipeline
    send between two GPUs of a 4-GPU HGX board uses the pair's third)."""
    from autopar_opt.ir.hardware import LinkTier
    t = cluster.intra_node
    share = 1.0 / (cluster.nvlink_board - 1) if cluster.nvlink_board > 2 else 1.0
    return LinkTier(t.name, t.bandwidth_gb_per_s * share, t.latency_us)
