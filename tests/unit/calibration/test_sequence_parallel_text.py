"""``parallelism.sequence_parallel`` written as text is read as what it says (QA round 11: the
text "false", as any non-empty text, was read as true, and Megatron sequence parallelism priced:
its activation memory divided by tp and its all-gathers / reduce-scatters instead of
all-reduces)."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.reading import Unmodelable, read_record
from support.runs import tiny_record

TP2 = dict(hardware__num_gpus=2, parallelism__tp=2, training__global_batch_size=1)


@pytest.mark.parametrize("value, sp", [("false", False), ("no", False), ("False", False),
                                       (0, False), ("true", True), ("yes", True), (True, True)])
def test_text_values_are_read_as_written(value, sp):
    assert read_record(tiny_record(parallelism__sequence_parallel=value, **TP2)).parallel.sp is sp


def test_another_text_is_refused():
    with pytest.raises(Unmodelable, match=r"parallelism\.sequence_parallel = 'maybe' must be "
                                          r"true or false"):
        read_record(tiny_record(parallelism__sequence_parallel="maybe", **TP2))
