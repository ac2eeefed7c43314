"""A plan with torchtitan's op-level selective checkpointing (``recompute: op``) is written
whole: plan.json and report.html, and it exports (QA round 9: the report's plan schema
knew only none/selective/full, so ``solve`` stopped with an internal error after plan.json)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from autopar_opt.cli.commands import app

SPEC = """model: {zoo: llama3-8b}
cluster: {nodes: 1, gpus_per_node: 8, device: H100-SXM-80GB}
training: {global_batch_size: 64, seq_len: 8192, dtype: bf16, runtime: torchtitan}
target: {framework: torchtitan}
search: {recompute: [op]}
"""


def test_op_recompute_solves_reports_and_exports(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["solve", str(spec), "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    plan = json.loads((out / "plan.json").read_text())
    recomputes = {s["recompute"] for st in plan["plan"]["stages"] for s in st["strategies"]}
    assert "op" in recomputes
    assert (out / "report.html").is_file()
    res = CliRunner().invoke(app, ["report", str(out / "plan.json"), "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["export", str(out / "plan.json"), "--to", "torchtitan"])
    assert res.exit_code == 0, res.output
    assert "SelectiveAC" in res.output
