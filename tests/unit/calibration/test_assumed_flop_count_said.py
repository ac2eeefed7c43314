"""A FLOP-derived figure inverted with a convention the record does not state is said in the
record's assumptions, not only in ``--json``'s measured_basis (QA round 11: a DeepSpeed record
with ``tflops_per_gpu`` and no flops_counting was inverted with Eq. 7, and the text table, which
prints the assumptions and no basis, said nothing of it)."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.reading import read_record
from support.runs import tiny_record


def _said(framework: str, **measured):
    rec = tiny_record(training__framework=framework, measured__iteration_time_s=None,
                      **{f"measured__{k}": v for k, v in measured.items()})
    return [a for a in build_run(read_record(rec)).assumptions
            if a.startswith("flops_counting not stated and")]


@pytest.mark.parametrize("measured", [{"tflops_per_gpu": 1.0}, {"mfu_pct": 1.0}])
def test_an_assumed_convention_is_said(measured):
    said = _said("DeepSpeed", **measured)
    assert len(said) == 1 and "Korthikanti 2022 Eq. 7" in said[0]


def test_a_stack_with_its_own_count_or_a_measured_time_says_nothing_more():
    assert _said("torchtitan", tflops_per_gpu=1.0) == []
    assert _said("DeepSpeed", tokens_per_sec_per_gpu=32_000.0) == []
