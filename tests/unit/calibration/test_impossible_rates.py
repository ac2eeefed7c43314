"""A measured rate beyond the hardware's dense peak is unmodelable: it neither enters a
comparison nor a fit (found by a new user, session 24: ``tflops_per_gpu: 5000`` on an
A100 was compared at -97% and moved a fitted GEMM efficiency from 0.81 to 0.70, while
``mfu_pct: 150`` was refused)."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.reading import Unmodelable, read_record
from support.runs import tiny_record


def test_a_rate_above_the_peak_is_refused_naming_it():
    # one layer of h=64 at 1 ns per iteration: far beyond one A100's 312 TFLOP/s
    with pytest.raises(Unmodelable, match=r"iteration_time_s = 1e-09 s\) is \d+% of the 1 "
                                          r"GPUs' dense bf16 peak .*above 100%"):
        build_run(read_record(tiny_record(measured__iteration_time_s=1e-9)))


def test_a_rate_below_the_peak_is_kept():
    run = build_run(read_record(tiny_record()))          # 1 ms: a small fraction of it
    assert run.measured_samples_per_s == pytest.approx(1e3)
