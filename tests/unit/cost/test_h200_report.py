"""benchmarks/kernels/h200_report.py: the figures it derives, against hand computations.

Oracles: a GEMM's predicted time by hand from the roofline-saturation formula
(t = (τ + τ_half) / eff_max, τ = 2mnk / peak, the H200 datasheet's 989 / 1,979 TFLOP/s
dense peaks); one micro-batch's measured GEMM and attention times summed by hand from a
synthetic sweep; the quantile against numpy's linear interpolation."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from autopar_opt.cost.params import default_params

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "kernels" / "h200_report.py"


@pytest.fixture(scope="module")
def report():
    spec = importlib.util.spec_from_file_location("h200_report", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("dtype,peak,fp8", [("bf16", 989e12, False), ("fp8", 1979e12, True)])
def test_gemm_prediction_by_hand(report, dtype, peak, fp8):
    p = default_params()
    m, n, k = 4096, 6144, 4096
    tau_us = 2 * m * n * k / peak * 1e6            # bf16: 208.45 µs at peak
    by_hand = (tau_us + p.efficiency_half_us) / p.efficiency_for("H200-141GB", fp8=fp8) * 1e-6
    row = {"m": m, "n": n, "k": k, "dtype": dtype}
    assert report._predicted(row, p) == pytest.approx(by_hand, rel=1e-12)


def test_measured_parts_sum_the_step_shapes(report):
    # 2 blocks, h 8, 2 heads (head dim 4), 1 kv head, ffn 16, vocab 64, 4 tokens:
    # qkv (4, 16, 8), proj (4, 8, 8), fc1 (4, 32, 8), fc2 (4, 8, 16), logits (4, 64, 8)
    shapes = {"qkv": (4, 16, 8), "proj": (4, 8, 8), "fc1": (4, 32, 8), "fc2": (4, 8, 16), "logits": (4, 64, 8)}
    times = {"qkv": 1.0, "proj": 2.0, "fc1": 3.0, "fc2": 4.0, "logits": 10.0}
    layouts = {"fwd": 1.0, "dgrad": 0.1, "wgrad": 0.01}
    gemm = [{"m": m, "n": n, "k": k, "layout": lay, "dtype": "bf16", "s": times[g] * f}
            for g, (m, n, k) in shapes.items() for lay, f in layouts.items()]
    gemm.append({"m": 4, "n": 16, "k": 8, "layout": "fwd", "dtype": "fp8", "s": 1e6})   # not bf16: ignored
    res = {"step": {"dims": {"layers": 2, "h": 8, "heads": 2, "kv": 1, "ffn": 16, "vocab": 64}, "seq": 4,
                    "micro_batch_s": 100.0},
           "gemm": gemm,
           "attention_fill": [{"seq": 4, "heads": 2, "head_dim": 4, "fwd_bwd_s": 5.0},
                              {"seq": 4, "heads": 1, "head_dim": 4, "fwd_bwd_s": 99.0}]}
    parts = report.measured_parts(res)
    # per layout set 1.11 x; blocks 2 x (1+2+3+4) x 1.11 = 22.2, head 10 x 1.11 = 11.1
    assert parts["gemm"] == pytest.approx(33.3)
    assert parts["gemm_head"] == pytest.approx(11.1)
    assert parts["attention"] == pytest.approx(10.0)
    assert parts["rest"] == pytest.approx(100.0 - 33.3 - 10.0)


def test_quantile_is_numpys_linear_interpolation(report):
    values = [0.3, 2.0, 0.05, 1.1, 0.7, 0.9, 4.0]
    for q in (0.0, 0.5, 0.9, 1.0):
        assert report.pct(values, q) == pytest.approx(float(np.percentile(values, 100 * q)))
