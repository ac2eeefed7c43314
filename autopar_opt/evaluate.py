"""Independent plan evaluator: iteration time, throughput, MFU, memory.

Recomputes everything from the pure cost functions, never from a solver or
its tables (docs/DESIGN.md §1): a solver's objective for a decoded plan must equal
:func:`evaluate` to round-off, which the test suite checks for every backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field, asdict

from autopar_opt.cost.layer_cost import StageContext, layer_cost
from autopar_opt.cost.params import CostParams, default_params
from autopar_opt.cost.reshard import cross_stage_time, reshard_time
from autopar_opt.graph import LayerGraph
from autopar_opt.hardware import GIB, Cluster
from autopar_opt.pipeline import PlanError, boundary_is_intra, inflight_microbatches, validate_plan  # noqa: F401 (PlanError: evaluate's error type)
from autopar_opt.plan import Plan
from autopar_opt.training import Schedule, Training


@dataclass
class StageMetrics:
    """Per-stage results; times per micro-batch except ``sync_s``."""

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

    @property
    def fits(self) -> bool:
        return self.peak_memory_gib <= self.capacity_gib + 1e-9


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

    @property
    def peak_memory_gib(self) -> list[float]:
        return [s.peak_memory_gib for s in self.stages]

    def to_dict(self) -> dict:
        data = asdict(self)
        data["peak_memory_gib"] = self.peak_memory_gib
        for st, m in zip(data["stages"], self.stages):
            st["fits"] = m.fits
        return data


def pipeline_latency(stage_times: list[float], transfer_times: list[float],
                     sync_times: list[float], microbatches: int,
                     schedule: Schedule = Schedule.one_f_one_b, vp_chunks: int = 1) -> float:
    """Iteration latency of a synchronous pipeline (docs/DESIGN.md §3).

    ``T = Σp_i + Σo_i + (c-1)·max(max p, max o) + max g`` for GPipe and 1F1B
    (same bubble; Narayanan et al. 2021, Sec. 2.2). For the interleaved
    schedule with ``v`` chunks the fill/drain part shrinks by ``v``
    (Narayanan et al. 2021, Sec. 2.2.2: bubble fraction ``(p-1)/(v·m)``):
    ``T = c·max + (Σp + Σo - max)/v + max g``.
    """
    bottleneck = max(max(stage_times), max(transfer_times, default=0.0))
    fill = sum(stage_times) + sum(transfer_times)
    sync = max(sync_times, default=0.0)
    if schedule is Schedule.interleaved and vp_chunks > 1:
        return microbatches * bottleneck + (fill - bottleneck) / vp_chunks + sync
    return fill + (microbatches - 1) * bottleneck + sync


def evaluate(plan: Plan, graph: LayerGraph, cluster: Cluster, training: Training,
             params: CostParams | None = None) -> PlanMetrics:
    """Price ``plan`` with the cost model alone. Raises :class:`PlanError`
    (:func:`autopar_opt.pipeline.validate_plan`)."""
    params = params or default_params()
    d = validate_plan(plan, graph, cluster, training)
    b = training.global_batch_size // plan.microbatches
    ctx = StageContext(cluster, training, params, d, b)
    layers = {layer.name: layer for layer in graph.layers}
    stage_of, strat = plan.stage_of(), plan.strategy_of()
    pp, c = plan.pp, plan.microbatches
    p = [0.0] * pp
    comp = [0.0] * pp
    comm = [0.0] * pp
    g = [0.0] * pp
    w = [0.0] * pp
    a = [0.0] * pp
    flops = hw_flops = 0.0
    for name, layer in layers.items():
        i = stage_of[name]
        cost = layer_cost(layer, strat[name], ctx)
        p[i] += cost.time_s
        comp[i] += cost.compute_s
        comm[i] += cost.comm_s
        g[i] += cost.sync_s
        w[i] += cost.weight_bytes
        a[i] += cost.act_bytes
        flops += cost.flops * d
        hw_flops += cost.hw_flops * d
    o = [0.0] * max(pp - 1, 0)
    eff = params.comm_efficiency
    for u, v in graph.edges:
        su, sv = strat[u].layout, strat[v].layout
        nbytes = layers[u].output_bytes * b
        if stage_of[u] == stage_of[v]:
            r = reshard_time(su, sv, nbytes, ctx.stage_tier, eff)
            p[stage_of[u]] += r
            comm[stage_of[u]] += r
            continue
        for k in range(stage_of[u], stage_of[v]):   # relayed across every boundary crossed
            tier = cluster.intra_node if boundary_is_intra(k, d, cluster.gpus_per_node) else cluster.inter_node
            o[k] += cross_stage_time(su, sv, nbytes, tier, cluster.intra_node, eff)
    t = pipeline_latency(p, o, g, c, plan.schedule, plan.vp_chunks) + params.iteration_overhead_s
    cap = ctx.capacity_bytes / GIB
    stages = []
    for i, st in enumerate(plan.stages):
        inflight = inflight_microbatches(plan.schedule, pp, c, i)
        peak = (w[i] + inflight * a[i]) / GIB
        stages.append(StageMetrics(i, list(st.layers), p[i], comp[i], comm[i],
                                   o[i] if i < len(o) else 0.0, g[i], w[i] / GIB,
                                   inflight * a[i] / GIB, peak, cap, inflight))
    peak_total = cluster.device.peak_flops(training.dtype) * cluster.num_devices
    model_flops = flops * c  # FLOPs of one micro-batch over all devices, times c
    samples = training.global_batch_size
    return PlanMetrics(
        iteration_time_s=t,
        samples_per_s=samples / t,
        tokens_per_s=samples * training.tokens_per_sample / t,
        mfu=model_flops / (t * peak_total),
        hfu=hw_flops * c / (t * peak_total),
        bubble_s=t - c * max(p) - max(g, default=0.0),
        stages=stages,
        feasible=all(s.fits for s in stages),
        memory_capacity_gib=cap,
    )
