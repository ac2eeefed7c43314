"""Shared fixtures of the report tests."""

from __future__ import annotations

import copy
import json

import pytest

from support import paths
from support.cli import run_cli


@pytest.fixture(scope="session")
def quickstart_out(tmp_path_factory):
    """The folder ``autopar solve examples/quickstart.yaml`` wrote (plan.json, report.html;
    a real search whose stages state every memory part, a reserve too), solved once for
    every report test; tests read it and write elsewhere."""
    out = tmp_path_factory.mktemp("solve")
    code, text = run_cli("solve", paths.REPO / "examples" / "quickstart.yaml", "--out", out,
                         "--quiet")
    assert code == 0, text
    return out


@pytest.fixture(scope="session")
def quickstart_plan_json(quickstart_out) -> dict:
    """The plan.json of :func:`quickstart_out`."""
    return json.loads((quickstart_out / "plan.json").read_text())


@pytest.fixture
def solved(quickstart_plan_json) -> dict:
    """A copy of :func:`quickstart_plan_json` each test may change."""
    return copy.deepcopy(quickstart_plan_json)
