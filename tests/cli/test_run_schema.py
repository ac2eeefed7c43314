"""A run file has a JSON Schema (``autopar schema --runs``): the shipped record files
validate against it, every key the reader takes is in it with a description, and a
value of the wrong type is refused by both the schema and the reader."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from autopar_opt.calibration.reading import read_records
from autopar_opt.calibration.reading.measured import THROUGHPUT_UNITS
from autopar_opt.calibration.reading.moe import EP_KEYS, ETP_KEYS, MOE_MODEL_KEYS
from autopar_opt.calibration.reading.schema import SECTIONS
from autopar_opt.cli.commands import app
from support import paths

ROOT = paths.REPO
RUN_FILES = (ROOT / "tests" / "data" / "published_runs.yaml",
             ROOT / "benchmarks" / "calibration" / "holdout_runs.yaml")


@pytest.fixture(scope="module")
def schema() -> dict:
    result = CliRunner().invoke(app, ["schema", "--runs"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(doc)
    return doc


def _section(schema: dict, name: str) -> dict:
    return schema["$defs"][SECTIONS[name].__name__]["properties"]


@pytest.mark.parametrize("path", RUN_FILES, ids=lambda p: p.name)
def test_the_shipped_run_files_validate(schema, path):
    records = yaml.safe_load(path.read_text())
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(records))
    assert [(list(e.absolute_path), e.message[:120]) for e in errors] == []


def test_every_key_the_reader_takes_is_described(schema):
    for name, cls in SECTIONS.items():
        props = _section(schema, name)
        for field in cls.model_fields:
            assert props[field].get("description"), f"{name}.{field} has no description"
    measured, model, parallel = (_section(schema, n) for n in ("measured", "model", "parallelism"))
    assert set(THROUGHPUT_UNITS) <= set(measured)
    assert set(MOE_MODEL_KEYS) <= set(model)
    assert set(EP_KEYS + ETP_KEYS) <= set(parallel)
    # a key read by name anywhere in the reading (sec.text("intra_node"), m.raw(...),
    # _number(m, "moe_load_imbalance", ...)) is a property of some section
    every = set().union(*(_section(schema, n) for n in SECTIONS))
    source = "".join(p.read_text() for p in (ROOT / "autopar_opt" / "calibration").rglob("*.py"))
    read = set(re.findall(r"\.(?:text|raw|extra)\(\"([a-z_]+)\"\)", source))
    read |= set(re.findall(r"_(?:number|positive)\(m, \"([a-z_]+)\"", source))
    assert read and read <= every, sorted(read - every)


def test_units_and_enums_are_stated(schema):
    measured = _section(schema, "measured")
    assert "tokens/s per GPU" in json.dumps(measured["tokens_per_sec_per_gpu"])
    assert '"maximum": 100' in json.dumps(measured["mfu_pct"])
    assert ["device", "reserved", "allocated"] == measured["memory_measure"]["anyOf"][0]["enum"]
    assert "Gb/s" in _section(schema, "hardware")["inter_node_gbps_per_gpu"]["description"]


def _record(**edits) -> dict:
    rec = yaml.safe_load(RUN_FILES[0].read_text())[0]
    for dotted, value in edits.items():
        section, key = dotted.split("__")
        rec[section] = {**rec[section], key: value}
    return rec


@pytest.mark.parametrize("edits, key", [
    ({"model__num_layers": "96"}, "model.num_layers"),
    ({"measured__mfu_pct": 150}, "mfu_pct"),
    ({"measured__memory_measure": "peak"}, "memory_measure"),
], ids=["text-count", "mfu-over-100", "unknown-measure"])
def test_schema_and_reader_refuse_the_same_value(schema, edits, key):
    rec = _record(**edits)
    assert list(jsonschema.Draft202012Validator(schema).iter_errors([rec]))
    read, skipped = read_records([rec])
    assert read == [] and key in skipped[0][1]


def test_a_good_record_passes_both(schema):
    rec = _record()
    assert list(jsonschema.Draft202012Validator(schema).iter_errors([rec])) == []
    read, skipped = read_records([rec])
    assert len(read) == 1 and skipped == []


def test_one_schema_at_a_time():
    result = CliRunner().invoke(app, ["schema", "--runs", "--plan"])
    assert result.exit_code == 2
    assert "at most one of --plan, --estimate, --runs, --sweep and --placement" in result.output
