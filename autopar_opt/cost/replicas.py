"""Pricing data-parallel replica classes on a mixed fleet (docs/DESIGN.md §11, shape D).

Each class ``t`` is priced by :func:`~autopar_opt.cost.evaluate.evaluate` as a
pipeline on its own groups with its own batch ``B_t`` (its in-class gradient
reduction included, as today). Then the classes all-reduce the gradients
across groups, once per iteration:

``S = 2(K−1)·α + 2(K−1)/K · Γ / (n_min · β·eff)``  (:func:`cross_class_sync`)

the ring all-reduce of Thakur, Rabenseifner & Gropp (2005, Sec. 4) over ``K``
classes of a hierarchical all-reduce (Jia et al. 2018, "Highly scalable deep
learning training system with mixed-precision", Sec. 3.3: reduce inside each
group, all-reduce across groups, broadcast inside): after its in-class
reduction every device of class ``t`` holds a ``1/n_t`` share of the gradient,
so ``n_min`` (the devices of the smallest class) parallel rings cross the
groups, each carrying ``Γ / n_min`` bytes; ``Γ`` = every parameter's gradient in
the dtype the runtime reduces it in
(:func:`~autopar_opt.cost.state.reduced_grad_bytes` without ZeRO); α, β the
slowest path between groups of different classes
(:meth:`~autopar_opt.ir.fleet.Fleet.path_tier`), at the network efficiency.

Stated limitations: ``S`` is not hidden behind the backward pass, and the
in-class reduction keeps today's full all-reduce price (conservative by at most
the in-class all-gather). ``S`` does not depend on the classes' strategies, so
``T = max_t T_t + S`` decomposes over classes (the exact split search of
:mod:`autopar_opt.search.replicas`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import combinations

from autopar_opt.cost.collectives import allreduce_time
from autopar_opt.cost.evaluate import PlanMetrics, evaluate
from autopar_opt.cost.params import CostParams, default_params
from autopar_opt.cost.state import reduced_grad_bytes
from autopar_opt.ir.fleet import Fleet
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import LinkTier
from autopar_opt.ir.pipeline import PlanError
from autopar_opt.ir.replicas import ReplicaPlan
from autopar_opt.ir.training import Training


@dataclass(frozen=True)
class ClassSync:
    """The cross-class gradient all-reduce: its time and what it was priced on."""

    time_s: float
    grad_bytes: float
    rings: int
    tier: LinkTier | None


def cross_class_sync(graph: LayerGraph, fleet: Fleet, training: Training, params: CostParams,
                     classes: list[tuple[int, ...]] | tuple[tuple[int, ...], ...]) -> ClassSync:
    """``S`` for classes on the given groups (module doc); 0 for one class."""
    k = len(classes)
    grad = sum(float(layer.params) for layer in graph.layers) * reduced_grad_bytes(training, 0)
    if k < 2:
        return ClassSync(0.0, grad, 0, None)
    rings = min(sum(fleet.groups[g].num_devices for g in cls) for cls in classes)
    tiers = [fleet.path_tier(g, h) for a, b in combinations(classes, 2) for g in a for h in b]
    tier = min(tiers, key=lambda t: (t.bandwidth_gb_per_s, -t.latency_us))
    t = allreduce_time(k, grad / rings, tier, params.inter_comm_efficiency)
    return ClassSync(t, grad, rings, tier)


@dataclass
class ReplicaMetrics:
    """What a replica plan costs: ``iteration_time_s = max_t T_t + sync_s``."""

    iteration_time_s: float
    samples_per_s: float
    tokens_per_s: float
    mfu: float
    sync_s: float
    classes: list[PlanMetrics]
    feasible: bool
    sync: ClassSync | None = field(default=None, repr=False)

    def to_dict(self) -> dict:
        return {"iteration_time_s": self.iteration_time_s, "samples_per_s": self.samples_per_s,
                "tokens_per_s": self.tokens_per_s, "mfu": self.mfu, "sync_s": self.sync_s,
                "feasible": self.feasible, "classes": [m.to_dict() for m in self.classes]}


def class_training(training: Training, batch: int) -> Training:
    """The training of one class: the same run with its share of the batch."""
    return replace(training, global_batch_size=batch)


def evaluate_replicas(plan: ReplicaPlan, graph: LayerGraph, fleet: Fleet, training: Training,
                      params: CostParams | None = None) -> ReplicaMetrics:
    """Price a replica plan with the cost model alone (module doc). Raises
    :class:`PlanError` when the classes overlap, their batches do not sum to the
    global batch, or a class plan breaks a rule on its groups."""
    params = params or default_params()
    if len(plan.classes) < 2:
        raise PlanError("a replica plan needs at least two classes")
    used = [g for c in plan.classes for g in c.groups]
    if len(used) != len(set(used)):
        raise PlanError(f"replica classes share a group: {[list(c.groups) for c in plan.classes]}")
    if sum(plan.batches) != training.global_batch_size or min(plan.batches) < 1:
        raise PlanError(f"class batches {list(plan.batches)} must be positive and sum to the global "
                        f"batch {training.global_batch_size}")
    metrics = []
    for c in plan.classes:
        if set(c.plan.stage_groups or ()) != set(c.groups):
            raise PlanError(f"class on groups {list(c.groups)} has stages on groups "
                            f"{sorted(set(c.plan.stage_groups or ()))}")
        metrics.append(evaluate(c.plan, graph, fleet, class_training(training, c.batch), params))
    sync = cross_class_sync(graph, fleet, training, params, [c.groups for c in plan.classes])
    t = max(m.iteration_time_s for m in metrics) + sync.time_s
    # each class's MFU is over the whole fleet's peak (cost.evaluate.fleet_peak_flops), so
    # the model FLOPs of all classes over the fleet's peak per iteration is their time-weighted
    # sum (a group no class uses counts as idle, as on one cluster)
    done = sum(m.mfu * m.iteration_time_s for m in metrics)
    samples = training.global_batch_size
    return ReplicaMetrics(iteration_time_s=t, samples_per_s=samples / t,
                          tokens_per_s=samples * training.tokens_per_sample / t,
                          mfu=done / t, sync_s=sync.time_s, classes=metrics,
                          feasible=all(m.feasible for m in metrics), sync=sync)
