"""The embedding-tying fields the reader takes are in ``schema --runs`` and a value other than
true or false is refused (QA round 11: ``tie_word_embeddings`` and its two spellings were read
but not in the schema, and ``tie_word_embeddings: "no"`` was ignored without a word)."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.reading import Unmodelable, read_record
from autopar_opt.calibration.reading.run_schema import run_file_json_schema
from support.runs import tiny_record

KEYS = ("tie_word_embeddings", "share_embeddings_and_output_weights",
        "untie_embeddings_and_output_weights")


def test_the_schema_lists_the_tying_keys_as_booleans():
    model = run_file_json_schema()["$defs"]["Model"]["properties"]
    for key in KEYS:
        assert model[key]["anyOf"][0] == {"type": "boolean"}


def test_a_stated_tying_is_priced_and_a_word_is_refused():
    # the tiny record: vocab 128, hidden 64: an untied head has 128 x 64 = 8,192 more parameters
    tied = build_run(read_record(tiny_record(model__tie_word_embeddings=True)))
    untied = build_run(read_record(tiny_record(model__untie_embeddings_and_output_weights=True)))
    assert untied.params_total - tied.params_total == 128 * 64
    with pytest.raises(Unmodelable, match=r"model\.tie_word_embeddings = 'no' must be true or false"):
        read_record(tiny_record(model__tie_word_embeddings="no"))
