"""The NICs per node a multi-node record leaves unstated are said (QA round 11: one per GPU was
taken without a word, and 2 instead of 8 moved a 4-node Llama-2-7B record from 55.86 to 53.06
predicted samples/s)."""

from __future__ import annotations

from autopar_opt.calibration.reading import read_record
from support.runs import tiny_record

NODES2 = dict(hardware__num_gpus=16, parallelism__dp=16, training__global_batch_size=16)


def _nic_notes(**changes) -> list[str]:
    return [n for n in read_record(tiny_record(**changes)).notes() if "nics_per_node" in n]


def test_unstated_nics_of_a_multi_node_run_are_said():
    assert _nic_notes(**NODES2) == ["nics_per_node not stated: one NIC per GPU (8 per node, the "
                                    "DGX design)"]
    assert _nic_notes(hardware__nics_per_node=4, **NODES2) == []
    assert _nic_notes() == []                       # one GPU: no network
