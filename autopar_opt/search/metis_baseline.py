"""A Metis-style planner on a mixed fleet, under our cost model (issue 34 baseline).

Reimplemented from the description in Um et al., "Metis: Fast Automatic
Distributed Training on Heterogeneous GPUs", USENIX ATC'24 (Sec. 4–5), within
our plan space (a stage never straddles two device types) and priced by our
:func:`~autopar_opt.cost.evaluate.evaluate`, so that its plans and ours differ
only by how they are searched:

* **inter-stage plan**: every order of the groups (Metis' "node sequence"),
  every number of congruent stages per group (its device-group shapes: powers
  of two of a group's size here) and every micro-batch count ("batches");
* **intra-stage plan**: one ``(dp, tp)`` per stage, starting from pure data
  parallelism; while stages run out of memory, they double their tensor
  parallelism (Metis ``_next_strategy`` doubles the stage with the least
  memory headroom, one at a time: prefer data over tensor parallelism, add tp
  only when memory demands it; here every stage out of memory doubles in the
  same step, which prices a pipeline of many stages in a few evaluations
  instead of hundreds); every layer of a stage takes the fastest strategy of
  that layout;
* **layer partition**: contiguous, each stage's share of the total layer time
  proportional to its compute throughput (Metis' ``LayerComputeBalancer``),
  repeated up to three times with an out-of-memory stage's throughput scaled by
  ``0.9 × capacity / demand`` (Metis ``_adj_compute_performance``);
* **heterogeneous data parallelism**: replicas on the groups, the batch split in
  proportion to each group's throughput under its own best plan (Metis'
  ``DataLoadBalancer``), rounded to the split quantum.

It proves nothing: its value is compared with the certified optimum.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from itertools import permutations

import numpy as np

from autopar_opt.cost.evaluate import evaluate
from autopar_opt.cost.context import StageContext, even_stage_params
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import CostParams
from autopar_opt.cost.replicas import class_training, evaluate_replicas
from autopar_opt.ir.fleet import Fleet
from autopar_opt.ir.fleet_pipeline import fleet_tie_tier, group_stage_counts
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.replicas import ReplicaClass, ReplicaPlan
from autopar_opt.ir.strategies import Strategy, enumerate_strategies
from autopar_opt.ir.training import Schedule, SearchSpace, Training
from autopar_opt.search.configs import microbatch_counts
from autopar_opt.search.replicas import batch_quantum

#: Metis' ``max_partition_attempts``.
PARTITION_ATTEMPTS = 3


@dataclass
class MetisResult:
    """The heuristic's best plan, its iteration time, how many plans it priced and its time."""

    plan: Plan | ReplicaPlan | None
    value: float
    evaluated: int
    wall_time_s: float


def _layout_strategy(layer, d: int, b: int, dp: int, tp: int, space: SearchSpace, fleet: Fleet,
                     g: int, training: Training, ctx: StageContext,
                     memo: dict | None = None, key: tuple = ()) -> tuple[Strategy, float] | None:
    """The fastest strategy of ``layer`` with this ``dp × tp`` (cp 1) on ``(g, d)``
    (``memo[key]`` when priced before: layers of one cost class share it)."""
    if memo is not None and key in memo:
        return memo[key]
    best = None
    for s in enumerate_strategies(layer, d, b, space, fleet.groups[g].gpus_per_node, training.seq_len,
                                  training.autocast, training.runtime.cp_splits_heads):
        if s.dp != dp or s.tp != tp or s.cp != 1:
            continue
        t = layer_cost(layer, s, ctx).time_s
        if best is None or t < best[1]:
            best = (replace(s, group=g), t)
    if memo is not None:
        memo[key] = best
    return best


def _partition(times: np.ndarray, perf: list[float]) -> list[int] | None:
    """Contiguous split of layers (per-stage layer times ``times[u, i]``) giving each
    stage the share of work ``perf_i / Σ perf``: cut when the work done passes the
    share of the stages so far. Stage boundaries as the first layer of every stage."""
    n, pp = times.shape
    if pp > n:
        return None
    share = np.cumsum(perf) / sum(perf)
    work = times.mean(axis=1)
    done = np.cumsum(work) / work.sum()
    starts, u = [0], 0
    for i in range(pp - 1):
        u = max(u + 1, int(np.searchsorted(done, share[i], side="left")) + 1)
        u = min(u, n - (pp - 1 - i))
        starts.append(u)
    return starts


def _plan(graph: LayerGraph, choice, starts: list[int], gs, ds, c: int) -> Plan:
    n = len(graph.layers)
    stages = []
    for i, lo in enumerate(starts):
        hi = starts[i + 1] if i + 1 < len(starts) else n
        stages.append(StagePlan([graph.layers[u].name for u in range(lo, hi)],
                                [choice[i][u][0] for u in range(lo, hi)]))
    return Plan(stages, c, Schedule.one_f_one_b, stage_devices=list(ds), stage_groups=list(gs))


def metis_pipeline(graph: LayerGraph, fleet: Fleet, training: Training, space: SearchSpace,
                   params: CostParams, groups: tuple[int, ...] | None = None,
                   deadline: float | None = None) -> MetisResult:
    """The best pipeline plan the Metis-style search finds (module doc)."""
    start = time.perf_counter()
    pool = tuple(range(len(fleet.groups))) if groups is None else groups
    best: tuple[float, Plan] | None = None
    count = 0
    memo: dict = {}
    for k in range(1, len(pool) + 1):
        for order in permutations(pool, k):
            if any(fleet.link(a, b) is None for a, b in zip(order, order[1:])):
                continue
            for ns in _stage_counts(fleet, order, len(graph.layers)):
                gs = tuple(g for g, m in zip(order, ns) for _ in range(m))
                ds = tuple(fleet.groups[g].num_devices // m for g, m in zip(order, ns) for _ in range(m))
                for c in microbatch_counts(training, space):
                    if deadline is not None and time.perf_counter() > deadline:
                        return MetisResult(best[1] if best else None, best[0] if best else math.inf,
                                           count, time.perf_counter() - start)
                    got, tried = _intra_stage(graph, fleet, training, space, params, gs, ds, c, memo)
                    count += tried
                    if got is not None and (best is None or got[0] < best[0]):
                        best = got
    return MetisResult(best[1] if best else None, best[0] if best else math.inf, count,
                       time.perf_counter() - start)


def _stage_counts(fleet: Fleet, order, layers: int):
    from itertools import product

    options = [[m for m in group_stage_counts(fleet, g, layers) if m & (m - 1) == 0] for g in order]
    for ns in product(*options):
        if sum(ns) <= layers:
            yield ns


def _intra_stage(graph, fleet, training, space, params, gs, ds, c, memo: dict):
    """Metis' intra-stage loop for one inter-stage plan: (dp, tp) per stage from pure data
    parallelism, tp doubled on the tightest stage while memory does not fit. Returns
    ``((value, plan) or None, plans priced)``."""
    b = training.global_batch_size // c
    pp, n = len(gs), len(graph.layers)
    tie = fleet_tie_tier(fleet, gs, ds)
    even = even_stage_params(graph.total_params(), pp)
    ctxs = [StageContext(fleet.groups[g], training, params, d, b, tie_tier=tie, stage_params=even)
            for g, d in zip(gs, ds)]
    tps = [1] * pp
    tried = 0
    while True:
        tie_key = None if tie is None else (tie.bandwidth_gb_per_s, tie.latency_us)
        choice = [[_layout_strategy(layer, d, b, d // tps[i], tps[i], space, fleet, g, training, ctxs[i],
                                    memo, (cls, g, d, b, tps[i], tie_key))
                   for layer, cls in zip(graph.layers, graph.cost_classes)]
                  for i, (g, d) in enumerate(zip(gs, ds))]
        headroom = [-math.inf if any(x is None for x in row) else math.inf for row in choice]
        if all(h == math.inf for h in headroom):
            times = np.array([[choice[i][u][1] for i in range(pp)] for u in range(n)])
            perf = [1.0 / times[:, i].mean() for i in range(pp)]
            for _ in range(PARTITION_ATTEMPTS):
                starts = _partition(times, perf)
                if starts is None:
                    return None, tried
                plan = _plan(graph, choice, starts, gs, ds, c)
                m = evaluate(plan, graph, fleet, training, params)
                tried += 1
                if m.feasible:
                    return (m.iteration_time_s, plan), tried
                headroom = [st.capacity_gib - st.peak_memory_gib for st in m.stages]
                for i, st in enumerate(m.stages):
                    if not st.fits:
                        perf[i] *= 0.9 * st.capacity_gib / st.peak_memory_gib
        cap = [min(ds[i], fleet.groups[gs[i]].gpus_per_node) if space.tp_within_node else ds[i]
               for i in range(pp)]
        short = [i for i in range(pp) if headroom[i] < 0 and tps[i] * 2 <= cap[i]]
        if not short:
            return None, tried
        for i in short:                 # every stage out of memory at once (module doc)
            tps[i] *= 2


def metis_plan(graph: LayerGraph, fleet: Fleet, training: Training, space: SearchSpace,
               params: CostParams, split_parts: int, time_limit_s: float = 600.0) -> MetisResult:
    """The Metis-style planner: the best of its pipelines over the fleet and of its
    heterogeneous data-parallel replicas (one per group, the batch split by throughput)."""
    start = time.perf_counter()
    deadline = start + time_limit_s
    best = metis_pipeline(graph, fleet, training, space, params, deadline=deadline)
    evaluated = best.evaluated
    plan, value = best.plan, best.value
    if len(fleet.groups) > 1:
        own = [metis_pipeline(graph, fleet, training, space, params, groups=(g,), deadline=deadline)
               for g in range(len(fleet.groups))]
        evaluated += sum(o.evaluated for o in own)
        rates = [training.global_batch_size / o.value if o.plan is not None else 0.0 for o in own]
        usable = [g for g, r in enumerate(rates) if r > 0]
        q = batch_quantum(training.global_batch_size, split_parts)
        if len(usable) > 1:
            units = training.global_batch_size // q
            raw = [rates[g] / sum(rates[h] for h in usable) * units for g in usable]
            shares = [max(1, int(x)) for x in raw]
            while sum(shares) < units:            # largest remainder, as Metis' DataLoadBalancer
                j = max(range(len(raw)), key=lambda j: raw[j] - shares[j])
                shares[j] += 1
            while sum(shares) > units:
                j = max(range(len(shares)), key=lambda j: shares[j])
                shares[j] -= 1
            classes = []
            for g, s in zip(usable, shares):
                tr = class_training(training, s * q)
                got = metis_pipeline(graph, fleet, tr, space, params, groups=(g,), deadline=deadline)
                evaluated += got.evaluated
                if got.plan is None:
                    classes = []
                    break
                classes.append(ReplicaClass((g,), s * q, got.plan))
            if classes:
                rp = ReplicaPlan(classes)
                m = evaluate_replicas(rp, graph, fleet, training, params)
                evaluated += 1
                if m.feasible and m.iteration_time_s < value:
                    plan, value = rp, m.iteration_time_s
    return MetisResult(plan, value, evaluated, time.perf_counter() - start)
