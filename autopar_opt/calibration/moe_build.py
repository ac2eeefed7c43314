"""An MoE record as a graph, a plan with expert parallelism and a FLOP count.

Called from :mod:`autopar_opt.calibration.build` when
the record's reading (:mod:`autopar_opt.calibration.reading.moe`) found routed experts.

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

from autopar_opt.calibration.flops import Dims
from autopar_opt.calibration.reading import RunRecord
from autopar_opt.calibration.reading.model import resolve_tying
from autopar_opt.calibration.reading.moe import MoeSpec
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.model_zoo.blocks import AttentionDims, MlpDims, decoder_block
from autopar_opt.model_zoo.transformer import embedding, lm_head
from autopar_opt.ir.plan import Plan, StagePlan


def moe_graph(rec: RunRecord, stated_params: float, notes: list[str]) -> LayerGraph:
    """The record's MoE decoder: embedding, blocks (``spec.pattern``), output
    layer; ``stated_params`` the published count (0 when not stated)."""
    m, moe = rec.model, rec.moe
    spec = moe.spec
    s, h, v = m.seq, m.hidden, m.vocab
    opts = dict(flash_attention=m.flash, causal_flops=m.flash, layer_norm=m.layer_norm,
                dropout=m.dropout, fused_gated=rec.runtime.fused_swiglu)
    dense = MlpDims(spec.dense_ffn, gated=moe.gated, bias=m.biases) if spec.dense_ffn else None
    blocks = [decoder_block(f"block{i:03d}", s, moe.attention, **({"moe": spec.dims} if sparse
                                                                 else {"mlp": dense}), **opts)
              for i, sparse in enumerate(spec.pattern)]
    embed = embedding("embed", s, h, v, m.learned_positions, dropout=m.dropout)
    head = lm_head("head", s, h, v, tied=True)
    if not m.layer_norm:                      # RMSNorm: one vector (lm_head counts LayerNorm's two)
        head = replace(head, params=head.params - h)
    tied_total = sum(b.params for b in blocks) + embed.params + head.params
    if not resolve_tying(m.tied, stated_params, tied_total, v * h, notes):
        head = replace(head, params=head.params + v * h, tied_params=0, tied_to="")
    total = sum(b.params for b in blocks) + embed.params + head.params
    if stated_params and abs(total / stated_params - 1) > 0.05:
        notes.append(f"modelled parameters {total / 1e9:.3g} B differ from param_count_b "
                     f"{stated_params / 1e9:g} by more than 5%: check the expert fields")
    return LayerGraph.chain(rec.id, [embed, *blocks, head], seq_len=s, source=rec.id)


def with_ep(plan: Plan, graph: LayerGraph, ep: int, etp: int = 0) -> Plan:
    """``plan`` with expert parallelism ``ep`` (and expert tensor parallelism
    ``etp``, 0: equal to ``tp``) on its MoE layers."""
    moe = {layer.name for layer in graph.layers if layer.is_moe}
    stages = [StagePlan(list(st.layers), [replace(s, ep=ep, etp=etp) if name in moe else s
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


def moe_flop_count(convention: tuple[str, str], d: Dims, attn: AttentionDims, spec: MoeSpec,
                   graph: LayerGraph) -> tuple[float, str]:
    """(FLOPs of one iteration, label) by the MoE convention the record's
    counting text names (``convention``: key and label of
    :func:`autopar_opt.calibration.reading.counting.moe_convention`).

    Megatron-Core (named, or by default): :func:`megatron_moe_flops`, causal
    for ``mcore_causal``. PaLM / torchtitan ``6·N' + 12·l·h·s`` and
    ``6·N·D`` count the parameters a token uses: for MoE the active ones
    (top-k of the routed experts; torchtitan's MoE models pass the active
    non-embedding count, ``get_nparams_and_flops``). Dense-only conventions
    (llm-foundry, BigScience 8·N·s·B, Eq. 3) were refused by the reading
    (:func:`autopar_opt.calibration.reading.moe.check_counting`).
    """
    key, label = convention
    active, embed = graph.active_params(), d.vocab * d.hidden
    tokens = d.batch * d.seq
    if key == "palm":
        return tokens * (6 * (active - embed) + 12 * d.layers * d.hidden * d.seq), label
    if key in ("six_nd", "six_nd_non_embedding"):
        return 6 * (active - (embed if key == "six_nd_non_embedding" else 0)) * tokens, label
    return megatron_moe_flops(d, attn, spec, True, key == "mcore_causal"), label
