"""``schema --runs`` states the single-field rules the reader applies to counts and memory:
a count is a positive integer, a memory figure positive (QA round 11: ``seq_len: 0``,
``nics_per_node: 0`` and ``memory_gib_per_gpu: -3`` validated against the schema and were then
refused by the reader). The shipped record files still validate."""

from __future__ import annotations

import jsonschema
import pytest
import yaml

from autopar_opt.calibration.reading import Unmodelable, read_record
from autopar_opt.calibration.reading.run_schema import run_file_json_schema
from support.paths import DATA
from support.runs import tiny_record

VALIDATOR = jsonschema.Draft202012Validator(run_file_json_schema())


@pytest.mark.parametrize("key, value", [("model__seq_len", 0), ("hardware__nics_per_node", 0),
                                        ("parallelism__tp", 0),
                                        ("measured__memory_gib_per_gpu", -3.0)])
def test_what_the_reader_refuses_alone_the_schema_refuses(key, value):
    rec = tiny_record(**{key: value})
    assert list(VALIDATOR.iter_errors([rec]))
    with pytest.raises(Unmodelable):
        read_record(rec)


def test_the_shipped_records_still_validate():
    records = yaml.safe_load((DATA / "published_runs.yaml").read_text())
    assert not list(VALIDATOR.iter_errors(records))
    assert not list(VALIDATOR.iter_errors([tiny_record()]))
