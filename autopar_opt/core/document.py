"""The typed model of ``plan.json`` (``autopar solve``) and of ``autopar estimate --json``.

One model, three uses: ``autopar schema --plan`` / ``--estimate`` print its
JSON Schema, the report reads ``plan.json`` through it
(:func:`document_problems`), and the tests check every document the search
writes against it. Keys the report needs are required; everything else is
optional and unknown keys are allowed, so a newer writer's additions do not
break an older reader.

Non-finite numbers have one encoding (docs/DESIGN.md §4): JSON has no
infinity, so ``±inf`` and NaN are written as the strings ``"inf"``,
``"-inf"`` and ``"nan"`` (:data:`JsonFloat`; the search writes them with
``autopar_opt.search.certificate.json_float``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from autopar_opt.core.bounds import SearchStatus, Status

#: A number, or "inf" / "-inf" / "nan" (the one encoding of non-finite values).
JsonFloat = Annotated[Union[float, Literal["inf", "-inf", "nan"]], Field(
    description='A number, or the string "inf", "-inf" or "nan" (JSON has no infinity).')]


#: The plan.json layout this version writes and reads (autopar_opt.search.document).
SCHEMA_VERSION = 1


class _Doc(BaseModel):
    model_config = ConfigDict(extra="allow")


def _f(description: str, **kw: Any) -> Any:
    return Field(description=description, **kw)


class StrategyDoc(_Doc):
    """One layer's strategy (``autopar_opt.ir.strategies.Strategy.to_dict``)."""

    dp: int = _f("Data-parallel degree.")
    tp: int = _f("Tensor-parallel degree.")
    cp: int = _f("Context-parallel degree.", default=1)
    sp: bool = _f("Sequence parallelism.", default=False)
    zero: int = _f("ZeRO level (0-3).", default=0)
    recompute: str = _f("Activation recomputation: none, selective or full.", default="none")
    ep: Optional[int] = _f("Expert-parallel degree (only when > 1).", default=None)


class StageDoc(_Doc):
    """One pipeline stage: consecutive layers and their strategies."""

    layers: list[str] = _f("Layer names, in order.")
    strategies: list[StrategyDoc] = _f("One strategy per layer.")


class RankedStageDoc(StageDoc):
    """A stage of ``plan.json``: also its ranks (congruent stages: stage ``i`` =
    ``[i*d, (i+1)*d)``; free stage sizes: consecutive groups of ``devices`` ranks)."""

    first_rank: int = _f("First rank of the stage's device group.")
    last_rank: int = _f("Last rank of the stage's device group.")
    devices: Optional[int] = _f("Devices of the stage (last_rank - first_rank + 1).", default=None)


class _PlanBase(_Doc):
    pp: int = _f("Pipeline stages.")
    microbatches: int = _f("Micro-batches per iteration.")
    schedule: str = _f("Pipeline schedule: gpipe, 1f1b or interleaved.")
    vp_chunks: int = _f("Virtual pipeline chunks (interleaved only).", default=1)
    stage_devices: Optional[list[int]] = _f(
        "Devices of every stage with free stage sizes (absent: congruent, N/pp each).", default=None)


class EstimatePlanDoc(_PlanBase):
    """A plan as ``autopar estimate --json`` prints it."""

    stages: list[StageDoc] = _f("Stages in pipeline order.")


class PlanDoc(_PlanBase):
    """The best plan of ``plan.json``."""

    stages: list[RankedStageDoc] = _f("Stages in pipeline order, with their ranks.")

    @field_validator("stages")
    @classmethod
    def _some_stage(cls, stages: list) -> list:
        if not stages:     # a plan places every layer, so it has at least one stage
            raise ValueError("a plan needs at least one stage: give the plan.json written by "
                             "`autopar solve --out DIR` (or 'plan': null when there is none)")
        return stages


class StageMetricsDoc(_Doc):
    """Per-stage metrics (``autopar_opt.cost.evaluate.StageMetrics``); times per micro-batch
    except ``sync_s``, ``dp_s`` and ``optimizer_s`` (once per iteration)."""

    index: int = _f("Stage index.", default=0)
    layers: list[str] = _f("Layer names of the stage.", default_factory=list)
    time_s: float = _f("Stage time per micro-batch, s.")
    compute_s: float = _f("Compute part of time_s, s.", default=0.0)
    comm_s: float = _f("Exposed communication part of time_s (tp + cp + zero + ep + offload + reshard), s.",
                       default=0.0)
    transfer_s: float = _f("Transfer to the next stage per micro-batch, s.")
    sync_s: float = _f("Once-per-iteration time (dp_s + optimizer_s), s.")
    tp_s: float = _f("Exposed tensor-parallel communication, s.", default=0.0)
    cp_s: float = _f("Exposed context-parallel communication, s.", default=0.0)
    zero_s: float = _f("Exposed ZeRO-3 parameter gathers, s.", default=0.0)
    ep_s: float = _f("Exposed MoE all-to-all, s.", default=0.0)
    offload_s: float = _f("Exposed CPU activation offload copies, s.", default=0.0)
    reshard_s: float = _f("Resharding between layers of the stage, s.", default=0.0)
    dp_s: float = _f("Exposed gradient reduction per iteration, s.", default=0.0)
    optimizer_s: float = _f("Optimizer step per iteration, s.", default=0.0)
    weight_gib: float = _f("Weights, gradients and optimizer state per device, GiB.")
    weights_gib: float = _f("Weights per device, GiB.", default=0.0)
    grads_gib: float = _f("Gradients per device, GiB.", default=0.0)
    optimizer_gib: float = _f("Optimizer state per device, GiB.", default=0.0)
    activation_gib: float = _f("Activations at the peak per device (logits excluded), GiB.")
    logits_gib: float = _f("fp32 logits and loss of the output layer, GiB.", default=0.0)
    working_gib: float = _f("Transient working set of the layer in flight (recomputed "
                            "activations, ZeRO-3 gathered parameters and gradient), GiB.",
                            default=0.0)
    reserve_gib: float = _f("Runtime reserve and allocator fragmentation, GiB.", default=0.0)
    peak_memory_gib: float = _f("Peak memory per device, GiB.")
    capacity_gib: float = _f("Usable memory per device, GiB.")
    inflight_microbatches: int = _f("Micro-batches whose activations the stage holds at its peak.",
                                    default=1)
    fits: bool = _f("peak_memory_gib <= capacity_gib.", default=True)
    memory_status: Literal["fits", "tight", "over"] = _f(
        "fits, tight (headroom below 5% of capacity) or over.", default="fits")
    headroom_fraction: float = _f("Free memory as a fraction of capacity (negative: over).",
                                  default=0.0)


class MetricsDoc(_Doc):
    """What a plan costs under the model (``autopar_opt.cost.evaluate.PlanMetrics``)."""

    iteration_time_s: float = _f("Predicted iteration time, s.")
    samples_per_s: float = _f("Throughput, samples/s.")
    tokens_per_s: float = _f("Throughput, tokens/s.")
    mfu: float = _f("Model FLOPs utilisation (0-1).")
    hfu: float = _f("Hardware FLOPs utilisation, recomputation included (0-1).", default=0.0)
    bubble_s: float = _f("Pipeline bubble per iteration, s.", default=0.0)
    feasible: bool = _f("Every stage fits in memory.", default=True)
    memory_capacity_gib: float = _f("Usable memory per device, GiB.")
    peak_memory_gib: list[float] = _f("Peak memory per device of each stage, GiB.",
                                      default_factory=list)
    breakdown: dict[str, float] = _f("Iteration time by cause (compute_s, tp_comm_s, dp_comm_s, "
                                     "optimizer_s, fixed_s, pipeline_bubble_s, ...), s.",
                                     default_factory=dict)
    stages: list[StageMetricsDoc] = _f("Per-stage metrics.")


class _BoundsDoc(_Doc):
    """A primal value, a proven lower bound and their gap (``core.bounds.Bounds``)."""

    primal: Optional[JsonFloat] = _f("Best plan value found, s (null: no plan).")
    lower_bound: JsonFloat = _f("Proven lower bound, s (-inf: none; inf: proven infeasible).")
    gap: JsonFloat = _f("(primal - lower_bound) / primal.")


class ConfigRowDoc(_BoundsDoc):
    """One outer configuration of the certificate."""

    pp: int = _f("Pipeline stages.")
    microbatches: int = _f("Micro-batches.")
    schedule: str = _f("Pipeline schedule.")
    stage_devices: Optional[list[int]] = _f(
        "Devices of every stage with free stage sizes (absent: congruent, N/pp each).", default=None)
    status: Status = _f("What the search knows about it (docs/DESIGN.md §4).")
    time_s: float = _f("Solve time, s.")
    timings: dict[str, float] = _f("Where time_s went: build, translate, solve, dp_warm, s.",
                                   default_factory=dict)
    pruned_by: Optional[str] = _f("Why it was pruned (bound >= incumbent), if it was.")
    model_hash: Optional[str] = _f("sha256 of the exported sub-model (--export-models).",
                                   default=None)
    message: str = _f("What the solver or the search said.", default="")


class CertificateDoc(_BoundsDoc):
    """Global primal, global lower bound (the minimum of the per-configuration
    bounds), gap and the per-configuration table."""

    exact: bool = _f("The global bound is a proof (finite and <= primal, or every "
                     "configuration proven infeasible).")
    configurations: list[ConfigRowDoc] = _f("Every outer configuration.")


class LinkDoc(_Doc):
    name: str = _f("Link name.")
    bandwidth_gb_per_s: float = _f("Bandwidth, GB/s.")
    latency_us: float = _f("Latency, µs.")


class ClusterDoc(_Doc):
    name: str = _f("Cluster name.")
    nodes: int = _f("Nodes.")
    gpus_per_node: int = _f("GPUs per node.")
    num_devices: int = _f("GPUs in total.")
    device: str = _f("Device name.")
    hbm_gib: float = _f("Device memory, GiB.")
    peak_tflops: Optional[float] = _f("Dense 16-bit peak per device, TFLOP/s.", default=None)
    intra_node: Optional[LinkDoc] = _f("Link inside a node.", default=None)
    inter_node: Optional[LinkDoc] = _f("Link between nodes.", default=None)


class SpecSummaryDoc(_Doc):
    path: Optional[str] = _f("The spec file.", default=None)
    model: dict[str, Any] = _f("Model summary (name, num_layers, params, is_chain, source).")
    cluster: ClusterDoc = _f("Cluster summary.")
    training: dict[str, Any] = _f("Training settings (global_batch_size, seq_len, dtype, ...).")


class CostModelDoc(_Doc):
    params: dict[str, Any] = _f("CostParams in use.", default_factory=dict)
    assumptions: list[str] = _f("The model's stated assumptions.")
    case: list[str] = _f("What the model assumed for this case: attention kernel and fallbacks, "
                         "device variant and power cap, NICs, framework rules "
                         "(autopar_opt.cost.assumptions).", default_factory=list)
    runtime: dict[str, Any] = _f("The software stack's capabilities (autopar_opt.ir.runtime).",
                                 default_factory=dict)


class SolverDoc(_Doc):
    name: str = _f("Backend name.")
    version: str = _f("Solver name and version.")
    form: str = _f("milp, miqp or tables (the DP).")
    time_limit_s: float = _f("Time limit of the search, s.")
    rel_gap: float = _f("Target relative gap.")
    wall_time_s: Optional[float] = _f("Wall time of the search, s.", default=None)
    log_tail: Optional[str] = _f("The last lines of the solver log, if any.", default=None)
    timings: dict[str, float] = _f(
        "Where the command's time went, s: tables_s (cost tables and analytic bounds, "
        "inside wall_time_s), search_cpu_s (CPU time the process spent in the search, all "
        "threads: wall_time_s less the waiting on a busy machine), baselines_s (after the "
        "search), command_s (since the process started, before the outputs were written).",
        default_factory=dict)


class BaselineDoc(_Doc):
    name: str = _f("Baseline name.")
    plan: Optional[EstimatePlanDoc] = _f("The baseline plan (null: none fits).", default=None)
    metrics: Optional[MetricsDoc] = _f("Its metrics (null: no such plan fits).")
    note: str = _f("How it was built.")


class InfeasibilityDoc(_Doc):
    reason: str = _f("Why there is no plan.")
    details: list[str] = _f("Why the configurations failed (at most 10).", default_factory=list)
    least_memory_gib: float = _f("Least memory any plan needs per device, GiB.")
    capacity_gib: float = _f("Usable memory per device, GiB.")
    advice: list[str] = _f("What to change.")


class PlanDocument(_Doc):
    """``plan.json``, written by ``autopar solve --out DIR`` (schema_version 1)."""

    schema_version: int = _f("Version of this document's layout.")
    tool: dict[str, str] = _f("The writer: name and version.", default_factory=dict)
    created_utc: Optional[str] = _f("When the document was written (ISO 8601, UTC).", default=None)
    notices: list[str] = _f("What the user should know about this result.", default_factory=list)
    spec: SpecSummaryDoc = _f("What was solved.")
    search_space: dict[str, Any] = _f("The search space (an optimality claim holds within it).")
    cost_model: CostModelDoc = _f("The cost model's parameters and assumptions.")
    status: SearchStatus = _f("optimal | feasible | infeasible | no_plan | interrupted (exit codes 0, 0, 3, 4, 130/143).")
    plan: Optional[PlanDoc] = _f("The best plan (null: none).")
    metrics: Optional[MetricsDoc] = _f("The best plan's metrics (null: no plan).")
    certificate: CertificateDoc = _f("The optimality certificate.")
    solver: SolverDoc = _f("The backend and its limits.")
    baselines: list[BaselineDoc] = _f("Megatron-style and pure data-parallel plans, priced.")
    infeasibility: Optional[InfeasibilityDoc] = _f("Why there is no plan, when there is none.",
                                                   default=None)

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, version: int) -> int:
        if version != SCHEMA_VERSION:
            raise ValueError(f"unsupported: this autopar reads schema_version {SCHEMA_VERSION}; "
                             "re-write the plan.json with `autopar solve --out DIR` of this version")
        return version

    @model_validator(mode="after")
    def _consistent(self) -> "PlanDocument":
        if self.plan is not None and self.metrics is None:
            raise ValueError("'metrics' is null but 'plan' is set: a plan needs its metrics")
        if self.status is SearchStatus.infeasible and self.plan is None and self.infeasibility is None:
            raise ValueError("missing key 'infeasibility' (an infeasible search explains itself)")
        return self


class EstimateDocument(_Doc):
    """``autopar estimate --json``: a hand-written plan priced by the cost model."""

    spec: str = _f("The spec file.")
    plan: EstimatePlanDoc = _f("The plan of the spec.")
    metrics: MetricsDoc = _f("Its metrics.")
    assumed: list[str] = _f("What the model assumed for this case (autopar_opt.cost.assumptions).",
                            default_factory=list)


def _where(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and not part.startswith(("function-", "float", "literal")):
            out += ("." if out else "") + part
    return out


def document_problems(doc: Any, model: type[BaseModel] = PlanDocument) -> list[str]:
    """Every problem of ``doc`` against ``model`` (empty when none), each naming the
    dotted key; missing keys first (in document order), then keys inside lists."""
    if not isinstance(doc, dict):
        return ["the document must be a JSON object"]
    try:
        model.model_validate(doc)
    except ValidationError as exc:
        problems: list[tuple[bool, str]] = []
        for err in exc.errors():
            where = _where(err["loc"])
            if err["type"] == "missing":
                text = f"missing key '{where}'"
            elif err["type"] == "value_error" and not where:
                text = str(err["ctx"]["error"]) if "ctx" in err else err["msg"]
            elif err["type"] == "value_error" and "ctx" in err:   # a validator's own words
                text = f"'{where}' = {err.get('input')!r}: {err['ctx']['error']}"
            else:
                text = f"'{where}' {err['msg'].lower()}, got {err.get('input')!r}"
            if text not in (t for _, t in problems):
                problems.append(("[" in where, text))
        return [t for in_list, t in problems if not in_list] + [t for in_list, t in problems if in_list]
    return []


def json_schemas() -> dict[str, dict[str, Any]]:
    """``{"plan.json": ..., "estimate": ...}``: the JSON Schemas of both documents."""
    return {"plan.json": PlanDocument.model_json_schema(),
            "estimate": EstimateDocument.model_json_schema()}
