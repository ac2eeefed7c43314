"""How a record's layers are split over its pipeline stages (calibration.reading.pipeline_split):
stated as ``parallelism.pp_partition`` or ``pp_stage_layers``, else read from the notes' words
naming an embedding-slot partition, and said in the record's assumptions (QA round 11: a 32-layer
pp-4 record went from 54.48 to 51.59 predicted samples/s, -5.3%, with no word; session 32: five
BLOOM records writing "embeddings as own slots" were split evenly)."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.reading import Unmodelable, read_record
from autopar_opt.calibration.reading.run_schema import run_file_json_schema
from support.runs import tiny_record


def _record(notes: str = "", **parallelism):
    rec = tiny_record(model__num_layers=6, hardware__num_gpus=4, parallelism__pp=4,
                      training__global_batch_size=4)
    rec["notes"] = notes
    rec["parallelism"].update(parallelism)
    return read_record(rec)


def _split_notes(rec) -> list[str]:
    return [n for n in rec.notes() if "layer's place in the split" in n]


@pytest.mark.parametrize("notes", [
    "the embedding has its own pp slot",
    "PP partition with embeddings as own slots. A 48 GPU subset test",
    "--pp-partition-method type:transformer|embedding",
    "run with --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split",
])
def test_notes_naming_embedding_slots_split_the_blocks_and_say_so(notes):
    plain, slots = _record(), _record(notes)
    # by hand: 6 blocks as 2,2,1,1, the embedding on the first stage, the head on the last
    assert plain.stage_sizes == (3, 2, 1, 2)
    # own slots: 8 items (6 blocks + embedding + head) as 2,2,2,2
    assert slots.stage_sizes == (2, 2, 2, 2)
    said = _split_notes(slots)
    assert len(said) == 1 and "[2, 2, 2, 2]" in said[0] and "the notes name it" in said[0]
    assert "pp_partition: embedding_slots" in said[0]
    assert not _split_notes(plain)


def test_notes_about_other_slots_do_not_move_the_split():
    rec = _record("booked a time slot on the cluster; each team had its own slot")
    assert rec.stage_sizes == (3, 2, 1, 2) and not _split_notes(rec)


def test_the_stated_partition_beats_the_notes():
    stated = _record("embeddings as own slots", pp_partition="even")
    assert stated.stage_sizes == (3, 2, 1, 2) and not _split_notes(stated)
    slots = _record("", pp_partition="embedding_slots")
    assert slots.stage_sizes == (2, 2, 2, 2)
    assert "parallelism.pp_partition = embedding_slots" in _split_notes(slots)[0]


def test_stated_stage_layers_are_taken_with_embedding_and_head_added():
    rec = _record("embeddings as own slots", pp_stage_layers=[1, 2, 2, 1])
    # the embedding joins stage 0, the head stage 3: items 2, 2, 2, 2
    assert rec.stage_sizes == (2, 2, 2, 2)
    assert any("as stated: [1, 2, 2, 1]" in n for n in rec.notes())


@pytest.mark.parametrize("key,value,words", [
    ("pp_partition", "balanced", "is not a partition this reader knows"),
    ("pp_stage_layers", [2, 2, 2], "must list 4 stages (pp) whose layers add up to"),
    ("pp_stage_layers", [2, 2, 2, 2], "adding up to 8"),
    ("pp_stage_layers", [2, -1, 3, 2], "must be a list of whole numbers"),
    ("pp_stage_layers", "2,2,1,1", "must be a list of whole numbers"),
])
def test_a_bad_stated_split_is_refused_naming_key_value_and_rule(key, value, words):
    with pytest.raises(Unmodelable, match="parallelism." + key) as exc:
        _record(**{key: value})
    assert words in str(exc.value)


def test_both_split_fields_stated_is_refused():
    with pytest.raises(Unmodelable, match="both stated"):
        _record(pp_partition="embedding_slots", pp_stage_layers=[1, 2, 2, 1])


def test_the_run_schema_documents_the_fields_and_the_notes_reading():
    schema = run_file_json_schema()
    par = schema["$defs"]["Parallelism"]["properties"]
    assert par["pp_partition"]["anyOf"][0] == {"enum": ["even", "embedding_slots"]}
    assert par["pp_stage_layers"]["anyOf"][0]["items"] == {"type": "integer", "minimum": 0}
    assert "embeddings as own slots" in schema["items"]["properties"]["notes"]["description"]
