"""plan.json and estimate's JSON have a schema (autopar schema --plan / --estimate),
and the report reads plan.json through the same typed model."""

from __future__ import annotations

import json

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
    assert schema["title"] == "PlanDocument"
    assert {"status", "plan", "metrics", "certificate", "solver"} <= set(schema["properties"])
    row = schema["$defs"]["ConfigRowDoc"]["properties"]["lower_bound"]
    assert '"inf"' in json.dumps(row)                      # the one encoding of infinity
    assert json.loads(_cli("schema", "--estimate").stdout)["title"] == "EstimateDocument"
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
                    .replace("memory_reserve_gib: 0.0", "memory_reserve_gib: 79.999"))
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
