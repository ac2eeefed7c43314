"""An fp32 (or TF32) run record is priced as fp32 training, as the schema's precision list
promises (QA round 11: "fp32" was "taken as bf16 (16-bit peak)": 2-byte weights, mixed Adam and
the 312 TFLOP/s bf16 peak of an A100 instead of its 19.5 fp32 / 156 TF32)."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.reading import read_record
from autopar_opt.ir.hardware import DEVICE_CATALOG
from support.runs import tiny_record


@pytest.mark.parametrize("text, dtype", [("fp32", "fp32"), ("float32", "fp32"),
                                         ("FP32 (TF32 matmuls)", "tf32"), ("tf32", "tf32")])
def test_fp32_texts_are_fp32_training(text, dtype):
    rec = read_record(tiny_record(training__precision=text))
    assert rec.dtype == dtype and rec.optimizer == "adam_fp32"
    assert not any("taken as bf16" in n for n in rec.notes())
    run = build_run(rec)
    assert run.training.dtype == dtype
    peak = DEVICE_CATALOG["A100-80GB"].peak_tflops[dtype]
    assert peak == {"fp32": 19.5, "tf32": 156.0}[dtype]
    assert any(f"dense {dtype} peak" in a for a in run.assumptions)   # the tiny rate's share


def test_16_bit_texts_naming_fp32_parts_stay_16_bit():
    assert read_record(tiny_record(training__precision="bf16 (fp32 master weights)")).dtype == "bf16"
    assert read_record(tiny_record(training__precision="fp16 mixed (fp32 master)")).dtype == "fp16"
