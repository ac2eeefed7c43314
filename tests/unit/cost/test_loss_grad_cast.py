"""The output layer's cross-entropy backward transient
(cost/memory.py ``loss_grad_cast_bytes``, part of ``working_set_bytes``).

Oracles: hand-derived bytes from the layer sizes. Megatron's vocabulary-parallel
loss keeps the 4·s·V fp32 softmax and, in the backward pass, casts the fp32
gradient written in its place to the 16-bit logits' dtype while it is alive
(Megatron-Core ``megatron/core/tensor_parallel/cross_entropy.py``,
``_VocabParallelCrossEntropy``): 2 bytes per logit on top of the 4, per device
``2·s·V / tp · b / (dp·cp)``. A fused loss kernel (``fused_cross_entropy``), 32-bit
logits and runtimes whose loss is not Megatron's add nothing.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from support.two_stage_lm import evaluate_on_off
from autopar_opt.cost.memory import activation_bytes, loss_grad_cast_bytes, working_set_bytes
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import GIB
from autopar_opt.model_zoo.transformer import lm_head
from autopar_opt.ir.runtime import RUNTIMES, runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Training

S, H, V = 8, 16, 64          # 512 logits per sample; fp32 logits 4·s·V = 2048 bytes


def _tr(runtime: str = "megatron-core", dtype: str = "bf16", **caps: bool) -> Training:
    return Training(global_batch_size=8, seq_len=S, dtype=dtype, runtime=runtime_named(runtime, **caps))


def test_hand_derived_transient_of_a_tiny_output_layer() -> None:
    """s = 8, V = 64: 512 logits per sample. Micro-batch of 4 samples over dp = 2:
    2 samples per GPU; tp = 2 splits the vocabulary: 2 B x 512 / 2 x 2 = 1024 bytes.
    cp = 2 halves the sequence share again (512 bytes); tp = 1, dp = 1: 2 x 512 x 4 = 4096."""
    head = lm_head("head", S, H, V)
    tr = _tr()
    assert tr.runtime.loss_grad_cast and not tr.runtime.fused_cross_entropy
    assert loss_grad_cast_bytes(head, Strategy(dp=2, tp=2), 4, tr) == pytest.approx(1024)
    assert loss_grad_cast_bytes(head, Strategy(dp=2, tp=2, cp=2), 4, tr) == pytest.approx(512)
    assert loss_grad_cast_bytes(head, Strategy(dp=1, tp=1), 4, tr) == pytest.approx(4096)
    # it is the output layer's whole working set here (no recompute, no ZeRO-3) ...
    assert working_set_bytes(head, Strategy(dp=2, tp=2), 4, tr) == pytest.approx(1024)
    # ... and half of the fp32 logits it keeps (6 bytes per logit at the peak, not 4)
    kept = activation_bytes(head, Strategy(dp=2, tp=2), 4, training=tr) - 4 * S * H * 2
    assert kept == pytest.approx(2 * 4 * 512 / 2)
    # the other Megatron stacks the same; FP8 training keeps 16-bit logits: same
    for rt in ("megatron-lm", "megatron-bridge", "deepspeed"):
        assert loss_grad_cast_bytes(head, Strategy(dp=2, tp=2), 4, _tr(rt)) == pytest.approx(1024), rt
    assert loss_grad_cast_bytes(head, Strategy(dp=2, tp=2), 4, _tr(dtype="fp8")) == pytest.approx(1024)


def test_no_transient_without_the_cast() -> None:
    """A fused kernel writing its gradient in place (llm-foundry's flash-attn xentropy),
    32-bit logits (nothing to cast), runtimes whose loss is plain PyTorch (their own
    transient: tests/unit/cost/test_eager_loss.py)
    and every other layer kind: 0."""
    head = lm_head("head", S, H, V)
    s = Strategy(dp=2, tp=2)
    assert loss_grad_cast_bytes(head, s, 4, _tr(fused_cross_entropy=True)) == 0.0
    assert loss_grad_cast_bytes(head, s, 4, _tr("pytorch-fsdp")) == 0.0
    assert RUNTIMES["pytorch-fsdp"].fused_cross_entropy
    assert loss_grad_cast_bytes(head, s, 4, _tr(dtype="fp32")) == 0.0
    for rt in ("pytorch-ddp", "torchtitan"):
        assert loss_grad_cast_bytes(head, s, 4, _tr(rt)) == 0.0, rt
    block = Layer("b", LayerKind.transformer_block, params=10, act_bytes=4096.0,
                  act_replicated_bytes=1024.0, input_bytes=64.0)
    assert loss_grad_cast_bytes(block, s, 4, _tr()) == 0.0


def test_adds_to_the_recomputed_activations_of_the_output_layer() -> None:
    """Full recomputation of the output layer: X = (full - kept) + the cast, per the
    rule that a layer's working-set parts add. dp = tp = 1, 4 samples:
    full = (4·s·h + 4·s·V) x 4 = (512 + 2048) x 4 = 10240 (the final norm's input and
    output, Korthikanti et al. 2022, Sec. 4.3, and the fp32 logits), kept = input
    2·s·h x 4 = 1024, cast = 2 x 512 x 4 = 4096: X = 9216 + 4096 = 13312."""
    head = lm_head("head", S, H, V)
    s = Strategy(dp=1, tp=1, recompute=Recompute.full)
    assert working_set_bytes(head, s, 4, _tr()) == pytest.approx(13312)
    assert working_set_bytes(head, s, 4, _tr(fused_cross_entropy=True)) == pytest.approx(
        (4 * S * H + 2 * S * V) * 4 - 2 * S * H * 4)       # 16-bit logits kept, no cast


def test_evaluate_holds_it_in_the_last_stage() -> None:
    """Two stages (pp = 2) of 2 GPUs each (dp = 2, tp = 1), no recompute, ZeRO-0:
    only the output layer has a working set. Batch 8, 2 micro-batches of 4: 2
    samples per GPU, s = 256, V = 1000: X = 2 B x 256 x 1000 x 2 = 1,024,000 bytes on
    the last stage, 0 on the first; turning the cast off lowers the last stage's
    modelled bytes by exactly that and leaves the first stage's unchanged."""
    on = Training(global_batch_size=8, seq_len=256)
    assert on.runtime.loss_grad_cast
    off = replace(on, runtime=replace(on.runtime, loss_grad_cast=False))
    x = 2 * 256 * 1000 * 2
    m_on, m_off, modelled = evaluate_on_off(on, off)
    assert m_on.stages[1].working_gib == pytest.approx(x / GIB, rel=1e-12)
    assert m_on.stages[0].working_gib == 0.0 and m_off.stages[1].working_gib == 0.0
    assert modelled[1] - modelled[3] == pytest.approx(x / GIB, rel=1e-9)
    assert modelled[0] == pytest.approx(modelled[2], rel=1e-12)
