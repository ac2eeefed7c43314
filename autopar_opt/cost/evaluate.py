"""Independent plan evaluator: iteration time, throughput, MFU, memory.

Recomputes everything from the pure cost functions, never from a solver or
its tables (docs/DESIGN.md §1): a solver's objective for a decoded plan must equal
:func:`evaluate` to round-off, which the test suite checks for every backend.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from autopar_opt.cost import comm_split
from autopar_opt.cost.compute import causal_mfu
from autopar_opt.cost.context import StageContext, even_stage_params
from autopar_opt.cost.layer_cost import layer_cost, unsharded_held_parts
from autopar_opt.cost.state import held_layer, weight_parts
from autopar_opt.cost.params import CostParams, default_params
from autopar_opt.cost.reshard import cross_stage_time, reshard_time
from autopar_opt.ir.graph import LayerGraph, LayerKind
from autopar_opt.ir.fleet import Fleet
from autopar_opt.ir.fleet_pipeline import (boundary_tier, fleet_boundaries_intra, fleet_tie_tier,
                                           validate_fleet_plan)
from autopar_opt.ir.hardware import GIB, MEM_EPS, Cluster, LinkTier
from autopar_opt.ir.pipeline import (  # noqa: F401 (PlanError: evaluate's error type)
    PlanError, boundaries_intra, inflight_microbatches, interleaved_inflight, tie_tier,
    validate_plan)
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.training import Schedule, Training

#: Headroom below this fraction of capacity is flagged as tight, not "fits".
TIGHT_HEADROOM = 0.05


@dataclass
class StageMetrics:
    """Per-stage results; times per micro-batch except ``sync_s``.

    Time breakdown (per micro-batch): ``compute_s`` plus the exposed
    communication ``tp_s``, ``cp_s``, ``zero_s`` (ZeRO-3 gathers), ``ep_s``
    (MoE all-to-all), ``offload_s`` (CPU activation offload copies) and
    ``reshard_s`` (= ``comm_s`` together); once per iteration ``dp_s``
    (exposed gradient reduction) and ``optimizer_s`` (= ``sync_s``).
    Memory breakdown (GiB per device): ``weights_gib``, ``grads_gib``,
    ``optimizer_gib`` (= ``weight_gib``), ``activation_gib`` (in-flight
    micro-batches, the output layer excluded), ``logits_gib`` (the output
    layer's stored bytes per in-flight micro-batch: what the loss keeps, 2 or 4
    bytes per logit by runtime (:func:`~autopar_opt.cost.memory.kept_logit_bytes`),
    and its input), both with the 16-bit weight casts autograd keeps per micro-batch
    under ZeRO-3 and PyTorch AMP (:attr:`LayerCost.act_bytes
    <autopar_opt.cost.context.LayerCost>`,
    :func:`~autopar_opt.cost.state.autocast_saved_cast_bytes`: in
    ``logits_gib`` the output layer's cast, the tied word-embedding matrix's
    included; none for a lookup embedding), ``working_gib`` (the transient working set of the
    layer in flight: the largest of the stage's layers,
    :func:`~autopar_opt.cost.memory.working_set_bytes`), ``reserve_gib``
    (runtime reserve + allocator fragmentation); ``peak_memory_gib`` is their sum.
    ``communication``: per kind (:data:`~autopar_opt.cost.comm_split.KINDS`) its
    ``total_s``, ``hidden_s``, ``exposed_s`` (the field above) and ``interference_s``, per
    micro-batch (dp per iteration) (:mod:`autopar_opt.cost.comm_split`).
    """

    index: int
    layers: list[str]
    time_s: float
    compute_s: float
    comm_s: float
    transfer_s: float
    sync_s: float
    weight_gib: float
    activation_gib: float
    peak_memory_gib: float
    capacity_gib: float
    inflight_microbatches: int
    tp_s: float = 0.0
    cp_s: float = 0.0
    zero_s: float = 0.0
    ep_s: float = 0.0
    offload_s: float = 0.0
    reshard_s: float = 0.0
    dp_s: float = 0.0
    optimizer_s: float = 0.0
    weights_gib: float = 0.0
    grads_gib: float = 0.0
    optimizer_gib: float = 0.0
    logits_gib: float = 0.0
    reserve_gib: float = 0.0
    working_gib: float = 0.0
    communication: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        return self.peak_memory_gib <= self.capacity_gib + MEM_EPS

    @property
    def headroom_fraction(self) -> float:
        """Free memory as a fraction of capacity (negative: does not fit)."""
        return (self.capacity_gib - self.peak_memory_gib) / self.capacity_gib if self.capacity_gib else 0.0

    @property
    def memory_status(self) -> str:
        """``fits``, ``tight`` (headroom below 5% of capacity) or ``over``."""
        if not self.fits:
            return "over"
        return "tight" if self.headroom_fraction < TIGHT_HEADROOM else "fits"


@dataclass
class PlanMetrics:
    """What a plan costs under the model."""

    iteration_time_s: float
    samples_per_s: float
    tokens_per_s: float
    mfu: float
    hfu: float
    bubble_s: float
    stages: list[StageMetrics]
    feasible: bool
    memory_capacity_gib: float
    breakdown: dict[str, float] = field(default_factory=dict)
    #: MFU counting a causal attention core at the half it computes (``mfu`` counts the
    #: whole score matrix, as published MFUs do: :func:`~autopar_opt.cost.compute.
    #: uncomputed_attention_share`); equal to ``mfu`` without causal attention
    mfu_causal: float = 0.0
    #: per kind of communication, per iteration on the breakdown's critical path: total,
    #: hidden, exposed (= the breakdown's term) and interference seconds
    #: (:func:`~autopar_opt.cost.comm_split.iteration_communication`)
    communication: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def peak_memory_gib(self) -> list[float]:
        return [s.peak_memory_gib for s in self.stages]

    def to_dict(self) -> dict:
        data = asdict(self)
        data["peak_memory_gib"] = self.peak_memory_gib
        for st, m in zip(data["stages"], self.stages):
            st["fits"] = m.fits
            st["memory_status"] = m.memory_status
            st["headroom_fraction"] = m.headroom_fraction
        return data


def pipeline_latency(stage_times: list[float], transfer_times: list[float],
                     sync_times: list[float], microbatches: int,
                     schedule: Schedule = Schedule.one_f_one_b, vp_chunks: int = 1) -> float:
    """Iteration latency of a synchronous pipeline (docs/DESIGN.md §3).

    ``T = Σp_i + Σo_i + (c-1)·max(max p, max o) + max g`` for GPipe and 1F1B
    (same bubble; Narayanan et al. 2021, Sec. 2.2). The interleaved schedule
    with ``v`` chunks is 1F1B over ``v·c`` chunk micro-batches, each ``1/v`` of a
    stage's compute but a whole activation sent at each chunk boundary
    (Narayanan et al. 2021, Sec. 2.2.2: the bubble shrinks by ``v``, the
    communication grows by ``v``; the sends overlap the chunks' compute, Megatron's
    ``overlap_p2p_comm`` default with interleaving, so each is its own pipeline
    stage as above): ``T = Σp/v + Σo + (v·c - 1)·max(max p/v, max o) + max g``.
    Without transfers this is ``c·max p + (Σp - max p)/v + max g``. The send from
    the last rank back to the first (between chunks) carries the same activation
    as the other boundaries and is taken to cost no more than their largest.
    """
    sync = max(sync_times, default=0.0)
    if schedule is Schedule.interleaved and vp_chunks > 1:
        v = vp_chunks
        chunk = [t / v for t in stage_times]
        bottleneck = max(max(chunk), max(transfer_times, default=0.0))
        return sum(chunk) + sum(transfer_times) + (microbatches * v - 1) * bottleneck + sync
    bottleneck = max(max(stage_times), max(transfer_times, default=0.0))
    fill = sum(stage_times) + sum(transfer_times)
    return fill + (microbatches - 1) * bottleneck + sync


@dataclass(frozen=True)
class _Placement:
    """Where a plan's stages run: devices and context of every stage, the tie tier,
    per boundary whether both stages share a node, and the peak FLOP/s of the
    devices the plan is measured against (MFU)."""

    sizes: list[int]
    ctxs: list[StageContext]
    tie: LinkTier | None
    intra: list[bool]
    peak_total: float
    fleet: Fleet | None
    #: the cluster of a plan on one group (None on a fleet)
    cluster: Cluster | None = None


def _placement(plan: Plan, graph: LayerGraph, cluster: Cluster | Fleet, training: Training,
               params: CostParams) -> _Placement:
    """A plan's stages on a cluster (today's rules) or on a mixed fleet, every
    stage priced on its own group (:mod:`autopar_opt.ir.fleet_pipeline`)."""
    b = training.global_batch_size // max(plan.microbatches, 1)
    if isinstance(cluster, Fleet) and plan.stage_groups is None and len(cluster.groups) == 1:
        cluster = cluster.groups[0]
    if not isinstance(cluster, Fleet) and plan.stage_groups is None:
        sizes = validate_plan(plan, graph, cluster, training)
        memo: dict[int, StageContext] = {}
        tie = tie_tier(cluster, sizes)
        even = even_stage_params(graph.total_params(), plan.pp)
        ctxs = [memo.setdefault(d, StageContext(cluster, training, params, d, b, tie_tier=tie,
                                                stage_params=even)) for d in sizes]
        return _Placement(sizes, ctxs, tie, boundaries_intra(sizes, cluster.gpus_per_node),
                          cluster.device.datasheet_flops(training.dtype) * cluster.num_devices, None,
                          cluster)
    fleet = cluster if isinstance(cluster, Fleet) else Fleet.of(cluster)
    sizes = validate_fleet_plan(plan, graph, fleet, training)
    groups = list(plan.stage_groups or [])
    tie = fleet_tie_tier(fleet, groups, sizes)
    keyed: dict[tuple[int, int], StageContext] = {}
    even = even_stage_params(graph.total_params(), plan.pp)
    ctxs = [keyed.setdefault((g, d), StageContext(fleet.groups[g], training, params, d, b,
                                                  tie_tier=tie, stage_params=even))
            for g, d in zip(groups, sizes)]
    # MFU over every GPU of the fleet, each at its own device's peak, the groups the plan
    # leaves idle included: as on one cluster (`cluster.num_devices` above) and as the README
    # and plan.json define it (the used stages' GPUs alone were counted: a plan on the H100
    # group of an A100 + H100 fleet reported its H100 utilisation as the fleet's)
    peak = fleet_peak_flops(fleet, training.dtype)
    return _Placement(sizes, ctxs, tie, fleet_boundaries_intra(groups, sizes, fleet), peak, fleet)


def fleet_peak_flops(fleet: Fleet, dtype: str) -> float:
    """The datasheet dense peak of ``dtype`` summed over every GPU of ``fleet`` (MFU's
    denominator per second), each group at its own device's."""
    return sum(g.num_devices * g.device.datasheet_flops(dtype) for g in fleet.groups)


def evaluate(plan: Plan, graph: LayerGraph, cluster: Cluster | Fleet, training: Training,
             params: CostParams | None = None) -> PlanMetrics:
    """Price ``plan`` with the cost model alone, on a cluster or a mixed fleet
    (a plan with ``stage_groups``: every stage on its group, boundaries on their
    tier, :func:`~autopar_opt.ir.fleet_pipeline.boundary_tier`). Raises
    :class:`PlanError` (:func:`autopar_opt.ir.pipeline.validate_plan`,
    :func:`~autopar_opt.ir.fleet_pipeline.validate_fleet_plan`)."""
    params = params or default_params()
    where = _placement(plan, graph, cluster, training, params)
    sizes, ctxs, tie = where.sizes, where.ctxs, where.tie
    b = training.global_batch_size // plan.microbatches
    layers = {layer.name: layer for layer in graph.layers}
    stage_of, strat = plan.stage_of(), plan.strategy_of()
    pp, c = plan.pp, plan.microbatches
    keys = ("p", "comp", "comm", "g", "w", "a", "logits", "tp", "cp", "zero", "ep", "off", "reshard",
            "dp", "opt", "wt", "gr", "os", "x")
    acc = {k: [0.0] * pp for k in keys}
    split = comm_split.new_accumulator(pp)
    flops = hw_flops = 0.0
    groups: dict[tuple, list] = {}   # (stage, cost class, strategy) -> [layer, count]
    for layer, cls in zip(graph.layers, graph.cost_classes):
        key = (stage_of[layer.name], cls, strat[layer.name])
        entry = groups.get(key)
        if entry is None:
            groups[key] = [layer, 1]
        else:
            entry[1] += 1
    for (i, _, s), (layer, n) in groups.items():
        ctx, d = ctxs[i], sizes[i]
        cost = layer_cost(layer, s, ctx)
        for key, val in (("p", cost.time_s), ("comp", cost.compute_s), ("comm", cost.comm_s),
                         ("g", cost.sync_s), ("w", cost.weight_bytes), ("tp", cost.tp_exposed_s),
                         ("cp", cost.cp_exposed_s), ("zero", cost.zero_exposed_s),
                         ("ep", cost.ep_exposed_s), ("off", cost.offload_exposed_s),
                         ("dp", cost.dp_exposed_s), ("opt", cost.optimizer_s)):
            acc[key][i] += n * val
        comm_split.add_layer(split, i, n, cost)
        acc["logits" if layer.kind is LayerKind.lm_head else "a"][i] += n * cost.act_bytes
        acc["x"][i] = max(acc["x"][i], cost.working_bytes)   # one layer in flight: the max
        held_w, held_g, _ = unsharded_held_parts(held_layer(layer, tie is not None), s, ctx)
        for key, part in zip(("wt", "gr", "os"), weight_parts(layer, s, training, tie is not None)):
            acc[key][i] += n * part
        acc["wt"][i] += n * held_w      # gathered, unreduced ZeRO-3 state held once per stage
        acc["gr"][i] += n * held_g
        flops += n * cost.flops * d
        hw_flops += n * cost.hw_flops * d
    o = [0.0] * max(pp - 1, 0)
    intra = where.intra
    for u, v in graph.edges:
        same_stage = stage_of[u] == stage_of[v]
        if same_stage and strat[u] is strat[v]:
            continue          # same strategy, same layout: nothing moves (reshard_time = 0)
        su, sv = strat[u].layout, strat[v].layout
        nbytes = layers[u].output_bytes * b
        if same_stage:
            if su == sv:
                continue
            ctx = ctxs[stage_of[u]]
            tier = ctx.stage_tier
            r = reshard_time(su, sv, nbytes, tier, ctx.link_efficiency(tier))
            for key in ("p", "comm", "reshard"):
                acc[key][stage_of[u]] += r
            split["reshard", "total"][stage_of[u]] += r       # never hidden
            continue
        for k in range(stage_of[u], stage_of[v]):   # relayed across every boundary crossed
            if where.fleet is None:
                cl = where.cluster
                tier, recv, eff_ctx = (cl.intra_pair if intra[k] else cl.inter_node_per_gpu, cl.intra_node,
                                       ctxs[0])
            else:           # the pair's groups decide the link (fleet_pipeline.boundary_tier)
                gu, gv = strat[u].group, strat[v].group
                tier = boundary_tier(where.fleet, gu, gv, intra[k])
                recv, eff_ctx = where.fleet.groups[gv].intra_node, ctxs[stage_of[u]]
            o[k] += cross_stage_time(su, sv, nbytes, tier, recv, eff_ctx.link_efficiency(tier),
                                     eff_ctx.params.comm_efficiency)
    p, g = acc["p"], acc["g"]
    t = pipeline_latency(p, o, g, c, plan.schedule, plan.vp_chunks) + params.iteration_overhead_s
    stages = [_stage_metrics(i, plan, acc, o, ctxs[i], pp, c) for i in range(pp)]
    for i, st in enumerate(stages):
        st.communication = comm_split.stage_split(
            split, i, {kind: getattr(st, name) for kind, name in comm_split.STAGE_EXPOSED.items()})
    breakdown = iteration_breakdown(stages, c, t, params.iteration_overhead_s)
    peak_total = where.peak_total
    model_flops = flops * c  # FLOPs of one micro-batch over all devices, times c
    samples = training.global_batch_size
    return PlanMetrics(
        iteration_time_s=t,
        samples_per_s=samples / t,
        tokens_per_s=samples * training.tokens_per_sample / t,
        mfu=model_flops / (t * peak_total),
        hfu=hw_flops * c / (t * peak_total),
        bubble_s=t - c * max(p) - max(g, default=0.0) - params.iteration_overhead_s,
        stages=stages,
        feasible=all(s.fits for s in stages),
        memory_capacity_gib=stages[0].capacity_gib if stages else 0.0,
        breakdown=breakdown,
        mfu_causal=causal_mfu(model_flops / (t * peak_total), graph.layers),
        communication=comm_split.iteration_communication(stages, c),
    )


def iteration_breakdown(stages: list[StageMetrics], microbatches: int, total_s: float,
                        fixed_s: float) -> dict[str, float]:
    """Split the iteration time along its critical path (seconds, summing to
    ``total_s``): the bottleneck stage's ``c`` micro-batches (compute and
    exposed TP/CP/ZeRO/reshard communication), the slowest stage's
    once-per-iteration exposed gradient reduction and optimizer step, the
    fixed per-iteration cost, and the pipeline fill/drain with the stage
    sends (the rest: docs/DESIGN.md §3). Each communication term's total, hidden part and
    interference: :func:`~autopar_opt.cost.comm_split.iteration_communication` (the same
    stages)."""
    if not stages:
        return {}
    b, g = comm_split.critical_stages(stages)
    c = microbatches
    out = {"compute_s": c * b.compute_s, "tp_comm_s": c * b.tp_s, "cp_comm_s": c * b.cp_s,
           "zero_comm_s": c * b.zero_s, "ep_comm_s": c * b.ep_s,
           "offload_comm_s": c * b.offload_s, "reshard_s": c * b.reshard_s,
           "dp_comm_s": g.dp_s, "optimizer_s": g.optimizer_s, "fixed_s": fixed_s}
    rest = total_s - sum(out.values())
    # a one-stage plan's rest is the round-off of the sum (-2.2e-16 s), not a bubble
    out["pipeline_bubble_s"] = 0.0 if abs(rest) <= 1e-12 * max(total_s, 1.0) else rest
    return out


def _stage_metrics(i: int, plan: Plan, acc: dict, o: list[float], ctx: StageContext,
                   pp: int, c: int) -> StageMetrics:
    """One stage's times and memory with their breakdowns (see StageMetrics)."""
    params = ctx.params
    inflight = inflight_microbatches(plan.schedule, pp, c, i)
    held, held_logits = inflight, inflight
    if plan.schedule is Schedule.interleaved and plan.vp_chunks > 1:
        held, held_logits = interleaved_inflight(pp, c, plan.vp_chunks, i)
        inflight = min(c, math.ceil(held))
    act = held * acc["a"][i] / GIB
    logits = held_logits * acc["logits"][i] / GIB
    working = acc["x"][i] / GIB
    modelled = acc["w"][i] / GIB + act + logits + working
    reserve = params.memory_reserve_gib + params.memory_fragmentation * modelled
    cap = ctx.cluster.device.hbm_gib - ctx.training.memory_reserve_gib
    return StageMetrics(
        i, list(plan.stages[i].layers), acc["p"][i], acc["comp"][i], acc["comm"][i],
        o[i] if i < len(o) else 0.0, acc["g"][i], acc["w"][i] / GIB, act,
        modelled + reserve, cap, inflight,
        tp_s=acc["tp"][i], cp_s=acc["cp"][i], zero_s=acc["zero"][i], ep_s=acc["ep"][i],
        offload_s=acc["off"][i],
        reshard_s=acc["reshard"][i], dp_s=acc["dp"][i], optimizer_s=acc["opt"][i],
        weights_gib=acc["wt"][i] / GIB, grads_gib=acc["gr"][i] / GIB,
        optimizer_gib=acc["os"][i] / GIB, logits_gib=logits, reserve_gib=reserve,
        working_gib=working)
