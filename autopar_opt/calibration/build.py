"""Turn one published-run record into a model, a cluster, a manual plan and a
measured throughput (or say why it cannot be modeled).

Conventions follow the frameworks the records come from:

* Megatron-LM places the embedding in the first stage and the LM head in the
  last and splits the transformer blocks evenly (``--num-layers`` must divide
  by ``pp``); BigScience Megatron-DeepSpeed gives the embeddings their own
  partition slots (``--pp-partition-method type:transformer|embedding``).
* Schedule 1F1B (Megatron's and DeepSpeed's default), interleaved with
  ``vp_chunks`` model chunks when ``vp_chunks > 1`` (Narayanan et al. 2021,
  Sec. 2.2.2).
* Micro-batches per iteration ``c = B / (b·dp)`` (gradient accumulation).
* The runtime (:func:`~autopar_opt.calibration.reading.records.runtime_of`) comes
  from the framework text; with fused (flash) attention (llm-foundry MPT's
  ``attn_impl``, Megatron-Core's Transformer Engine) there are no ``5·a·s²``
  score activations and causal blocks are skipped (FlashAttention-2, Dao
  2023, Sec. 3.1.1: half the score FLOPs).
* A runtime with a distributed optimizer (Megatron-Core, Megatron-Bridge)
  shards optimizer state over data parallelism (ZeRO-1).
* Mixture-of-Experts records (:mod:`.moe_fields` reads the expert fields,
  :mod:`.moe_build` builds the graph, the plan's ``ep`` and the MoE FLOP
  count); a record whose text says MoE but states no experts is refused.
* GB200: the NVLink domain (the two-tier model's "node") is the NVL72 rack;
  a job uses whole 4-GPU trays, the largest multiple of 4 up to 72 that
  divides its GPUs (256 GPUs: 4 x 64).
"""

from __future__ import annotations

from dataclasses import replace

from autopar_opt.calibration import moe_build
from autopar_opt.calibration.reading import stacks
from autopar_opt.calibration.reading.measured import (
    Dims, NoThroughput, arch_dims, gated_mlp, measured_samples_per_s)
from autopar_opt.calibration.memory import memory_fields
from autopar_opt.calibration.reading.moe_fields import MoeSpec, read_moe
from autopar_opt.calibration.reading.records import (
    DEFAULT_GPUS_PER_NODE, ModeledRun, Unmodelable, autocast_of, default_sequence_parallel,
    family_of,
    fp16_grad_dtype, fsdp_reduce_dtype, integer,
    record_device,
    map_precision, map_recompute, map_zero, number, runtime_of, section, text, tied_embeddings)
from autopar_opt.ir.graph import LayerKind
from autopar_opt.ir.pipeline import pipeline_rule_broken
from autopar_opt.ir.hardware import DEFAULT_INTER_NODE, NVLINK_DOMAIN, DeviceType, LinkTier, make_cluster
from autopar_opt.ir.runtime import Runtime
from autopar_opt.ir.plan import uniform_plan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Schedule, Training
from autopar_opt.model_zoo.transformer import decoder_lm


#: Architectures whose own code fuses Q, K and V on every stack, so a runtime
#: without fused projections leaves their attention one GEMM: HF GPT-2
#: ``GPT2Attention.c_attn``, HF GPT-NeoX and BLOOM ``query_key_value``,
#: llm-foundry MPT ``Wqkv`` (``llmfoundry/models/layers/attention.py``).
FUSED_QKV_ARCHS = ("gpt-2", "gpt2", "gpt-neox", "gptneox", "bloom", "mpt")


#: How far (relative) the built graph's parameter count may lie from a record's
#: stated ``param_count_b`` before the record is flagged. Stated counts are
#: rounded names ("130B", "8B") and differ by convention (embeddings, biases,
#: norms in or out); over both record files every other record lies within 8%.
PARAM_COUNT_TOLERANCE = 0.10
#: Prefix of the note :func:`param_count_note` writes (what the reports look for).
PARAM_CHECK = "PARAMETER CHECK"


def param_count_note(stated_b: float | None, built: float) -> str | None:
    """A warning when the model built from a record's ``model`` fields has more
    than :data:`PARAM_COUNT_TOLERANCE` more or fewer parameters than its stated
    ``param_count_b``: the architecture fields (or the stated count) then
    describe another model than the one that ran, and the predicted compute
    is off by about as much (6·N·D, Kaplan et al. 2020, Sec. 2.1). ``None``
    when nothing is stated or the two agree."""
    if not stated_b:
        return None
    rel = built / (stated_b * 1e9) - 1.0
    if abs(rel) <= PARAM_COUNT_TOLERANCE:
        return None
    return (f"{PARAM_CHECK}: the model built from the record's fields has {built / 1e9:.2f} B "
            f"parameters, {rel:+.1%} against the stated param_count_b = {stated_b:g} B (more "
            f"than {PARAM_COUNT_TOLERANCE:.0%} apart): check the architecture fields")


def param_count_warnings(items) -> list[str]:
    """``- `id`: note`` for every priced record (a comparison with ``id`` and
    ``assumptions``) whose notes carry :func:`param_count_note`'s warning."""
    return [f"- `{c.id}`: {note}" for c in items for note in c.assumptions
            if note.startswith(PARAM_CHECK)]


def _model(rec: dict, runtime: Runtime, notes: list[str]):
    """(graph, FLOP-formula dims, MoE description or None) of the record's model."""
    m = section(rec, "model")
    layers = integer(m, "num_layers", "model", True)
    h = integer(m, "hidden_size", "model", True)
    a = integer(m, "num_attention_heads", "model", True)
    s = integer(m, "seq_len", "model", True)
    v = integer(m, "vocab_size", "model", True)
    moe = read_moe(rec, layers, notes)
    ffn = integer(m, "ffn_hidden_size", "model")
    if ffn is None and moe is None:
        ffn = 4 * h
        notes.append("ffn_hidden_size not stated: 4h (Megatron default)")
    kv = integer(m, "num_kv_heads", "model")
    if kv is None:
        kv = a
        notes.append("num_kv_heads not stated: = heads (multi-head attention)")
    arch = text(m, "arch").lower()
    flash = "flash" in arch or runtime.flash_attention
    if flash and "flash" not in arch:
        notes.append(f"fused (flash) attention: runtime {runtime.name}")
    params = number(m, "param_count_b", "model")
    if moe is not None:
        dims = Dims(0, s, layers, h, v, params * 1e9 if params else 0.0)
        graph = moe_build.moe_graph(rec, moe, dims, a, kv, flash, runtime.fused_swiglu, notes)
        _check_params(params, graph.total_params(), notes)
        return graph, Dims(0, s, layers, h, v, dims.params or float(graph.total_params())), moe
    def build(tied: bool):
        return decoder_lm(str(rec["id"]), layers, s, h, a, ffn, v, kv_heads=kv,
                          gated_mlp=gated_mlp(arch),
                          flash_attention=flash, causal_flops=flash,
                          learned_positions="learned pos" in arch, tied=tied,
                          biases="no bias" not in arch, source=str(rec["id"]),
                          fused_gated=runtime.fused_swiglu, dropout="no dropout" not in arch,
                          model_fuses_qkv=any(k in arch for k in FUSED_QKV_ARCHS))

    graph = build(True)
    if not tied_embeddings(m, arch, params * 1e9 if params else None, graph.total_params(),
                           v * h, notes):
        graph = build(False)
    _check_params(params, graph.total_params(), notes)
    dims = Dims(0, s, layers, h, v, params * 1e9 if params else float(graph.total_params()))
    return graph, dims, None


def _check_params(stated_b: float | None, built: float, notes: list[str]) -> None:
    note = param_count_note(stated_b, built)
    if note:
        notes.append(note)


def _parallelism(rec: dict, n: int, runtime: Runtime, notes: list[str]) -> dict:
    par = section(rec, "parallelism")
    tp = integer(par, "tp", "parallelism")
    pp = integer(par, "pp", "parallelism")
    if tp is None or pp is None:
        missing = [k for k, val in (("tp", tp), ("pp", pp)) if val is None]
        raise Unmodelable(f"parallelism.{'/'.join(missing)} not stated (null): the manual plan is unknown")
    cp = integer(par, "cp", "parallelism") or 1
    dp = integer(par, "dp", "parallelism")
    if dp is None:
        if n % (tp * pp * cp):
            raise Unmodelable(f"parallelism.dp is null and tp*pp*cp = {tp * pp * cp} does not divide {n} GPUs")
        dp = n // (tp * pp * cp)
        notes.append(f"dp not stated: num_gpus/(tp·pp·cp) = {dp}")
    if tp * pp * dp * cp != n:
        raise Unmodelable(f"tp*pp*dp*cp = {tp}*{pp}*{dp}*{cp} = {tp * pp * dp * cp} != num_gpus = {n}")
    sp = par.get("sequence_parallel")
    if sp is None:
        sp = tp > 1 and default_sequence_parallel(runtime)
        notes.append(f"sequence_parallel not stated: {sp} "
                     + ("(framework default off)" if not sp else
                        "(TP communication overlap needs it)" if runtime.tp_comm_overlap else
                        f"({runtime.name} TP always shards the sequence)"))
    vp = integer(par, "vp_chunks", "parallelism")
    if vp is None:
        vp = 1
        if pp > 1:
            notes.append("vp_chunks not stated: 1 (non-interleaved 1F1B)")
    zero = map_zero(par, runtime, notes)
    if zero == 0 and dp * cp > 1 and runtime.distributed_optimizer:
        zero = 1
        notes.append(f"distributed optimizer of {runtime.name}: optimizer state sharded (ZeRO-1)")
    return {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "sp": bool(sp) and tp > 1, "vp": vp,
            "zero": zero}


def _cluster(rec: dict, dev: DeviceType, n: int, notes: list[str]):
    hw = section(rec, "hardware")
    device = dev.name
    gpn = integer(hw, "gpus_per_node", "hardware")
    if gpn is None and device in NVLINK_DOMAIN:
        trays = [g for g in range(4, NVLINK_DOMAIN[device] + 1, 4) if n % g == 0]
        gpn = max(trays) if trays else n
        notes.append(f"{device}: NVLink domain of {gpn} GPUs used per NVL{NVLINK_DOMAIN[device]} rack")
    elif gpn is None:
        gpn = DEFAULT_GPUS_PER_NODE
        notes.append(f"gpus_per_node not stated: {gpn}")
    if n < gpn:
        gpn = n
    if n % gpn:
        raise Unmodelable(f"{n} GPUs are not whole nodes of {gpn}")
    gbps = number(hw, "inter_node_gbps_per_gpu", "hardware")
    inter = None
    if gbps:
        inter = LinkTier("inter", gbps / 8.0, DEFAULT_INTER_NODE[device].latency_us)
    elif n > gpn:
        notes.append(f"inter-node bandwidth not stated: catalog {DEFAULT_INTER_NODE[device].name} "
                     f"{DEFAULT_INTER_NODE[device].bandwidth_gb_per_s:g} GB/s per GPU")
    nics = integer(hw, "nics_per_node", "hardware")
    return make_cluster(str(rec["id"]), n // gpn, gpn, dev, inter_node=inter,
                        source=text(hw, "system"), nics_per_node=nics)


def _stage_sizes(num_blocks: int, pp: int, embed_slots: bool) -> list[int]:
    """Layers per stage: embedding first, head last, blocks spread evenly
    (with ``embed_slots`` the embedding and head count as blocks)."""
    items = num_blocks + (2 if embed_slots else 0)
    if items < pp:
        raise Unmodelable(f"{num_blocks} blocks cannot fill {pp} pipeline stages")
    base, extra = divmod(items, pp)
    sizes = [base + (1 if i < extra else 0) for i in range(pp)]
    if not embed_slots:
        sizes[0] += 1
        sizes[-1] += 1
    return sizes


def _batches(tr: dict, par: dict, notes: list[str]) -> tuple[int, int, int]:
    gbs = integer(tr, "global_batch_size", "training", True)
    mbs = integer(tr, "micro_batch_size", "training")
    if mbs is None:
        mbs = 1
        notes.append("micro_batch_size not stated: 1")
    per = mbs * par["dp"]
    c = max(1, round(gbs / per))
    if c * per != gbs:
        notes.append(f"global batch {gbs} is not a multiple of mbs·dp = {per}: priced as "
                     f"{c} micro-batches ({c * per} samples), throughput compared per sample")
    return gbs, mbs, c


def _offload(tr: dict, layers: int, pp: int, notes: list[str]) -> float:
    """``training.cpu_offloading_num_layers`` N (Megatron-Core: layers of each
    pipeline rank whose activations go to host memory) as the offloaded
    fraction ``N / (layers / pp)`` of :attr:`Training.activation_offload`."""
    n = integer(tr, "cpu_offloading_num_layers", "training")
    if not n:
        return 0.0
    per_rank = layers / pp
    if n >= per_rank:
        raise Unmodelable(f"training.cpu_offloading_num_layers = {n} is not below the "
                          f"{per_rank:g} layers of a pipeline rank (Megatron-Core requires it)")
    notes.append(f"CPU activation offload: {n} of {per_rank:g} layers per pipeline rank")
    return n / per_rank


def build_run(rec: dict) -> ModeledRun:
    """Everything needed to price ``rec``; raises :class:`Unmodelable` with the reason."""
    notes: list[str] = []
    hw, tr = section(rec, "hardware"), section(rec, "training")
    framework = text(tr, "framework")
    family = family_of(str(rec["id"]), framework)
    runtime = runtime_of(framework, notes, rec)
    dev = record_device(text(hw, "gpu_type"), number(hw, "gpu_memory_gb", "hardware"), notes,
                        number(hw, "power_limit_w", "hardware"))
    device = dev.name
    n = integer(hw, "num_gpus", "hardware", True)
    graph, dims, moe = _model(rec, runtime, notes)
    rec, ep = moe_build.expert_parallel(rec, n, moe, notes)
    par = _parallelism(rec, n, runtime, notes)
    if moe is not None:
        moe_build.check_ep(ep, par["dp"], par["cp"], moe)
    cluster = _cluster(rec, dev, n, notes)
    broken = pipeline_rule_broken(par["pp"], n, cluster.gpus_per_node)
    if broken:
        raise Unmodelable(f"the published plan breaks a pipeline rule: {broken}")
    dtype = map_precision(text(tr, "precision"), device, notes)
    runtime = fsdp_reduce_dtype(runtime, text(tr, "precision"), notes)
    runtime = fp16_grad_dtype(runtime, dtype, framework, text(tr, "precision"), notes)
    counting = stacks.counting_of(runtime, str(rec.get("flops_counting") or ""), notes)
    recompute = map_recompute(text(tr, "recompute"), counting, notes)
    if recompute is Recompute.selective and graph.layers[1].act_attn_bytes == 0:
        recompute = Recompute.none     # FlashAttention keeps no attention core to drop
    gbs, mbs, c = _batches(tr, par, notes)
    training = Training(c * mbs * par["dp"], dims.seq, dtype, runtime=runtime,
                        activation_offload=_offload(tr, dims.layers, par["pp"], notes),
                        autocast=autocast_of(text(tr, "precision"), runtime, notes))
    strategy = Strategy(par["dp"], par["tp"], par["cp"], par["sp"], par["zero"] if par["dp"] > 1 else 0,
                        recompute)
    meas = section(rec, "measured")
    per_layer = str(rec.get("record_type") or "").startswith("per_layer")
    if per_layer and moe is not None:
        raise Unmodelable("per-layer record of an MoE model: only end-to-end MoE runs are modelled")
    plan = None
    if per_layer:
        measured, basis = _per_layer_measured(meas, mbs * par["dp"])
    else:
        embed_slots = "own pp slot" in text(rec, "notes").lower()
        sizes = _stage_sizes(dims.layers, par["pp"], embed_slots)
        schedule = Schedule.interleaved if par["vp"] > 1 else Schedule.one_f_one_b
        plan = _blocks_only_recompute(
            uniform_plan([layer.name for layer in graph.layers], par["pp"], strategy, c,
                         schedule, par["vp"], stage_sizes=sizes), graph)
        dims = replace(dims, batch=gbs, **arch_dims(section(rec, "model")))
        if moe is not None:
            plan = moe_build.with_ep(plan, graph, ep)
            measured, basis = _moe_measured(rec, moe, dims, n, device, dtype, counting, graph)
        else:
            try:
                measured, basis = measured_samples_per_s(meas, dims, n, device, dtype, counting)
            except NoThroughput as exc:      # every throughput key null: memory only
                if not number(meas, "memory_gib_per_gpu", "measured"):
                    raise Unmodelable(str(exc)) from None
                measured, basis = None, "memory only (no throughput published)"
    measure, rank = memory_fields(meas)
    mem = number(meas, "memory_gib_per_gpu", "measured")
    hbm = cluster.device.hbm_gib
    if mem is not None and not 0 < mem <= 1.1 * hbm:
        raise Unmodelable(f"measured.memory_gib_per_gpu = {mem:g} is not a per-GPU memory of a "
                          f"{device} (0 < memory <= 1.1 x its {hbm:g} GiB): state GiB per GPU")
    return ModeledRun(str(rec["id"]), family, framework, "per_layer" if per_layer else "end_to_end",
                      graph, cluster, training, plan, strategy, mbs * par["dp"], measured, basis,
                      number(meas, "memory_gib_per_gpu", "measured"), notes, measure, rank)


def _blocks_only_recompute(plan, graph):
    """A record's full recomputation checkpoints the transformer (dense or MoE)
    layers only: the embedding, the output layer and the loss keep their activations (the
    logits) and are not recomputed (Megatron-LM ``--recompute-granularity
    full`` checkpoints inside ``TransformerBlock``; Hugging Face
    ``gradient_checkpointing_enable`` wraps the decoder blocks; DeepSpeed
    ``activation_checkpoint_interval`` the pipeline's layer specs)."""
    ends = {layer.name for layer in graph.layers
            if layer.kind in (LayerKind.embedding, LayerKind.lm_head)}
    for st in plan.stages:
        st.strategies = [s if name not in ends or s.recompute is not Recompute.full
                         else replace(s, recompute=Recompute.none)
                         for name, s in zip(st.layers, st.strategies)]
    return plan


def _per_layer_measured(meas: dict, samples: int) -> tuple[float, str]:
    other = meas.get("other") if isinstance(meas.get("other"), dict) else {}
    ms = number(other, "combined_ms", "measured.other")
    if ms is None:
        fwd = number(other, "forward_ms", "measured.other")
        bwd = number(other, "backward_ms", "measured.other")
        if fwd is None or bwd is None:
            raise Unmodelable("per-layer record without combined_ms or forward_ms + backward_ms")
        ms = fwd + bwd
    if ms <= 0:
        raise Unmodelable(f"per-layer time {ms} ms is not positive")
    return samples / (ms * 1e-3), f"layer fwd+bwd = {ms:g} ms for {samples} samples"


def _moe_measured(rec: dict, moe: MoeSpec, dims: Dims, n: int, device: str, dtype: str,
                  counting: str, graph) -> tuple[float, str]:
    """An MoE record's measured samples/s (:func:`moe_build.moe_measured`) with the
    MoE form of the FLOP convention its counting text names."""
    m = section(rec, "model")
    a = integer(m, "num_attention_heads", "model")
    attn = moe_build.attention_dims(m, moe, dims.hidden, a, integer(m, "num_kv_heads", "model") or a,
                                    "no bias" not in text(m, "arch").lower())
    flops = moe_build.moe_flop_count(counting, dims, attn, moe, graph)
    return moe_build.moe_measured(section(rec, "measured"), dims, flops, n, device, dtype, counting)
