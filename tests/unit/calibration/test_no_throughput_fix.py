"""A record with no throughput and no memory is refused with the fix, not only the rule (QA
round 11: "no usable measured throughput (...all null)" said what was missing, not what to
write)."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.reading import Unmodelable, read_record
from support.runs import tiny_record


def test_no_throughput_names_the_keys_and_the_fix():
    with pytest.raises(Unmodelable) as err:
        build_run(read_record(tiny_record(measured__iteration_time_s=None)))
    text = str(err.value)
    assert text.startswith("no usable measured throughput (iteration_time_s, ")
    assert "fix: state one of them under measured in its unit" in text
    assert "measured.memory_gib_per_gpu to compare on memory alone" in text
