"""``autopar estimate FLEET_SPEC --plan PLAN_JSON`` re-prices the plan.json a fleet solve
wrote, with the same figures, key by key, as the solve's own plan.json (QA round 36: it was
refused, "estimate prices a plan on one cluster").

Oracle: the solve's plan.json (``metrics``: iteration time, throughput, MFU, interval, ...;
``placement``: every stage's group, ranks, time and memory against its group's capacity),
for both fleet shapes: a pipeline whose stages run on both groups (GPT-1.7B on 2 A100 +
2 H100) and data-parallel replica classes (4 + 4 GPUs, batch 128: classes of 32 and 96
samples). A spec listing the same groups in the other order prices the same plan the same;
an edit the spec's fleet cannot run is refused naming the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from autopar_opt.core.document import FleetEstimateDocument, document_problems
from support.cli import communication_table, first_json, run_cli


def _fleet(gpus: int) -> dict:
    return {"name": "mix", "groups": [
        {"name": "a100", "device": "A100-80GB", "nodes": 1, "gpus_per_node": gpus},
        {"name": "h100", "device": "H100-SXM-80GB", "nodes": 1, "gpus_per_node": gpus}],
        "links": [{"between": ["a100", "h100"], "bandwidth_gb_per_s": 100, "latency_us": 20}]}


SEARCH = {"pp_degrees": [1, 2], "tp_degrees": [1, 2], "zero_levels": [1], "recompute": ["none"],
          "sequence_parallel": [True]}
SPECS = {
    "pipeline": {"model": {"zoo": "gpt-1.7b"}, "cluster": _fleet(2),
                 "training": {"global_batch_size": 64, "seq_len": 1024}, "search": SEARCH,
                 "solver": {"name": "dp", "time_limit_s": 30, "rel_gap": 0.001}},
    "replicas": {"model": {"zoo": "gpt-1.7b"}, "cluster": _fleet(4),
                 "training": {"global_batch_size": 128, "seq_len": 2048}, "search": SEARCH,
                 "solver": {"name": "dp", "time_limit_s": 30, "rel_gap": 0.001}}}


def _solved(tmp_path: Path, shape: str) -> tuple[Path, Path, dict]:
    spec = tmp_path / f"{shape}.yaml"
    spec.write_text(yaml.safe_dump(SPECS[shape]))
    code, text = run_cli("solve", spec, "--out", tmp_path / "out", "--quiet")
    assert code == 0, text
    plan = tmp_path / "out" / "plan.json"
    doc = json.loads(plan.read_text())
    assert doc["shape"] == shape
    if shape == "pipeline":               # over both groups, not one group alone
        assert sorted(doc["plan"]["stage_groups"]) == ["a100", "h100"]
    return spec, plan, doc


@pytest.mark.parametrize("shape", ["pipeline", "replicas"])
def test_a_fleet_plan_reprices_to_the_solves_figures(tmp_path, shape):
    spec, plan, doc = _solved(tmp_path, shape)
    code, text = run_cli("estimate", spec, "--plan", plan, "--json")
    assert code == 0, text
    est = first_json(text)
    assert est["shape"] == shape
    assert set(est["metrics"]) == set(doc["metrics"])
    for key, value in doc["metrics"].items():
        assert est["metrics"][key] == (pytest.approx(value, rel=1e-12)
                                       if isinstance(value, float) else value), key
    assert est["placement"] == doc["placement"]          # every stage: group, time, memory
    assert est["repriced"]["recorded_iteration_time_s"] == doc["metrics"]["iteration_time_s"]
    assert est["repriced"]["differences"] == []
    assert any(n.endswith(", the same") for n in est["repriced"]["notes"])
    # the document `autopar schema --estimate` describes, every key declared
    assert document_problems(est, FleetEstimateDocument) == []
    assert not FleetEstimateDocument.model_validate(est).model_extra
    # its own JSON is a plan file estimate --plan reads, with the same figures
    again = tmp_path / "estimate.json"
    again.write_text(json.dumps(est))
    code, text = run_cli("estimate", spec, "--plan", again, "--json")
    assert code == 0, text
    assert first_json(text)["metrics"] == est["metrics"]
    # the text says the same figures
    code, text = run_cli("estimate", spec, "--plan", plan)
    assert code == 0, text
    assert f"iteration time:   {doc['metrics']['iteration_time_s']:.6g} s" in text
    for row in doc["placement"]:
        assert f"{row['peak_memory_gib']:.2f} / {row['capacity_gib']:.2f}" in text


def test_the_spec_may_list_the_groups_in_another_order(tmp_path):
    """Groups are matched by name (a strategy's group index is the file's order)."""
    spec, plan, doc = _solved(tmp_path, "pipeline")
    data = yaml.safe_load(spec.read_text())
    data["cluster"]["groups"].reverse()
    other = tmp_path / "reversed.yaml"
    other.write_text(yaml.safe_dump(data))
    code, text = run_cli("estimate", other, "--plan", plan, "--json")
    assert code == 0, text
    est = first_json(text)
    assert est["metrics"]["iteration_time_s"] == pytest.approx(doc["metrics"]["iteration_time_s"],
                                                               rel=1e-12)
    assert [(r["group"], r["peak_memory_gib"]) for r in est["placement"]] == \
        [(r["group"], pytest.approx(r["peak_memory_gib"], rel=1e-12)) for r in doc["placement"]]
    # its JSON, in the reversed order, priced under the first spec: the same again
    again = tmp_path / "estimate.json"
    again.write_text(json.dumps(est))
    code, text = run_cli("estimate", spec, "--plan", again, "--json")
    assert code == 0, text
    assert first_json(text)["placement"] == doc["placement"]


def test_another_device_is_said_and_an_edit_it_cannot_run_is_refused(tmp_path):
    spec, plan, doc = _solved(tmp_path, "pipeline")
    data = yaml.safe_load(spec.read_text())
    data["cluster"]["groups"][0]["device"] = "A100-40GB"
    other = tmp_path / "a100_40.yaml"
    other.write_text(yaml.safe_dump(data))
    code, text = run_cli("estimate", other, "--plan", plan, "--json")
    assert code == 0, text
    assert first_json(text)["repriced"]["differences"] == [
        "fleet.groups.a100.device 'A100-80GB' -> 'A100-40GB'"]
    edited = json.loads(plan.read_text())
    edited["plan"]["stage_groups"][0] = "v100"
    bad = tmp_path / "edited.json"
    bad.write_text(json.dumps(edited))
    code, text = run_cli("estimate", spec, "--plan", bad, "--json")
    assert code == 2, text
    problem = first_json(text)["error"]["problems"][0]
    assert problem["file"] == str(bad) and problem["key"] == "plan.stage_groups[0]"
    assert problem["value"] == "v100"


def test_an_interleaved_edit_is_refused_as_the_fleet_search_refuses_it(tmp_path):
    """README "Mixed fleets": the pipelines of a fleet run 1F1B or GPipe."""
    spec, plan, doc = _solved(tmp_path, "pipeline")
    doc["plan"]["schedule"] = "interleaved"
    bad = tmp_path / "interleaved.json"
    bad.write_text(json.dumps(doc))
    code, text = run_cli("estimate", spec, "--plan", bad, "--json")
    assert code == 2, text
    problem = first_json(text)["error"]["problems"][0]
    assert problem["key"] == "plan.schedule" and "1f1b or gpipe" in problem["fix"]


@pytest.mark.parametrize("plan, status, said", [
    (None, "infeasible", "has no plan: the fleet solve ended 'infeasible'"),
    ([1], "optimal", "is an array, not an object"),    # not "the fleet solve ended 'optimal'"
    ("x", None, "is a string, not an object"),
    (None, None, "holds no 'plan' object")])
def test_a_plan_that_is_not_an_object_is_not_blamed_on_the_solve(plan, status, said):
    from autopar_opt.cli.errors import CommandError
    from autopar_opt.cli.reprice_fleet import fleet_plan

    doc = {"shape": "pipeline", "status": status, "plan": plan}
    with pytest.raises(CommandError) as caught:
        fleet_plan(doc, None, "p.json")
    problem = caught.value.problems[0]
    assert (problem.file, problem.key) == ("p.json", "plan")
    assert said in problem.rule, problem.rule


def test_a_fleet_pipeline_prints_its_communication_as_one_cluster_does(tmp_path):
    """``estimate`` prints each kind of communication that moves anything (57a564c3); the
    fleet route printed none although its --json metrics carry them. Oracle: the same
    command's --json ``metrics.communication``."""
    spec, plan, _doc = _solved(tmp_path, "pipeline")
    code, text = run_cli("estimate", spec, "--plan", plan)
    assert code == 0, text
    code, out = run_cli("estimate", spec, "--plan", plan, "--json")
    assert code == 0, out
    comm = first_json(out)["metrics"]["communication"]
    from autopar_opt.cli.commands import COMM_NAMES

    rows = communication_table(text)
    moving = {COMM_NAMES[k]: k for k, f in comm.items() if f["total_s"] > 0}
    assert set(rows) == set(moving) and {"TP", "DP grad sync"} <= set(rows)
    for name, kind in moving.items():
        want = [comm[kind][f] for f in ("total_s", "hidden_s", "exposed_s", "interference_s")]
        assert rows[name] == pytest.approx(want, rel=5e-4, abs=1e-12), kind


def test_a_replica_class_may_name_its_stage_groups(tmp_path):
    """A replica class's plan records its stage groups by index into fleet.groups, a
    pipeline's by name; the strategies' group takes either. A class whose stage_groups were
    written by name was refused ("invalid literal for int()")."""
    spec, plan, doc = _solved(tmp_path, "replicas")
    names = [g["name"] for g in doc["fleet"]["groups"]]
    for c in doc["plan"]["classes"]:
        c["plan"]["stage_groups"] = [names[g] for g in c["plan"]["stage_groups"]]
    named = tmp_path / "named.json"
    named.write_text(json.dumps(doc))
    code, text = run_cli("estimate", spec, "--plan", named, "--json")
    assert code == 0, text
    est = first_json(text)
    assert est["metrics"]["iteration_time_s"] == doc["metrics"]["iteration_time_s"]
    assert est["placement"] == doc["placement"]


@pytest.mark.parametrize("groups, said", [
    ([{"name": "a100"}, {"name": "h100"}], "several groups (a100, h100) but"),
    ([], "several groups (its fleet.groups lists none) but")])
def test_a_one_cluster_spec_names_the_fleet_plans_groups(tmp_path, groups, said):
    """A fleet plan.json given with a one-cluster spec is refused naming the fleet's groups,
    and, for a file that lists none, saying so rather than printing '()' (QA round 17)."""
    spec = tmp_path / "one.yaml"
    spec.write_text(yaml.safe_dump({"model": {"zoo": "gpt-1.7b"}, "cluster": {"zoo": "debug-2x4"},
                                    "training": {"global_batch_size": 64, "seq_len": 1024}}))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"shape": "pipeline", "fleet": {"groups": groups}, "plan": {}}))
    code, text = run_cli("estimate", spec, "--plan", plan)
    assert code != 0 and said in text, text
    assert "()" not in text


@pytest.mark.parametrize("shape", ["pipeline", "replicas"])
def test_a_fleet_plan_states_its_communication_per_kind(tmp_path, shape):
    """The fleet plan.json and report carried no per-kind communication for the replica
    classes, and the fleet report showed no table for either shape. Oracle: each kind's
    exposed_s is the breakdown's own term (the pipeline's ``metrics.breakdown``; per class,
    the class's PlanMetrics of evaluate_replicas), estimate prints the same, the report
    shows one table per critical path."""
    from autopar_opt.cost.comm_split import BREAKDOWN_TERM
    from autopar_opt.cost.replicas import evaluate_replicas
    from autopar_opt.reports.fleet import render_fleet_html
    from autopar_opt.spec import load_spec
    from autopar_opt.cli.reprice_fleet import fleet_plan

    spec, plan, doc = _solved(tmp_path, shape)
    m = doc["metrics"]
    if shape == "pipeline":
        paths = [(m["communication"], m["breakdown"])]
    else:
        loaded = load_spec(spec)
        priced = evaluate_replicas(fleet_plan(doc, loaded.fleet, str(plan)), loaded.graph,
                                   loaded.fleet, loaded.training, loaded.cost_params)
        assert [c["class"] for c in m["classes"]] == list(range(len(priced.classes)))
        for c, want in zip(m["classes"], priced.classes):
            assert c["iteration_time_s"] == want.iteration_time_s
            assert c["breakdown"] == want.breakdown and c["communication"] == want.communication
        paths = [(c["communication"], c["breakdown"]) for c in m["classes"]]
    for comm, breakdown in paths:
        assert set(comm) == set(BREAKDOWN_TERM)
        for kind, term in BREAKDOWN_TERM.items():
            assert comm[kind]["exposed_s"] == breakdown[term], kind
        assert any(f["total_s"] > 0 for f in comm.values())
    html = render_fleet_html(doc)
    assert html.count("Communication: hidden and exposed") == len(paths)
    code, text = run_cli("estimate", spec, "--plan", plan)
    assert code == 0, text
    assert sum("communication, critical path" in line for line in text.splitlines()) == len(paths)
