"""A hybrid-parallel plan: stages, per-layer strategies, micro-batching, schedule."""

from __future__ import annotations

from dataclasses import dataclass, field

from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Schedule


@dataclass
class StagePlan:
    """One pipeline stage: consecutive layers (by name) and their strategies."""

    layers: list[str]
    strategies: list[Strategy]

    def to_dict(self) -> dict:
        return {"layers": list(self.layers),
                "strategies": [s.to_dict() for s in self.strategies]}

    @classmethod
    def from_dict(cls, data: dict) -> "StagePlan":
        return cls(list(data["layers"]), [Strategy.from_dict(s) for s in data["strategies"]])


@dataclass
class Plan:
    """A complete plan. Stage ``i`` runs on ranks ``[i*d, (i+1)*d)`` with ``d = N/pp``
    (congruent stages, ``stage_devices`` None), or, with ``stage_devices``, on the
    next ``stage_devices[i]`` ranks after the stages before it
    (:func:`autopar_opt.ir.pipeline.stage_devices_problem` states the rules).

    ``vp_chunks`` > 1 only with the interleaved schedule (each device holds
    ``vp_chunks`` model chunks; evaluation only, not searched).

    On a mixed fleet (:mod:`autopar_opt.ir.fleet`) ``stage_groups[i]`` is the
    group stage ``i`` runs on (None: one group, a homogeneous cluster); the
    stages of one group take consecutive ranks of that group in pipeline order
    (:func:`autopar_opt.ir.fleet_pipeline.fleet_stage_problem`), and
    ``stage_devices`` is then always given.
    """

    stages: list[StagePlan]
    microbatches: int
    schedule: Schedule = Schedule.one_f_one_b
    vp_chunks: int = 1
    notes: dict = field(default_factory=dict)
    stage_devices: list[int] | None = None
    stage_groups: list[int] | None = None

    @property
    def pp(self) -> int:
        return len(self.stages)

    def stage_of(self) -> dict[str, int]:
        """Layer name -> stage index."""
        return {name: i for i, st in enumerate(self.stages) for name in st.layers}

    def strategy_of(self) -> dict[str, Strategy]:
        """Layer name -> strategy."""
        return {name: s for st in self.stages for name, s in zip(st.layers, st.strategies)}

    def to_dict(self) -> dict:
        data = {"pp": self.pp, "microbatches": self.microbatches,
                "schedule": self.schedule.value, "vp_chunks": self.vp_chunks,
                "stages": [st.to_dict() for st in self.stages]}
        if self.stage_devices is not None:
            data["stage_devices"] = list(self.stage_devices)
        if self.stage_groups is not None:
            data["stage_groups"] = list(self.stage_groups)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Plan":
        return cls(stages=[StagePlan.from_dict(s) for s in data["stages"]],
                   microbatches=int(data["microbatches"]),
                   schedule=Schedule(data.get("schedule", "1f1b")),
                   vp_chunks=int(data.get("vp_chunks", 1)),
                   stage_devices=(None if data.get("stage_devices") is None
                                  else [int(d) for d in data["stage_devices"]]),
                   stage_groups=(None if data.get("stage_groups") is None
                                 else [int(g) for g in data["stage_groups"]]))


def uniform_plan(layer_names: list[str], pp: int, strategy: Strategy, microbatches: int,
                 schedule: Schedule = Schedule.one_f_one_b, vp_chunks: int = 1,
                 stage_sizes: list[int] | None = None) -> Plan:
    """A Megatron-style plan: the same strategy for every layer, layers split
    into ``pp`` stages as evenly as possible (or by ``stage_sizes``)."""
    n = len(layer_names)
    if stage_sizes is None:
        base, extra = divmod(n, pp)
        stage_sizes = [base + (1 if i < extra else 0) for i in range(pp)]
    if sum(stage_sizes) != n or any(k <= 0 for k in stage_sizes):
        raise ValueError(f"stage sizes {stage_sizes} do not split {n} layers into {pp} non-empty stages")
    stages, start = [], 0
    for size in stage_sizes:
        names = layer_names[start:start + size]
        stages.append(StagePlan(names, [strategy] * len(names)))
        start += size
    return Plan(stages, microbatches, schedule, vp_chunks)
