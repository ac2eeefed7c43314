"""A published run as the cost model prices it: the builders' output
(:func:`autopar_opt.calibration.build.build_run`), what comparison, fitting
and validation take."""

from __future__ import annotations

from dataclasses import dataclass, field

from autopar_opt.ir.graph import Layer, LayerGraph
from autopar_opt.ir.hardware import Cluster
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training


@dataclass
class ModeledRun:
    """One record turned into the objects the cost model prices.

    kind : ``"end_to_end"`` (priced by :func:`autopar_opt.cost.evaluate.evaluate`)
        or ``"per_layer"`` (one transformer block priced by ``layer_cost``).
    measured_samples_per_s : measured throughput on the common basis;
        ``None`` for a memory-only record (memory published, no throughput).
    measured_basis : which measured field it came from and how.
    measured_memory_gib : published peak memory per GPU, if any.
    assumptions : every default taken for a field the record does not state.
    memory_measure, memory_rank : what the published memory measures and on
        which GPU (:mod:`autopar_opt.calibration.memory`).
    published_params, published_half_unit : the model's published parameter
        count (the record's, else its known family's; ``None`` when none is
        published) and half a unit of its last published digit.
    architecture_assumed : the architecture facts no field, family or text
        stated (:mod:`autopar_opt.calibration.reading.architecture`).
    """

    id: str
    family: str
    framework: str
    kind: str
    graph: LayerGraph
    cluster: Cluster
    training: Training
    plan: Plan | None
    strategy: Strategy
    microbatch_samples: int
    measured_samples_per_s: float | None
    measured_basis: str
    measured_memory_gib: float | None
    assumptions: list[str] = field(default_factory=list)
    memory_measure: str = "device"
    memory_rank: str = "max"
    published_params: float | None = None
    published_half_unit: float = 0.0
    architecture_assumed: tuple[str, ...] = ()

    @property
    def params_total(self) -> int:
        """Parameters of the built model (every expert of an MoE)."""
        return self.graph.total_params()

    @property
    def params_active(self) -> int:
        """Parameters one token uses (top-k experts of an MoE)."""
        return self.graph.active_params()

    @property
    def memory_only(self) -> bool:
        """Memory published, throughput not: memory statistics and fit only."""
        return self.measured_samples_per_s is None

    @property
    def block(self) -> Layer:
        """The (first) transformer block: what a per-layer record measures."""
        return next(layer for layer in self.graph.layers if layer.name.startswith("block"))
