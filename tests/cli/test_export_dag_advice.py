"""Exporting a DAG's plan gives advice the user can follow (QA round 36).

``autopar export`` of Inception v3's plan said "(fix: solve again with target: megatron in
the spec (or --runnable-by megatron) ...)"; following it is refused: ``solve
--runnable-by megatron`` on that spec exits 2 ("not a chain of layers"). Oracle: that
second route, run here, and every exporter's refusal of the plan.
"""

from __future__ import annotations

import pytest

from support import paths
from support.cli import run_cli

SPEC = paths.REPO / "examples" / "inception_v3_8gpu.yaml"


@pytest.fixture(scope="module")
def dag_plan(tmp_path_factory):
    out = tmp_path_factory.mktemp("dag")
    code, text = run_cli("solve", SPEC, "--out", out, "--quiet", "--time-limit", "20")
    assert code == 0, text
    return out / "plan.json"


def test_the_old_advice_is_refused_by_solve():
    code, text = run_cli("solve", SPEC, "--runnable-by", "megatron", "--time-limit", "5", "--quiet")
    assert code == 2 and "not a chain" in text


@pytest.mark.parametrize("to", ["megatron", "megatron-bridge", "torchtitan", "deepspeed"])
def test_every_target_refuses_and_says_why_without_a_solve_again(dag_plan, to):
    code, text = run_cli("export", dag_plan, "--to", to)
    assert code == 2, text
    fix = text[text.index("(fix:"):]
    assert "solve again" not in fix and "runnable-by" not in fix
    assert "not a chain" in fix
