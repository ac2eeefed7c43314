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
``autopar_opt.core.result.json_float``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from autopar_opt.core import limits
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


#: A parallel degree (every command reading a plan multiplies them into device counts).
Degree = Annotated[int, Field(ge=1, le=limits.MAX_DEGREE, strict=True)]


class StrategyDoc(_Doc):
    """One layer's strategy (``autopar_opt.ir.strategies.Strategy.to_dict``)."""

    dp: Degree = _f("Data-parallel degree.")
    tp: Degree = _f("Tensor-parallel degree.")
    cp: Degree = _f("Context-parallel degree.", default=1)
    sp: bool = _f("Sequence parallelism.", default=False, strict=True)
    zero: int = _f("ZeRO level (0-3).", default=0, ge=0, le=3, strict=True)
    recompute: Literal["none", "selective", "full", "op"] = _f(
        "Activation recomputation: none, selective (the attention core), full, or op "
        "(torchtitan's op-level selective checkpointing).", default="none")
    ep: Optional[Degree] = _f("Expert-parallel degree (only when > 1).", default=None)
    # QA round 12: written by Strategy.to_dict and read by report and export, but neither
    # documented by `autopar schema --plan` nor checked (etp 'x' was an internal error,
    # zero_group -5 exported as "replicas=-26")
    etp: Optional[Degree] = _f("Expert tensor-parallel degree of the routed experts (only when "
                               "it differs from tp).", default=None)
    group: Optional[int] = _f("Fleet group of the stage running it (only when not the first, "
                              "0).", default=None, ge=0, strict=True)
    zero_group: Optional[Degree] = _f(
        "Hybrid sharding: the ranks of one ZeRO shard group, a divisor of dp·cp, the states "
        "replicated dp·cp / zero_group times (only when sharded so).", default=None)

    @model_validator(mode="after")
    def _shard_group_divides(self) -> "StrategyDoc":
        if self.zero_group is not None and (self.dp * self.cp) % self.zero_group:
            raise ValueError(f"zero_group = {self.zero_group} does not divide dp·cp = "
                             f"{self.dp * self.cp}: a shard group is a divisor of the "
                             "data-parallel ranks")
        return self


class StageDoc(_Doc):
    """One pipeline stage: consecutive layers and their strategies."""

    layers: list[Annotated[str, Field(min_length=1)]] = _f("Layer names, in order.", min_length=1)
    strategies: list[StrategyDoc] = _f("One strategy per layer.", min_length=1)

    @model_validator(mode="after")
    def _one_strategy_per_layer(self) -> "StageDoc":
        if len(self.layers) != len(self.strategies):
            raise ValueError(f"{len(self.layers)} layers but {len(self.strategies)} strategies: "
                             "a stage gives one strategy per layer")
        return self


class RankedStageDoc(StageDoc):
    """A stage of ``plan.json``: also its ranks (congruent stages: stage ``i`` =
    ``[i*d, (i+1)*d)``; free stage sizes: consecutive groups of ``devices`` ranks)."""

    first_rank: int = _f("First rank of the stage's device group.", ge=0, strict=True)
    last_rank: int = _f("Last rank of the stage's device group.", ge=0, strict=True)
    devices: Optional[Degree] = _f("Devices of the stage (last_rank - first_rank + 1).", default=None)

    @model_validator(mode="after")
    def _ranks_agree(self) -> "RankedStageDoc":
        size = self.last_rank - self.first_rank + 1
        if size < 1 or (self.devices is not None and self.devices != size):
            raise ValueError(f"ranks {self.first_rank}..{self.last_rank} do not hold "
                             f"{self.devices if self.devices is not None else 'any'} devices")
        return self


class _PlanBase(_Doc):
    pp: Degree = _f("Pipeline stages.")
    microbatches: int = _f("Micro-batches per iteration.", ge=1, le=limits.MAX_MICROBATCHES,
                           strict=True)
    schedule: Literal["gpipe", "1f1b", "interleaved"] = _f(
        "Pipeline schedule: gpipe, 1f1b or interleaved.")
    vp_chunks: Degree = _f("Virtual pipeline chunks (interleaved only).", default=1)
    stage_devices: Optional[list[Degree]] = _f(
        "Devices of every stage with free stage sizes (absent: congruent, N/pp each).", default=None)
    recompute: Optional[str] = _f(
        "The plan's recomputation over its transformer layers in words: none, one mode on "
        "every layer, Megatron's block method (the first N layers of every stage) with its "
        "flags, or a per-layer mix (ir/recompute_pattern.py). Written, not read.", default=None)

    def _check_stages(self, stages: list) -> None:
        """Every field a command reads agrees with the stages it describes (issue 33:
        ``pp: 64`` beside one stage was exported as if it were not there)."""
        if not stages:     # reported by _some_stage, on the key
            return
        if self.pp != len(stages):
            raise ValueError(f"pp = {self.pp} but the plan lists {len(stages)} stage(s): pp is "
                             "the number of stages")
        if self.stage_devices is not None and len(self.stage_devices) != self.pp:
            raise ValueError(f"stage_devices lists {len(self.stage_devices)} device counts for "
                             f"{self.pp} stage(s): one per stage")
        if self.vp_chunks > 1 and self.schedule != "interleaved":
            raise ValueError(f"vp_chunks = {self.vp_chunks} with the {self.schedule} schedule: "
                             "virtual chunks exist only in the interleaved schedule")


def _at_least_one(stages: list) -> list:
    """A plan places every layer, so it has at least one stage."""
    if not stages:
        raise ValueError("a plan needs at least one stage: give the plan.json written by "
                         "`autopar solve --out DIR` (or 'plan': null when there is none)")
    return stages


class EstimatePlanDoc(_PlanBase):
    """A plan as ``autopar estimate --json`` prints it."""

    stages: list[StageDoc] = _f("Stages in pipeline order.")

    @field_validator("stages")
    @classmethod
    def _some_stage(cls, stages: list) -> list:
        return _at_least_one(stages)

    @model_validator(mode="after")
    def _consistent(self) -> "EstimatePlanDoc":
        self._check_stages(self.stages)
        return self


class PlanDoc(_PlanBase):
    """The best plan of ``plan.json``."""

    stages: list[RankedStageDoc] = _f("Stages in pipeline order, with their ranks.")

    @field_validator("stages")
    @classmethod
    def _some_stage(cls, stages: list) -> list:
        return _at_least_one(stages)

    @model_validator(mode="after")
    def _consistent(self) -> "PlanDoc":
        self._check_stages(self.stages)
        return self


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
    communication: dict[str, dict[str, float]] = _f(
        "Per kind of communication, the stage's total_s, hidden_s, exposed_s (the field of the "
        "kind above) and interference_s, as metrics.communication defines them, per micro-batch "
        "(dp per iteration), s (empty in documents written before it).", default_factory=dict)


#: plan.json's words for ``metrics.communication`` (autopar_opt.cost.comm_split).
COMMUNICATION_TEXT = (
    "Each kind of communication (tp, cp, zero, ep, offload, reshard, dp) per iteration along "
    "the critical path metrics.breakdown reads, s: the bottleneck stage's micro-batches for every "
    "kind but dp, the stage of the largest once-per-iteration time for dp. total_s: the whole "
    "transfer time of the kind's collectives (the host copies for offload; cp with its "
    "partial-output merge, never hidden); hidden_s: the part of it overlapped with compute; "
    "exposed_s: the breakdown's term (tp_comm_s, cp_comm_s, zero_comm_s, ep_comm_s, "
    "offload_comm_s, reshard_s, dp_comm_s); interference_s: the slowdown of the compute that "
    "hidden traffic overlaps, which exposed_s carries (comm_interference x the NCCL time hidden "
    "on the compute's SMs; Transformer Engine's SM margin under TP user buffers), so that "
    "exposed_s - interference_s = total_s - hidden_s. zero: per micro-batch ZeRO-3/FSDP gathers "
    "and reduce-scatters and ZeRO-2 reductions; dp: once per iteration, the gradient reduction "
    "and parameter all-gather, ZeRO-3's once-per-iteration gathers and reduce-scatters, the "
    "tied-embedding all-reduce. MoE all-to-alls and resharding are never hidden. Pipeline sends "
    "between stages are not split out: they are inside pipeline_bubble_s. Empty in documents "
    "written before it.")


class IntervalDoc(_Doc):
    """How far the cost model has been from comparable published runs, out of sample
    (``autopar_opt.cost.interval``): an interval around the predicted iteration time.
    It says how far the model can be trusted; the certificate stays exact under the model."""

    value: float = _f("The predicted iteration time, s.")
    low: float = _f("Lower end of the interval, s.")
    high: float = _f("Upper end of the interval, s.")
    level: float = _f("Nominal coverage (0.8: an 80% interval).")
    comparable_runs: int = _f("Published runs whose out-of-sample errors make the interval.")
    sources: int = _f("Source families (publications) of those runs.", default=0)
    exact_matches: int = _f("Runs sharing every regime label of the plan.")
    labels_kept: list[str] = _f("Regime labels the comparable runs share with the plan.",
                                default_factory=list)
    regime: dict[str, str] = _f("The plan's regime (framework, long_context, sharded_at_scale, "
                                "fp8, moe, generation).", default_factory=dict)
    wide: bool = _f("Few published runs share every label: the interval is wide for that reason.",
                    default=False)
    text: str = _f("The interval as one sentence.", default="")


class MetricsDoc(_Doc):
    """What a plan costs under the model (``autopar_opt.cost.evaluate.PlanMetrics``)."""

    iteration_time_s: float = _f("Predicted iteration time, s.")
    samples_per_s: float = _f("Throughput, samples/s.")
    tokens_per_s: float = _f("Throughput, tokens/s: samples_per_s times training.seq_len; a "
                             "model without a sequence length (a CNN) counts a sample as one "
                             "token, so it equals samples_per_s there.")
    mfu: float = _f("Model FLOPs utilisation (0-1): model FLOPs (forward + backward, no "
                    "recomputation) over the iteration time and the datasheet dense peak of the "
                    "training dtype summed over every GPU of the cluster, idle ones included "
                    "(on a fleet each group's GPUs at their own device's peak; a power cap slows "
                    "the clock, not this denominator); "
                    "attention cores counted whole (the score matrix, as PaLM and Megatron-LM "
                    "count MFU).")
    mfu_causal: float = _f("MFU counting each causal attention core at the half its kernel "
                           "computes (0-1; = mfu without causal attention; 0 in documents "
                           "written before it).", default=0.0)
    hfu: float = _f("Hardware FLOPs utilisation, recomputation included (0-1).", default=0.0)
    bubble_s: float = _f("Pipeline bubble per iteration, s.", default=0.0)
    feasible: bool = _f("Every stage fits in memory.", default=True)
    memory_capacity_gib: float = _f("Usable memory per device, GiB.")
    peak_memory_gib: list[float] = _f("Peak memory per device of each stage, GiB.",
                                      default_factory=list)
    breakdown: dict[str, float] = _f("Iteration time along its critical path by cause, s, summing "
                                     "to iteration_time_s: compute_s; the exposed communication per "
                                     "kind (tp_comm_s, cp_comm_s, zero_comm_s, ep_comm_s, "
                                     "offload_comm_s, reshard_s, dp_comm_s: the time overlap leaves "
                                     "on the critical path, with the slowdown hidden NCCL traffic "
                                     "causes; each kind's total and hidden time and that slowdown: "
                                     "metrics.communication); optimizer_s, fixed_s, "
                                     "pipeline_bubble_s (fill/drain and the stage sends).",
                                     default_factory=dict)
    communication: dict[str, dict[str, float]] = _f(COMMUNICATION_TEXT, default_factory=dict)
    stages: list[StageMetricsDoc] = _f("Per-stage metrics.")
    interval: Optional[IntervalDoc] = _f("80% interval of iteration_time_s from comparable "
                                         "published runs (null in documents written before it).",
                                         default=None)


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
    methods: list[dict] = _f("Which method proved what (issue 35): per method, the "
                             "configurations it answered, its best plan, the least bound it "
                             "proved, its time (core/portfolio.MethodRecord).", default_factory=list)
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
    device_memory_gib: Optional[float] = _f(
        "The memory cluster.device_memory_gib set on the catalog device (GiB; null: the "
        "catalog part's own).", default=None)
    peak_tflops: Optional[float] = _f("Dense 16-bit peak per device, TFLOP/s.", default=None)
    intra_node: Optional[LinkDoc] = _f("Link inside a node.", default=None)
    inter_node: Optional[LinkDoc] = _f("Link between nodes.", default=None)
    intra_node_topology: Optional[str] = _f(
        "How the node's GPUs share their NVLinks: switch (NVSwitch) or mesh (point to point, "
        "no NVSwitch, as 4-GPU HGX boards).", default=None)
    nvlink_board_gpus: Optional[int] = _f("GPUs of that point-to-point board (null: switched).",
                                          default=None)


class SpecSummaryDoc(_Doc):
    path: Optional[str] = _f("The spec file, as the command was given it.", default=None)
    resolved_path: Optional[str] = _f("The spec file's absolute path (export and report read "
                                      "it from any folder).", default=None)
    scenario: Optional[str] = _f("The scenario of a capacity sweep this plan solves (the path "
                                 "is the sweep's; export rebuilds the scenario's spec from it), "
                                 "or null for a spec of its own.", default=None)
    model: dict[str, Any] = _f("Model summary (name, num_layers, params, params_active, is_chain, "
                               "source, attention_windows, architecture: one line of the built "
                               "architecture, or null without one; measured: which layers the "
                               "spec's measured times price, or null; assumed: what the "
                               "model's import took by default or left out, one sentence each).")
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
    calibration: dict[str, Any] = _f(
        "Where the parameters come from: 'parameters' (shipped: autopar_opt/cost/calibrated.yaml, "
        "or given: not the shipped calibration), 'fitted_on' (the shipped fit's date; null for "
        "given parameters) and 'intervals_generated_on' (the date of the residuals the 80% "
        "intervals come from, autopar_opt/cost/intervals.yaml); {} in documents written before "
        "it.", default_factory=dict)


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


class ComparisonDoc(_Doc):
    optimum_s: float = _f("The optimum's iteration time, s.")
    other_s: float = _f("The spec's plan's iteration time, s.")
    relative: float = _f("other_s / optimum_s - 1.")
    explained: bool = _f("Whether the difference exceeds 5% (then text names the terms that differ).")
    terms: dict[str, dict[str, float]] = _f(
        "Per breakdown term (compute, recompute_s = compute x (1 - MFU/HFU), exposed TP/CP/MoE/"
        "ZeRO-3/gradient communication, optimizer, bubble, ...): optimum_s and other_s.")
    optimum_least_headroom: float = _f("The optimum's least free-memory fraction over its stages.")
    other_least_headroom: float = _f("The spec's plan's least free-memory fraction.")
    text: str = _f("The comparison in one sentence, generated from the two breakdowns.")


class BaselineDoc(_Doc):
    name: str = _f("Baseline name.")
    plan: Optional[EstimatePlanDoc] = _f("The baseline plan (null: none fits).", default=None)
    metrics: Optional[MetricsDoc] = _f("Its metrics (null: no such plan fits).")
    note: str = _f("How it was built.")
    comparison: Optional[ComparisonDoc] = _f(
        "The spec's own plan (user plan) against the optimum, term by term "
        "(autopar_opt.search.compare); absent for the other baselines.", default=None)


class InfeasibilityDoc(_Doc):
    reason: str = _f("Why there is no plan.")
    details: list[str] = _f("Why the configurations failed (at most 10).", default_factory=list)
    least_memory_gib: JsonFloat = _f("Least memory any plan needs per device, GiB (\"inf\": no plan at any memory, or none priced).")
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
    runnability: Optional[dict[str, Any]] = _f(
        "Under a target (the framework that will run the plan): the runnable optimum against "
        "the certified bound of the free per-layer space (free_primal, free_lower_bound, "
        "free_status) and the price of runnability as an interval (price_low, price_high); "
        "unsearched: what the framework runs that the target's space leaves out, empty when "
        "nothing (nothing is at present; older documents named Megatron's partial "
        "recomputation in a 1F1B pipeline of more than one stage).",
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
        if self.plan is not None and self.metrics is not None and \
                len(self.metrics.stages) != self.plan.pp:
            raise ValueError(f"'metrics.stages' has {len(self.metrics.stages)} entries for a plan "
                             f"of {self.plan.pp} stage(s): one per stage")
        if self.status is SearchStatus.infeasible and self.plan is None and self.infeasibility is None:
            raise ValueError("missing key 'infeasibility' (an infeasible search explains itself)")
        return self


class EstimateDocument(_Doc):
    """``autopar estimate --json``: a hand-written plan priced by the cost model."""

    spec: str = _f("The spec file.")
    plan: EstimatePlanDoc = _f("The plan of the spec.")
    recompute: Optional[str] = _f("The plan's recomputation in words, as plan.json's "
                                  "plan.recompute (ir/recompute_pattern.py).", default=None)
    metrics: MetricsDoc = _f("Its metrics.")
    assumed: list[str] = _f("What the model assumed for this case (autopar_opt.cost.assumptions).",
                            default_factory=list)
    notices: list[str] = _f("What the spec's reading decided and said (e.g. a target that cannot "
                            "run the model: the free per-layer space); absent when none.",
                            default_factory=list)
    plan_file: Optional[str] = _f("The plan.json (or estimate --json) whose plan was priced "
                                  "(estimate --plan FILE); absent: the spec's own plan.",
                                  default=None)
    repriced: Optional[dict[str, Any]] = _f(
        "With --plan: recorded_iteration_time_s (the file's own figure), differences (the "
        "cluster and training settings the spec changes) and notes (what was said).",
        default=None)

    @model_validator(mode="after")
    def _consistent(self) -> "EstimateDocument":
        if len(self.metrics.stages) != self.plan.pp:
            raise ValueError(f"'metrics.stages' has {len(self.metrics.stages)} entries for a plan "
                             f"of {self.plan.pp} stage(s): one per stage")
        return self


def plan_problems(plan: Any, ranked: bool = True) -> list[str]:
    """Every problem of a document's ``plan`` entry (keys named ``plan.…``): the fields
    ``autopar export`` reads, checked against each other (``ranked``: a plan.json plan,
    with ranks; else the plan of ``autopar estimate --json``)."""
    problems = document_problems(plan, PlanDoc if ranked else EstimatePlanDoc)
    return [p.replace("'", "'plan.", 1) if p.startswith("'") else
            p.replace("missing key '", "missing key 'plan.", 1) if p.startswith("missing key")
            else f"'plan': {p}" for p in problems]


def _where(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and not part.startswith(("function-", "float", "literal")):
            out += ("." if out else "") + part
    return out


def _shown(value: Any, limit: int = 60) -> str:
    """A value short enough for a message ("" for a long mapping or list: the key names it)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return "" if isinstance(value, (dict, list)) else text[:limit - 3] + "..."


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
                shown = _shown(err.get("input"))
                text = (f"'{where}' = {shown}: " if shown else f"'{where}': ") + str(err["ctx"]["error"])
            else:
                text = f"'{where}' {err['msg'].lower()}, got {_shown(err.get('input')) or '...'}"
            if text not in (t for _, t in problems):
                problems.append(("[" in where, text))
        return [t for in_list, t in problems if not in_list] + [t for in_list, t in problems if in_list]
    return []


def json_schemas() -> dict[str, dict[str, Any]]:
    """``{"plan.json": ..., "estimate": ...}``: the JSON Schemas of both documents."""
    return {"plan.json": PlanDocument.model_json_schema(),
            "estimate": EstimateDocument.model_json_schema()}


# --------------------------------------------------------------------------- fleets
# The plan.json of a fleet of several groups (``cluster.groups``: autopar_opt.search.
# fleet_document) has its own layout: groups and links, a pipeline over groups or data-
# parallel replica classes, a placement per stage, each group alone. Published here so
# that ``autopar schema --plan`` covers every plan.json a solve writes (QA round 9: a fleet
# plan.json failed that schema with some fifty errors).

_Number = Union[float, Literal["inf", "-inf"]]


class FleetGroupDoc(_Doc):
    """One group of the fleet: a plain cluster of one device type."""

    name: str = _f("The group's name (cluster.groups[].name).", min_length=1)
    device: str = _f("Catalog device name.")
    nodes: int = _f("Nodes of the group.", ge=1)
    gpus_per_node: int = _f("GPUs per node.", ge=1)
    num_devices: int = _f("GPUs of the group.", ge=1)


class FleetLinkDoc(_Doc):
    """The network between two groups."""

    between: list[str] = _f("The two groups it joins.", min_length=2, max_length=2)
    bandwidth_gb_per_s: float = _f("Per-GPU bandwidth between the groups, GB/s.", gt=0)


class FleetDoc(_Doc):
    """The fleet as solved."""

    name: str = _f("The fleet's name.")
    num_devices: int = _f("GPUs of every group.", ge=1)
    groups: list[FleetGroupDoc] = _f("The groups, in the spec's order.", min_length=1)
    links: list[FleetLinkDoc] = _f("Links between groups.", default_factory=list)


class FleetStageDoc(_Doc):
    """One pipeline stage (or replica class's stage) placed on a group."""

    index: int = _f("Stage index within its pipeline.", ge=0)
    group: str = _f("The group that runs it.")
    devices: int = _f("Its GPUs.", ge=1)
    first_rank: int = _f("First rank within the group.", ge=0)
    last_rank: int = _f("Last rank within the group.", ge=0)
    layers: int = _f("Layers it holds.", ge=0)
    first_layer: str = _f("Its first layer.")
    last_layer: str = _f("Its last layer.")
    strategies: list[str] = _f("Its layers' strategies, compactly.")
    time_s: Optional[float] = _f("Its time per micro-batch step, s.", default=None)
    peak_memory_gib: Optional[float] = _f("Its busiest device's peak memory, GiB.", default=None)
    capacity_gib: Optional[float] = _f("Its device's memory, GiB.", default=None)
    class_: Optional[int] = Field(None, alias="class",
                                  description="Replica class (shape replicas), else null.")
    batch: Optional[int] = _f("Samples of its replica class per iteration (replicas).",
                              default=None, ge=1)


class FleetAloneDoc(_Doc):
    """One group on its own: its best plan and bound (what the fleet is compared with)."""

    group: str = _f("The group.")
    devices: int = _f("Its GPUs.", ge=1)
    primal: Optional[_Number] = _f("Its best plan's time, s (null: none).", default=None)
    lower_bound: Optional[_Number] = _f("Its proven bound, s.", default=None)


class FleetCertificateDoc(_Doc):
    """The fleet search's certificate (bounds over every configuration of the fleet)."""

    primal: Optional[_Number] = _f("The plan's time, s (null: no plan).", default=None)
    lower_bound: Optional[_Number] = _f("Proven lower bound over the space, s.", default=None)
    gap: Optional[_Number] = _f("(primal - lower bound) / primal.", default=None)
    exact: bool = _f("Whether the bound is proven.")
    configurations: list[dict[str, Any]] = _f("Each configuration's status and bounds.")


class FleetPlanDocument(_Doc):
    """``plan.json`` of a fleet of several groups (``cluster.groups``), written by
    ``autopar solve --out DIR`` (schema_version 1)."""

    schema_version: int = _f("Version of this document's layout.")
    tool: dict[str, str] = _f("The writer: name and version.", default_factory=dict)
    created_utc: Optional[str] = _f("When the document was written (ISO 8601, UTC).", default=None)
    spec: dict[str, Any] = _f("What was solved: the spec's path, model and training.")
    fleet: FleetDoc = _f("The groups and the links between them.")
    search_space: dict[str, Any] = _f("The search space (an optimality claim holds within it).")
    cost_model: dict[str, Any] = _f("The cost model's parameters and assumptions.")
    status: Literal["optimal", "feasible", "infeasible", "no_plan", "interrupted",
                    "not_solved"] = _f("The search's status (exit codes as a plain solve's).")
    shape: Optional[Literal["pipeline", "replicas"]] = _f(
        "One pipeline over groups, or data-parallel replica classes (null: no plan).")
    best_configuration: Optional[str] = _f("The configuration of the plan.", default=None)
    plan: Optional[dict[str, Any]] = _f("The plan: stages over groups, or replica classes.")
    metrics: Optional[dict[str, Any]] = _f("The plan's metrics (null: no plan).")
    placement: list[FleetStageDoc] = _f("Each stage on its group.", default_factory=list)
    homogeneous: list[FleetAloneDoc] = _f("Each group alone.", default_factory=list)
    certificate: FleetCertificateDoc = _f("The optimality certificate.")
    solver: dict[str, Any] = _f("The backend and its limits.")
    notices: list[str] = _f("What the user should know about this result.", default_factory=list)


def plan_json_schema() -> dict[str, Any]:
    """The JSON Schema of a model's ``plan.json``: a plain cluster's (:class:`PlanDocument`)
    or a fleet's (:class:`FleetPlanDocument`, with ``fleet``); an operator-sharding or peer
    problem's plan.json has its own layout (said in the schema's description)."""
    from pydantic import TypeAdapter

    schema = TypeAdapter(Union[PlanDocument, FleetPlanDocument]).json_schema()
    schema["title"] = "plan.json (autopar solve --out DIR)"
    schema["description"] = ("A model's plan.json on a plain cluster (PlanDocument) or on a "
                             "fleet of groups (FleetPlanDocument: it has 'fleet'). Not covered: "
                             "the plan.json of an operator-sharding solve or of a peer problem "
                             "(spec.problem), which have their own layouts. Infinite numbers are "
                             "the strings \"inf\" / \"-inf\".")
    return schema


class FleetEstimateDocument(_Doc):
    """``autopar estimate FLEET_SPEC --plan PLAN_JSON --json`` on a fleet solve's plan.json
    (autopar_opt/cli/reprice_fleet.py): the plan re-priced under the fleet spec, in the
    keys of the fleet plan.json (``metrics``, ``placement``)."""

    spec: str = _f("The fleet spec the plan was priced under.")
    fleet: FleetDoc = _f("The groups and links it was priced on (this document is itself a "
                         "plan file `estimate --plan` reads).")
    shape: Literal["pipeline", "replicas"] = _f("One pipeline over groups, or replica classes.")
    plan: dict[str, Any] = _f("The plan priced, as a fleet plan.json's: stages with their "
                              "groups by name, or replica classes (groups, batch, plan); a "
                              "strategy's group indexes fleet.groups.")
    metrics: dict[str, Any] = _f("Its metrics under the spec, the keys of the fleet plan.json's "
                                 "metrics (iteration time, throughput, MFU, interval, ...).")
    placement: list[FleetStageDoc] = _f("Each stage on its group: time, memory, capacity.")
    assumed: list[str] = _f("What the model assumed for this case, per group.",
                            default_factory=list)
    notices: list[str] = _f("What the spec's reading decided and said; absent when none.",
                            default_factory=list)
    plan_file: str = _f("The fleet plan.json whose plan was priced.")
    repriced: dict[str, Any] = _f(
        "recorded_iteration_time_s (the file's own figure), differences (the group and "
        "training settings the spec changes) and notes (what was said).")


def estimate_json_schema() -> dict[str, Any]:
    """The JSON Schema of ``autopar estimate --json``: a plan on one cluster
    (:class:`EstimateDocument`) or a fleet solve's plan re-priced under its fleet spec
    (:class:`FleetEstimateDocument`, with ``shape`` and ``placement``)."""
    from pydantic import TypeAdapter

    schema = TypeAdapter(Union[EstimateDocument, FleetEstimateDocument]).json_schema()
    schema["title"] = "autopar estimate --json"
    schema["description"] = ("A plan on one cluster priced by the cost model (EstimateDocument), "
                             "or a fleet solve's plan.json re-priced under its fleet spec "
                             "(FleetEstimateDocument: it has 'shape' and 'placement').")
    return schema
