"""The one phrase of a record's free-text ``notes`` that changes its pricing, "own pp slot"
(BigScience's partition: the embedding and the LM head take pipeline slots of their own), is
said in the record's assumptions and in ``schema --runs`` (QA round 11: a 32-layer pp-4 record
went from 54.48 to 51.59 predicted samples/s, -5.3%, with no word)."""

from __future__ import annotations

from autopar_opt.calibration.reading import read_record
from autopar_opt.calibration.reading.run_schema import run_file_json_schema
from support.runs import tiny_record


def _record(notes: str):
    rec = tiny_record(model__num_layers=6, hardware__num_gpus=4, parallelism__pp=4,
                      training__global_batch_size=4)
    rec["notes"] = notes
    return read_record(rec)


def test_own_pp_slots_split_the_blocks_and_say_so():
    plain, slots = _record(""), _record("the embedding has its own pp slot")
    # by hand: 6 blocks as 2,2,1,1, the embedding on the first stage, the head on the last
    assert plain.stage_sizes == (3, 2, 1, 2)
    # own slots: 8 items (6 blocks + embedding + head) as 2,2,2,2
    assert slots.stage_sizes == (2, 2, 2, 2)
    said = [n for n in slots.notes() if "own pp slot" in n]
    assert len(said) == 1 and "[2, 2, 2, 2]" in said[0]
    assert not any("own pp slot" in n for n in plain.notes())
    assert "own pp slot" in run_file_json_schema()["items"]["properties"]["notes"]["description"]
