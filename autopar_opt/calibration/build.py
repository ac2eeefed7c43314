"""Turn one read record (:class:`~autopar_opt.calibration.reading.RunRecord`)
into a model, a cluster, a manual plan and a measured throughput.

The record's texts and fields were read once
(:func:`~autopar_opt.calibration.reading.read_record`); nothing here reads a
mapping or a text. What the builders still decide (the embedding tying by
parameter count when nothing states it, the parameter check) is written into
the run's notes.

Conventions follow the frameworks the records come from:

* Megatron-LM places the embedding in the first stage and the LM head in the
  last and splits the transformer blocks evenly (``--num-layers`` must divide
  by ``pp``); BigScience Megatron-DeepSpeed gives the embeddings their own
  partition slots (``--pp-partition-method type:transformer|embedding``).
* Schedule 1F1B (Megatron's and DeepSpeed's default), interleaved with
  ``vp_chunks`` model chunks when ``vp_chunks > 1`` (Narayanan et al. 2021,
  Sec. 2.2.2).
* Micro-batches per iteration ``c = B / (b·dp)`` (gradient accumulation).
* The runtime (:func:`~autopar_opt.calibration.reading.runtime.runtime_of`) comes
  from the framework text; with fused (flash) attention (llm-foundry MPT's
  ``attn_impl``, Megatron-Core's Transformer Engine) there are no ``5·a·s²``
  score activations and causal blocks are skipped (FlashAttention-2, Dao
  2023, Sec. 3.1.1: half the score FLOPs).
* A runtime with a distributed optimizer (Megatron-Core, Megatron-Bridge)
  shards optimizer state over data parallelism (ZeRO-1).
* Mixture-of-Experts records (:mod:`.reading.moe` reads the expert fields,
  :mod:`.moe_build` builds the graph, the plan's ``ep`` and the MoE FLOP
  count); a record whose text says MoE but states no experts is refused.
* GB200: the NVLink domain (the two-tier model's "node") is the NVL72 rack;
  a job uses whole 4-GPU trays, the largest multiple of 4 up to 72 that
  divides its GPUs (256 GPUs: 4 x 64).
"""

from __future__ import annotations

from dataclasses import replace

from autopar_opt.calibration import moe_build
from autopar_opt.calibration.flops import Dims, measured_samples_per_s
from autopar_opt.calibration.modeled import ModeledRun
from autopar_opt.calibration.reading import RunRecord, Unmodelable
from autopar_opt.calibration.reading.model import resolve_tying
from autopar_opt.calibration.reading.measured import stated_throughputs
from autopar_opt.ir.graph import LayerGraph, LayerKind
from autopar_opt.ir.hardware import DEFAULT_INTER_NODE, LinkTier, Cluster, make_cluster
from autopar_opt.model_zoo.transformer import decoder_lm
from autopar_opt.ir.plan import uniform_plan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Schedule, Training


#: How far (relative) the built graph's parameter count may lie from the
#: model's published count (the record's ``param_count_b``, else its known
#: family's count for the named size) before the record is flagged: issue 28
#: allows no record built more than 3% from its published count.
PARAM_COUNT_TOLERANCE = 0.03
#: Prefix of the note :func:`param_count_note` writes (what the reports look for).
PARAM_CHECK = "PARAMETER CHECK"


def param_count_note(published: float | None, built: float, source: str = "param_count_b",
                     half_unit: float = 0.0) -> str | None:
    """A warning when the model built from a record's ``model`` fields lies
    more than :data:`PARAM_COUNT_TOLERANCE` from its published count (in
    parameters; a rounded count stands for the interval of ``half_unit``
    either side of it): the architecture fields (or the count) then describe
    another model than the one that ran, and the predicted compute is off by
    about as much (6·N·D, Kaplan et al. 2020, Sec. 2.1). ``None`` when no count
    is published or the two agree."""
    if not published:
        return None
    rel = param_count_gap(published, built, half_unit)
    if abs(rel) <= PARAM_COUNT_TOLERANCE:
        return None
    shown = f"{published / 1e9:g}" + (f" ± {half_unit / 1e9:g}" if half_unit else "")
    return (f"{PARAM_CHECK}: the model built from the record's fields has {built / 1e9:.2f} B "
            f"parameters, {rel:+.1%} from the published {shown} B ({source}; more than "
            f"{PARAM_COUNT_TOLERANCE:.0%} apart): check the architecture fields")


def param_count_gap(published: float, built: float, half_unit: float = 0.0) -> float:
    """Relative distance of ``built`` from the published interval
    ``published ± half_unit`` (0 inside it; signed)."""
    if built > published + half_unit:
        return built / (published + half_unit) - 1.0
    if built < published - half_unit:
        return built / (published - half_unit) - 1.0
    return 0.0


def param_count_warnings(items) -> list[str]:
    """``- `id`: note`` for every priced record (a comparison with ``id`` and
    ``assumptions``) whose notes carry :func:`param_count_note`'s warning."""
    return [f"- `{c.id}`: {note}" for c in items for note in c.assumptions
            if note.startswith(PARAM_CHECK)]


def _graph(rec: RunRecord, notes: list[str]) -> tuple[LayerGraph, Dims]:
    """(graph, FLOP-formula dims) of the record's model."""
    m = rec.model
    params = m.param_count_b
    if rec.moe is not None:
        graph = moe_build.moe_graph(rec, params * 1e9 if params else 0.0, notes)
        _check_params(m, graph.total_params(), notes)
        return graph, Dims(0, m.seq, m.layers, m.hidden, m.vocab,
                           params * 1e9 if params else float(graph.total_params()))

    def build(tied: bool) -> LayerGraph:
        return decoder_lm(rec.id, m.layers, m.seq, m.hidden, m.heads, m.ffn, m.vocab,
                          kv_heads=m.kv_heads, gated_mlp=m.gated, flash_attention=m.flash,
                          causal_flops=m.flash, learned_positions=m.learned_positions, tied=tied,
                          biases=m.biases, source=rec.id, fused_gated=rec.runtime.fused_swiglu,
                          dropout=m.dropout, model_fuses_qkv=m.fuses_qkv)

    graph = build(True)
    if not resolve_tying(m.tied, params * 1e9 if params else None, graph.total_params(),
                         m.vocab * m.hidden, notes):
        graph = build(False)
    _check_params(m, graph.total_params(), notes)
    return graph, Dims(0, m.seq, m.layers, m.hidden, m.vocab,
                       params * 1e9 if params else float(graph.total_params()))


def _check_params(m, built: float, notes: list[str]) -> None:
    note = param_count_note(m.published_params, built, m.published_source,
                            m.published_half_unit)
    if note:
        notes.append(note)


def _tying_assumed(notes: list[str]) -> tuple[str, ...]:
    """``("tied",)`` when the builder had to decide the embedding tying."""
    return ("tied",) if any(n.startswith("embedding tying not stated") for n in notes) else ()


def _cluster(rec: RunRecord) -> Cluster:
    c = rec.cluster
    inter = None
    if c.inter_node_gbps_per_gpu:
        inter = LinkTier("inter", c.inter_node_gbps_per_gpu / 8.0,
                         DEFAULT_INTER_NODE[c.device].latency_us)
    return make_cluster(rec.id, c.num_gpus // c.gpus_per_node, c.gpus_per_node,
                        c.device_type or c.device, inter_node=inter, source=c.system,
                        nics_per_node=c.nics_per_node, board_gpus=c.node_gpus,
                        nvlink_mesh=False if c.nvswitch else None)


#: Runtimes whose selective recomputation re-runs a FlashAttention core in the backward
#: pass: Megatron-Core checkpoints the core attention whatever its kernel
#: (``megatron/core/transformer/attention.py``: ``checkpoint_core_attention =
#: recompute_granularity == 'selective'`` and ``"core_attn" in recompute_modules``, then
#: ``_checkpointed_attention_forward``). Megatron-LM's legacy model skips it for
#: FlashAttention (``megatron/model/transformer.py`` ``ParallelAttention.forward``: ``if not
#: self.use_flash_attn: if self.checkpoint_core_attention: ...``), and there selective
#: recomputation of a FlashAttention model is none.
REPEATS_FUSED_CORE = frozenset({"megatron-core", "megatron-bridge"})


def build_run(rec: RunRecord) -> ModeledRun:
    """Everything needed to price the read record ``rec``; raises
    :class:`~autopar_opt.calibration.reading.Unmodelable` (or the cost
    model's ValueError) when what it states cannot be built."""
    notes: list[str] = []
    graph, dims = _graph(rec, notes)
    cluster = _cluster(rec)
    par, b = rec.parallel, rec.batches
    training = Training(b.microbatches * b.micro_batch * par.dp, rec.model.seq, rec.dtype,
                        rec.optimizer, runtime=rec.runtime, activation_offload=rec.activation_offload,
                        autocast=rec.autocast)
    recompute = rec.recompute
    if recompute is Recompute.selective and graph.layers[1].act_attn_bytes == 0 \
            and rec.runtime.name not in REPEATS_FUSED_CORE:
        recompute = Recompute.none     # FlashAttention keeps no attention core to drop
    strategy = Strategy(par.dp, par.tp, par.cp, par.sp, par.zero if par.dp > 1 else 0, recompute,
                        zero_group=par.zero_group)
    plan = None
    samples = b.micro_batch * par.dp
    if rec.kind == "per_layer":
        ms = rec.per_layer_ms
        measured, basis = samples / (ms * 1e-3), f"layer fwd+bwd = {ms:g} ms for {samples} samples"
    else:
        schedule = Schedule.interleaved if par.vp > 1 else Schedule.one_f_one_b
        plan = _blocks_only_recompute(
            uniform_plan([layer.name for layer in graph.layers], par.pp, strategy,
                         b.microbatches, schedule, par.vp, stage_sizes=list(rec.stage_sizes)),
            graph)
        dims = replace(dims, batch=b.global_batch, **rec.model.flop_dims)
        flops = None
        if rec.moe is not None:
            plan = moe_build.with_ep(plan, graph, par.ep, par.etp)
            bad = [s for st in plan.stages for s in st.strategies
                   if s.hybrid and s.ep > 1 and s.edp % s.replicas]
            if bad:      # Megatron-Core: "Expert data parallel size should be divisible by ..."
                raise Unmodelable(f"hybrid sharding with {bad[0].replicas} replicas does not "
                                  f"divide the expert data-parallel degree {bad[0].edp}")
            flops = moe_build.moe_flop_count(rec.flops.moe, dims, rec.moe.attention, rec.moe.spec,
                                             graph)
        if rec.throughput is None:
            measured, basis = None, "memory only (no throughput published)"
            if "hfu_pct" in rec.no_throughput:
                # QA round 11: a stated hfu_pct was set aside without a word in the record's
                # assumptions (the reason was only in the reading's exception text)
                notes.append("measured.hfu_pct is stated but not used alone (hardware FLOPs "
                             "count the recomputation each framework counts its own way): "
                             "compared on memory only; state mfu_pct, a rate or a time")
        else:
            measured, basis = measured_samples_per_s(rec.throughput, dims, rec.cluster.num_gpus,
                                                     rec.cluster.device, rec.dtype, rec.flops,
                                                     flops=flops)
            _refuse_beyond_peak(measured, basis, graph, cluster, training.dtype)
            notes.extend(disagreeing_figures(rec, measured, dims, flops))
            notes.extend(fraction_like_mfu(rec) or low_share(measured, basis, graph, cluster,
                                                             training.dtype))
            if ASSUMED_FORMULA in basis:
                # QA round 11: said only in --json's measured_basis, not in the text table
                notes.append(f"flops_counting not stated and {rec.runtime.name} logs no FLOP "
                             f"count of its own: {basis} (state the record's flops_counting: "
                             "PaLM / torchtitan, Megatron-Core num_floating_point_operations, "
                             "6ND or 72*B*s*l*h^2)")
    return ModeledRun(rec.id, rec.family, rec.framework, rec.kind, graph, cluster, training, plan,
                      strategy, samples, measured, basis, rec.memory_gib, rec.notes_with(notes),
                      rec.memory_measure, rec.memory_rank, rec.model.published_params,
                      rec.model.published_half_unit,
                      rec.model.architecture.assumed + _tying_assumed(notes))


#: Two stated throughput figures of one record further apart than this (relative, in
#: samples/s) are said: published figures are rounded to 2-3 digits (an MFU of 41% is
#: 40.5-41.5%, 1.2%), so a larger gap is a different quantity or a different FLOP count.
FIGURES_AGREE = 0.05


def disagreeing_figures(rec: RunRecord, measured: float, dims: Dims,
                        flops: tuple[float, str] | None) -> list[str]:
    """A note per stated throughput figure of ``rec`` besides the one compared on
    (:func:`~autopar_opt.calibration.reading.measured.pick_throughput`) that gives a rate
    more than :data:`FIGURES_AGREE` away from it: the record is compared on the first,
    and the user sees that its own figures disagree (a FLOP-derived figure inverted with
    a convention that is not the one the source used, or a unit slip) instead of the
    second being dropped without a word."""
    out = []
    for other in stated_throughputs(rec.raw.measured)[1:]:
        rate, how = measured_samples_per_s(other, dims, rec.cluster.num_gpus, rec.cluster.device,
                                           rec.dtype, rec.flops, flops=flops)
        gap = rate / measured - 1.0
        if abs(gap) > FIGURES_AGREE:
            out.append(f"measured figures disagree: {how} gives {rate:.4g} samples/s, "
                       f"{100 * gap:+.0f}% from the {measured:.4g} of "
                       f"{rec.throughput.key} (compared on), beyond the "
                       f"{100 * FIGURES_AGREE:g}% of rounding")
    return out


#: The mark the FLOP conventions' labels carry when the record's text named none
#: (:func:`autopar_opt.calibration.reading.counting.convention`).
ASSUMED_FORMULA = "[formula not stated: assumed]"


def fraction_like_mfu(rec: RunRecord) -> list[str]:
    """A note when the MFU a record is compared on is below 1: ``mfu_pct`` is a percentage,
    and 0.45 reads as 0.45 % of the peak, a hundredth of the 45 % a fraction of 0.45 means
    (QA round 11: compared at +8,600% without a word on the unit). Kept, not refused: a
    tiny model on a large GPU can run below 1 %."""
    t = rec.throughput
    if t is None or t.name != "mfu_pct" or t.value >= 1.0:
        return []
    return [f"measured.{t.key} = {t.value:g} read as {t.value:g} % of the peak (a percentage); "
            f"if it is a fraction ({100 * t.value:g} %), write {100 * t.value:g}"]


#: Below this share of the dense peak (model FLOPs, forward + backward; half the lowest
#: published, 10.4%) a measured rate is
#: said: the published runs reach 10-62% (234 end-to-end records of both files), a per-GPU
#: figure given as the job's total (or the other way round) is off by the GPU count.
LOW_SHARE = 0.05


def low_share(measured: float, basis: str, graph, cluster, dtype: str) -> list[str]:
    """A note when the measured rate is below :data:`LOW_SHARE` of the GPUs' dense peak under
    the model's FLOP count (QA round 11: ``tokens_per_sec`` meant per GPU, read as the job's
    total, was compared without a word); kept, not refused: a tiny model can run that low."""
    peak = cluster.device.peak_flops(dtype) * cluster.num_devices
    share = measured * graph.flops_per_sample() / peak if peak > 0 else 1.0
    if share >= LOW_SHARE:
        return []
    return [f"the measured rate ({basis}) is {100 * share:.2g}% of the {cluster.num_devices} GPUs' "
            f"dense {dtype} peak under the model's FLOP count, where published runs reach 10-62%: "
            "check the figure and its unit (per GPU or all GPUs)"]


def _refuse_beyond_peak(measured: float, basis: str, graph, cluster, dtype: str) -> None:
    """A measured rate whose model FLOPs (forward + backward, no recomputation) exceed
    the GPUs' dense peak is not one the hardware can run (a unit or a digit wrong):
    unmodelable, so it neither enters a comparison nor a fit. The published records
    reach at most 62% of it."""
    peak = cluster.device.peak_flops(dtype) * cluster.num_devices
    share = measured * graph.flops_per_sample() / peak if peak > 0 else 0.0
    if share > 1.0:
        raise Unmodelable(f"the measured rate ({basis}) is {100 * share:.0f}% of the "
                          f"{cluster.num_devices} GPUs' dense {dtype} peak under the model's FLOP "
                          "count (forward + backward, no recomputation): above 100%, not a rate "
                          "this hardware runs (fix: check the figure and its unit)")


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
