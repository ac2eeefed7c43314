"""Cost tables of one configuration on a mixed fleet (issue 34; docs/DESIGN.md §11, shape P).

A configuration places stage ``i`` on group ``g_i`` with ``d_i`` devices
(:mod:`autopar_opt.ir.fleet_pipeline`). The tables are those of
:func:`~autopar_opt.cost.tables.build_cost_tables` with three generalisations,
each exact, so that every solver (DP, MILP, MIQP) and every bound reads them
unchanged:

* **strategies per (group, devices)**: a layer's strategy list is the union over
  the distinct ``(g_i, d_i)`` of the configuration, each strategy tagged with its
  group (:attr:`Strategy.group <autopar_opt.ir.strategies.Strategy>`) and priced
  on that group's cluster (its device's peak, HBM and fitted efficiency, its
  link tiers); :meth:`CostTables.allowed_in_stage` masks the others per stage.
* **memory in reference bytes**: each strategy's ``W``, ``H`` and ``X`` are
  stored times ``r_g = C_ref / C_g`` (``C_g`` the modelled capacity of its
  group, ``C_ref`` that of the first stage's group, ``capacity_bytes``). A stage
  only runs strategies of its own group, so its memory row against ``C_ref`` is
  its true row against ``C_g`` multiplied by ``r_g > 0``: the same constraint.
* **boundary tiers per strategy pair**: ``cross_intra`` / ``cross_inter`` price
  a pair of strategies of one group on that group's intra-node / inter-node
  tier, and a pair of different groups on the path tier between them (a
  boundary between groups is never intra-node). A stage's strategies belong to
  its group, so the entry read at a boundary is the cost of that boundary's link.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from autopar_opt.cost.context import StageContext, even_stage_params
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import CostParams
from autopar_opt.cost.reshard import cross_stage_time, reshard_time
from autopar_opt.cost.tables import CostTables, dominance_vectors, prune_layer_strategies
from autopar_opt.ir.fleet import Fleet
from autopar_opt.ir.fleet_pipeline import (boundary_tier, fleet_boundaries_intra, fleet_stage_problem,
                                           fleet_tie_tier)
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.pipeline import inflight_microbatches, microbatch_rule_broken
from autopar_opt.ir.strategies import Strategy, enumerate_strategies
from autopar_opt.ir.training import Schedule, SearchSpace, Training


def group_capacity_bytes(fleet: Fleet, group: int, training: Training, params: CostParams) -> float:
    """Modelled bytes a device of ``group`` may hold (:attr:`StageContext.capacity_bytes`)."""
    return StageContext(fleet.groups[group], training, params, 1, 1).capacity_bytes


class FleetTableCache:
    """Priced strategies and edge matrices shared by the configurations of one
    search (same graph, fleet, training except the batch, space and parameters).

    A layer's pruned strategies and cost arrays on ``(group, devices)`` depend on
    the micro-batch size and the tie tier, not on the rest of the configuration,
    and an edge's matrices on the strategy lists of its two layers: many
    configurations of a fleet search share them (two groups of 512 GPUs: 784
    configurations, 98 distinct ``(group, devices, micro-batch)``)."""

    def __init__(self) -> None:
        self.layers: dict[tuple, tuple[list[Strategy], tuple[np.ndarray, ...]]] = {}
        self.edges: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _tier_key(tier) -> tuple | None:
    return None if tier is None else (tier.name, tier.bandwidth_gb_per_s, tier.latency_us)


def build_fleet_tables(graph: LayerGraph, fleet: Fleet, training: Training, space: SearchSpace,
                       params: CostParams, microbatches: int, schedule: Schedule,
                       stage_groups: tuple[int, ...], stage_devices: tuple[int, ...],
                       prune_dominated: bool = True, cache: FleetTableCache | None = None,
                       with_edges: bool = True) -> CostTables:
    """Enumerate and price every strategy of one fleet configuration (module doc).

    ``cache`` shares priced strategies between the configurations of one search
    (:class:`FleetTableCache`); ``with_edges`` False leaves the edge matrices out
    (empty lists: enough for :func:`~autopar_opt.search.bounds.analytic_lower_bound`,
    which reads no edge). Raises ValueError when the configuration is not
    well formed (micro-batches that do not divide the batch, stages breaking
    :func:`~autopar_opt.ir.fleet_pipeline.fleet_stage_problem`)."""
    broken = microbatch_rule_broken(microbatches, training.global_batch_size)
    if broken:
        raise ValueError(str(broken))
    why = fleet_stage_problem(stage_groups, stage_devices, fleet)
    if why:
        raise ValueError(f"stages on groups {list(stage_groups)} with devices {list(stage_devices)}: {why}")
    cache = cache if cache is not None else FleetTableCache()
    pp = len(stage_devices)
    b = training.global_batch_size // microbatches
    tie = fleet_tie_tier(fleet, stage_groups, stage_devices)
    keys = sorted(set(zip(stage_groups, stage_devices)))
    even = even_stage_params(graph.total_params(), pp)
    ctxs = {(g, d): StageContext(fleet.groups[g], training, params, d, b, tie_tier=tie,
                                 stage_params=even) for g, d in keys}
    ref = stage_groups[0]
    cap = {g: group_capacity_bytes(fleet, g, training, params) for g in set(stage_groups)}
    scale = tuple(cap[ref] / cap[g] if g in cap else 1.0 for g in range(len(fleet.groups)))
    strategies, arrays_of, classes = [], [], []
    built: dict[int, tuple] = {}
    for layer, cls in zip(graph.layers, graph.cost_classes):
        if cls not in built:
            strats, arrs = [], []
            for (g, d), ctx in ctxs.items():
                got, arr = _priced(cache, layer, cls, g, d, b, tie, ctx, fleet, training, space,
                                   prune_dominated)
                strats += got
                if got:
                    arrs.append(_scaled(arr, scale[g]))
            merged = tuple(np.concatenate([a[f] for a in arrs]) if arrs else np.zeros(0)
                           for f in range(5))
            built[cls] = (len(built), strats, merged)
        idx, strats, merged = built[cls]
        classes.append(idx)
        strategies.append(strats)
        arrays_of.append(merged)
    time, sync, wbytes, abytes, xbytes = ([a[f] for a in arrays_of] for f in range(5))
    edges = graph.edge_indices()
    memo_key = (b, tuple(keys), _tier_key(tie))
    reshard, cross_intra, cross_inter = (
        fleet_edge_tables(graph, fleet, strategies, edges, ctxs, b, cache.edges, memo_key)
        if with_edges else ([], [], []))
    return CostTables(
        graph=graph, cluster=fleet.groups[ref], training=training, params=params, pp=pp,
        microbatches=microbatches, schedule=schedule, devices_per_stage=max(stage_devices),
        microbatch_samples=b, strategies=strategies, time=time, sync=sync,
        weight_bytes=wbytes, act_bytes=abytes, edges=edges, reshard=reshard,
        cross_intra=cross_intra, cross_inter=cross_inter,
        boundary_intra=fleet_boundaries_intra(stage_groups, stage_devices, fleet),
        inflight=[inflight_microbatches(schedule, pp, microbatches, i) for i in range(pp)],
        capacity_bytes=cap[ref], layer_class=classes, working_bytes=xbytes, space=space,
        stage_devices=tuple(stage_devices), stage_groups=tuple(stage_groups), fleet=fleet,
        memory_scale=scale)


def _priced(cache: FleetTableCache, layer, cls: int, g: int, d: int, b: int, tie, ctx: StageContext,
            fleet: Fleet, training: Training, space: SearchSpace, prune: bool):
    """A layer's (pruned) strategies on ``(g, d)`` tagged with ``g``, and their cost
    arrays in DOMINANCE_FIELDS order (true bytes), from the cache when priced before."""
    key = (cls, g, d, b, _tier_key(tie) if layer.tied_params > 0 else None, prune)   # only tied layers see it
    if key not in cache.layers:
        got = [replace(s, group=g) for s in enumerate_strategies(
            layer, d, b, space, fleet.groups[g].gpus_per_node, training.seq_len, training.autocast,
            training.runtime.cp_splits_heads)]
        costs = [layer_cost(layer, s, ctx) for s in got]
        if prune:                     # layouts carry the group: pruning stays inside one group
            got, costs = prune_layer_strategies(got, costs)
        cache.layers[key] = (got, tuple(np.array(col) for col in dominance_vectors(costs).T) if got
                              else tuple(np.zeros(0) for _ in range(5)))
    return cache.layers[key]


def _scaled(arrays: tuple[np.ndarray, ...], r: float) -> tuple[np.ndarray, ...]:
    """Time, sync unchanged; W, H, X (the last three, DOMINANCE_FIELDS order) times ``r``."""
    if r == 1.0:
        return arrays
    return arrays[:2] + tuple(a * r for a in arrays[2:])


def fleet_edge_tables(graph: LayerGraph, fleet: Fleet, strategies: list[list[Strategy]],
                      edges: list[tuple[int, int]], ctxs: dict[tuple[int, int], StageContext],
                      b: int, shared: dict | None = None, shared_key: tuple = ()):
    """R, R'(intra), R'(inter) per edge on a fleet (module doc): R on the stage's own
    tier for two strategies of one (group, devices), else 0 (never in one stage);
    R' per pair on :func:`~autopar_opt.ir.fleet_pipeline.boundary_tier`, its tp all-gather on the receiver's intra-node
    tier, the efficiency of the tier crossed. Priced once per pair of distinct layouts;
    ``shared`` (with ``shared_key``, what the matrices depend on beyond the two layers'
    classes) keeps them for the other configurations of a search."""
    reshard, cross_intra, cross_inter = [], [], []
    memo: dict[tuple, tuple] = {}
    layouts: dict[int, tuple[list, np.ndarray]] = {}

    def distinct(strats: list[Strategy]) -> tuple[list, np.ndarray]:
        if id(strats) not in layouts:
            seen: dict = {}
            rep: list[Strategy] = []
            idx = []
            for s in strats:
                if s.layout not in seen:
                    seen[s.layout] = len(seen)
                    rep.append(s)
                idx.append(seen[s.layout])
            layouts[id(strats)] = (rep, np.array(idx, dtype=int))
        return layouts[id(strats)]

    def in_stage(a: Strategy, c: Strategy, nbytes: float) -> float:
        if (a.group, a.devices) != (c.group, c.devices):
            return 0.0
        ctx = ctxs[(a.group, a.devices)]
        return reshard_time(a.layout, c.layout, nbytes, ctx.stage_tier,
                            ctx.link_efficiency(ctx.stage_tier))

    def cross(a: Strategy, c: Strategy, nbytes: float, intra: bool) -> float:
        tier = boundary_tier(fleet, a.group, c.group, intra)
        recv = fleet.groups[c.group].intra_node
        ctx = ctxs[(a.group, a.devices)]
        eff = ctx.link_efficiency(tier)    # the sender's, as evaluate
        return cross_stage_time(a.layout, c.layout, nbytes, tier, recv, eff, ctx.params.comm_efficiency)

    classes = graph.cost_classes
    shared = {} if shared is None else shared
    for u, v in edges:
        nbytes = graph.layers[u].output_bytes * b
        key = (nbytes, id(strategies[u]), id(strategies[v]))
        far = (shared_key, nbytes, classes[u], classes[v])
        if key not in memo and far in shared:
            memo[key] = shared[far]
        if key not in memo:
            (lu, iu), (lv, iv) = distinct(strategies[u]), distinct(strategies[v])
            small = ([[in_stage(a, c, nbytes) for c in lv] for a in lu],
                     [[cross(a, c, nbytes, True) for c in lv] for a in lu],
                     [[cross(a, c, nbytes, False) for c in lv] for a in lu])
            memo[key] = tuple(np.array(m, dtype=float).reshape(len(lu), len(lv))[np.ix_(iu, iv)]
                              for m in small)
            shared[far] = memo[key]
        r, ci, ce = memo[key]
        reshard.append(r)
        cross_intra.append(ci)
        cross_inter.append(ce)
    return reshard, cross_intra, cross_inter
