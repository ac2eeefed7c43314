"""The output layer's loss is priced at the HBM traffic its kernels move
(``compute.loss_traffic_bytes``), not at passes over the logits it keeps.

Before, the element-wise time was ``elementwise_passes`` x the bytes the loss
keeps: a 16-bit plain PyTorch loss (keeps 2 bytes per logit) cost exactly as
much as the fused kernel (also 2), half of Megatron's (4), and its backward
transients were not priced at all.

Oracle: the bytes per logit written out from the kernels (docstring of
``loss_traffic_bytes``, PyTorch ``LossNLL.cpp``/``Loss.cu``/``derivatives.yaml``,
flash-attn's cross-entropy kernel): fused 2 + 2 + 2 = 6; eager in 16 bits
``6·e`` = 12; eager in fp32 on 16-bit logits 6·4 + (2 + 4) + (4 + 2) = 36; at the
A100-80GB datasheet bandwidth, 2,039 GB/s. Everything else about the layer is
held equal, so the difference of two runtimes' compute times is the loss's
traffic difference alone.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autopar_opt.cost.compute import compute_time, loss_traffic_bytes
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import default_params
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.model_zoo.transformer import lm_head
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Training

BW = 2039e9
S, H, V, B = 1024, 1024, 32000, 4          # tokens, hidden, vocabulary, micro-batch samples
BASE = runtime_named("pytorch-fsdp")
FUSED = replace(BASE, fused_cross_entropy=True, eager_cross_entropy=False)
EAGER = replace(BASE, fused_cross_entropy=False, eager_cross_entropy=True)
EAGER32 = replace(EAGER, loss_fp32_upcast=True)
MEGATRON = replace(BASE, fused_cross_entropy=False, eager_cross_entropy=False,
                   loss_grad_cast=True)


def _time(runtime, strategy=Strategy(dp=1, tp=1), dtype="bf16") -> float:
    ctx = StageContext(make_cluster("c", 1, 8, "A100-80GB"),
                       Training(64, S, dtype, runtime=runtime), default_params(), 1, B)
    return compute_time(lm_head("head", S, H, V), strategy, ctx).total_s


def test_bytes_per_logit_by_hand():
    tr = lambda rt, dtype="bf16": loss_traffic_bytes(Training(64, S, dtype, runtime=rt))  # noqa: E731
    assert tr(FUSED) == 6.0
    assert tr(EAGER) == 12.0          # log_softmax 2+2; nll zero-fill 2; backward 2+2+2
    assert tr(EAGER32) == 36.0        # the same in fp32 (24) + the cast and its backward (12)
    assert tr(EAGER, "fp8") == 12.0   # FP8 training: the output layer is 16-bit, nothing to cast
    assert tr(EAGER, "fp32") == 24.0  # fp32 logits: nothing to cast
    assert tr(MEGATRON) is None       # priced as passes over its kept fp32 softmax


def test_eager_loss_is_not_faster_than_the_fused_kernel():
    logits = S * V * B                 # one device, tp = 1
    fused, eager, eager32 = _time(FUSED), _time(EAGER), _time(EAGER32)
    assert eager - fused == pytest.approx((12 - 6) * logits / BW, rel=1e-9)
    assert eager32 - fused == pytest.approx((36 - 6) * logits / BW, rel=1e-9)
    assert fused < eager < eager32


def test_megatron_loss_keeps_the_passes_over_its_fp32_softmax():
    p = default_params()
    logits = S * V * B
    assert _time(MEGATRON) - _time(FUSED) == pytest.approx(
        (p.elementwise_passes * 4 - 6) * logits / BW, rel=1e-9)


@pytest.mark.parametrize("tp", [2, 4])
def test_vocabulary_parallel_split_and_full_recomputation(tp):
    """The logits split over tp (vocabulary-parallel); full recomputation
    re-runs the forward third of the element-wise time, as for any layer."""
    logits = S * V * B / tp
    st = Strategy(dp=1, tp=tp)
    assert _time(EAGER, st) - _time(FUSED, st) == pytest.approx(6 * logits / BW, rel=1e-9)
    full = Strategy(dp=1, tp=tp, recompute=Recompute.full)
    assert _time(EAGER, full) - _time(FUSED, full) == pytest.approx(
        6 * logits * 4 / 3 / BW, rel=1e-9)
