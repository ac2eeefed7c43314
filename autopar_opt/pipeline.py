"""Pipeline rules: the one place that says what a well-formed pipeline is.

Used by the cost tables (per outer configuration), the evaluator, the spec's
plan builder, the outer configurations of the search and the calibration:
stage congruence, in-flight micro-batches per schedule, the link tier of a
stage boundary, and :func:`validate_plan` for a complete :class:`Plan`.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar_opt.graph import LayerGraph
from autopar_opt.hardware import Cluster
from autopar_opt.plan import Plan
from autopar_opt.strategies import divisors, ep_degree_ok
from autopar_opt.training import Schedule, Training


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


def microbatch_rule_broken(microbatches: int, global_batch_size: int) -> RuleBroken | None:
    """None when ``microbatches`` divides the global batch, else the rule and its fix."""
    if microbatches >= 1 and global_batch_size % microbatches == 0:
        return None
    below = [d for d in divisors(global_batch_size) if d <= max(microbatches, 1)]
    return RuleBroken(f"{microbatches} micro-batches do not divide the global batch "
                      f"({global_batch_size})",
                      f"use a divisor of {global_batch_size}, e.g. {max(below)}")


def inflight_microbatches(schedule: Schedule, pp: int, microbatches: int, stage: int) -> int:
    """Micro-batches whose activations a stage holds at its peak.

    GPipe keeps all ``c`` (Huang et al. 2019); 1F1B keeps at most ``pp - i``
    (Narayanan et al. 2021, Sec. 2.2.1); the interleaved schedule is priced
    like 1F1B (its extra warm-up memory is not modelled).
    """
    if schedule is Schedule.gpipe:
        return microbatches
    return min(pp - stage, microbatches)


def boundary_is_intra(boundary: int, devices_per_stage: int, gpus_per_node: int) -> bool:
    """Whether stages ``boundary`` and ``boundary + 1`` share a node."""
    first_next = (boundary + 1) * devices_per_stage
    return devices_per_stage < gpus_per_node and first_next % gpus_per_node != 0


def validate_plan(plan: Plan, graph: LayerGraph, cluster: Cluster, training: Training) -> int:
    """Check every pipeline rule a plan must satisfy; return the devices per stage.

    The rules: every layer placed exactly once, no empty stage, ``pp``
    divides the devices, congruent stages (:func:`stages_congruent`),
    micro-batches divide the global batch, every edge goes forward, every
    strategy uses the stage's ``d`` devices and its ``dp`` divides the
    micro-batch, every expert-parallel degree follows
    :func:`~autopar_opt.strategies.ep_degree_ok`. Raises :class:`PlanError` naming the first rule broken.
    """
    names = [layer.name for layer in graph.layers]
    planned = [n for st in plan.stages for n in st.layers]
    if sorted(planned) != sorted(names):
        missing = sorted(set(names) - set(planned))
        extra = sorted(set(planned) - set(names))
        raise PlanError(f"plan must place every layer exactly once (missing: {missing[:5]}, "
                        f"unknown or repeated: {extra[:5] or 'none'})")
    if any(not st.layers for st in plan.stages):
        raise PlanError("every stage must hold at least one layer")
    broken = (pipeline_rule_broken(plan.pp, cluster.num_devices, cluster.gpus_per_node)
              or microbatch_rule_broken(plan.microbatches, training.global_batch_size))
    if broken:
        raise PlanError(str(broken))
    d = cluster.num_devices // plan.pp
    b = training.global_batch_size // plan.microbatches
    stage_of = plan.stage_of()
    layers = {layer.name: layer for layer in graph.layers}
    for u, v in graph.edges:
        if stage_of[u] > stage_of[v]:
            raise PlanError(f"edge {u} -> {v} goes backwards from stage {stage_of[u]} to {stage_of[v]}")
    for st in plan.stages:
        for name, s in zip(st.layers, st.strategies):
            if s.devices != d:
                raise PlanError(f"layer {name}: dp*tp*cp = {s.devices} must equal the {d} devices per stage")
            if b % s.dp:
                raise PlanError(f"layer {name}: dp={s.dp} must divide the {b} samples per micro-batch")
            if not ep_degree_ok(layers[name], s.dp, s.cp, s.ep):
                raise PlanError(f"layer {name}: ep={s.ep} needs an MoE layer whose experts and "
                                f"dp*cp = {s.dp * s.cp} it divides")
        if len(st.strategies) != len(st.layers):
            raise PlanError("each stage needs one strategy per layer")
    return d
