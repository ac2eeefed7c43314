"""``autopar estimate SPEC --plan PLAN_JSON`` of a hand-edited plan.json (QA round 36).

A fleet plan.json's pipeline entry (or a replica class's) was read by Plan.from_dict's
int(), with no check: 1.5 micro-batches priced as 1, ZeRO -1 or pp 0 priced without a word,
while a one-cluster plan.json's entry is checked against its layout. And a recorded
iteration time of NaN (Python's json writes and reads it) was said as 'records nan s per
iteration; re-priced ..., the same' and printed as NaN in --json, which no JSON reader
takes. Oracle: the key, the value and the rule each edit breaks, known by construction."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from support.cli import first_json, run_cli

FLEET = {"name": "mix", "groups": [
    {"name": "a100", "device": "A100-80GB", "nodes": 1, "gpus_per_node": 2},
    {"name": "h100", "device": "H100-SXM-80GB", "nodes": 1, "gpus_per_node": 2}],
    "links": [{"between": ["a100", "h100"], "bandwidth_gb_per_s": 100, "latency_us": 20}]}
SPECS = {
    "fleet": {"model": {"zoo": "gpt-1.7b"}, "cluster": FLEET,
              "training": {"global_batch_size": 64, "seq_len": 1024},
              "search": {"pp_degrees": [2], "tp_degrees": [1, 2], "zero_levels": [1],
                         "recompute": ["none"], "sequence_parallel": [True]},
              "solver": {"name": "dp", "time_limit_s": 20}},
    "one": {"model": {"zoo": "debug"}, "cluster": {"zoo": "debug-2x4"},
            "training": {"global_batch_size": 16, "seq_len": 128},
            "search": {"pp_degrees": [2]}, "solver": {"name": "dp", "time_limit_s": 20}}}


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """Each spec and the plan.json its solve wrote."""
    folder = tmp_path_factory.mktemp("solved")
    out = {}
    for name, spec in SPECS.items():
        path = folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump(spec))
        code, text = run_cli("solve", path, "--out", folder / name, "--quiet")
        assert code == 0, text
        out[name] = (path, json.loads((folder / name / "plan.json").read_text()))
    return out


def _stage0(plan):
    return plan["stages"][0]["strategies"][0]


@pytest.mark.parametrize("edit, key, said", [
    (lambda p: p.update(microbatches=1.5), "plan.microbatches", "valid integer, got 1.5"),
    (lambda p: p.update(microbatches="8"), "plan.microbatches", "valid integer, got '8'"),
    (lambda p: p.update(pp=0), "plan.pp", "greater than or equal to 1, got 0"),
    (lambda p: p.update(vp_chunks=-8), "plan.vp_chunks", "greater than or equal to 1, got -8"),
    (lambda p: _stage0(p).update(zero=-1), "plan.stages[0].strategies[0].zero",
     "greater than or equal to 0, got -1"),
    (lambda p: _stage0(p).update(tp="2"), "plan.stages[0].strategies[0].tp",
     "valid integer, got '2'"),
])
def test_a_fleet_plans_malformed_entry_is_refused_naming_the_key(solved, tmp_path, edit, key, said):
    spec, doc = solved["fleet"]
    doc = copy.deepcopy(doc)
    edit(doc["plan"])
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    code, text = run_cli("estimate", spec, "--plan", plan, "--json")
    assert code == 2, text
    problem = first_json(text)["error"]["problems"][0]
    assert (problem["file"], problem["key"]) == (str(plan), key), problem
    assert said in problem["rule"] and "autopar solve --out DIR" in problem["fix"], problem


@pytest.mark.parametrize("name", ["fleet", "one"])
@pytest.mark.parametrize("recorded", [float("nan"), float("inf")])
def test_a_recorded_time_that_is_not_finite_is_not_compared(solved, tmp_path, name, recorded):
    spec, doc = solved[name]
    doc = copy.deepcopy(doc)
    doc["metrics"]["iteration_time_s"] = recorded
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    code, text = run_cli("estimate", spec, "--plan", plan, "--json")
    assert code == 0, text
    assert "NaN" not in text and "Infinity" not in text
    est = first_json(text)
    assert est["repriced"]["recorded_iteration_time_s"] is None
    code, text = run_cli("estimate", spec, "--plan", plan)
    assert code == 0, text
    assert "records nan" not in text and "records inf" not in text


@pytest.mark.parametrize("edit, key, value, said", [
    (lambda d: d.pop("shape"), "shape", None, "is neither 'pipeline'"),
    (lambda d: d.update(shape="zzz"), "shape", "zzz", "is neither 'pipeline'"),
    (lambda d: d["plan"].update(stage_groups="a100"), "plan.stage_groups", "a100", "is not a list"),
    (lambda d: d["plan"].update(stage_groups=None), "plan.stage_groups", None, "is not a list"),
    (lambda d: d["plan"].pop("stages"), "plan.stages", None, "is missing"),
])
def test_a_fleet_plans_shape_and_lists_are_named_not_a_python_error(solved, tmp_path, edit, key,
                                                                     value, said):
    """Before: a deleted shape was refused as a fleet spec's own problem ('invalid spec',
    cluster.groups, the plan file unnamed); a wrong one read the plan as a pipeline
    ('KeyError: stage_groups'); stage_groups 'a100' named its letter 'a' as a group,
    None a TypeError."""
    spec, doc = solved["fleet"]
    doc = copy.deepcopy(doc)
    edit(doc)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    code, text = run_cli("estimate", spec, "--plan", plan, "--json")
    assert code == 2, text
    problem = first_json(text)["error"]["problems"][0]
    assert (problem["file"], problem["key"], problem["value"]) == (str(plan), key, value), problem
    assert said in problem["rule"] and "Error" not in problem["rule"], problem


def test_a_one_cluster_plan_under_a_fleet_spec_names_the_plan_file(solved, tmp_path):
    """The refusal read as the fleet spec's own problem ('a cluster of several groups has no
    plan to re-price'), the plan.json it was given not named (QA round 36)."""
    spec, _ = solved["fleet"]
    _, doc = solved["one"]
    plan = tmp_path / "one_plan.json"
    plan.write_text(json.dumps(doc))
    code, text = run_cli("estimate", spec, "--plan", plan, "--json")
    assert code == 2, text
    [problem] = first_json(text)["error"]["problems"]
    assert (problem["file"], problem["key"]) == (str(spec), "cluster.groups"), problem
    assert f"{plan} is the plan.json of one cluster" in problem["rule"], problem
    assert f"re-price {plan} under a spec of one cluster" in problem["fix"], problem
