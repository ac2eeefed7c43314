"""Pipeline rules: the one place that says what a well-formed pipeline is.

Used by the cost tables (per outer configuration), the evaluator, the spec's
plan builder, the outer configurations of the search and the calibration:
stage congruence, in-flight micro-batches per schedule, the link tier of a
stage boundary and of the first-to-last-stage tie (:func:`tie_tier`), and :func:`validate_plan` for a complete :class:`Plan`.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import Cluster, LinkTier
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.strategies import divisors, ep_degree_ok
from autopar_opt.ir.training import Schedule, Training


class PlanError(ValueError):
    """A plan that does not fit its model or cluster (names the rule broken)."""


def stages_congruent(devices_per_stage: int, gpus_per_node: int) -> bool:
    """True when every stage sees the same node layout."""
    d, g = devices_per_stage, gpus_per_node
    return g % d == 0 or d % g == 0


@dataclass(frozen=True)
class RuleBroken:
    """A pipeline rule an outer configuration breaks: the rule, as a sentence
    about the value, and how to fix it."""

    rule: str
    fix: str

    def __str__(self) -> str:
        return self.rule


def pipeline_rule_broken(pp: int, num_devices: int, gpus_per_node: int,
                         num_layers: int | None = None) -> RuleBroken | None:
    """The first rule ``pp`` stages break on ``num_devices`` GPUs (``gpus_per_node``
    per node) and ``num_layers`` layers; None when the pipeline is well formed.

    The rules, in order: ``pp`` divides the devices; the ``d = devices / pp``
    devices of a stage are congruent (:func:`stages_congruent`); no more stages
    than layers. Every caller (the plan validator, the cost tables, the spec's
    plan builder, the search's outer configurations, the calibration) asks here.
    """
    if pp > num_devices:     # said as such (it was "pp=16 does not divide the 8 devices")
        return RuleBroken(f"pp={pp}: more stages than the {num_devices} devices (a stage runs "
                          "on one device at least)",
                          f"use a divisor of {num_devices}: {', '.join(map(str, divisors(num_devices)))}")
    if pp < 1 or num_devices % pp:
        return RuleBroken(f"pp={pp} does not divide the {num_devices} devices",
                          f"use a divisor of {num_devices}: {', '.join(map(str, divisors(num_devices)))}")
    d = num_devices // pp
    if not stages_congruent(d, gpus_per_node):
        return RuleBroken(f"{d} devices per stage neither divide nor are a multiple of "
                          f"{gpus_per_node} GPUs per node",
                          "choose pp so that a stage fills whole nodes or divides one node")
    if num_layers is not None and pp > num_layers:
        return RuleBroken(f"pp={pp}: more stages than the {num_layers} layers", f"use pp <= {num_layers}")
    return None


def microbatch_rule_broken(microbatches: int, global_batch_size: int,
                           dp: int | None = None) -> RuleBroken | None:
    """None when ``microbatches`` divides the global batch, else the rule and its fix:
    the counts that work, those whose micro-batch also splits over ``dp`` where the
    data-parallel degree is known (a fix that broke the next rule helped nobody)."""
    if microbatches >= 1 and global_batch_size % microbatches == 0:
        return None
    rule = f"{microbatches} micro-batches do not divide the global batch ({global_batch_size})"
    return RuleBroken(rule, microbatch_fix(microbatches, global_batch_size, dp))


def microbatch_fix(microbatches: int, global_batch_size: int, dp: int | None = None) -> str:
    """The micro-batch counts to use instead of ``microbatches``: divisors of the global
    batch whose micro-batch (``global / count`` samples) splits over ``dp``."""
    ok = [d for d in divisors(global_batch_size)
          if dp is None or (global_batch_size // d) % dp == 0]
    if not ok:
        return (f"the global batch ({global_batch_size}) is not a multiple of dp={dp}: change "
                f"training.global_batch_size or the plan's tp/pp")
    below = [d for d in ok if d <= max(microbatches, 1)]
    split = f" (global batch / micro-batches a multiple of dp={dp})" if dp else ""
    return (f"use a divisor of {global_batch_size}{split}, e.g. {max(below or ok[:1])}"
            + (f"; one of {', '.join(map(str, ok))}" if len(ok) <= 12 else ""))


def stage_offsets(sizes: list[int] | tuple[int, ...]) -> list[int]:
    """First rank of every stage when stages take consecutive ranks in order."""
    out, at = [], 0
    for d in sizes:
        out.append(at)
        at += d
    return out


def stage_devices_problem(sizes: list[int] | tuple[int, ...], gpus_per_node: int,
                          num_devices: int) -> str | None:
    """Why a vector of per-stage device counts is not a valid pipeline (None: it is).

    Stages take consecutive ranks in order. A stage is either whole nodes
    (a multiple of the GPUs per node, starting at a node boundary) or a
    divisor of a node's GPUs lying inside one node; the counts sum to at most
    the cluster. Congruent stages (every stage ``N/pp``) always pass.
    """
    g = gpus_per_node
    if any(d < 1 for d in sizes):
        return "every stage needs at least one device"
    if sum(sizes) > num_devices:
        return f"the stages use {sum(sizes)} devices, more than the {num_devices} of the cluster"
    for i, (d, at) in enumerate(zip(sizes, stage_offsets(sizes))):
        if not stages_congruent(d, g):
            return f"stage {i} has {d} devices: neither a divisor nor a multiple of {g} GPUs per node"
        if d >= g and at % g:
            return f"stage {i} ({d} devices, whole nodes) would start at rank {at}, inside a node"
        if d < g and at // g != (at + d - 1) // g:
            return f"stage {i} ({d} devices) would span two nodes (ranks {at}-{at + d - 1})"
    return None


def boundaries_intra(sizes: list[int] | tuple[int, ...], gpus_per_node: int) -> list[bool]:
    """Per boundary ``i`` (between stages ``i`` and ``i+1``): both on one node.

    Stage ``i+1`` starts at rank ``o``; the two stages share a node exactly
    when ``o`` is not a node boundary (whole-node stages start on one, and a
    sub-node stage never spans two nodes). For congruent stages this is
    :func:`boundary_is_intra`.
    """
    offs = stage_offsets(sizes)
    return [offs[i + 1] % gpus_per_node != 0 for i in range(len(sizes) - 1)]


def tie_tier(cluster: Cluster, sizes: list[int] | tuple[int, ...]) -> LinkTier | None:
    """The link between the first and the last stage, over which tied
    parameters' gradients are all-reduced (a rank of the first stage with its
    counterpart at the same position of the last stage); None with one stage
    (no copy, nothing to reduce). Stages take consecutive ranks in order."""
    if len(sizes) < 2:
        return None
    return cluster.tier_for_span(0, stage_offsets(sizes)[-1])


def plan_stage_devices(plan: Plan, num_devices: int) -> list[int]:
    """Device count of every stage: the plan's own, or ``N/pp`` each (congruent)."""
    if plan.stage_devices is not None:
        return list(plan.stage_devices)
    return [num_devices // plan.pp] * plan.pp


#: Most stage-size vectors ``search.stage_devices: free`` may enumerate (over every pp).
MAX_FREE_SHAPES = 4096


def stage_sizes(cluster: Cluster) -> list[int]:
    """Device counts a stage may have: divisors of a node's GPUs, or whole nodes."""
    g, n = cluster.gpus_per_node, cluster.num_devices
    return sorted({d for d in divisors(g) if d <= n} | {g * k for k in range(1, n // g + 1)})


def free_shapes(cluster: Cluster, pp: int) -> list[tuple[int, ...]]:
    """Every vector of ``pp`` stage device counts that is a valid pipeline
    (:func:`~autopar_opt.ir.pipeline.stage_devices_problem`), except the congruent one
    (``N/pp`` each, the configuration without ``stage_devices``).

    Built stage by stage from rank 0: a whole-node stage must start on a node
    boundary and a sub-node stage must end inside its node, so a prefix that
    breaks a rule is never extended.
    """
    g, n = cluster.gpus_per_node, cluster.num_devices
    sizes = stage_sizes(cluster)
    congruent = (n // pp,) * pp if n % pp == 0 and stages_congruent(n // pp, g) else None
    out: list[tuple[int, ...]] = []

    def grow(prefix: tuple[int, ...], at: int) -> None:
        if len(out) > MAX_FREE_SHAPES:
            return
        if len(prefix) == pp:
            if prefix != congruent:
                out.append(prefix)
            return
        left = pp - len(prefix) - 1          # every later stage needs at least one device
        for d in sizes:
            if at + d + left > n:
                break
            if (d >= g and at % g) or (d < g and at // g != (at + d - 1) // g):
                continue
            grow(prefix + (d,), at + d)

    grow((), 0)
    return out


def count_free_shapes(num_layers: int, cluster: Cluster, pp_degrees: tuple[int, ...] | None) -> int:
    """Stage-size vectors ``search.stage_devices: free`` adds over the allowed ``pp``
    (at most ``min(N, layers)``); stops counting past :data:`MAX_FREE_SHAPES`."""
    total = 0
    for pp in range(1, min(cluster.num_devices, num_layers) + 1):
        if pp_degrees is not None and pp not in pp_degrees:
            continue
        total += len(free_shapes(cluster, pp))
        if total > MAX_FREE_SHAPES:
            break
    return total


def inflight_microbatches(schedule: Schedule, pp: int, microbatches: int, stage: int) -> int:
    """Micro-batches whose activations a stage holds at its peak.

    GPipe keeps all ``c`` (Huang et al. 2019); 1F1B keeps at most ``pp - i``
    (Narayanan et al. 2021, Sec. 2.2.1). The interleaved schedule with one
    chunk per device is 1F1B; with ``v > 1`` chunks
    :func:`interleaved_inflight` gives its warm-up memory.
    """
    if schedule is Schedule.gpipe:
        return microbatches
    return min(pp - stage, microbatches)


def interleaved_inflight(pp: int, microbatches: int, vp: int, stage: int) -> tuple[float, int]:
    """(activations held at the peak in whole-stage micro-batches, micro-batches
    of the stage's last model chunk held) under the interleaved 1F1B schedule
    with ``vp`` model chunks per device.

    Megatron-Core ``forward_backward_pipelining_with_interleaving``
    (``megatron/core/pipeline_parallel/schedules.py``): of the ``c·v`` chunk
    micro-batches a rank runs ``w = 2·(pp - i - 1) + (v - 1)·g`` warm-up
    forwards (``g`` = ``microbatch_group_size_per_vp_stage``, default
    ``pp``), all ``c·v`` when ``w >= c·v``; at the peak it holds ``w + 1``
    chunk micro-batches, each ``1/v`` of the stage's layers. Forwards run
    chunk by chunk in groups of ``g`` micro-batches, so the last chunk (the
    one with the output layer) holds ``w + 1 - (v - 1)·g`` of them (at least
    one, at most ``c``).
    """
    total = microbatches * vp
    warm = 2 * (pp - stage - 1) + (vp - 1) * pp
    chunks = total if warm >= total else warm + 1
    last = min(microbatches, max(1, chunks - (vp - 1) * pp))
    return chunks / vp, last


def boundary_is_intra(boundary: int, devices_per_stage: int, gpus_per_node: int) -> bool:
    """Whether stages ``boundary`` and ``boundary + 1`` share a node."""
    first_next = (boundary + 1) * devices_per_stage
    return devices_per_stage < gpus_per_node and first_next % gpus_per_node != 0


def validate_plan(plan: Plan, graph: LayerGraph, cluster: Cluster, training: Training) -> list[int]:
    """Check every pipeline rule a plan must satisfy; return the devices of every stage.

    The rules: every layer placed exactly once, no empty stage, ``pp``
    divides the devices and congruent stages (:func:`stages_congruent`), or,
    for a plan with its own ``stage_devices``, :func:`stage_devices_problem`;
    micro-batches divide the global batch, every edge goes forward, every
    strategy uses its stage's devices and its ``dp`` divides the
    micro-batch, every expert-parallel degree follows
    :func:`~autopar_opt.ir.strategies.ep_degree_ok`. Raises :class:`PlanError` naming the first rule broken.
    """
    check_placement(plan, graph)
    sizes = _check_stage_devices(plan, cluster)
    check_plan_layers(plan, graph, training, sizes)
    return sizes


def check_placement(plan: Plan, graph: LayerGraph) -> None:
    """Every layer placed exactly once and no empty stage (:class:`PlanError` otherwise)."""
    names = [layer.name for layer in graph.layers]
    planned = [n for st in plan.stages for n in st.layers]
    if sorted(planned) != sorted(names):
        missing = sorted(set(names) - set(planned))
        extra = sorted(set(planned) - set(names))
        raise PlanError(f"plan must place every layer exactly once (missing: {missing[:5]}, "
                        f"unknown or repeated: {extra[:5] or 'none'})")
    if any(not st.layers for st in plan.stages):
        raise PlanError("every stage must hold at least one layer")


def check_plan_layers(plan: Plan, graph: LayerGraph, training: Training, sizes: list[int]) -> None:
    """The rules of :func:`validate_plan` after the stage devices (``sizes``): micro-batches,
    edges forward, every strategy on its stage's devices with its ``dp`` dividing the
    micro-batch, expert-parallel degrees. Raises :class:`PlanError`."""
    broken = microbatch_rule_broken(plan.microbatches, training.global_batch_size)
    if broken:
        raise PlanError(str(broken))
    b = training.global_batch_size // plan.microbatches
    stage_of = plan.stage_of()
    layers = {layer.name: layer for layer in graph.layers}
    for u, v in graph.edges:
        if stage_of[u] > stage_of[v]:
            raise PlanError(f"edge {u} -> {v} goes backwards from stage {stage_of[u]} to {stage_of[v]}")
    for st, d in zip(plan.stages, sizes):
        for name, s in zip(st.layers, st.strategies):
            if s.devices != d:
                raise PlanError(f"layer {name}: dp*tp*cp = {s.devices} must equal the {d} devices of its stage")
            if b % s.dp:
                raise PlanError(f"layer {name}: dp={s.dp} must divide the {b} samples per micro-batch")
            if not ep_degree_ok(layers[name], s.dp, s.cp, s.ep, s.tp, s.etp):
                if s.etp:
                    raise PlanError(f"layer {name}: etp={s.etp} x ep={s.ep} needs an MoE layer whose "
                                    f"experts ep divides and whose tp*cp*dp = {s.devices} "
                                    "etp*ep divides")
                raise PlanError(f"layer {name}: ep={s.ep} needs an MoE layer whose experts and "
                                f"dp*cp = {s.dp * s.cp} it divides")
        if len(st.strategies) != len(st.layers):
            raise PlanError("each stage needs one strategy per layer")


def _check_stage_devices(plan: Plan, cluster: Cluster) -> list[int]:
    """The per-stage device counts of ``plan`` after their rules (PlanError otherwise)."""
    if plan.stage_devices is not None:
        if len(plan.stage_devices) != plan.pp:
            raise PlanError(f"stage_devices lists {len(plan.stage_devices)} counts for {plan.pp} stages")
        why = stage_devices_problem(plan.stage_devices, cluster.gpus_per_node, cluster.num_devices)
        if why:
            raise PlanError(f"stage_devices {list(plan.stage_devices)}: {why}")
        return list(plan.stage_devices)
    broken = pipeline_rule_broken(plan.pp, cluster.num_devices, cluster.gpus_per_node)
    if broken:
        raise PlanError(str(broken))
    return [cluster.num_devices // plan.pp] * plan.pp
