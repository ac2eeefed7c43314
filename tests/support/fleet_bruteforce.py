"""Brute-force optimum on tiny mixed fleets (test oracle for issue 34).

Enumerates, independently of the library's search: every shape (an ordered
non-empty subset of the groups, each used group split whole into ``n``
congruent stages), micro-batch count and schedule, every contiguous split of
the layers, and every combination of per-layer strategies that
:func:`~autopar_opt.ir.strategies.enumerate_strategies` gives on the stage's
group and device count (unpruned). Each plan is priced from the pure cost
functions with numpy broadcasting, every stage on its own group's context and
against its own capacity, boundaries on their link (same node, the group's
network, or the slowest link between two groups); the winner is re-priced by
:func:`~autopar_opt.cost.evaluate.evaluate` and the two must agree.

Replica plans (data-parallel classes on disjoint groups with a batch split) are
the maximum of the classes' own brute-force optima plus the cross-class
all-reduce, over every partition and split of the grid.
It never reads cost tables, so it checks tables, DP and MIP alike.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np

from autopar_opt.cost.collectives import allreduce_time
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import CostParams, default_params
from autopar_opt.cost.reshard import cross_stage_time, reshard_time
from autopar_opt.cost.state import reduced_grad_bytes
from autopar_opt.ir.fleet import Fleet
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import GIB, MEM_EPS
from autopar_opt.ir.pipeline import inflight_microbatches, pipeline_rule_broken
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.strategies import divisors, enumerate_strategies
from autopar_opt.ir.training import Schedule, SearchSpace, Training

MAX_COMBINATIONS = 500_000


def shapes(fleet: Fleet, num_layers: int, groups: tuple[int, ...] | None = None):
    """(stage groups, stage devices) of every shape the search space holds."""
    pool = tuple(range(len(fleet.groups))) if groups is None else groups
    for k in range(1, len(pool) + 1):
        for order in itertools.permutations(pool, k):
            counts = [[n for n in divisors(fleet.groups[g].num_devices)
                       if pipeline_rule_broken(n, fleet.groups[g].num_devices,
                                               fleet.groups[g].gpus_per_node) is None]
                      for g in order]
            for ns in itertools.product(*counts):
                if sum(ns) > num_layers:
                    continue
                yield (tuple(g for g, n in zip(order, ns) for _ in range(n)),
                       tuple(fleet.groups[g].num_devices // n for g, n in zip(order, ns) for _ in range(n)))


def _tier(fleet: Fleet, gu: int, gv: int, same_node: bool):
    from support.bruteforce import pair_link
    if gu != gv:
        link = fleet.link(gu, gv).tier
        a, b = fleet.groups[gu].inter_node, fleet.groups[gv].inter_node
        from autopar_opt.ir.hardware import LinkTier
        return LinkTier("path", min(a.bandwidth_gb_per_s, b.bandwidth_gb_per_s, link.bandwidth_gb_per_s),
                        link.latency_us + max(a.latency_us, b.latency_us))
    cl = fleet.groups[gu]
    return pair_link(cl) if same_node else cl.inter_node


def pipeline_optimum(graph: LayerGraph, fleet: Fleet, training: Training, space: SearchSpace,
                     params: CostParams | None = None, groups: tuple[int, ...] | None = None,
                     microbatches: list[int] | None = None) -> tuple[float, Plan] | None:
    """Best pipeline plan over every shape (on ``groups``), micro-batch count and schedule."""
    params = params or default_params()
    best = None
    allowed = space.microbatches
    cs = microbatches or [c for c in divisors(training.global_batch_size)
                          if (c in allowed if allowed is not None else c <= space.max_microbatches)]
    for gs, ds in shapes(fleet, len(graph.layers), groups):
        for c in cs:
            scheds = [Schedule(s) for s in space.schedules] if len(gs) > 1 else [Schedule.one_f_one_b]
            for sched in scheds:
                got = shape_optimum(graph, fleet, training, space, params, gs, ds, c, sched)
                if got is not None and (best is None or got[0] < best[0]):
                    best = got
    return best


def shape_optimum(graph: LayerGraph, fleet: Fleet, training: Training, space: SearchSpace,
                  params: CostParams, gs: tuple[int, ...], ds: tuple[int, ...], c: int,
                  sched: Schedule) -> tuple[float, Plan] | None:
    """Best plan of one configuration (stage groups ``gs``, devices ``ds``, ``c``
    micro-batches, schedule), or None when no plan fits."""
    pp, n = len(gs), len(graph.layers)
    b = training.global_batch_size // c
    # tie tier (first to last stage)
    offs, used = [], {}
    for g, d in zip(gs, ds):
        offs.append(used.get(g, 0))
        used[g] = used.get(g, 0) + d
    if pp < 2:
        tie = None
    elif gs[0] != gs[-1]:
        tie = _tier(fleet, gs[0], gs[-1], False)
    else:
        tie = fleet.groups[gs[0]].tier_for_span(0, offs[-1])
    ctx = {(g, d): StageContext(fleet.groups[g], training, params, d, b, tie_tier=tie) for g, d in zip(gs, ds)}
    cap = [ctx[(g, d)].capacity_bytes + MEM_EPS * GIB for g, d in zip(gs, ds)]
    same_node = [gs[i] == gs[i + 1] and offs[i + 1] % fleet.groups[gs[i]].gpus_per_node != 0
                 for i in range(pp - 1)]
    strats = {}
    for g, d in set(zip(gs, ds)):
        for u, layer in enumerate(graph.layers):
            strats[(u, g, d)] = [replace(s, group=g) for s in enumerate_strategies(
                layer, d, b, space, fleet.groups[g].gpus_per_node, training.seq_len, training.autocast)]
    inflight = [inflight_microbatches(sched, pp, c, i) for i in range(pp)]
    best = None
    for cuts in itertools.combinations(range(1, n), pp - 1):
        bounds = (0, *cuts, n)
        stage = [i for i in range(pp) for _ in range(bounds[i], bounds[i + 1])]
        lists = [strats[(u, gs[stage[u]], ds[stage[u]])] for u in range(n)]
        if any(not x for x in lists):
            continue
        if math.prod(len(x) for x in lists) > MAX_COMBINATIONS:
            raise ValueError("brute force refused: too many combinations")
        got = _price(graph, fleet, training, lists, stage, gs, ds, ctx, cap, same_node, inflight, c, b)
        if got is not None and (best is None or got[0] < best[0]):
            best = (got[0], stage, got[1], lists)
    if best is None:
        return None
    value, stage, ks, lists = best
    stages = [StagePlan([], []) for _ in range(pp)]
    for u, i in enumerate(stage):
        stages[i].layers.append(graph.layers[u].name)
        stages[i].strategies.append(lists[u][ks[u]])
    plan = Plan(stages, c, sched, stage_devices=list(ds), stage_groups=list(gs))
    value += params.iteration_overhead_s
    m = evaluate(plan, graph, fleet, training, params)
    if not m.feasible or not math.isclose(m.iteration_time_s, value, rel_tol=1e-9):
        raise AssertionError(f"fleet brute force {value} disagrees with evaluate {m.iteration_time_s}")
    return value, plan


def _axis(arr, u, n):
    shape = [1] * n
    shape[u] = len(arr)
    return np.asarray(arr, float).reshape(shape)


def _price(graph, fleet, training, lists, stage, gs, ds, ctx, cap, same_node, inflight, c, b):
    n, pp = len(lists), len(gs)
    p, g, w, h, x = [0.0] * pp, [0.0] * pp, [0.0] * pp, [0.0] * pp, [0.0] * pp
    for u, ss in enumerate(lists):
        i = stage[u]
        lc = [layer_cost(graph.layers[u], s, ctx[(gs[i], ds[i])]) for s in ss]
        p[i] = p[i] + _axis([q.time_s for q in lc], u, n)
        g[i] = g[i] + _axis([q.sync_s for q in lc], u, n)
        w[i] = w[i] + _axis([q.weight_bytes for q in lc], u, n)
        h[i] = h[i] + _axis([q.act_bytes for q in lc], u, n)
        x[i] = np.maximum(x[i], _axis([q.working_bytes for q in lc], u, n))
    o = [0.0] * (pp - 1)
    for u, v in graph.edge_indices():
        nbytes = graph.layers[u].output_bytes * b
        su, sv = stage[u], stage[v]
        shape = [1] * n
        shape[u], shape[v] = len(lists[u]), len(lists[v])
        if su == sv:
            c0 = ctx[(gs[su], ds[su])]
            mat = [[reshard_time(a.layout, bb.layout, nbytes, c0.stage_tier, c0.link_efficiency(c0.stage_tier))
                    for bb in lists[v]] for a in lists[u]]
            p[su] = p[su] + np.array(mat).reshape(shape)
        for k in range(su, sv):
            tier = _tier(fleet, gs[su], gs[sv], same_node[k])
            c0 = ctx[(gs[su], ds[su])]
            recv = fleet.groups[gs[sv]].intra_node
            mat = [[cross_stage_time(a.layout, bb.layout, nbytes, tier, recv, c0.link_efficiency(tier),
                                     c0.params.comm_efficiency)
                    for bb in lists[v]] for a in lists[u]]
            o[k] = o[k] + np.array(mat).reshape(shape)
    full_shape = tuple(len(s) for s in lists)
    terms = [np.broadcast_to(np.asarray(t, float), full_shape) for t in p + o]
    total = sum(terms) + (c - 1) * np.maximum.reduce(terms)
    total = total + np.maximum.reduce([np.broadcast_to(np.asarray(t, float), full_shape) for t in g])
    for i in range(pp):
        mem = np.broadcast_to(np.asarray(w[i] + inflight[i] * h[i] + x[i], float), full_shape)
        total = np.where(mem > cap[i], np.inf, total)
    k = np.unravel_index(int(np.argmin(total)), full_shape)
    value = float(total[k])
    return (value, tuple(int(j) for j in k)) if math.isfinite(value) else None


def replica_optimum(graph: LayerGraph, fleet: Fleet, training: Training, space: SearchSpace,
                    quantum: int, params: CostParams | None = None) -> float | None:
    """Best replica plan value over every partition of the groups into classes and
    every split of the batch in multiples of ``quantum`` (two groups: the two singletons)."""
    params = params or default_params()
    n = len(fleet.groups)
    if n != 2:
        raise ValueError("the replica brute force covers two groups")
    grad = sum(float(layer.params) for layer in graph.layers) * reduced_grad_bytes(training, 0)
    tier = _tier(fleet, 0, 1, False)
    rings = min(fleet.groups[0].num_devices, fleet.groups[1].num_devices)
    sync = allreduce_time(2, grad / rings, tier, params.inter_comm_efficiency)
    best = None
    batch = training.global_batch_size
    for b0 in range(quantum, batch, quantum):
        parts = []
        for g, share in ((0, b0), (1, batch - b0)):
            tr = replace(training, global_batch_size=share)
            got = pipeline_optimum(graph, fleet, tr, space, params, groups=(g,))
            parts.append(None if got is None else got[0])
        if None in parts:
            continue
        value = max(parts) + sync
        best = value if best is None or value < best else best
    return best
