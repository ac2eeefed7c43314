"""Outer configurations of the search: (pipeline degree, micro-batches, schedule)."""

from __future__ import annotations

from dataclasses import dataclass

from autopar_opt.pipeline import stages_congruent
from autopar_opt.graph import LayerGraph
from autopar_opt.hardware import Cluster
from autopar_opt.strategies import divisors
from autopar_opt.training import Schedule, SearchSpace, Training


#: Most stage-size vectors ``search.stage_devices: free`` may enumerate (over every pp).
MAX_FREE_SHAPES = 4096


@dataclass(frozen=True)
class OuterConfig:
    """One outer configuration; the inner problem is a MILP/MIQP or a DP.

    ``stage_devices`` is every stage's device count with free stage sizes
    (None: congruent stages of ``N/pp`` devices each)."""

    pp: int
    microbatches: int
    schedule: Schedule
    stage_devices: tuple[int, ...] | None = None

    def _key(self) -> tuple:
        return (self.pp, self.microbatches, self.schedule.value, self.stage_devices or ())

    def __lt__(self, other: "OuterConfig") -> bool:
        return self._key() < other._key()

    def label(self) -> str:
        sizes = "" if self.stage_devices is None else " devices=" + "+".join(map(str, self.stage_devices))
        return f"pp={self.pp} c={self.microbatches} {self.schedule.value}{sizes}"

    def to_dict(self) -> dict:
        out = {"pp": self.pp, "microbatches": self.microbatches, "schedule": self.schedule.value}
        if self.stage_devices is not None:
            out["stage_devices"] = list(self.stage_devices)
        return out


def pipeline_degrees(graph: LayerGraph, cluster: Cluster, space: SearchSpace) -> list[int]:
    """pp values that divide the devices, give congruent stages and fit the layer count."""
    out = []
    if space.stage_devices == "free":
        return [pp for pp in range(1, min(cluster.num_devices, len(graph.layers)) + 1)
                if space.pp_degrees is None or pp in space.pp_degrees]
    for pp in divisors(cluster.num_devices):
        if space.pp_degrees is not None and pp not in space.pp_degrees:
            continue
        if pp > len(graph.layers):
            continue
        if not stages_congruent(cluster.num_devices // pp, cluster.gpus_per_node):
            continue
        out.append(pp)
    return out


def stage_sizes(cluster: Cluster) -> list[int]:
    """Device counts a stage may have: divisors of a node's GPUs, or whole nodes."""
    g, n = cluster.gpus_per_node, cluster.num_devices
    return sorted({d for d in divisors(g) if d <= n} | {g * k for k in range(1, n // g + 1)})


def free_shapes(cluster: Cluster, pp: int) -> list[tuple[int, ...]]:
    """Every vector of ``pp`` stage device counts that is a valid pipeline
    (:func:`~autopar_opt.pipeline.stage_devices_problem`), except the congruent one
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
    ``pp == 1`` (1F1B when allowed): the others are the same plan.
    """
    configs = []
    schedules = [Schedule(s) for s in space.schedules]
    free = space.stage_devices == "free"
    for pp in pipeline_degrees(graph, cluster, space):
        n = cluster.num_devices
        shapes: list[tuple[int, ...] | None] = []
        if n % pp == 0 and stages_congruent(n // pp, cluster.gpus_per_node):
            shapes.append(None)
        if free:
            shapes += free_shapes(cluster, pp)
        for c in microbatch_counts(training, space):
            scheds = schedules
            if pp == 1:
                scheds = [Schedule.one_f_one_b] if Schedule.one_f_one_b in schedules else schedules[:1]
            for sched in scheds:
                configs += [OuterConfig(pp, c, sched, shape) for shape in shapes]
    return configs


def count_free_shapes(graph: LayerGraph, cluster: Cluster, space: SearchSpace) -> int:
    """Stage-size vectors ``search.stage_devices: free`` adds (stops counting past the limit)."""
    total = 0
    for pp in pipeline_degrees(graph, cluster, space):
        total += len(free_shapes(cluster, pp))
        if total > MAX_FREE_SHAPES:
            break
    return total
