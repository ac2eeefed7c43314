"""A published-run record read once into :class:`RunRecord`: what the builders take.

:func:`read_record` validates a record mapping (:class:`~.schema.RawRecord`)
and reads every field and text the cost model depends on, in one pass and in
a fixed order (runtime, device, model, expert and data parallelism, nodes,
precision and gradient dtypes, FLOP convention, recomputation, batches,
offload, autocast, what was measured). Each default it takes for an unstated
field is an :class:`Assumption` on the record, so nothing is dropped or
guessed silently; a record the cost model cannot price raises
:class:`~.errors.Unmodelable` with the reason (the first problem in that
order). The builders (:func:`autopar_opt.calibration.build.build_run`) turn a
:class:`RunRecord` into a graph, a cluster, a plan and a measured throughput
without reading the record's text again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from autopar_opt.calibration.reading import device as dev
from autopar_opt.calibration.reading import moe as moe_reading
from autopar_opt.calibration.reading import stacks
from autopar_opt.calibration.reading.counting import FlopCount, read_counting
from autopar_opt.calibration.reading.device import ClusterFacts
from autopar_opt.calibration.reading.errors import Unmodelable
from autopar_opt.calibration.reading.measured import (
    NoThroughput, Throughput, memory_fields, per_layer_ms, pick_throughput)
from autopar_opt.calibration.reading.model import ModelFacts, read_dims, read_model
from autopar_opt.calibration.reading.moe import MoeSpec
from autopar_opt.calibration.reading.batching import Batches, read_batches
from autopar_opt.calibration.reading.parallel import ParallelFacts, read_parallelism
from autopar_opt.calibration.reading.pipeline_split import stage_split
from autopar_opt.calibration.reading.runtime import fp16_grad_dtype, fsdp_reduce_dtype, runtime_of
from autopar_opt.calibration.reading.runtime_options import apply_stated, stated_options
from autopar_opt.calibration.reading.schema import RawRecord
from autopar_opt.calibration.reading.training import (
    autocast_of, map_precision, map_recompute, read_offload)
from autopar_opt.ir.hardware import DEVICE_CATALOG
from autopar_opt.model_zoo.blocks import AttentionDims
from autopar_opt.ir.runtime import Runtime
from autopar_opt.ir.training import Recompute

#: The topics of a record's assumptions, in the order they are read. The
#: builder adds its own (embedding tying by parameter count, the parameter
#: check) to the ``model`` topic: :meth:`RunRecord.notes_with`.
TOPICS = ("runtime", "device", "model", "parallelism", "cluster", "training")


@dataclass(frozen=True)
class Assumption:
    """One default taken (or one reading of a text) for a record: its topic
    (:data:`TOPICS`) and the sentence the reports print."""

    topic: str
    text: str


@dataclass(frozen=True)
class MoeFacts:
    """An MoE record's expert fields (:class:`~.moe.MoeSpec`), its attention
    (GQA or MLA dimensions) and whether its dense MLPs are gated."""

    spec: MoeSpec
    attention: AttentionDims
    gated: bool


@dataclass(frozen=True)
class RunRecord:
    """A published run as the cost model reads it (all texts interpreted).

    ``kind``: ``end_to_end`` or ``per_layer``; ``throughput``: the measured
    figure (``None`` for a per-layer record or a memory-only one: memory
    published, no throughput); ``per_layer_ms``: a per-layer record's layer
    time; ``stage_sizes``: layers per pipeline stage of an end-to-end record;
    ``counting``: the FLOP convention's text (stated, or the stack's own),
    ``flops``: the conventions it names;
    ``assumptions``: every default taken, in reading order."""

    raw: RawRecord
    id: str
    family: str
    framework: str
    kind: str
    runtime: Runtime
    cluster: ClusterFacts
    model: ModelFacts
    moe: MoeFacts | None
    parallel: ParallelFacts
    dtype: str
    counting: str
    flops: FlopCount
    recompute: Recompute
    batches: Batches
    activation_offload: float
    autocast: bool
    stage_sizes: tuple[int, ...]
    throughput: Throughput | None
    no_throughput: str
    per_layer_ms: float | None
    memory_gib: float | None
    memory_measure: str
    memory_rank: str
    assumptions: tuple[Assumption, ...] = field(default=())
    #: the optimizer key (:data:`~autopar_opt.ir.training.OPTIMIZER_BYTES`) of the stack
    optimizer: str = "adam_mixed"

    @property
    def memory_only(self) -> bool:
        """Memory published, throughput not."""
        return self.kind == "end_to_end" and self.throughput is None

    def notes(self) -> list[str]:
        """The assumptions' sentences in reading order."""
        return [a.text for a in self.assumptions]

    def notes_with(self, model_notes: list[str]) -> list[str]:
        """The sentences with the builder's ``model_notes`` after the reading's
        own ``model`` topic (the order the reports print)."""
        upto = TOPICS.index("model")
        head = [a.text for a in self.assumptions if TOPICS.index(a.topic) <= upto]
        tail = [a.text for a in self.assumptions if TOPICS.index(a.topic) > upto]
        return head + model_notes + tail


def family_of(rec_id: str, framework: str) -> str:
    """Source family of a run (the unit of leave-one-family-out validation):
    one publication or published table series (first id token; two for the
    Megatron READMEs and Megatron-Bridge)."""
    parts = rec_id.split("_")
    if parts[0].startswith("bloom"):
        return "bloom"
    if parts[0] == "megatron":
        return "_".join(parts[:2])
    return parts[0]


#: Keys records state beside a section's declared ones that other readers take (the MoE
#: reading's expert width and active count, the experts' own TP degree): not misspellings.
KNOWN_EXTRAS = frozenset(("moe_ffn_hidden_size", "active_param_count_b", "etp"))


def misspelt_keys(raw: RawRecord) -> list[str]:
    """A note per extra key of a section that is a near-spelling of one of its declared keys
    (``parallelism.tpp`` for ``tp``): records keep extra keys by design, so such a key was
    ignored without a word (QA round 9)."""
    import difflib

    from autopar_opt.calibration.reading.schema import SECTIONS

    out = []
    for name in SECTIONS:
        section = getattr(raw, name, None)
        declared = list(type(section).model_fields) if section is not None else []
        for key in (getattr(section, "model_extra", None) or {}):
            if key in KNOWN_EXTRAS or not isinstance(key, str):
                continue
            near = difflib.get_close_matches(key, declared, n=1, cutoff=0.8)
            if near:
                out.append(f"{name}.{key} is not a key of the record format (did you mean "
                           f"{near[0]!r}?): ignored")
    return out


#: Megatron-Core written with a space or an underscore (the stacks' rules test "megatron-core").
_MEGATRON_CORE = re.compile(r"megatron[ _]core", re.IGNORECASE)


def megatron_core_spelling(framework: str, notes: list[str]) -> str:
    """``framework`` with "Megatron Core" / "megatron_core" written as "Megatron-Core", the
    spelling every rule of the reading tests (QA round 11: "Megatron Core 0.8" was read as
    the 2020-22 Megatron-LM stack); the reading is said."""
    fixed = _MEGATRON_CORE.sub("Megatron-Core", framework)
    if fixed != framework:
        notes.append(f"framework {framework!r} read as {fixed!r}")
    return fixed


def read_record(rec: dict | RawRecord) -> RunRecord:
    """Read one record; raises :class:`Unmodelable` with the reason it cannot
    be priced (the module docstring gives the order)."""
    raw = rec if isinstance(rec, RawRecord) else RawRecord.read(rec)
    notes: dict[str, list[str]] = {t: [] for t in TOPICS}
    notes["model"].extend(misspelt_keys(raw))
    hw, tr, meas = raw.hardware, raw.training, raw.measured
    framework = megatron_core_spelling(tr.text("framework"), notes["runtime"])
    runtime = runtime_of(framework, notes["runtime"], raw)
    device_type = dev.record_device(hw.text("gpu_type"), hw.gpu_memory_gb, notes["device"],
                                    hw.power_limit_w)
    device = device_type.name
    n = dev.num_gpus(hw)
    model_notes = notes["model"]
    layers = read_dims(raw.model)[0]
    spec = moe_reading.read_moe(raw, layers, model_notes)
    if spec is not None:
        runtime = moe_reading.moe_stack(framework, runtime, notes["runtime"])
    model = read_model(raw.model, runtime, spec is not None, model_notes)
    runtime = stacks.arch_flash_attention(model.arch, model.flash, runtime, notes["runtime"])
    runtime = stacks.cp_exchange(framework, runtime, notes["runtime"])
    runtime = apply_stated(raw, runtime, notes["runtime"])     # explicit beats the text
    moe = None
    if spec is not None:
        gated = moe_reading.moe_mlp_gated(model.arch, model_notes)
        attention = moe_reading.attention_dims(raw.model, spec, model.hidden, model.heads,
                                               model.kv_heads, model.biases)
        moe = MoeFacts(spec, attention, gated)
    par_notes = notes["parallelism"]
    dp_stated, ep = moe_reading.expert_parallel(raw.parallelism, n, spec, par_notes)
    parallel = read_parallelism(raw.parallelism, n, runtime, par_notes, dp_stated, ep)
    if model.heads < 1 or model.hidden % model.heads:
        # each head is hidden/heads wide: the record format states no other head width
        raise Unmodelable(f"model.num_attention_heads = {model.heads} does not divide "
                          f"model.hidden_size = {model.hidden} (each head is hidden/heads wide; "
                          "check the record's heads and hidden size)")
    if parallel.tp > 1 and model.heads % parallel.tp:
        # tensor parallelism splits the attention heads (Megatron-LM validate_args:
        # num_attention_heads % tensor_model_parallel_size == 0); QA round 9: tp 16 on 24
        # heads was priced
        raise Unmodelable(f"parallelism.tp = {parallel.tp} does not divide model."
                          f"num_attention_heads = {model.heads}: tensor parallelism splits the "
                          "heads, so no framework runs this layout (check the record's tp and "
                          "heads)")
    if parallel.tp > 1 and model.kv_heads % parallel.tp:
        # tensor parallelism splits the key/value heads too (Megatron-Core attention:
        # divide(num_query_groups, tensor_model_parallel_size); torchtitan's ColwiseParallel
        # wk/wv leave a rank part of a head); QA round 11: 2 KV heads at tp 4 were priced
        raise Unmodelable(f"parallelism.tp = {parallel.tp} does not divide the key/value heads "
                          f"(model.num_kv_heads = {model.kv_heads}): tensor parallelism splits "
                          "them, so no framework runs this layout (check the record's tp and "
                          "num_kv_heads)")
    if parallel.cp > 1 and model.seq % (2 * parallel.cp):
        # QA round 11: priced without a word; Megatron-Core and Transformer Engine split the
        # sequence into 2·cp chunks (load-balanced causal attention), which a launch refuses
        par_notes.append(f"model.seq_len {model.seq} is not a multiple of 2*cp = "
                         f"{2 * parallel.cp} (the frameworks split the sequence into 2*cp "
                         "chunks): priced as if it split evenly")
    etp = moe_reading.expert_tp(raw.parallelism, spec, par_notes)
    if spec is not None:
        moe_reading.check_ep(ep, parallel.dp, parallel.cp, spec, parallel.tp, etp)
        parallel = replace(parallel, etp=etp)
    cluster = dev.read_cluster(hw, device, n, notes["cluster"], device_type)
    dev.check_pipeline(parallel.pp, cluster)
    tn = notes["training"]
    precision = tr.text("precision")
    dtype = map_precision(precision, device, tn)
    runtime = fsdp_reduce_dtype(runtime, precision, tn)
    runtime = fp16_grad_dtype(runtime, dtype, framework, precision, tn)
    runtime = replace(runtime, **stated_options(raw))        # still beats the precision text
    counting = stacks.counting_of(runtime, raw.flops_counting, tn)
    recompute = map_recompute(tr.text("recompute"), counting, tn)
    batches = read_batches(tr, parallel.dp, tn, pp=parallel.pp, runtime=runtime,
                           framework=framework)
    offload = read_offload(tr, model.layers, parallel.pp, tn)
    autocast = autocast_of(precision, runtime, tn)
    optimizer = stacks.optimizer_of(framework, dtype, tn)
    per_layer = raw.record_type.startswith("per_layer")
    if raw.record_type and not per_layer and not raw.record_type.startswith("end_to_end"):
        raise Unmodelable(f"record_type {raw.record_type!r} is neither an end-to-end run "
                          "('end_to_end_training_throughput') nor one layer's time "
                          "('per_layer_time ...'): state which was measured")
    if per_layer and spec is not None:
        raise Unmodelable("per-layer record of an MoE model: only end-to-end MoE runs are modelled")
    sizes: tuple[int, ...] = ()
    throughput, no_throughput, layer_ms = None, "", None
    if per_layer:
        layer_ms = per_layer_ms(meas)
    else:
        sizes, said = stage_split(raw.parallelism, raw.notes, model.layers, parallel.pp)
        notes["parallelism"].extend(said)
        if spec is not None:
            moe_reading.check_counting(counting)
        try:
            throughput = pick_throughput(meas)
        except NoThroughput as exc:      # every throughput key null: memory only, if stated
            if spec is not None or not meas.memory_gib_per_gpu:
                raise Unmodelable(str(exc)) from None
            no_throughput = str(exc)
    measure, rank = memory_fields(meas)
    mem = meas.memory_gib_per_gpu
    hbm = DEVICE_CATALOG[device].hbm_gib
    if mem is not None and not 0 < mem <= 1.1 * hbm:
        raise Unmodelable(f"measured.memory_gib_per_gpu = {mem:g} is not a per-GPU memory of the "
                          f"{device} (0 < memory <= 1.1 x its {hbm:g} GiB): state GiB per GPU")
    return RunRecord(
        raw=raw, id=raw.id, family=family_of(raw.id, framework), framework=framework,
        kind="per_layer" if per_layer else "end_to_end", runtime=runtime, cluster=cluster,
        model=model, moe=moe, parallel=parallel, dtype=dtype, counting=counting,
        flops=read_counting(counting, device, dtype),
        recompute=recompute, batches=batches, activation_offload=offload, autocast=autocast,
        stage_sizes=sizes, throughput=throughput, no_throughput=no_throughput,
        per_layer_ms=layer_ms, memory_gib=mem, memory_measure=measure, memory_rank=rank,
        assumptions=tuple(Assumption(t, x) for t in TOPICS for x in notes[t]),
        optimizer=optimizer)
