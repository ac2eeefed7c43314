"""bf16 on a GPU without bf16 tensor cores is refused like FP8 on one without FP8 ones (QA
round 11: a V100 record stating bf16 was read as fp16 and priced at the fp16 tensor-core peak,
125 TFLOP/s, which bf16 never reaches on Volta)."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.reading import Unmodelable, read_record
from support.runs import tiny_record

V100 = dict(hardware__gpu_type="V100-SXM2-32GB", hardware__gpu_memory_gb=32)


def test_bf16_on_a_v100_is_refused_naming_precision_and_device():
    with pytest.raises(Unmodelable, match=r"training\.precision 'bf16' is bf16 but V100-32GB has "
                                          r"no bf16 tensor cores"):
        read_record(tiny_record(**V100))                      # the tiny record says bf16


def test_fp16_on_a_v100_and_bf16_on_an_a100_are_read():
    assert read_record(tiny_record(training__precision="fp16", **V100)).dtype == "fp16"
    assert read_record(tiny_record(training__precision="mixed precision fp16", **V100)).dtype \
        == "fp16"
    assert read_record(tiny_record()).dtype == "bf16"
