"""A layout that does not use the job's GPUs is refused naming the keys, the values, the rule
and the fix (QA round 11: "tp*pp*dp*cp = 1*1*8*1 = 8 != num_gpus = 16", with no section or fix)."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.reading import Unmodelable, read_record
from support.runs import tiny_record


def test_a_layout_not_using_every_gpu_is_refused_with_the_fix():
    with pytest.raises(Unmodelable) as err:
        read_record(tiny_record(hardware__num_gpus=2))      # tp 1, pp 1, dp 1, cp 1
    text = str(err.value)
    assert "parallelism tp*pp*dp*cp = 1*1*1*1 = 1 != hardware.num_gpus = 2" in text
    assert "must use every GPU of the job" in text and "fix: correct parallelism.dp" in text
