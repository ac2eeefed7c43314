"""A JSON input that gives one key twice in an object (QA round 34).

``json`` keeps the last value without a word: a public-format placement graph starting
``{"maxFPGAs": 1, ...`` before the file's own ``"maxFPGAs": 6`` was placed on 6 devices, a
plan.json with a second ``schema_version`` was rendered and exported. The spec loader and the
Hugging Face reader already refuse a repeated key; every other JSON input (plan.json,
placement.json, capacity.json, placement graphs, expert splits, Piper and PaSE files) is
read by :func:`autopar_opt.core.reading.parse_json`, which now refuses it too. Oracle: the
file's text (the key given twice); the same file without the repetition is accepted.
"""

from __future__ import annotations

import json

import pytest

from autopar_opt.core import reading
from autopar_opt.core.errors import SpecError
from support import paths
from support.cli import run_cli

GRAPH = paths.DATA / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"


def _repeat_first(text: str, key: str, value) -> str:
    """``text`` (a JSON object) with ``"key": value`` given once more at its start."""
    return "{" + json.dumps(key) + ": " + json.dumps(value) + ", " + text.lstrip()[1:]


def test_parse_json_names_the_repeated_key_at_any_depth(tmp_path):
    limits = reading.ReadLimits("test file", 1000, "a small test file")
    for text, key in (('{"a": 1, "a": 2}', "a"), ('{"x": [{"id": 1, "n": 2, "id": 3}]}', "id")):
        path = tmp_path / "f.json"
        path.write_text(text)
        with pytest.raises(SpecError) as info:
            reading.read_json(path, limits)
        (problem,) = info.value.problems
        assert problem.file == str(path)
        assert f"key {key!r} appears more than once" in problem.rule
    path.write_text('{"x": [{"id": 1}, {"id": 3}]}')          # the same key in two objects
    assert reading.read_json(path, limits) == {"x": [{"id": 1}, {"id": 3}]}


def test_a_placement_graph_that_repeats_a_key_is_refused(tmp_path):
    text = GRAPH.read_text()
    assert json.loads(text)["maxFPGAs"] == 6
    path = tmp_path / "g.json"
    path.write_text(_repeat_first(text, "maxFPGAs", 1))
    code, out = run_cli("place", path, "--time-limit", "10", "--out", tmp_path / "out")
    assert code == 2, out
    assert "key 'maxFPGAs' appears more than once" in out
    assert not (tmp_path / "out").exists()


def test_report_and_export_refuse_a_plan_json_that_repeats_a_key(tmp_path):
    out = tmp_path / "solved"
    code, text = run_cli("solve", paths.REPO / "examples" / "quickstart.yaml", "--solver", "dp",
                         "--out", out, "--quiet")
    assert code == 0, text
    plan = tmp_path / "plan.json"
    plan.write_text(_repeat_first((out / "plan.json").read_text(), "schema_version", 1))
    for args in (("report", plan, "--out", tmp_path / "r.html"),
                 ("export", plan, "--to", "megatron", "--out", tmp_path / "x.sh")):
        code, text = run_cli(*args)
        assert code == 2, text
        assert "key 'schema_version' appears more than once" in text
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "x.sh").exists()
