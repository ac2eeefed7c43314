"""``autopar report capacity.json -o ELSEWHERE`` links each scenario to its plan report
from where the report is written (found by a new user, session 24: the links stayed
relative to the sweep's folder and were broken elsewhere); a link to a report that is
not there is dropped."""

from __future__ import annotations

import re
import shutil

import yaml

from support.cli import run_cli

SWEEP = {"base": {"model": {"zoo": "debug"},
                  "cluster": {"nodes": 1, "gpus_per_node": 8, "device": "A100-80GB"},
                  "training": {"global_batch_size": 64, "seq_len": 128},
                  "solver": {"time_limit_s": 10}},
         "axes": {"gpus": [4, 8]},
         "planning": {"token_budget": 1.0e9, "deadline_days": 30,
                      "prices": {"per_gpu_hour": {"A100-80GB": 2.0}, "source": "test"}}}


def test_links_resolve_from_the_reports_folder(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump(SWEEP))
    code, text = run_cli("capacity", sweep, "--out", tmp_path / "run", "--quiet")
    assert code == 0, text
    html = tmp_path / "elsewhere" / "deeper" / "cap.html"
    code, text = run_cli("report", tmp_path / "run" / "capacity.json", "-o", html)
    assert code == 0, text
    links = re.findall(r'<a href="([^"#][^"]*)">', html.read_text())
    assert len(links) == 2 and all((html.parent / link).is_file() for link in links)
    # each scenario's model-error interval says how many runs it stands on (QA round 10)
    assert len(re.findall(r"\(from \d+ runs(, wide)?\)", html.read_text())) == 2
    alone = tmp_path / "alone"                   # capacity.json without its scenarios' folder
    alone.mkdir()
    shutil.copy(tmp_path / "run" / "capacity.json", alone / "capacity.json")
    code, text = run_cli("report", alone / "capacity.json", "-o", alone / "cap.html")
    assert code == 0, text
    assert not re.findall(r'<a href="scenarios/', (alone / "cap.html").read_text())


def test_a_scenario_plan_exports_from_its_sweep(tmp_path):
    """QA round 5 (M8): a scenario's plan.json names the sweep file, which export refused
    ("this is a capacity sweep"). plan.json now records the scenario, and export rebuilds
    its spec from the sweep: the file is the one that scenario's spec gives (oracle: the
    same plan exported with a hand-written spec of that scenario)."""
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump(SWEEP))
    code, text = run_cli("capacity", sweep, "--out", tmp_path / "run", "--quiet")
    assert code == 0, text
    plan = tmp_path / "run" / "scenarios" / "8gpu" / "plan.json"
    code, via_sweep = run_cli("export", plan, "--to", "megatron")
    assert code == 0, via_sweep
    alone = dict(SWEEP["base"], cluster=dict(SWEEP["base"]["cluster"], gpus_per_node=8))
    (tmp_path / "s8.yaml").write_text(yaml.safe_dump(alone))
    code, via_spec = run_cli("export", plan, "--to", "megatron", "--spec", tmp_path / "s8.yaml")
    assert code == 0, via_spec
    strip = lambda t: [line for line in t.splitlines() if not line.startswith("#")]  # noqa: E731
    assert strip(via_sweep) == strip(via_spec) and "--tensor-model-parallel-size" in via_sweep


def test_scenarios_that_are_not_a_list_of_entries_are_named_not_a_crash(tmp_path):
    """QA round 34: a hand-edited capacity.json whose ``scenarios`` is not a list of
    mappings was an AttributeError in the link rebasing (exit 70, "a bug in the tool")
    before the renderer's own check could name it. Oracle: exit 2, the key named, no file."""
    import json

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump(SWEEP))
    code, text = run_cli("capacity", sweep, "--out", tmp_path / "run", "--quiet")
    assert code == 0, text
    doc = json.loads((tmp_path / "run" / "capacity.json").read_text())
    for value in ("x", [1, 2]):
        edited = tmp_path / "edited.json"
        edited.write_text(json.dumps({**doc, "scenarios": value}))
        code, text = run_cli("report", edited, "-o", tmp_path / "cap.html")
        assert code == 2, text
        assert "not one the capacity report can read" in text and "scenarios" in text
        assert not (tmp_path / "cap.html").exists()
