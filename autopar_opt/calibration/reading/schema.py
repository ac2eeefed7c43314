"""A published-run record as written in the run file: typed, validated, not interpreted.

One pydantic model per section of ``tests/data/published_runs.yaml``
(``source``, ``model``, ``hardware``, ``parallelism``, ``training``,
``measured``). Each field the cost model reads has its type here, and a stated
value of the wrong type or out of range is refused with the rule that has
always applied to run records: a number is a finite int or float (not
``true``/``false``, not a text), a count is a positive integer at most its
limit in :mod:`autopar_opt.core.limits` (the spec's own limits; a record with
``num_layers: 1e9`` once hung the calibration building a billion layers).
Keys the cost model does not read (``derived``, ``intra_node``, the many
spellings of Mixture-of-Experts fields, ``measured.other``) are kept as
given: :mod:`.moe` and :mod:`.measured` read them once, with their own rules.

Nothing here reads free text; :mod:`.record` turns a :class:`RawRecord` into a
:class:`~autopar_opt.calibration.reading.record.RunRecord`, the typed reading
the builders take.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from autopar_opt.core import limits
from autopar_opt.calibration.reading.errors import Unmodelable

#: Upper bounds of a record's integers (:mod:`autopar_opt.core.limits`); any other
#: integer is a model dimension, at most ``MAX_SEQ_LEN``.
INT_LIMITS = {"num_layers": "MAX_LAYERS", "cpu_offloading_num_layers": "MAX_LAYERS",
              "global_batch_size": "MAX_GLOBAL_BATCH", "micro_batch_size": "MAX_GLOBAL_BATCH",
              "grad_accum_steps": "MAX_GLOBAL_BATCH",
              "gpus_per_node": "MAX_GPUS_PER_NODE", "num_gpus": "MAX_DEVICES",
              "tp": "MAX_DEGREE", "pp": "MAX_DEGREE", "dp": "MAX_DEGREE", "cp": "MAX_DEGREE",
              "vp_chunks": "MAX_DEGREE", "dp_replicate": "MAX_DEGREE"}


def number_problem(value: Any, where: str, key: str) -> str | None:
    """Why a stated value is not a number (None: it is one, or it is null)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"{where}.{key} = {value!r} is not a number"
    return None


def integer_problem(value: Any, where: str, key: str) -> str | None:
    """Why a stated value is not a positive integer within its limit."""
    bad = number_problem(value, where, key)
    if bad or value is None:
        return bad
    if value != int(value) or value <= 0:
        return f"{where}.{key} = {float(value)!r} must be a positive integer"
    name = INT_LIMITS.get(key, "MAX_SEQ_LEN")
    cap = getattr(limits, name)
    if value > cap:
        return (f"{where}.{key} = {int(value)} exceeds the limit of {cap:,} "
                f"(autopar_opt.core.limits.{name}); state the run's real value")
    return None


_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0", "none")


def flag_value(value: Any, where: str) -> bool | None:
    """A true/false field as stated (None: not stated): a boolean, 0/1, or the words
    true/yes/on and false/no/off/none; another value raises
    :class:`~autopar_opt.calibration.reading.errors.Unmodelable` (QA round 11: the text "false"
    was read as true, as any non-empty text was)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    word = str(value).strip().lower()
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise Unmodelable(f"{where} = {value!r} must be true or false")


def _fail(message: str) -> PydanticCustomError:
    return PydanticCustomError("run_record", "{message}", {"message": message})


class _Section(BaseModel):
    """A record section: every stated key is kept (unknown ones as extras);
    the declared ones are checked by :meth:`_checked`."""

    model_config = ConfigDict(extra="allow", frozen=True)
    #: This section's name in error messages (``model.num_layers = ...``).
    WHERE: ClassVar[str] = ""
    #: Fields read as numbers / as positive integers.
    NUMBERS: ClassVar[tuple[str, ...]] = ()
    INTEGERS: ClassVar[tuple[str, ...]] = ()
    #: Of the NUMBERS, those that are physical sizes, stated or null, never zero or negative
    #: (a GPU's memory, a NIC's bandwidth, a power cap), with their unit.
    POSITIVE: ClassVar[dict[str, str]] = {}

    @field_validator("*", mode="before")
    @classmethod
    def _checked(cls, value: Any, info) -> Any:
        name = info.field_name or ""
        where = cls.WHERE
        if name in cls.INTEGERS:
            bad = integer_problem(value, where, name)
            if bad:
                raise _fail(bad)
            return None if value is None else int(value)
        if name in cls.NUMBERS:
            bad = number_problem(value, where, name)
            if not bad and value is not None and name in cls.POSITIVE and value <= 0:
                # QA round 11: a negative power cap crashed the calibration (a complex cube
                # root), a cap of 0 divided by zero, a negative bandwidth or memory was priced
                unit = cls.POSITIVE[name]
                bad = (f"{where}.{name} = {value!r} must be a positive number of {unit}; "
                       "state the real figure or null (not stated)")
            if bad:
                raise _fail(bad)
            return None if value is None else float(value)
        return value

    def extra(self, key: str) -> Any:
        """A key this section does not declare (``None`` when absent)."""
        return (self.model_extra or {}).get(key)

    def raw(self, key: str) -> Any:
        """A key's value as stated, declared or not."""
        if key in type(self).model_fields:
            return getattr(self, key)
        return self.extra(key)

    def text(self, key: str) -> str:
        """A key as text ("" when null or absent)."""
        value = self.raw(key)
        return "" if value is None else str(value)


class Source(_Section):
    """Where the run was published."""

    WHERE: ClassVar[str] = "source"
    citation: Optional[Any] = Field(None, description=(
        "Who published the run and where (authors, title, venue, date): the record's citation."))
    locator: Optional[Any] = Field(None, description=(
        'Where in the source the figures are (table, figure, section, log line).'))
    url: Optional[Any] = Field(None, description=(
        'A link to the source.'))


class Model(_Section):
    """The model trained (architecture fields; MoE and MLA spellings as extras).

    Optional architecture fields, each beating a known family and the ``arch``
    text (:mod:`autopar_opt.calibration.reading.architecture`): ``family`` (a
    key of ``model_zoo/families.yaml``), ``mlp`` (gated / plain, or an
    activation: swiglu, geglu, gelu, relu, squared_relu), ``biases`` (none /
    qkv / all, or true / false), ``dropout`` (true / false), ``positions``
    (learned / rope / alibi / relative / none), ``norm`` (layernorm / rmsnorm)."""

    WHERE: ClassVar[str] = "model"
    INTEGERS: ClassVar[tuple[str, ...]] = (
        "num_layers", "hidden_size", "num_attention_heads", "seq_len", "vocab_size",
        "ffn_hidden_size", "num_kv_heads")
    NUMBERS: ClassVar[tuple[str, ...]] = ("param_count_b",)
    name: Optional[Any] = Field(None, description=(
        "The model's name (text; 'MoE', 'Mixtral', 'DeepSeek-V3' and the like mark a Mixture-of-Experts "
        "record, which must then state its experts)."))
    arch: Optional[Any] = Field(None, description=(
        'Free text on the architecture; an explicit field below always beats it, and what it leaves '
        'unstated is said as assumed.'))
    num_layers: Optional[int] = Field(None, description=(
        'Transformer blocks (a positive integer).'))
    hidden_size: Optional[int] = Field(None, description=(
        'Model width h.'))
    num_attention_heads: Optional[int] = Field(None, description=(
        'Query heads (must divide hidden_size, and be divisible by parallelism.tp).'))
    num_kv_heads: Optional[int] = Field(None, description=(
        'Key/value heads (grouped-query attention); unstated: num_attention_heads (multi-head).'))
    ffn_hidden_size: Optional[int] = Field(None, description=(
        "MLP inner width (an MoE record's dense layers); unstated: 4·h (Megatron's default), said."))
    vocab_size: Optional[int] = Field(None, description=(
        'Vocabulary size as trained (padded where the framework pads).'))
    seq_len: Optional[int] = Field(None, description=(
        'Sequence length in tokens per sample.'))
    param_count_b: Optional[float] = Field(None, description=(
        'The published parameter count, in billions: the built model must be within 3% of it (checked, '
        'reported).'))
    family: Optional[Any] = Field(None, description=(
        'A known family (a key of model_zoo/families.yaml: llama, mistral, qwen, gpt-neox, ...) giving the '
        'MLP type, norm, biases, tying and positions, with their source.'))
    mlp: Optional[Any] = Field(None, description=(
        'gated or plain, or the activation: swiglu, geglu, gelu, relu, squared_relu.'))
    biases: Optional[Any] = Field(None, description=(
        'none, qkv or all (or true / false).'))
    dropout: Optional[Any] = Field(None, description=(
        'true / false.'))
    positions: Optional[Any] = Field(None, description=(
        'learned, rope, alibi, relative or none.'))
    # QA round 11: the description said nothing of the dense builder ignoring the key
    norm: Optional[Any] = Field(None, description=(
        'layernorm or rmsnorm: read for a Mixture-of-Experts model (its norms\' parameters); a dense '
        'model\'s blocks are priced alike for both.'))


class Hardware(_Section):
    """The GPUs and their network."""

    WHERE: ClassVar[str] = "hardware"
    INTEGERS: ClassVar[tuple[str, ...]] = ("num_gpus", "gpus_per_node", "nics_per_node")
    NUMBERS: ClassVar[tuple[str, ...]] = ("gpu_memory_gb", "inter_node_gbps_per_gpu",
                                          "power_limit_w")
    POSITIVE: ClassVar[dict[str, str]] = {"gpu_memory_gb": "GB", "inter_node_gbps_per_gpu": "Gb/s",
                                          "power_limit_w": "W"}
    gpu_type: Optional[Any] = Field(None, description=(
        "The GPU (text: 'H100-SXM5-80GB', 'A100 80GB PCIe', 'H200', 'GH200', ...); an unstated form factor "
        "of an H100/H800/A100/A800 is taken as the SXM part and said so."))
    gpu_memory_gb: Optional[float] = Field(None, description=(
        "The GPU's memory in GB as published (chooses between the 80/94/96 GB and 40/80 GB parts)."))
    num_gpus: Optional[int] = Field(None, description=(
        'GPUs in the job (= tp·pp·dp·cp).'))
    gpus_per_node: Optional[int] = Field(None, description=(
        'GPUs per node (which groups stay inside a node); unstated: 8, said.'))
    inter_node_gbps_per_gpu: Optional[float] = Field(None, description=(
        "Network bandwidth per NIC between nodes, in Gb/s (gigabits: 200 for HDR, 400 for NDR); unstated: "
        "the device's usual fabric, said as assumed."))
    #: network interfaces per node (each at ``inter_node_gbps_per_gpu``); None: one per GPU
    nics_per_node: Optional[int] = Field(None, description=(
        'Network interfaces per node, each at inter_node_gbps_per_gpu; unstated: one per GPU.'))
    #: a stated board power cap per GPU, W (lowers the sustained clock)
    power_limit_w: Optional[float] = Field(None, description=(
        'A stated board power cap per GPU, in W (lowers the sustained clock).'))
    system: Optional[Any] = Field(None, description=(
        'Free text on the system (cluster name, VM type).'))


class Parallelism(_Section):
    """The published layout. ``zero_stage`` keeps its stated value: 0 and
    ``false`` mean no ZeRO, any other value must be a positive integer
    (checked where the stage is read, :func:`.parallel.map_zero`)."""

    WHERE: ClassVar[str] = "parallelism"
    INTEGERS: ClassVar[tuple[str, ...]] = ("tp", "pp", "dp", "cp", "vp_chunks", "dp_replicate")
    tp: Optional[int] = Field(None, description=(
        'Tensor-parallel degree.'))
    pp: Optional[int] = Field(None, description=(
        'Pipeline-parallel degree.'))
    dp: Optional[int] = Field(None, description=(
        'Data-parallel degree (the expert-parallel degree ep is carved out of dp·cp, as Megatron-Core '
        'does).'))
    cp: Optional[int] = Field(None, description=(
        'Context-parallel degree.'))
    vp_chunks: Optional[int] = Field(None, description=(
        "Virtual pipeline chunks per stage (interleaved 1F1B); unstated: the framework's default schedule, "
        "said."))
    dp_replicate: Optional[int] = Field(None, description=(
        'Hybrid sharding (HSDP, MiCS): the replicas; the shard group is dp / dp_replicate.'))
    sequence_parallel: Optional[Any] = Field(None, description=(
        "Megatron sequence parallelism, true / false; unstated: the framework's default for a TP run, said."))
    zero_stage: Optional[Any] = Field(None, description=(
        'ZeRO stage 0-3 (0 or false: none); explicit, it beats any framework text.'))
    fsdp: Optional[Any] = Field(None, description=(
        "FSDP sharding as text (FULL_SHARD / SHARD_GRAD_OP / HYBRID_SHARD / NO_SHARD, 'fsdp2', ...), read "
        "as a ZeRO stage."))
    pp_partition: Optional[Any] = Field(None, json_schema_extra={"anyOf": [
        {"enum": ["even", "embedding_slots"]}, {"type": "null"}]}, description=(
        "How the layers were split over the pipeline stages: even (Megatron-LM's split, the embedding "
        "on the first stage and the LM head on the last beside their layers) or embedding_slots (each "
        "takes one layer's place: BigScience --pp-partition-method type:transformer|embedding, "
        "Megatron-Core --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split); "
        "unstated: the notes' words, said, else even."))
    pp_stage_layers: Optional[Any] = Field(None, json_schema_extra={"anyOf": [
        {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1},
        {"type": "null"}]}, description=(
        "Transformer layers of each pipeline stage, one whole number per stage, adding up to "
        "model.num_layers (an uneven split, e.g. --decoder-first-pipeline-num-layers); the embedding "
        "joins the first stage, the LM head the last."))


class Training(_Section):
    """Batch, precision, recomputation and the framework text."""

    WHERE: ClassVar[str] = "training"
    INTEGERS: ClassVar[tuple[str, ...]] = (
        "global_batch_size", "micro_batch_size", "grad_accum_steps", "cpu_offloading_num_layers")
    framework: Optional[Any] = Field(None, description=(
        'The training stack and version as text (Megatron-LM, NeMo, torchtitan, DeepSpeed, llm-foundry, '
        '...): its documented defaults price what the record leaves unstated, each said.'))
    precision: Optional[Any] = Field(None, description=(
        "bf16, fp16, fp32, or FP8 in any common spelling (fp8, float8, e4m3, MXFP8, 'bf16 + FP8 linear "
        "layers')."))
    recompute: Optional[Any] = Field(None, description=(
        "Activation recomputation: none, selective, op (torchtitan's op policy) or full."))
    global_batch_size: Optional[int] = Field(None, description=(
        'Samples per iteration over the whole job.'))
    micro_batch_size: Optional[int] = Field(None, description=(
        'Samples per micro-batch per data-parallel rank.'))
    #: micro-batches per iteration per data-parallel rank (gradient accumulation steps)
    grad_accum_steps: Optional[int] = Field(None, description=(
        'Micro-batches per iteration per data-parallel rank (gradient accumulation).'))
    runtime_options: Optional[Any] = Field(None, json_schema_extra={"anyOf": [
        {"type": "object"}, {"type": "null"}]}, description=(
        "Runtime capabilities stated explicitly, as a spec's training.runtime_options (e.g. "
        "{async_dgrad: true} for a Megatron-LM release the text's defaults predate): each beats what "
        "the framework text gives, said."))
    cpu_offloading_num_layers: Optional[int] = Field(None, description=(
        'Megatron-Core --cpu-offloading-num-layers: layers per pipeline rank whose activations go to host '
        'memory.'))


class Measured(_Section):
    """What was measured: throughput keys (read by :mod:`.measured`, which
    checks a stated one is usable), memory and ``other``."""

    WHERE: ClassVar[str] = "measured"
    NUMBERS: ClassVar[tuple[str, ...]] = ("memory_gib_per_gpu",)
    memory_gib_per_gpu: Optional[float] = Field(None, description=(
        'Peak memory per GPU, in GiB.'))
    memory_measure: Optional[Any] = Field(None, description=(
        'What the memory figure measures: device (nvidia-smi, the default), reserved '
        '(torch.cuda.max_memory_reserved) or allocated (live tensors).'))
    memory_rank: Optional[Any] = Field(None, description=(
        'Which GPU the memory figure is from: max (the busiest, the default), last (the rank Megatron '
        'logs from) or first (the first pipeline stage: a stack that logs from rank 0).'))

    def other(self) -> dict:
        """``measured.other`` as a mapping ({} when absent or not a mapping)."""
        value = self.extra("other")
        return value if isinstance(value, dict) else {}


SECTIONS: dict[str, type[_Section]] = {
    "source": Source, "model": Model, "hardware": Hardware, "parallelism": Parallelism,
    "training": Training, "measured": Measured}


class RawRecord(BaseModel):
    """One run record as stated in the file (types checked, nothing read from
    text). ``id`` is empty only for the partial records tests build."""

    model_config = ConfigDict(extra="allow", frozen=True)

    id: str = ""
    record_type: str = ""
    flops_counting: str = ""
    notes: str = ""
    source: Source = Source()
    model: Model = Model()
    hardware: Hardware = Hardware()
    parallelism: Parallelism = Parallelism()
    training: Training = Training()
    measured: Measured = Measured()

    @classmethod
    def read(cls, rec: dict) -> "RawRecord":
        """Validate one record mapping; raises :class:`Unmodelable` with every
        problem of its stated fields (joined by "; ")."""
        problems = []
        for name in SECTIONS:
            value = rec.get(name)
            if value is not None and not isinstance(value, dict):
                problems.append(f"'{name}' is a {type(value).__name__}, expected a mapping")
        if problems:
            raise Unmodelable("; ".join(problems))
        data = {k: v for k, v in rec.items() if not (k in SECTIONS and v is None)}
        for key in ("id", "record_type", "flops_counting", "notes"):
            if key in data:
                data[key] = "" if data[key] is None else str(data[key])
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise Unmodelable("; ".join(e["msg"] for e in exc.errors())) from None
