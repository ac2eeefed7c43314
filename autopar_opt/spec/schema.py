"""The spec file schema (pydantic v2): one model per section, every field documented.

The field descriptions are the user documentation: they appear in
``autopar schema`` (JSON Schema) and their ``examples`` feed the "fix" text of
error messages. Units are in the field names (``hbm_gib``, ``latency_us``).
Sections whose value can take two shapes (``model``, ``cluster``,
``cluster.device``, ``plan``) use a callable discriminator, so a mistake is
reported against the shape the user meant rather than against every shape.
Tags start with ``#`` so that error paths can drop them.
"""

from __future__ import annotations

import dataclasses
import types
import typing

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Discriminator, Field, StrictBool, Tag, field_validator
from pydantic_core import PydanticCustomError

from autopar_opt.cost.params import CostParams
from autopar_opt.ir.graph import Layer
from autopar_opt.ir.runtime_doc import runtime_options_help
from autopar_opt.spec.sections import Section, SolverName, SolverSection, documented_field  # noqa: F401
from autopar_opt.spec.derive import section_from_dataclass
from autopar_opt.core import limits
from autopar_opt.ir.training import DTYPE_BYTES, OPTIMIZER_BYTES, Recompute, Schedule

Dtype = Literal[tuple(DTYPE_BYTES)]  # type: ignore[valid-type]
Optimizer = Literal[tuple(OPTIMIZER_BYTES)]  # type: ignore[valid-type]
#: ``nvlink_board_gpus`` of a cluster and of a fleet's group.
BOARD_DOC = ("GPUs of the point-to-point NVLink board the node's GPUs sit on, when the job uses "
             "part of one (2 GPUs of a 4-GPU HGX board: 4): a pair then has 1/(board - 1) of a "
             "GPU's links. Implies intra_node_topology: mesh; at least gpus_per_node.")
#: ``intra_node_topology`` of a cluster and of a fleet's group (one text for both).
TOPOLOGY_DOC = ("How a node's GPUs share their NVLinks: 'switch' (NVSwitch, as 8-GPU HGX/DGX "
                "boards: any group of a node's GPUs gets each GPU's full NVLink bandwidth) or "
                "'mesh' (point to point, no NVSwitch, as 4-GPU HGX A100/H100/H200 boards: each "
                "pair has 1/(gpus_per_node - 1) of a GPU's links, so tensor parallelism over 2 of "
                "4 GPUs gets a third). Default: mesh for 3-4 GPUs per node of an SXM "
                "A100/A800/H100/H800/H200, switch otherwise (said in the plan's assumptions).")
PosInt = Annotated[int, Field(gt=0)]
#: A parallel degree, micro-batch or chunk count: positive, at most limits.MAX_DEGREE.
Degree = Annotated[int, Field(gt=0, le=limits.MAX_DEGREE)]
ZeroLevel = Annotated[int, Field(ge=0, le=3)]
Fraction = Annotated[float, Field(gt=0, le=1)]
def _pick(key: str, yes: str, no: str):
    """Callable discriminator: tag ``yes`` when a mapping holds ``key``."""
    def choose(value: Any) -> str:
        return yes if isinstance(value, dict) and key in value else no
    return Discriminator(choose)


# ----------------------------------------------------------------------- model
#: Examples of layer fields (they feed the "fix" text of error messages).
_LAYER_EXAMPLES: dict[str, Any] = {
    "name": "block0", "kind": "transformer_block", "flops_fwd": 1.2e12, "flops_bwd": 2.4e12,
    "params": 12_600_000, "act_bytes": 3.0e8, "act_replicated_bytes": 4.0e7,
    "act_attn_bytes": 1.0e8, "flops_recompute_selective": 1.0e10, "input_bytes": 8.0e6,
    "output_bytes": 8.0e6, "tp_comm_bytes": 1.6e7, "cp_comm_bytes": 8.0e6, "max_tp": 32,
    "supports_sp": True, "supports_cp": True, "num_experts": 8, "top_k": 2,
    "expert_load": 1.1}


def _layer_bounds(name: str, hint: Any) -> dict[str, Any]:
    """Bounds of a layer field: counts and sizes are non-negative (optional ones
    too: ``gemm_kernels``, ``gemm_kernels_unfused``); ``max_tp`` and
    ``expert_load`` are at least 1, and ``max_tp`` (a parallel degree) at most
    :data:`autopar_opt.core.limits.MAX_DEGREE`, the resource limit of every degree
    (issue 15: checked before any work, named in the error)."""
    if name in ("max_tp",):
        return {"ge": 1, "le": limits.MAX_DEGREE}
    if name == "expert_load":
        return {"ge": 1.0}
    return {"ge": 0} if _optional_inner(hint) in (int, float) else {}


def _optional_inner(hint: Any) -> Any:
    """``X`` of ``X | None`` (``Optional[X]``), else ``hint``: an optional count
    such as ``gemm_kernels: int | None`` gets the bounds of ``int``."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(inner) == 1:
            return inner[0]
    return hint


#: One layer of an explicit model, derived from :class:`autopar_opt.ir.graph.Layer`
#: (every field, documented by that class's docstring; ``measured`` costs are
#: given by the model section's ``measured`` list instead).
LayerSpec = section_from_dataclass(
    Layer, Section, name="LayerSpec",
    doc="One layer of an explicit model; per-sample FLOPs and bytes (autopar_opt.ir.graph.Layer).",
    constraints=_layer_bounds, examples=_LAYER_EXAMPLES, required=("name",),
    exclude=("measured",))


class MeasuredSpec(Section):
    """A measured per-layer cost at one TP degree; replaces the analytical compute model."""

    layer: str = documented_field("Name of the layer this measurement is for.", "block0")
    tp: Degree = documented_field("Tensor-parallel degree of the measurement.", 1, default=1)
    fwd_ms_per_sample: float = documented_field("Forward time per sample on each device, ms.", 0.8, ge=0)
    bwd_ms_per_sample: float = documented_field("Backward time per sample on each device, ms.", 1.6, ge=0)
    act_bytes_per_sample: Optional[float] = documented_field("Measured activation bytes per sample (optional).",
                                               3.0e8, default=None, ge=0)


class ZooModelSpec(Section):
    """A model from the zoo (``autopar zoo list``), optionally with changed dimensions."""

    zoo: str = documented_field("Zoo model name (see `autopar zoo list`).", "debug")
    overrides: dict[str, Any] = documented_field("Dimension overrides passed to the zoo builder.",
                                   {"num_layers": 8}, default_factory=dict)
    measured: list[MeasuredSpec] = documented_field("Measured per-layer costs (profile table).", [],
                                      default_factory=list)


class ExplicitModelSpec(Section):
    """A model given as an explicit layer list (topological order) and edges."""

    name: str = documented_field("Model name.", "my-model")
    layers: list[LayerSpec] = documented_field("Layers in topological order.", [{"name": "l0", "flops_fwd": 1e9}],
                                 min_length=1, max_length=limits.MAX_LAYERS)
    edges: Optional[list[tuple[str, str]]] = documented_field(
        "Edges [from, to] by layer name; default: a chain in layer order.", [["l0", "l1"]],
        default=None)
    seq_len: Optional[PosInt] = documented_field("Sequence length the per-sample numbers assume.", 2048,
                                   default=None, le=limits.MAX_SEQ_LEN)
    measured: list[MeasuredSpec] = documented_field("Measured per-layer costs (profile table).", [],
                                      default_factory=list)


class HfModelSpec(Section):
    """A model built from a Hugging Face ``config.json`` (`autopar model` shows what was built)."""

    hf_config: str = documented_field("Path to a config.json, or a directory holding one (relative to this "
                        "file), or the name of a bundled config where no such file exists "
                        "(autopar zoo list).", "configs/mixtral-8x7b/config.json")
    name: Optional[str] = documented_field("Model name; default: the config's _name_or_path, else the "
                             "file's name (the directory's for a config.json), else model_type.",
                             "mixtral-8x7b", default=None)
    flash_attention: bool = documented_field("Attention kernels keep no score matrix (FlashAttention). "
                               "The runtime's kernel on the GPU decides (an unfused runtime, "
                               "or a GPU without fused kernels, keeps the scores); a stated "
                               "value it contradicts is refused.", True, default=True)
    capacity_factor: Optional[Annotated[float, Field(ge=1)]] = documented_field(
        "MoE: expert capacity as a multiple of the average load, padded (Megatron "
        "--moe-expert-capacity-factor); default: dropless.", 1.25, default=None)
    load_imbalance: float = documented_field("MoE: busiest/average expert-parallel rank load of a dropless "
                               "router (1.0 = balanced).", 1.0, default=1.0, ge=1)
    measured: list[MeasuredSpec] = documented_field("Measured per-layer costs (profile table).", [],
                                      default_factory=list)


#: The keys that each name a model's source; a model section takes one.
MODEL_SOURCES = ("zoo", "hf_config", "layers")


def _model_tag(value: Any) -> str:
    if isinstance(value, dict) and "zoo" in value:
        return "#zoo"
    if isinstance(value, dict) and "hf_config" in value:
        return "#hf"
    return "#explicit"


ModelSection = Annotated[Union[Annotated[ZooModelSpec, Tag("#zoo")],
                               Annotated[HfModelSpec, Tag("#hf")],
                               Annotated[ExplicitModelSpec, Tag("#explicit")]],
                         Discriminator(_model_tag)]


# --------------------------------------------------------------------- cluster
class LinkSpec(Section):
    """One link tier of the α–β model (per-GPU unidirectional bandwidth)."""

    name: Optional[str] = documented_field("Label of the tier.", "nvlink3", default=None)
    bandwidth_gb_per_s: float = documented_field("Per-GPU bandwidth a ring collective sees, GB/s.", 300.0, gt=0)
    latency_us: float = documented_field("Latency α per ring step, µs.", 5.0, ge=0)


class DeviceSpec(Section):
    """A device not in the catalog."""

    name: str = documented_field("Device name.", "my-gpu")
    peak_tflops: dict[Dtype, Annotated[float, Field(gt=0)]] = documented_field(  # type: ignore[valid-type]
        "Dense peak TFLOP/s per dtype.", {"bf16": 312.0}, min_length=1)
    hbm_gib: float = documented_field("Device memory, GiB.", 80.0, gt=0)
    hbm_gb_per_s: float = documented_field("Memory bandwidth, GB/s.", 2039.0, gt=0)


DeviceField = Annotated[Union[Annotated[str, Tag("#catalog")], Annotated[DeviceSpec, Tag("#custom")]],
                        Discriminator(lambda v: "#custom" if isinstance(v, dict) else "#catalog")]


class ZooClusterSpec(Section):
    """A named cluster from the zoo (``autopar zoo list``)."""

    zoo: str = documented_field("Zoo cluster name (see `autopar zoo list`).", "dgx-a100-8")


class ExplicitClusterSpec(Section):
    """``nodes`` identical nodes of ``gpus_per_node`` devices."""

    name: str = documented_field("Cluster name.", "my-cluster", default="custom")
    nodes: PosInt = documented_field("Number of nodes.", 2, default=1, le=limits.MAX_NODES)
    gpus_per_node: PosInt = documented_field("GPUs per node.", 8, le=limits.MAX_GPUS_PER_NODE)
    device: DeviceField = documented_field("Catalog device name (A100-80GB, ...) or a custom device mapping.",
                             "A100-80GB")
    intra_node: Optional[LinkSpec] = documented_field("Intra-node link; default from the device.",
                                        {"bandwidth_gb_per_s": 300.0, "latency_us": 5.0}, default=None)
    inter_node: Optional[LinkSpec] = documented_field(
        "Inter-node link: one NIC's line rate per direction; default from the device (one "
        "400 Gb/s NIC per Hopper or Blackwell GPU).",
        {"bandwidth_gb_per_s": 25.0, "latency_us": 10.0}, default=None)
    nics_per_node: Optional[PosInt] = documented_field(
        "Network interfaces per node (each at inter_node's rate); default one per GPU. A group "
        "of ranks gets the NICs of its own members only.", 4, default=None,
        le=limits.MAX_GPUS_PER_NODE * 4)
    nodes_per_leaf: Optional[PosInt] = documented_field(
        "Nodes under one leaf switch (a rail-optimised scalable unit, e.g. 32 DGX H100, or a "
        "fat tree's leaf); default: one non-blocking fabric.", 32, default=None,
        le=limits.MAX_NODES)
    oversubscription: float = documented_field(
        "Blocking factor of the fabric above the leaves (2.0 = 2:1): a collective spanning more "
        "than nodes_per_leaf nodes gets this fraction less of its NICs' rate.", 2.0, default=1.0,
        ge=1.0, le=64.0)
    device_memory_gib: Optional[float] = documented_field(
        "Memory per GPU when it differs from the catalog part (e.g. a 94 or 96 GB Hopper): the "
        "device keeps its compute and takes this capacity.", 96.0, default=None, gt=0, le=4096)
    power_limit_w: Optional[float] = documented_field(
        "Board power cap per GPU, W (nvidia-smi -pl): below the part's rated power the sustained "
        "tensor clock falls as (cap / rated)^(1/3). A catalog part's cap must lie in the range its "
        "board accepts (autopar_opt/ir/power_limits.py, with sources).", 500.0, default=None, gt=0, le=10000)
    intra_node_topology: Optional[Literal["switch", "mesh"]] = documented_field(
        TOPOLOGY_DOC, "mesh", default=None)
    nvlink_board_gpus: Optional[PosInt] = documented_field(BOARD_DOC, 4, default=None, le=16)


class GroupSpec(Section):
    """One group of a mixed fleet: ``nodes`` identical nodes of one device type."""

    name: str = documented_field("Group name (unique; links and reports use it).", "h100")
    nodes: PosInt = documented_field("Number of nodes.", 64, le=limits.MAX_NODES)
    gpus_per_node: PosInt = documented_field("GPUs per node.", 8, le=limits.MAX_GPUS_PER_NODE)
    device: DeviceField = documented_field("Catalog device name (H100-SXM-80GB, ...) or a custom device mapping.",
                             "H100-SXM-80GB")
    intra_node: Optional[LinkSpec] = documented_field("Intra-node link; default from the device.",
                                        {"bandwidth_gb_per_s": 450.0, "latency_us": 5.0}, default=None)
    nics_per_node: Optional[PosInt] = documented_field(
        "Network cards per node; the inter-node tier gets nics_per_node x nic_gb_per_s / "
        "gpus_per_node per GPU. Default: one per GPU (the catalog's DGX design).", 8, default=None,
        le=limits.MAX_GPUS_PER_NODE * 4)     # the plain cluster's cap (QA round 9: none here)
    nic_gb_per_s: Optional[float] = documented_field(
        "Bandwidth of one network card, GB/s (400 Gb/s NDR = 50). Default: the catalog's "
        "per-GPU inter-node link of the device.", 50.0, default=None, gt=0)
    inter_node: Optional[LinkSpec] = documented_field(
        "Inter-node link: one NIC's line rate per direction, as a plain cluster's (beside "
        "nics_per_node; default one NIC per GPU), instead of nic_gb_per_s.",
        {"bandwidth_gb_per_s": 50.0, "latency_us": 10.0}, default=None)
    intra_node_topology: Optional[Literal["switch", "mesh"]] = documented_field(
        TOPOLOGY_DOC, "switch", default=None)
    nvlink_board_gpus: Optional[PosInt] = documented_field(BOARD_DOC, 4, default=None, le=16)
    # the plain cluster's fabric and device-variant keys, per group (QA round 9: a group
    # could not state a 94 GB Hopper, a power cap or a blocking fabric)
    nodes_per_leaf: Optional[PosInt] = documented_field(
        "Nodes of this group under one leaf switch; default: one non-blocking fabric.", 32,
        default=None, le=limits.MAX_NODES)
    oversubscription: float = documented_field(
        "Blocking factor of this group's fabric above its leaves (2.0 = 2:1).", 2.0,
        default=1.0, ge=1.0, le=64.0)
    device_memory_gib: Optional[float] = documented_field(
        "Memory per GPU of this group when it differs from the catalog part (e.g. a 94 or 96 "
        "GB Hopper).", 96.0, default=None, gt=0, le=4096)
    power_limit_w: Optional[float] = documented_field(
        "Board power cap per GPU of this group, W (nvidia-smi -pl), in the range its part "
        "accepts (as a plain cluster's).", 500.0, default=None,
        gt=0, le=10000)


class GroupLinkSpec(Section):
    """The link between two groups of a fleet (per-GPU bandwidth, as every tier)."""

    between: list[str] = documented_field("The two group names.", ["a100", "h100"], min_length=2, max_length=2)
    bandwidth_gb_per_s: float = documented_field(
        "Per-GPU bandwidth of traffic crossing this link, GB/s (a path between the groups gets "
        "the least of it and the two groups' inter-node tiers).", 25.0, gt=0)
    latency_us: float = documented_field("Latency of the link, µs (added to the larger inter-node latency).",
                           20.0, ge=0)
    name: Optional[str] = documented_field("Label of the link.", "spine", default=None)


class FleetClusterSpec(Section):
    """A mixed fleet: groups of nodes of different device types, and the links between them."""

    name: str = documented_field("Fleet name.", "a100+h100", default="fleet")
    groups: list[GroupSpec] = documented_field("The groups (at least one).", [{"name": "h100", "nodes": 64,
                                                                  "gpus_per_node": 8,
                                                                  "device": "H100-SXM-80GB"}],
                                 min_length=1)
    links: list[GroupLinkSpec] = documented_field("One link per pair of groups.",
                                    [{"between": ["a100", "h100"], "bandwidth_gb_per_s": 25.0,
                                      "latency_us": 20.0}], default_factory=list)


def _cluster_kind(value: Any) -> str:
    """Tag of a cluster mapping: zoo name, fleet of groups, or explicit nodes."""
    if isinstance(value, dict) and "zoo" in value:
        return "#zoo"
    if isinstance(value, dict) and "groups" in value:
        return "#fleet"
    # a fleet with its key misspelt ("group", "links" beside no nodes): read as a fleet, so
    # that the misspelling is named with "did you mean 'groups'" (QA round 9: four problems
    # of the plain-cluster form, none naming it)
    if isinstance(value, dict) and "nodes" not in value and (
            "links" in value or any(isinstance(k, str) and k.lower().startswith("group")
                                    for k in value)):
        return "#fleet"
    return "#explicit"


ClusterSection = Annotated[Union[Annotated[ZooClusterSpec, Tag("#zoo")],
                                 Annotated[FleetClusterSpec, Tag("#fleet")],
                                 Annotated[ExplicitClusterSpec, Tag("#explicit")]],
                           Discriminator(_cluster_kind)]


# ------------------------------------------------------------ training, search
class TrainingSection(Section):
    """What one training iteration is."""

    global_batch_size: PosInt = documented_field("Samples per optimizer step, all replicas together.", 512,
                                   le=limits.MAX_GLOBAL_BATCH)
    seq_len: Optional[PosInt] = documented_field("Tokens per sample; default: the model's own.", 2048, default=None,
                                   le=limits.MAX_SEQ_LEN)
    dtype: Dtype = documented_field("Compute dtype.", "bf16", default="bf16")  # type: ignore[valid-type]
    optimizer: Optimizer = documented_field(  # type: ignore[valid-type]
        "Optimizer and its precision (bytes per parameter of weights + gradients + state): "
        "adam_mixed 2 + 2 + 12 (16-bit weights, fp32 master and moments), adam_fp32 4 + 4 + 8, "
        "adam_bf16 2 + 2 + 4 (bf16 weights and moments, no fp32 master: KempnerForge; needs "
        "dtype bf16 or fp8, not with autocast), "
        "sgd_momentum_mixed 2 + 2 + 8, sgd_fp32 4 + 4 + 4. Default: adam_mixed, adam_fp32 for "
        "dtype fp32/tf32 (the mixed ones are refused there: fp32 training has no 16-bit copy).",
        "adam_mixed", default="adam_mixed")
    memory_reserve_gib: float = documented_field(
        "Device memory the user holds back beyond the modelled runtime reserve, GiB.", 2.0,
        default=0.0, ge=0)
    runtime: str = documented_field("Software stack (sets overlaps, fused attention, sharded optimizer): "
                      "megatron-lm, megatron-core, megatron-bridge, deepspeed, pytorch-fsdp, "
                      "torchtitan, pytorch-ddp.", "megatron-core", default="megatron-core")
    runtime_options: dict[str, Union[StrictBool, str]] = documented_field(
        runtime_options_help(), {"tp_comm_overlap": False}, default_factory=dict)
    activation_offload: float = documented_field(
        "Fraction of each transformer layer's saved activations offloaded to host memory "
        "between forward and backward (Megatron-Core --cpu-offloading-num-layers N of L "
        "layers per pipeline rank: N/L).", 0.5, default=0.0, ge=0, lt=1)
    autocast: bool = documented_field(
        "PyTorch AMP: 16-bit compute (dtype fp16 or bf16) by torch.autocast over fp32 "
        "parameters (e.g. Lightning precision=16 with DDP): fp32 weights and gradients, "
        "the optimizer's moments, and autocast's cached 16-bit weight casts (2 bytes per "
        "GEMM/convolution parameter, none for an embedding lookup or a norm; under ZeRO-3 "
        "per micro-batch in flight). Default false: 16-bit weights with an fp32 master copy in the "
        "optimizer state (Megatron, DeepSpeed, Apex O2).", True, default=False)


class SearchSection(Section):
    """The space a plan is chosen from; omitted keys mirror autopar_opt.ir.training.SearchSpace."""

    pp_degrees: Optional[list[Degree]] = documented_field("Pipeline degrees; default: every divisor of the devices.",
                                            [1, 2, 4], default=None, min_length=1)
    tp_degrees: Optional[list[Degree]] = documented_field("Tensor-parallel degrees; default: every divisor.",
                                            [1, 2, 4, 8], default=None, min_length=1)
    cp_degrees: list[Degree] = documented_field("Context-parallel degrees.", [1], default=[1], min_length=1)
    sequence_parallel: list[StrictBool] = documented_field("Sequence-parallel options.", [False, True],
                                       default=[False, True], min_length=1)
    zero_levels: list[ZeroLevel] = documented_field("ZeRO levels (0-3).", [0, 1], default=[0, 1, 2, 3], min_length=1)
    hybrid_sharding: list[StrictBool] = documented_field(
        "ZeRO over the whole dp*cp group (false) and/or hybrid sharding (true: FSDP's HSDP, "
        "Megatron's distributed-optimizer instances; DeepSpeed has none since it removed MiCS): "
        "a shard group of the dp*cp ranks inside one node, replicated across nodes.", [False], default=[False, True], min_length=1)
    hybrid_zero_levels: list[ZeroLevel] = documented_field(
        "ZeRO levels hybrid sharding is offered at: 3 by default (HSDP: every micro-batch's "
        "gathers stay in the node); add 1 or 2 for Megatron's distributed-optimizer instances.",
        [1, 3], default=[3], min_length=1)
    hybrid_shard_nodes: list[Degree] = documented_field(
        "Nodes one hybrid shard group spans: its ranks are those nodes' dp*cp ranks. 1 (the "
        "default) keeps every micro-batch's gathers inside a node; more nodes divide the "
        "states further and gather across the network (BloombergGPT sharded over 16 nodes).",
        [1, 2, 4], default=[1], min_length=1)
    recompute: list[Recompute] = documented_field("Recomputation modes.", ["none", "full"],
                                    default=[Recompute.none, Recompute.full], min_length=1)
    schedules: Optional[list[Literal["gpipe", "1f1b", "interleaved"]]] = documented_field(
        "Pipeline schedules searched (interleaved: Megatron's virtual pipeline on its even "
        "split, every vp_chunks value the layers allow; listed without 1f1b it also offers "
        "vp = 1, plain 1F1B, said as 'interleaved vp=1 (no virtual stages: 1F1B)'). Default: "
        "what the target runs and "
        "the cost model prices (megatron: 1f1b and interleaved; torchtitan, deepspeed, none: "
        "1f1b, GPipe being never faster and holding more activations).",
        ["1f1b", "interleaved"], default=None, min_length=1)
    vp_chunks: Optional[list[Degree]] = documented_field(
        "Virtual stages per pipeline rank tried with the interleaved schedule; default: every "
        "v >= 2 dividing the transformer layers per stage.", [2, 4], default=None, min_length=1)
    microbatches: Optional[list[Degree]] = documented_field("Micro-batch counts; default: divisors of the batch.",
                                              [4, 8, 16], default=None, min_length=1)
    max_microbatches: Degree = documented_field("Largest micro-batch count tried.", 64, default=64)
    tp_within_node: bool = documented_field("Keep tensor-parallel groups inside a node.", True, default=True)
    ep_degrees: Optional[list[Degree]] = documented_field(
        "Expert-parallel degrees of MoE layers; default: every degree Megatron-Core's folding "
        "allows, for each etp searched: etp*ep divides tp*cp*dp and ep divides the routed "
        "experts (the divisors of dp*cp where etp = tp, up to tp*cp*dp where etp = 1).",
        [1, 8], default=None, min_length=1)
    stage_devices: Literal["congruent", "free"] = documented_field(
        "Devices per pipeline stage: congruent (every stage N/pp) or free (each stage its own "
        "count: whole nodes, or a divisor of a node's GPUs inside one node; at most the "
        "cluster in all).", "free", default="congruent")
    etp_degrees: Optional[list[Degree]] = documented_field(
        "Expert tensor-parallel degrees of MoE layers (Megatron --expert-tensor-parallel-size; "
        "etp*ep divides tp*cp*dp); default: tp and 1.", [1], default=None, min_length=1)


class TargetSection(Section):
    """The framework that will launch the plan (autopar_opt.ir.target)."""

    framework: Literal["megatron", "torchtitan", "deepspeed", "none"] = documented_field(
        "megatron (Megatron-LM, Megatron-Core, Megatron-Bridge), torchtitan, deepspeed, or none "
        "(the free per-layer space).", "megatron")
    version: Optional[str] = documented_field(
        "torchtitan: 0.3 (its current Python configs + command line, default) or 0.2 (the TOML "
        "job files); unused for the others.", "0.3", default=None)


class _CostModelFile(Section):
    file: Optional[str] = documented_field("Parameters file written by `autopar calibrate --fit --output`, "
                             "relative to the spec file; other keys override it.",
                             "my_fit.yaml", default=None)


def _cost_bounds(name: str, hint: Any) -> dict[str, Any]:
    """The hard bounds a spec value must satisfy (``CostParams`` field metadata;
    per-device dicts carry theirs in the value type)."""
    f = _COST_FIELDS[name]
    return {} if str(f.type).startswith("dict") else dict(f.metadata["valid"])


def _cost_description(name: str) -> str:
    plausible = _COST_FIELDS[name].metadata.get("plausible")
    return "" if plausible is None else f" Plausible range {plausible[0]:g} to {plausible[1]:g}."


_COST_FIELDS = {f.name: f for f in dataclasses.fields(CostParams)}

#: Overrides of :class:`autopar_opt.cost.params.CostParams`, derived from it: one
#: optional key per parameter, documented by its docstring, with the bounds and
#: plausible range its field declares (omitted keys keep the calibrated value),
#: plus ``file``.
CostModelSection = section_from_dataclass(
    CostParams, _CostModelFile, name="CostModelSection",
    doc="Overrides of autopar_opt.cost.params.CostParams (physical quantities with documented "
        "ranges); omitted keys keep the calibrated value.",
    constraints=_cost_bounds, optional=True, describe=_cost_description,
    examples={"gemm_efficiency": {"A100-80GB": 0.7}, "fp8_efficiency": {"H100-SXM-80GB": 0.55}},
    types={name: dict[str, Annotated[float, Field(**f.metadata["valid"])]]
           for name, f in _COST_FIELDS.items() if str(f.type).startswith("dict")})


# ------------------------------------------------------------------------ plan
class MegatronPlanSpec(Section):
    """A Megatron-style plan: one strategy for every layer, layers split into ``pp`` stages."""

    tp: Degree = documented_field("Tensor-parallel degree.", 8, default=1)
    pp: Degree = documented_field("Pipeline-parallel degree (stages).", 8, default=1)
    dp: Optional[Degree] = documented_field("Data-parallel degree; default: devices / (tp*pp*cp).", 4, default=None)
    cp: Degree = documented_field("Context-parallel degree.", 1, default=1)
    ep: Degree = documented_field("Expert-parallel degree of the MoE layers (Megatron "
                    "--expert-model-parallel-size); etp*ep divides tp*cp*dp.", 8, default=1)
    etp: Optional[Degree] = documented_field("Expert tensor-parallel degree of the MoE layers "
                    "(Megatron --expert-tensor-parallel-size); default: tp.", 1, default=None)
    sequence_parallel: bool = documented_field("Megatron sequence parallelism (needs tp > 1).", True, default=False)
    zero: ZeroLevel = documented_field("ZeRO level (0-3).", 1, default=0)
    zero_group: Optional[Degree] = documented_field(
        "Hybrid sharding: ranks of one ZeRO shard group (a multiple of cp dividing dp*cp), "
        "replicated dp*cp/zero_group times (Megatron --num-distributed-optimizer-instances, "
        "torchtitan data_parallel_replicate_degree); default: "
        "the whole dp*cp group.", 8, default=None)
    recompute: Recompute = documented_field("Activation recomputation.", "selective", default=Recompute.none)
    microbatches: Optional[Degree] = documented_field("Micro-batches per iteration (or give micro_batch_size).",
                                        64, default=None)
    micro_batch_size: Optional[Degree] = documented_field(
        "Samples per micro-batch per data-parallel replica (Megatron --micro-batch-size).", 1,
        default=None)
    schedule: Schedule = documented_field("Pipeline schedule.", "1f1b", default=Schedule.one_f_one_b)
    vp_chunks: Degree = documented_field("Virtual pipeline chunks (interleaved schedule only).", 1, default=1)
    stage_layers: Optional[list[Degree]] = documented_field("Layers per stage; default: Megatron-LM's "
                                              "split (the transformer blocks evenly over "
                                              "pp*vp_chunks model chunks, the embedding on the "
                                              "first stage, the output layer on the last), else "
                                              "(blocks not divisible by pp) as even as possible.",
                                              [13, 12, 12, 13], default=None, min_length=1)


class StrategySpec(Section):
    """One intra-layer strategy: dp*tp*cp must equal the devices of the stage."""

    dp: Degree = documented_field("Data-parallel degree.", 2)
    tp: Degree = documented_field("Tensor-parallel degree.", 4, default=1)
    cp: Degree = documented_field("Context-parallel degree.", 1, default=1)
    ep: Degree = documented_field("Expert-parallel degree (MoE layers only); etp*ep divides "
                    "tp*cp*dp.", 1, default=1)
    etp: Optional[Degree] = documented_field("Expert tensor-parallel degree (MoE layers only); "
                    "default: tp.", 1, default=None)
    sp: bool = documented_field("Sequence parallelism.", False, default=False)
    zero: ZeroLevel = documented_field("ZeRO level (0-3).", 0, default=0)
    zero_group: Optional[Degree] = documented_field(
        "Hybrid sharding: ranks of one ZeRO shard group (a multiple of cp dividing dp*cp), "
        "replicated dp*cp/zero_group times; default: the whole dp*cp group.", 8, default=None)
    recompute: Recompute = documented_field("Activation recomputation.", "none", default=Recompute.none)


class StageSpec(Section):
    """One pipeline stage: consecutive layers and their strategies."""

    layers: list[str] = documented_field("Layer names, consecutive in the model's order.", ["embed", "block0"],
                           min_length=1)
    strategies: list[StrategySpec] = documented_field("One strategy per layer, or one for the whole stage.",
                                        [{"dp": 2, "tp": 4}], min_length=1)
    devices: Optional[Degree] = documented_field(
        "Devices of this stage (free stage sizes: whole nodes or a divisor of a node's GPUs); "
        "give it on every stage or on none (none: N/pp each).", 8, default=None)


class ExplicitPlanSpec(Section):
    """A plan given stage by stage."""

    stages: list[StageSpec] = documented_field("The pipeline stages in order.", [{"layers": ["l0"],
                                                                     "strategies": [{"dp": 8}]}],
                                 min_length=1)
    microbatches: Degree = documented_field("Micro-batches per iteration.", 8)
    schedule: Schedule = documented_field("Pipeline schedule.", "1f1b", default=Schedule.one_f_one_b)
    vp_chunks: Degree = documented_field("Virtual pipeline chunks (interleaved schedule only).", 1, default=1)


class MegatronArgsPlanSpec(Section):
    """An existing Megatron-LM command line read as the plan (its parallelism, batch,
    recompute, distributed-optimizer and pipeline-split flags; other flags are ignored)."""

    megatron_args: Union[str, list[str]] = documented_field(
        "The command line (a string, or a list of arguments).",
        "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --sequence-parallel "
        "--micro-batch-size 1 --global-batch-size 512 --use-distributed-optimizer")


class MegatronBridgePlanSpec(Section):
    """An existing Megatron-Bridge overrides file read as the plan (its model, train, ddp and
    mixed_precision settings, as Megatron-LM's flags: autopar_opt/export/bridge_import.py)."""

    megatron_bridge: str = documented_field(
        "The overrides file (YAML, as `autopar export --to megatron-bridge` writes it; a "
        "relative path is from the spec's folder).", "bridge_overrides.yaml")


class TorchtitanPlanSpec(Section):
    """An existing torchtitan 0.2 job file (TOML) read as the plan (its [parallelism],
    [training] and [activation_checkpoint]: autopar_opt/export/torchtitan_import.py)."""

    torchtitan: str = documented_field(
        "The job file (TOML, as `autopar export --to torchtitan --framework-version 0.2` "
        "writes it; a relative path is from the spec's folder).", "job.toml")


class DeepspeedPlanSpec(Section):
    """An existing DeepSpeed JSON config read as the plan (its batch, ZeRO, AutoTP, AutoEP
    and checkpointing settings; the pipeline degree from DeepSpeed's batch rule:
    autopar_opt/export/deepspeed_import.py)."""

    deepspeed: str = documented_field(
        "The JSON config (as `autopar export --to deepspeed` writes it; a relative path is "
        "from the spec's folder).", "ds_config.json")


def _plan_tag(value: Any) -> str:
    if isinstance(value, dict) and "stages" in value:
        return "#explicit"
    if isinstance(value, dict) and "megatron_args" in value:
        return "#megatron_args"
    if isinstance(value, dict) and "megatron_bridge" in value:
        return "#megatron_bridge"
    if isinstance(value, dict) and "torchtitan" in value:
        return "#torchtitan"
    if isinstance(value, dict) and "deepspeed" in value:
        return "#deepspeed"
    return "#megatron"


PlanSection = Annotated[Union[Annotated[MegatronPlanSpec, Tag("#megatron")],
                              Annotated[MegatronArgsPlanSpec, Tag("#megatron_args")],
                              Annotated[MegatronBridgePlanSpec, Tag("#megatron_bridge")],
                              Annotated[TorchtitanPlanSpec, Tag("#torchtitan")],
                              Annotated[DeepspeedPlanSpec, Tag("#deepspeed")],
                              Annotated[ExplicitPlanSpec, Tag("#explicit")]],
                        Discriminator(_plan_tag)]

#: A section given as a path to another file (resolved relative to the top file).
IncludePath = Annotated[str, Tag("#include")]


def _section_or_path(section: Any) -> Any:
    """``section`` or a relative path string (a file holding that section)."""
    return Annotated[Union[IncludePath, Annotated[section, Tag("#inline")]],
                     Discriminator(lambda v: "#include" if isinstance(v, str) else "#inline")]


# ---------------------------------------------------------------------- file
class SpecFile(Section):
    """An autopar-opt spec: the model, the cluster, the training setup, the search space,
    the solver, optional cost-model overrides and an optional plan to evaluate."""

    @field_validator("model", mode="before")
    @classmethod
    def _one_model_source(cls, value: Any) -> Any:
        """One problem naming both sources (``{zoo: X, hf_config: Y}`` was "unknown key
        'hf_config'" under the zoo section, though hf_config is a model key)."""
        given = [k for k in MODEL_SOURCES if isinstance(value, dict) and k in value]
        if len(given) > 1:
            raise PydanticCustomError("model_sources", "gives {given}: a model has one source "
                                      "(zoo, hf_config or layers); keep one of them",
                                      {"given": " and ".join(given)})
        return value

    description: Optional[str] = documented_field("Free text shown in reports.", "LLaMA-7B on 2x8 A100",
                                    default=None)
    model: _section_or_path(ModelSection) = documented_field(  # type: ignore[valid-type]
        "The model: {zoo: NAME}, {hf_config: PATH} or {name, layers, edges}, or a path to a "
        "file holding it.",
        {"zoo": "debug"})
    cluster: _section_or_path(ClusterSection) = documented_field(  # type: ignore[valid-type]
        "The cluster: {zoo: NAME} or {nodes, gpus_per_node, device}, or a path to a file.",
        {"zoo": "dgx-a100-8"})
    training: _section_or_path(TrainingSection) = documented_field(  # type: ignore[valid-type]
        "Training settings, or a path to a file holding them.", {"global_batch_size": 64})
    search: SearchSection = documented_field("Search space (defaults mirror SearchSpace).", {"pp_degrees": [1, 2]},
                               default_factory=SearchSection)
    # tagged like cost_model: a wrong name is one problem at `target` (not one per union member)
    target: Optional[Annotated[Union[
        Annotated[Literal["megatron", "torchtitan", "deepspeed", "none"], Tag("#name")],
        Annotated[TargetSection, Tag("#mapping")]],
        Discriminator(lambda v: "#mapping" if isinstance(v, (dict, TargetSection)) else "#name")]] = \
        documented_field(
            "The framework that will run the plan: the search space is exactly what it can run "
            "(one tp/cp/sp/ZeRO/ep/etp/recompute setting for the model, its schedules and stage "
            "splits). Default: the framework of training.runtime (megatron-*: megatron, "
            "torchtitan, deepspeed; pytorch-*: none). none: the free per-layer space.",
            "megatron", default=None)
    solver: SolverSection = documented_field("Solver options.", {"name": "highs"}, default_factory=SolverSection)
    cost_model: Optional[Annotated[Union[Annotated[str, Tag("#file")],
                                         Annotated[CostModelSection, Tag("#inline")]],
                                   Discriminator(lambda v: "#file" if isinstance(v, str)
                                                 else "#inline")]] = documented_field(
        "Cost-model overrides, or the path of a parameters file written by "
        "`autopar calibrate --fit --output FILE`.", {"comm_efficiency": 0.7}, default=None)
    plan: Optional[PlanSection] = documented_field("A plan to evaluate (`autopar estimate`) or use as baseline.",
                                     {"tp": 8, "pp": 1, "microbatches": 8}, default=None)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a model-on-a-cluster spec file (``autopar schema`` prints it
    with the problem forms beside it: :func:`autopar_opt.cli.commands.spec_json_schema`)."""
    return SpecFile.model_json_schema()
