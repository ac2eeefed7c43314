"""An MoE record as a graph, a plan with expert parallelism and a FLOP count.

Called from :mod:`autopar_opt.calibration.build` when
:func:`~autopar_opt.calibration.reading.moe_fields.read_moe` finds routed experts.

* Graph: the zoo's blocks (:func:`autopar_opt.model_zoo.blocks.decoder_block`,
  as :func:`autopar_opt.model_zoo.builders._moe` builds MoE decoders): GQA or
  MLA attention, SwiGLU routed experts (``moe_block`` layers), dense SwiGLU
  or plain MLPs for the dense layers, embedding and output layer as the dense
  calibration path builds them.
* Plan: the record's strategy on every layer, with ``ep`` on the MoE layers
  only (dense layers take ``ep = 1``: :func:`autopar_opt.ir.strategies.ep_degree_ok`).
* FLOPs for MFU / TFLOP/s inversion: Megatron-Core's
  ``num_floating_point_operations`` (NVIDIA/Megatron-LM
  ``megatron/training/training.py``, ``transformer_flops``): per token
  ``3·2·h·(3·f_dense·n_dense + 3·(k·f_e + f_shared)·n_moe)`` for the MLPs
  (only the ``top_k`` routed experts count; the router is not counted), the
  attention projections and core ``3·2·(h·(q + 2·g·d) + q·s·c + q·h)`` per
  layer (``c = 1/2`` with the causal halving of current Megatron-Core, ``1``
  in the form before it, e.g. ``core_r0.8``), MLA as that function writes it,
  and ``3·2·h·V`` for the logits.
"""

from __future__ import annotations

from dataclasses import replace

from autopar_opt.calibration.reading.measured import (
    _MCORE, _PALM, _SIX_ND, Dims, gated_mlp, measured_samples_per_s)
from autopar_opt.calibration.reading.moe_fields import EP_KEYS, ETP_KEYS, MoeSpec, first_stated
from autopar_opt.calibration.reading.records import Unmodelable, number, section, text, tied_embeddings
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.model_zoo.blocks import AttentionDims, MlpDims, decoder_block
from autopar_opt.model_zoo.transformer import embedding, lm_head
from autopar_opt.ir.plan import Plan, StagePlan


def attention_dims(m: dict, spec: MoeSpec, h: int, a: int, kv: int, biases: bool) -> AttentionDims:
    """GQA attention (``head_dim`` / ``kv_channels`` if stated, else ``h/a``) or MLA."""
    if spec.mla:
        x = spec.mla
        return AttentionDims(hidden=h, heads=a, kv_heads=a, head_dim=0,
                             q_lora_rank=x["q_lora_rank"], kv_lora_rank=x["kv_lora_rank"],
                             qk_nope_dim=x["qk_nope_dim"], qk_rope_dim=x["qk_rope_dim"],
                             v_head_dim=x["v_head_dim"])
    d = first_stated(m, ("head_dim", "kv_channels"), "model")[1]
    if not d:
        if h % a:
            raise Unmodelable(f"hidden_size {h} is not a multiple of {a} heads and "
                              "model.head_dim is not stated")
        d = h // a
    if a % kv:
        raise Unmodelable(f"num_kv_heads = {kv} does not divide num_attention_heads = {a}")
    return AttentionDims(hidden=h, heads=a, kv_heads=kv, head_dim=d, qkv_bias=biases,
                         out_bias=biases)


def _gated(arch: str, notes: list[str]) -> bool:
    """Dense-layer MLP gating; refuses non-gated experts (the zoo's are SwiGLU)."""
    if gated_mlp(arch) or "silu" in arch:
        return True
    if "gelu" in arch or "relu" in arch:
        raise Unmodelable("non-gated (GeLU/ReLU) experts: the zoo's MoE block prices SwiGLU "
                          "experts only")
    notes.append("MoE MLP activation not stated: SwiGLU (Mixtral, DeepSeek, Qwen-MoE, DBRX)")
    return True


def moe_graph(rec: dict, spec: MoeSpec, dims: Dims, heads: int, kv: int, flash: bool,
              fused_gated: bool, notes: list[str]) -> LayerGraph:
    """The record's MoE decoder: embedding, blocks (``spec.pattern``), output layer."""
    m = section(rec, "model")
    arch = text(m, "arch").lower()
    s, h, v = dims.seq, dims.hidden, dims.vocab
    biases = "no bias" not in arch
    gated = _gated(arch, notes)
    layer_norm = "layernorm" in arch.replace(" ", "") and "rmsnorm" not in arch
    attn = attention_dims(m, spec, h, heads, kv, biases)
    opts = dict(flash_attention=flash, causal_flops=flash, layer_norm=layer_norm,
                dropout="no dropout" not in arch, fused_gated=fused_gated)
    dense = MlpDims(spec.dense_ffn, gated=gated, bias=biases) if spec.dense_ffn else None
    blocks = [decoder_block(f"block{i:03d}", s, attn, **({"moe": spec.dims} if sparse
                                                        else {"mlp": dense}), **opts)
              for i, sparse in enumerate(spec.pattern)]
    embed = embedding("embed", s, h, v, "learned pos" in arch)
    head = lm_head("head", s, h, v, tied=True)
    if not layer_norm:                        # RMSNorm: one vector (lm_head counts LayerNorm's two)
        head = replace(head, params=head.params - h)
    tied_total = sum(b.params for b in blocks) + embed.params + head.params
    if not tied_embeddings(m, arch, dims.params, tied_total, v * h, notes):
        head = replace(head, params=head.params + v * h, tied_params=0, tied_to="")
    total = sum(b.params for b in blocks) + embed.params + head.params
    if dims.params and abs(total / dims.params - 1) > 0.05:
        notes.append(f"modelled parameters {total / 1e9:.3g} B differ from param_count_b "
                     f"{dims.params / 1e9:g} by more than 5%: check the expert fields")
    return LayerGraph.chain(str(rec["id"]), [embed, *blocks, head], seq_len=s, source=str(rec["id"]))


def expert_parallel(rec: dict, n: int, spec: MoeSpec | None, notes: list[str]) -> tuple[dict, int]:
    """(record with a Megatron-Core reading of ``parallelism.dp``, ``ep``).

    ``ep`` is carved out of ``dp·cp`` (``tp·pp·dp·cp = num_gpus``). A record
    whose stated ``dp`` satisfies ``tp·pp·dp·cp·ep = num_gpus`` instead counts
    the expert-data-parallel replicas: the attention layers' ``dp`` is then
    ``dp·ep``. ``ep`` unstated: 1 (Megatron-Core's default). The experts'
    tensor-parallel degree must equal ``tp``.
    """
    if spec is None:
        return rec, 1
    par = section(rec, "parallelism")
    ep = first_stated(par, EP_KEYS, "parallelism")[1]
    if not ep:
        notes.append("parallelism.ep not stated: 1 (Megatron-Core --expert-model-parallel-size "
                     "default)")
        return rec, 1
    tp, etp = number(par, "tp", "parallelism"), first_stated(par, ETP_KEYS, "parallelism")[1]
    if etp and tp and etp != tp:
        raise Unmodelable(f"expert tensor parallelism {etp} != tp {tp:g}: the cost model keeps "
                          "the experts' tp equal to tp (Megatron-Core's default ETP = TP)")
    vals = [number(par, k, "parallelism") for k in ("tp", "pp", "dp")]
    cp = number(par, "cp", "parallelism") or 1
    if all(vals):
        tp, pp, dp = vals
        if tp * pp * dp * cp != n and tp * pp * dp * cp * ep == n:
            notes.append(f"stated dp = {dp:g} counts expert replicas (tp·pp·dp·cp·ep = {n}): "
                         f"attention dp = dp·ep = {dp * ep:g} (Megatron-Core carves ep out of dp)")
            rec = {**rec, "parallelism": {**par, "dp": int(dp * ep)}}
    return rec, ep


def check_ep(ep: int, dp: int, cp: int, spec: MoeSpec) -> None:
    """Megatron-Core's rules: ``ep`` divides ``dp·cp`` and the number of experts."""
    if (dp * cp) % ep:
        raise Unmodelable(f"parallelism.ep = {ep} does not divide dp·cp = {dp * cp} "
                          "(Megatron-Core carves expert parallelism out of data parallelism)")
    if spec.dims.num_experts % ep:
        raise Unmodelable(f"parallelism.ep = {ep} does not divide the {spec.dims.num_experts} "
                          "routed experts (--num-experts % --expert-model-parallel-size)")


def with_ep(plan: Plan, graph: LayerGraph, ep: int) -> Plan:
    """``plan`` with expert parallelism ``ep`` on its MoE layers."""
    moe = {layer.name for layer in graph.layers if layer.is_moe}
    stages = [StagePlan(list(st.layers), [replace(s, ep=ep) if name in moe else s
                                          for name, s in zip(st.layers, st.strategies)])
              for st in plan.stages]
    return replace(plan, stages=stages)


def megatron_moe_flops(d: Dims, attn: AttentionDims, spec: MoeSpec, gated_dense: bool,
                       causal: bool) -> float:
    """Model FLOPs of one iteration (``d.batch`` samples), Megatron-Core
    ``num_floating_point_operations`` (see the module docstring)."""
    s, h, v, moe = d.seq, d.hidden, d.vocab, spec.dims
    n_moe = spec.moe_layers
    n_dense = len(spec.pattern) - n_moe
    mlp = 6 * h * ((3 if gated_dense else 2) * (spec.dense_ffn or 0) * n_dense
                   + 3 * (moe.top_k * moe.expert_ffn + moe.shared_ffn) * n_moe)
    c = 0.5 if causal else 1.0
    a = attn.heads
    if attn.mla:
        qk = attn.qk_nope_dim + attn.qk_rope_dim
        q = (attn.q_lora_rank * (h + a * qk + 1) if attn.q_lora_rank else h * a * qk)
        per_layer = 6 * (q + attn.kv_lora_rank * (h + a * (attn.qk_nope_dim + attn.v_head_dim) + 1)
                         + h * attn.qk_rope_dim + a * attn.v_head_dim * h
                         + c * s * a * (qk + attn.v_head_dim))
    else:
        qp = a * attn.head_dim
        per_layer = 6 * (h * (qp + 2 * attn.kv_heads * attn.head_dim) + 2 * c * qp * s + qp * h)
    return d.batch * s * (mlp + len(spec.pattern) * per_layer + 6 * h * v)


_DENSE_ONLY = (("llm-foundry", "llm-foundry 6·N·s"), ("model_size_b*4*2", "BigScience 8·N·s·B"),
               ("96*", "Narayanan 2021 Eq. 3"))


def moe_flop_count(counting: str, d: Dims, attn: AttentionDims, spec: MoeSpec,
                   graph: LayerGraph) -> tuple[float, str]:
    """(FLOPs of one iteration, label) by the convention the counting text names.

    Megatron-Core (named, or by default): :func:`megatron_moe_flops`, causal
    when the text says so. PaLM / torchtitan ``6·N' + 12·l·h·s`` and
    ``6·N·D`` count the parameters a token uses: for MoE the active ones
    (top-k of the routed experts; torchtitan's MoE models pass the
    active non-embedding count, ``get_nparams_and_flops``). Dense-only
    conventions (llm-foundry, BigScience 8·N·s·B, Eq. 3) have no stated MoE
    form: refused.
    """
    flat, low = counting.replace(" ", "").lower(), counting.lower()
    for key, label in _DENSE_ONLY:
        if key in flat:
            raise Unmodelable(f"flops_counting names {label}, a dense formula with no stated MoE "
                              "form: give iteration_time_s or tokens_per_sec_per_gpu")
    active, embed = graph.active_params(), d.vocab * d.hidden
    tokens = d.batch * d.seq
    if _PALM.search(low):
        per_token = 6 * (active - embed) + 12 * d.layers * d.hidden * d.seq
        return tokens * per_token, "PaLM / torchtitan 6·N_active' + 12·l·h·s (MoE: top-k experts)"
    if not _MCORE.search(low) and _SIX_ND.search(low):
        non_embed = "non-embedding" in low or "nonembedding" in flat
        n = active - (embed if non_embed else 0)
        return 6 * n * tokens, "6·N_active·D (MoE: top-k experts" + (
            ", non-embedding)" if non_embed else ")")
    causal = "causal" in low or "halv" in low
    label = "Megatron-Core num_floating_point_operations (MoE: top-k routed experts" + (
        ", causal)" if causal else ")")
    named = _MCORE.search(low) or "72*" in flat or "eq.7" in flat
    return megatron_moe_flops(d, attn, spec, True, causal), label + (
        "" if named else " [formula not stated: assumed]")


def moe_measured(meas: dict, d: Dims, flops: tuple[float, str], n: int, device: str,
                 dtype: str, counting: str) -> tuple[float, str]:
    """Measured samples/s as for dense records (:func:`measured_samples_per_s`:
    a measured rate first, else MFU, TFLOP/s per GPU or aggregate PFLOP/s),
    the FLOP figures inverted with ``flops`` (:func:`moe_flop_count`). A stated
    throughput key that is not usable (``measured.unusable_throughput``), or none
    stated, makes the record unmodelable (an MoE record has no memory-only form)."""
    try:
        return measured_samples_per_s(meas, d, n, device, dtype, counting, flops=flops)
    except ValueError as exc:
        raise Unmodelable(str(exc)) from None
