"""A record whose sequence does not split into 2·cp chunks says so (QA round 11: seq 4096
at cp 3 was priced without a word, while Megatron-Core and Transformer Engine split the
sequence into 2·cp chunks). Oracle: 2·cp divides 32 at cp 2 (4 chunks), not at cp 3 (6)."""

from __future__ import annotations

from autopar_opt.calibration.reading import read_record
from support.runs import tiny_record


def _said(cp: int, seq: int) -> list[str]:
    rec = tiny_record(hardware__num_gpus=cp, parallelism__cp=cp, model__seq_len=seq)
    return [n for n in read_record(rec).notes() if "not a multiple of 2*cp" in n]


def test_a_sequence_that_does_not_split_into_2cp_chunks_is_said():
    assert _said(3, 32) == ["model.seq_len 32 is not a multiple of 2*cp = 6 (the frameworks "
                            "split the sequence into 2*cp chunks): priced as if it split evenly"]
    assert _said(2, 32) == [] and _said(1, 33) == []


def test_an_uneven_stage_split_is_said():
    """QA round 11: 3 layers over pp 2 were split 2 + 1 without a word (records state no
    split). Oracle: the split by hand, embedding on the first stage and head on the last."""
    rec = tiny_record(hardware__num_gpus=2, parallelism__pp=2, model__num_layers=3)
    said = [n for n in read_record(rec).notes() if "do not divide over pp" in n]
    assert said == ["the 3 transformer layers do not divide over pp = 2 and the record states "
                    "no split (parallelism.pp_stage_layers): spread evenly, the first stages "
                    "one more (layers per stage, "
                    "embedding and head included: [3, 2])"]
    even = tiny_record(hardware__num_gpus=2, parallelism__pp=2, model__num_layers=4)
    assert not [n for n in read_record(even).notes() if "do not divide over pp" in n]
