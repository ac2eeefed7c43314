"""Outer configurations of the search: (pipeline degree, micro-batches, schedule,
virtual stages per rank of the interleaved schedule)."""

from __future__ import annotations

from dataclasses import dataclass

from autopar_opt.ir.pipeline import free_shapes, pipeline_rule_broken
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import Cluster
from autopar_opt.ir.strategies import divisors
from autopar_opt.ir.target import vp_degrees, vp_problem
from autopar_opt.ir.training import Schedule, SearchSpace, Training, schedule_text


@dataclass(frozen=True)
class OuterConfig:
    """One outer configuration; the inner problem is a MILP/MIQP or a DP.

    ``stage_devices`` is every stage's device count with free stage sizes
    (None: congruent stages of ``N/pp`` devices each); ``stage_groups`` every
    stage's group on a mixed fleet (None: one group; :mod:`autopar_opt.search.fleet`)."""

    pp: int
    microbatches: int
    schedule: Schedule
    stage_devices: tuple[int, ...] | None = None
    stage_groups: tuple[int, ...] | None = None
    #: virtual stages per rank (interleaved schedule; 1 otherwise)
    vp: int = 1

    def _key(self) -> tuple:
        return (self.pp, self.microbatches, self.schedule.value, self.stage_devices or (),
                self.stage_groups or (), self.vp)

    def __lt__(self, other: "OuterConfig") -> bool:
        return self._key() < other._key()

    def label(self) -> str:
        sizes = "" if self.stage_devices is None else " devices=" + "+".join(map(str, self.stage_devices))
        groups = "" if self.stage_groups is None else " groups=" + "+".join(map(str, self.stage_groups))
        return f"pp={self.pp} c={self.microbatches} {schedule_text(self.schedule, self.vp)}{sizes}{groups}"

    def to_dict(self) -> dict:
        out = {"pp": self.pp, "microbatches": self.microbatches, "schedule": self.schedule.value}
        if self.vp > 1:
            out["vp_chunks"] = self.vp
        if self.stage_devices is not None:
            out["stage_devices"] = list(self.stage_devices)
        if self.stage_groups is not None:
            out["stage_groups"] = list(self.stage_groups)
        return out


def pipeline_degrees(graph: LayerGraph, cluster: Cluster, space: SearchSpace) -> list[int]:
    """pp values that divide the devices, give congruent stages and fit the layer count."""
    if space.stage_devices == "free":
        return [pp for pp in range(1, min(cluster.num_devices, len(graph.layers)) + 1)
                if space.pp_degrees is None or pp in space.pp_degrees]
    return [pp for pp in divisors(cluster.num_devices)
            if (space.pp_degrees is None or pp in space.pp_degrees)
            and pipeline_rule_broken(pp, cluster.num_devices, cluster.gpus_per_node,
                                     len(graph.layers)) is None]


def microbatch_counts(training: Training, space: SearchSpace) -> list[int]:
    """Micro-batch counts that divide the global batch (and the spec allows)."""
    allowed = space.microbatches
    out = []
    for c in divisors(training.global_batch_size):
        if allowed is not None and c not in allowed:
            continue
        if allowed is None and c > space.max_microbatches:
            continue
        out.append(c)
    return out


def outer_configs(graph: LayerGraph, cluster: Cluster, training: Training,
                  space: SearchSpace) -> list[OuterConfig]:
    """Every outer configuration the spec allows, in a stable order.

    A pipeline with one stage has no bubble, so only one schedule is kept for
    ``pp == 1`` (1F1B when allowed): the others are the same plan. It is called
    1F1B when only the interleaved schedule is listed too: one stage has no virtual
    stages (Megatron-Core runs ``forward_backward_no_pipelining`` either way), and a
    one-stage plan labelled interleaved misread as a pipeline (QA round 10). Under a
    target (``space.runs_on``) stages are congruent and pipeline degrees the
    framework refuses for this model are not in the space
    (:meth:`~autopar_opt.ir.target.Target.config_problem`). The interleaved
    schedule at ``pp > 1`` gives one configuration per virtual-stage count
    (:func:`_interleaved`).
    """
    configs = []
    schedules = [Schedule(s) for s in space.schedules]
    target = space.runs_on
    # the frameworks give every pipeline stage the same devices (ir/target.py)
    free = space.stage_devices == "free" and target is None
    tied = any(layer.tied_to for layer in graph.layers)
    for pp in pipeline_degrees(graph, cluster, space):
        if target is not None and target.config_problem(pp, tied):
            continue
        n = cluster.num_devices
        shapes: list[tuple[int, ...] | None] = []
        if pipeline_rule_broken(pp, n, cluster.gpus_per_node) is None:
            shapes.append(None)                    # the congruent pipeline, N/pp each
        if free:
            shapes += free_shapes(cluster, pp)
        for c in microbatch_counts(training, space):
            scheds = schedules
            if pp == 1:
                scheds = [Schedule.one_f_one_b] if {Schedule.one_f_one_b, Schedule.interleaved} \
                    & set(schedules) else schedules[:1]
            for sched in scheds:
                if sched is Schedule.interleaved and pp > 1:
                    configs += _interleaved(graph, space, pp, c, schedules)
                    continue
                if target is not None and target.microbatch_problem(pp, c, sched):
                    continue
                configs += [OuterConfig(pp, c, sched, shape) for shape in shapes]
    return configs


def _interleaved(graph: LayerGraph, space: SearchSpace, pp: int, c: int,
                 schedules: list[Schedule]) -> list[OuterConfig]:
    """The interleaved configurations of ``(pp, c)``: one per virtual-stage count
    Megatron-Core runs here (:func:`~autopar_opt.ir.target.vp_problem`), on
    congruent stages; ``vp = 1`` (plain 1F1B) only when 1F1B is not listed."""
    vps = [v for v in vp_degrees(graph.layers, pp, space.vp_chunks)
           if vp_problem(graph.layers, pp, v, c) is None]
    if Schedule.one_f_one_b not in schedules and (space.vp_chunks is None or 1 in space.vp_chunks):
        vps = [1] + vps
    return [OuterConfig(pp, c, Schedule.interleaved, None, None, v) for v in vps]


def empty_space_problem(graph: LayerGraph, cluster: Cluster, training: Training,
                        space: SearchSpace) -> tuple[str, object, str, str] | None:
    """(key, value, rule, fix) when the spec's space holds no outer configuration at all,
    None otherwise. An empty space is a spec error, not a search that ran out of time (QA
    round 10: it exited 4, "no plan was found within the time limit", advising a longer one)."""
    if outer_configs(graph, cluster, training, space):
        return None
    degrees = pipeline_degrees(graph, cluster, space)
    if not degrees:
        return ("search.pp_degrees", list(space.pp_degrees or []),
                f"no pipeline degree fits {cluster.num_devices} devices of "
                f"{cluster.gpus_per_node} per node and the model's {len(graph.layers)} layers",
                "list a divisor of the devices that whole stages can hold")
    refused = target_refusals(graph, cluster, space)
    if refused and len(refused) == len(degrees):
        return ("search.pp_degrees", degrees, f"the target refuses every pipeline degree: "
                f"{next(iter(refused.values()))}",
                "list a pipeline degree the target runs, or set target: none")
    counts = microbatch_counts(training, space)
    if not counts:
        return ("search.microbatches", list(space.microbatches or []),
                f"no micro-batch count divides the global batch {training.global_batch_size}",
                "list divisors of the global batch")
    target = space.runs_on
    why = None if target is None else next(
        (w for pp in degrees for c in counts for sched in space.schedules
         if (w := target.microbatch_problem(pp, c, sched))), None)
    if why:
        return ("search.microbatches", list(space.microbatches or counts), why,
                "list micro-batch counts of at least the pipeline degree")
    if space.vp_chunks is not None:
        return ("search.vp_chunks", list(space.vp_chunks),
                f"no listed virtual-stage count splits the model's transformer blocks evenly "
                f"over the pipeline degrees {degrees} (Megatron-Core's interleaved rule), and "
                "no other schedule is listed", "list a vp that divides the blocks per stage, "
                "or add 1f1b to search.schedules")
    return ("search.schedules", list(space.schedules),
            "the listed schedules give no configuration for these pipeline degrees "
            f"{degrees} and micro-batch counts", "add 1f1b to search.schedules")


def target_refusals(graph: LayerGraph, cluster: Cluster, space: SearchSpace) -> dict[int, str]:
    """Pipeline degree -> why the space's target runs no plan with it
    (:meth:`~autopar_opt.ir.target.Target.config_problem`), for the degrees it refuses."""
    target = space.runs_on
    if target is None:
        return {}
    tied = any(layer.tied_to for layer in graph.layers)
    whys = {pp: target.config_problem(pp, tied) for pp in pipeline_degrees(graph, cluster, space)}
    return {pp: why for pp, why in whys.items() if why}


def target_dropped(graph: LayerGraph, cluster: Cluster, space: SearchSpace) -> str | None:
    """A sentence naming the pipeline degrees the target's own rules take out of the space
    (torchtitan pipelines no tied-embedding model), None when it takes none: they left
    without a word, and an infeasible answer advised more pipeline stages (QA round 10)."""
    dropped = target_refusals(graph, cluster, space)
    if not dropped:
        return None
    return (f"pipeline degrees {sorted(dropped)} are not searched: "
            f"{next(iter(dropped.values()))} (untie the output layer, or use another target)")


def vp_dropped(graph: LayerGraph, cluster: Cluster, space: SearchSpace) -> str | None:
    """A sentence naming the pipeline degrees at which no listed ``search.vp_chunks``
    splits the blocks (so the interleaved schedule has no configuration there), None when
    every degree has one or the list is not stated (QA round 10: left without a word)."""
    if space.vp_chunks is None or Schedule.interleaved not in [Schedule(x) for x in space.schedules]:
        return None
    if not any(v >= 2 for v in space.vp_chunks):       # 1 alone: plain 1F1B, nothing split
        return None
    none_at = [pp for pp in pipeline_degrees(graph, cluster, space)
               if pp > 1 and not vp_degrees(graph.layers, pp, space.vp_chunks)]
    if not none_at:
        return None
    return (f"search.vp_chunks {list(space.vp_chunks)}: no listed value splits the model's "
            f"blocks evenly at pipeline degrees {none_at} (Megatron-Core's interleaved rule): "
            "no interleaved configuration there")
