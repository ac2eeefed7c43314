"""A GPU count that is not whole nodes is refused naming both keys, their values and the fix
(QA round 11: "16 GPUs are not whole nodes of 12")."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.reading import Unmodelable, read_record
from support.runs import tiny_record


def test_gpus_not_filling_whole_nodes_are_named():
    rec = tiny_record(hardware__num_gpus=16, hardware__gpus_per_node=12, parallelism__dp=16,
                      training__global_batch_size=16)
    with pytest.raises(Unmodelable, match=r"hardware\.num_gpus = 16 is not a whole number of "
                                          r"nodes of hardware\.gpus_per_node = 12 \(fix: "):
        read_record(rec)
