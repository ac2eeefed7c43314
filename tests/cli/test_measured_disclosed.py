"""Measured per-layer times are said wherever the plan is: the summary, plan.json, the report,
and the interval (which describes the analytical model, not a measurement); a measurement no
plan can use (a tp the search never offers) is said to be unused. Oracle: the spec's own
measurements."""

from __future__ import annotations

import json

from support.cli import run_cli

SPEC = """model:
  name: mychain
  seq_len: 2048
  layers:
  - {name: emb, kind: embedding, flops_fwd: 0, flops_bwd: 0, params: 100000000, act_bytes: 1.0e+7}
  - {name: b0, kind: transformer_block, flops_fwd: 1.0e+12, flops_bwd: 2.0e+12, params: 200000000, act_bytes: 3.0e+8,
     max_tp: 8}
  - {name: b1, kind: transformer_block, flops_fwd: 1.0e+12, flops_bwd: 2.0e+12, params: 200000000, act_bytes: 3.0e+8}
  - {name: head, kind: lm_head, flops_fwd: 2.0e+11, flops_bwd: 4.0e+11, params: 100000000, act_bytes: 2.0e+8}
  measured:
  - {layer: b0, tp: TP, fwd_ms_per_sample: 10.0, bwd_ms_per_sample: 20.0}
cluster: {nodes: 1, gpus_per_node: 8, device: A100-80GB}
training: {global_batch_size: 64, seq_len: 2048, dtype: bf16}
search: {pp_degrees: [1], tp_degrees: [1]}
"""


def test_a_used_measurement_is_said_everywhere(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("TP", "1"))
    code, text = run_cli("solve", spec, "--out", tmp_path / "out")
    assert code == 0, text
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    said = doc["spec"]["model"]["measured"]
    assert said.startswith("1 of 4 layers' compute times are measured (model.measured: b0 at tp 1)")
    flat = " ".join(text.split())
    assert f"measured: {said}" in flat
    assert "1 of 4 layers are priced from the spec's measured times" in doc["metrics"]["interval"]["text"]
    assert "Measured layers" in (tmp_path / "out" / "report.html").read_text()
    assert "never used" not in flat


def test_a_measurement_at_a_tp_never_searched_is_said_unused(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("TP", "3"))
    code, text = run_cli("solve", spec, "--out", tmp_path / "out")
    assert code == 0, text
    flat = " ".join(text.split())
    assert "model.measured: layer 'b0' at tp 3 is never used: the search space's tp degrees are 1" in flat
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert "priced from the spec's measured times" not in doc["metrics"]["interval"]["text"]


def _estimate_at_tp1(tmp_path, measured_tp: int) -> str:
    """``estimate`` of the spec with a plan at tp 1 and b0 measured at ``measured_tp``:
    its output, whitespace flattened."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("TP", str(measured_tp)).replace(
        "search: {pp_degrees: [1], tp_degrees: [1]}", "plan: {tp: 1, micro_batch_size: 1}"))
    code, text = run_cli("estimate", spec)
    assert code == 0, text
    return " ".join(text.split())


def test_a_measurement_above_the_layers_max_tp_is_said_unused(tmp_path):
    """QA round 9: tp 16 on a layer of max_tp 8 was accepted without a word."""
    flat = _estimate_at_tp1(tmp_path, 16)
    assert "model.measured: layer 'b0' at tp 16 is never used: the layer's max_tp is 8" in flat


def test_estimate_says_its_plan_does_not_run_the_measured_degree(tmp_path):
    """QA round 9: estimate priced the plan's tp 1 analytically beside a tp 2 measurement
    without saying so."""
    flat = _estimate_at_tp1(tmp_path, 2)
    assert ("model.measured: layer 'b0' at tp 2: the spec's plan runs that layer at tp 1, which "
            "estimate prices analytically") in flat
