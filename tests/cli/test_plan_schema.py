"""plan.json and estimate's JSON have a schema (autopar schema --plan / --estimate),
and the report reads plan.json through the same typed model."""

from __future__ import annotations

import json

import pytest

from typer.testing import CliRunner

from autopar_opt.cli.commands import app
from autopar_opt.core.document import EstimateDocument, PlanDocument, document_problems
from support import paths

ROOT = paths.REPO
DATA = ROOT / "tests" / "data" / "report"


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def test_schema_plan_prints_the_plan_json_schema():
    result = _cli("schema", "--plan")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    # a plain cluster's plan.json or a fleet's (QA round 9: the fleet form was missing)
    forms = {ref["$ref"].rsplit("/", 1)[-1] for ref in schema["anyOf"]}
    assert forms == {"PlanDocument", "FleetPlanDocument"}
    plain = schema["$defs"]["PlanDocument"]
    assert {"status", "plan", "metrics", "certificate", "solver"} <= set(plain["properties"])
    assert "fleet" in schema["$defs"]["FleetPlanDocument"]["required"]
    row = schema["$defs"]["ConfigRowDoc"]["properties"]["lower_bound"]
    assert '"inf"' in json.dumps(row)                      # the one encoding of infinity
    # a plan on one cluster, or a fleet solve's plan re-priced (QA round 36)
    estimate = json.loads(_cli("schema", "--estimate").stdout)
    assert {ref["$ref"].rsplit("/", 1)[-1] for ref in estimate["anyOf"]} == \
        {"EstimateDocument", "FleetEstimateDocument"}
    assert _cli("schema", "--plan", "--estimate").exit_code == 2


def test_documents_the_search_writes_match_the_model(tmp_path):
    """A real plan.json (feasible and proven infeasible) and a real estimate JSON."""
    from autopar_opt.cli.solve import solve_command
    assert solve_command(str(ROOT / "examples" / "quickstart.yaml"), out_dir=str(tmp_path / "a"),
                         quiet=True) == 0
    feasible = json.loads((tmp_path / "a" / "plan.json").read_text())
    assert document_problems(feasible) == []
    assert _undeclared(PlanDocument.model_validate(feasible)) == []
    spec = tmp_path / "spec.yaml"
    spec.write_text((ROOT / "examples" / "quickstart.yaml").read_text()
                    .replace("memory_reserve_gib: 0.0", "memory_reserve_gib: 79.2"))
    assert solve_command(str(spec), out_dir=str(tmp_path / "b"), quiet=True) == 3
    doc = json.loads((tmp_path / "b" / "plan.json").read_text())
    assert document_problems(doc) == []
    assert PlanDocument.model_validate(doc).certificate.lower_bound == "inf"
    assert _undeclared(PlanDocument.model_validate(doc)) == []
    est = _cli("estimate", str(ROOT / "examples" / "estimate_megatron_gpt3_175b.yaml"), "--json")
    assert est.exit_code == 0
    assert document_problems(json.loads(est.stdout), EstimateDocument) == []
    assert _undeclared(EstimateDocument.model_validate_json(est.stdout)) == []


def _undeclared(model, where: str = "") -> list[str]:
    """Keys the writer wrote that the typed model does not declare (drift between
    the dataclasses the search serialises and the document model). ``spec.model``,
    ``training``, ``search_space`` and ``cost_model.params`` are free-form by design."""
    from pydantic import BaseModel
    out = [f"{where}.{k}" for k in (model.model_extra or {})]
    for name in type(model).model_fields:
        value = getattr(model, name)
        for i, item in enumerate(value if isinstance(value, list) else [value]):
            if isinstance(item, BaseModel):
                out += _undeclared(item, f"{where}.{name}" + (f"[{i}]" if isinstance(value, list) else ""))
    return out


def test_fixtures_match_and_problems_name_the_key():
    for name in ("plan_feasible.json", "plan_infeasible.json"):
        assert document_problems(json.loads((DATA / name).read_text())) == []
    doc = json.loads((DATA / "plan_feasible.json").read_text())
    doc["status"] = "great"
    doc["certificate"]["configurations"][0]["lower_bound"] = "lots"
    problems = document_problems(doc)
    assert any(p.startswith("'status'") for p in problems)
    assert any("certificate.configurations[0].lower_bound" in p for p in problems)
    assert document_problems([]) == ["the document must be a JSON object"]


def test_a_fleet_plan_json_matches_the_published_schema(tmp_path):
    """The plan.json of a fleet solve validates against `autopar schema --plan` (jsonschema,
    the way a user checks it); a plain one too, and a fleet one with a group of no nodes
    does not."""
    import copy

    import pytest
    import yaml

    jsonschema = pytest.importorskip("jsonschema")       # requirements-ray.lock (the test job)

    from support.fleets import TINY_MIX_CLUSTER

    spec = tmp_path / "fleet.yaml"
    spec.write_text(yaml.safe_dump({"model": {"zoo": "debug"},
                                    "cluster": copy.deepcopy(TINY_MIX_CLUSTER),
                                    "training": {"global_batch_size": 16},
                                    "solver": {"name": "dp", "time_limit_s": 60}}))
    assert _cli("solve", str(spec), "--out", str(tmp_path / "f"), "--quiet").exit_code == 0
    assert _cli("solve", str(ROOT / "examples" / "quickstart.yaml"), "--out",
                str(tmp_path / "p"), "--quiet").exit_code == 0
    validator = jsonschema.Draft202012Validator(json.loads(_cli("schema", "--plan").stdout))
    for name in ("f", "p"):
        doc = json.loads((tmp_path / name / "plan.json").read_text())
        assert list(validator.iter_errors(doc)) == [], name
    doc = json.loads((tmp_path / "f" / "plan.json").read_text())
    doc["fleet"]["groups"][0]["nodes"] = 0
    assert list(validator.iter_errors(doc))


def test_the_metrics_definitions_the_schema_states_are_the_ones_priced(tmp_path):
    """The schema says which GPUs MFU divides by (every GPU of the cluster) and what
    tokens/s is for a model without a sequence (samples/s: a sample counts as one token);
    both checked against the numbers: the quickstart's MFU by hand (Narayanan et al. 2021,
    eq. 3, over all 8 A100s at 312 TFLOP/s) and Inception-v3's two throughputs."""
    import yaml

    metrics = json.loads(_cli("schema", "--plan").stdout)["$defs"]["MetricsDoc"]["properties"]
    assert "every GPU of the cluster, idle ones included" in metrics["mfu"]["description"]
    assert "equals samples_per_s" in metrics["tokens_per_s"]["description"]
    result = _cli("estimate", str(ROOT / "examples" / "quickstart.yaml"), "--json")
    m = json.loads(result.stdout)["metrics"]
    b, s, layers, h, v = 64, 2048, 24, 2304, 51200          # GPT 1.7B (quickstart.yaml)
    flops = 72 * b * s * layers * h * h * (1 + s / (6 * h) + v / (12 * h * layers))
    assert m["mfu"] == pytest.approx(flops / (m["iteration_time_s"] * 8 * 312e12), rel=1e-9)
    spec = tmp_path / "inception.yaml"
    spec.write_text(yaml.safe_dump({
        "model": {"zoo": "inception-v3"}, "cluster": {"zoo": "1x8-a100-40"},
        "training": {"global_batch_size": 256, "dtype": "bf16"},
        "plan": {"tp": 1, "pp": 1, "dp": 8, "microbatches": 1}}))
    m = json.loads(_cli("estimate", str(spec), "--json").stdout)["metrics"]
    assert m["tokens_per_s"] == m["samples_per_s"] == pytest.approx(256 / m["iteration_time_s"])
