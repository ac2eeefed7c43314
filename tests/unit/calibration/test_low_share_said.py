"""A measured rate far below what any published run reaches is said with its share of the peak
(QA round 11: ``tokens_per_sec: 3500``, the per-GPU figure given as the job's total, was read as
438 tokens/s per GPU, 2% of the 8 H100s' peak, without a word). Oracle: the share is the
measured samples/s times the model's FLOPs per sample over the GPUs' dense peak."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.build import LOW_SHARE, build_run
from autopar_opt.calibration.reading import read_record
from support.runs import tiny_record


def _run(seconds: float):
    return build_run(read_record(tiny_record(measured__iteration_time_s=seconds)))


def _share(run) -> float:
    peak = run.cluster.device.peak_flops("bf16") * run.cluster.num_devices
    return run.measured_samples_per_s * run.graph.flops_per_sample() / peak


def test_a_rate_below_the_low_share_is_said_and_one_above_is_not():
    base = _run(1e-3)
    # the iteration time that puts the tiny record at 4x and at a tenth of LOW_SHARE
    fast = _run(1e-3 * _share(base) / (4 * LOW_SHARE))
    slow = _run(1e-3 * _share(base) / (0.1 * LOW_SHARE))
    assert _share(fast) == pytest.approx(4 * LOW_SHARE)
    said = [a for a in slow.assumptions if "of the 1 GPUs' dense bf16 peak" in a]
    assert len(said) == 1 and "0.5% of the 1 GPUs' dense bf16 peak" in said[0]
    assert not any("of the 1 GPUs' dense bf16 peak" in a for a in fast.assumptions)
