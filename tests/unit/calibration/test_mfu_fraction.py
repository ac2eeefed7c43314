"""An MFU below 1 is read as a percentage and said (QA round 11: ``mfu_pct: 0.45``, meant as a
fraction, was compared as 0.45 % of the peak at +8,600% with no word on the unit)."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.reading import read_record
from support.runs import tiny_record


def _run(mfu: float):
    return build_run(read_record(tiny_record(measured__iteration_time_s=None,
                                             measured__mfu_pct=mfu)))


def test_an_mfu_below_one_is_kept_as_a_percentage_and_said():
    small, big = _run(0.45), _run(45.0)
    # the same FLOP inversion: the measured rate is proportional to the MFU
    assert small.measured_samples_per_s == pytest.approx(big.measured_samples_per_s / 100)
    said = [a for a in small.assumptions if "mfu_pct = 0.45 read as 0.45 % of the peak" in a]
    assert len(said) == 1 and "write 45" in said[0]
    assert not any("read as" in a and "mfu_pct" in a for a in big.assumptions)
