"""A sweep says what `autopar solve` says it assumed of each scenario (QA round 35: the
tiny sweep's scenarios price a sequence of 512 on a model of 128 positions; the standalone
solve of the same point said so in its plan.json, the sweep's plan.json, capacity.json,
terminal and report said nothing)."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from autopar_opt.capacity import load_sweep
from autopar_opt.capacity.worker import search_scenario
from autopar_opt.cli.commands import app
from support import paths

TINY = paths.DATA / "capacity" / "tiny.yaml"


def test_a_scenario_says_what_the_standalone_solve_of_it_says(tmp_path):
    """Oracle: `autopar solve --json` of the scenario's own spec mapping."""
    scenario = load_sweep(TINY).scenarios[0]
    solo_spec = tmp_path / "solo.yaml"
    solo_spec.write_text(yaml.safe_dump(scenario.data))
    result = CliRunner().invoke(app, ["solve", str(solo_spec), "--json"])
    assert result.exit_code == 0, result.output
    said = json.loads(result.stdout)["notices"]
    assert any("max_position_embeddings 128" in n for n in said)
    row = search_scenario({"id": scenario.id, "key": scenario.key, "data": scenario.data,
                           "path": str(TINY)})
    assert row["document"]["notices"] == said           # the scenario's plan.json
    assert set(said) <= set(scenario.notes)              # capacity.json, terminal, report
