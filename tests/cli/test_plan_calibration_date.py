"""plan.json says where the cost model's parameters come from and when they were fitted
(QA round 36: the calibration's date was in neither plan.json nor the report for an H100
plan). Oracles: the shipped files' own headers (``calibrated.yaml`` ``fitted_on``,
``intervals.yaml`` ``generated_on``), and a spec that gives its own parameters
(``cost_model: FILE``) is said to, with no fit date."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from support.cli import run_cli
from support.paths import REPO

COST = REPO / "autopar_opt" / "cost"
EXAMPLES = REPO / "examples"


def test_plan_json_names_the_calibration_and_its_dates(tmp_path: Path) -> None:
    code, text = run_cli("solve", EXAMPLES / "quickstart.yaml", "--out", tmp_path / "out")
    assert code == 0, text
    cal = json.loads((tmp_path / "out" / "plan.json").read_text())["cost_model"]["calibration"]
    fitted = str(yaml.safe_load((COST / "calibrated.yaml").read_text())["fitted_on"])
    head = (COST / "intervals.yaml").read_text().split("\nruns:", 1)[0]
    generated = str(yaml.safe_load(head)["generated_on"])
    assert cal == {"parameters": "shipped (autopar_opt/cost/calibrated.yaml)",
                   "fitted_on": fitted, "intervals_generated_on": generated}


def test_given_parameters_have_no_fit_date(tmp_path: Path) -> None:
    fit = yaml.safe_load((COST / "calibrated.yaml").read_text())
    fit["params"]["iteration_overhead_s"] = 0.02
    own = tmp_path / "my_fit.yaml"
    own.write_text(yaml.safe_dump(fit))
    spec = yaml.safe_load((EXAMPLES / "quickstart.yaml").read_text())
    spec["cost_model"] = str(own)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    code, text = run_cli("solve", path, "--out", tmp_path / "out")
    assert code == 0, text
    cal = json.loads((tmp_path / "out" / "plan.json").read_text())["cost_model"]["calibration"]
    assert cal["parameters"] == "given (not the shipped calibration)" and cal["fitted_on"] is None
