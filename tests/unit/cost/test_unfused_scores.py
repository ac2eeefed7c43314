"""Bytes an unfused attention core keeps per score, by the runtime's softmax
(autopar_opt.cost.scores).

Oracle: the tensors each code path saves for the backward pass, counted by hand per
score of the a·s² matrix (s = 4 tokens, a = 2 heads: 32 scores per sample; 16-bit):

* Megatron's fused softmax (``megatron/core/fusions/fused_softmax.py``,
  ``ScaledUpperTriangMaskedSoftmax.forward``: ``ctx.save_for_backward(softmax_results,
  ...)``; ``return softmax_results``, which ``DotProductAttention`` hands to ``torch.bmm``
  through the dropout): without dropout the one 16-bit output, 2 bytes (64); with it,
  also the dropout's mask (1) and output (2): 5 (160), Korthikanti et al. 2022 Sec. 4.1.
* Hugging Face ``eager_attention_forward`` (``softmax(attn_weights, dim=-1,
  dtype=torch.float32).to(query.dtype)``, ``modeling_llama.py``): the softmax's fp32
  output (4) and the 16-bit cast the ·V matmul saves (2): 6 (192); with dropout the
  cast feeds the dropout, which keeps its mask (1) and output (2): 7 (224).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autopar_opt.cost.assumptions import cost_assumptions
from autopar_opt.cost.memory import activation_bytes
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Training
from autopar_opt.model_zoo.blocks import AttentionDims, MlpDims, decoder_block
from autopar_opt.model_zoo.transformer import transformer_block

S, H, A = 4, 8, 2
SCORES = A * S * S              # 32


def _kept(layer, runtime: str, dtype: str = "bf16", autocast: bool = False, **opts) -> float:
    """Score bytes the runtime keeps: what selective recomputation drops."""
    tr = Training(1, S, dtype, runtime=runtime_named(runtime, flash_attention=False, **opts),
                  autocast=autocast)
    whole = activation_bytes(layer, Strategy(dp=1, tp=1), 1, Recompute.none, tr)
    return whole - activation_bytes(layer, Strategy(dp=1, tp=1), 1, Recompute.selective, tr)


def _blocks(dropout: bool):
    attn = AttentionDims(hidden=H, heads=A, kv_heads=A, head_dim=H // A)
    return (transformer_block("b", S, H, A, 4 * H, dropout=dropout),
            decoder_block("d", S, attn, mlp=MlpDims(4 * H), flash_attention=False,
                          dropout=dropout))


@pytest.mark.parametrize("dropout, megatron, hf", [(False, 2, 6), (True, 5, 7)])
def test_each_runtime_keeps_its_softmax(dropout, megatron, hf):
    for layer in _blocks(dropout):
        assert layer.act_attn_bytes == pytest.approx(megatron * SCORES)    # the builders' count
        assert _kept(layer, "megatron-lm") == pytest.approx(megatron * SCORES)
        assert _kept(layer, "deepspeed") == pytest.approx(megatron * SCORES)
        assert _kept(layer, "pytorch-fsdp") == pytest.approx(hf * SCORES)
        assert _kept(layer, "pytorch-ddp") == pytest.approx(hf * SCORES)
        # torch.autocast runs a plain softmax in fp32 whatever the stack
        assert _kept(layer, "megatron-lm", autocast=True) == pytest.approx(hf * SCORES)
        # a stated option wins over the catalog's
        assert _kept(layer, "pytorch-fsdp", fp32_attention_softmax=False) == \
            pytest.approx(megatron * SCORES)


def test_fp32_training_and_unstated_layers_keep_the_stated_figure():
    """In fp32 training the softmax is fp32 with no cast: the builders' count (taken at
    its element width) stands; a layer list's own act_attn_bytes (attn_dropout None) is
    taken as given on every runtime."""
    block, _ = _blocks(False)
    assert _kept(block, "pytorch-fsdp", dtype="fp32") == pytest.approx(2 * SCORES)
    stated = replace(block, attn_dropout=None, act_attn_bytes=100.0,
                     act_bytes=block.act_bytes - block.act_attn_bytes + 100.0)
    assert _kept(stated, "pytorch-fsdp") == pytest.approx(100.0)


def test_the_plan_says_the_rule():
    block, _ = _blocks(False)
    graph = LayerGraph.chain("g", [block], seq_len=S)
    cluster = make_cluster("c", 1, 8, "A100-80GB")
    lines = {rt: " ".join(cost_assumptions(graph, cluster, Training(
        1, S, runtime=runtime_named(rt, flash_attention=False)))) for rt in
        ("megatron-lm", "pytorch-fsdp")}
    assert "2 bytes per score, 5 with attention dropout" in lines["megatron-lm"]
    assert "6 bytes per score, 7 with attention dropout" in lines["pytorch-fsdp"]
