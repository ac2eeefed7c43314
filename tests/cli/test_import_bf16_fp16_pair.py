"""A launch file that sets both --bf16 and --fp16 (or, in a Megatron-Bridge file under
``mixed_precision: null``, both model.bf16 and model.fp16) is refused as the pair it is.

Before (QA round 36), each flag was checked alone against training.dtype: under bf16 the
file was told '--fp16 trains in fp16 ... state the same precision', under fp16 '--bf16
trains in bf16', each fix undoing the other, while Megatron-LM refuses the pair itself
(arguments.py validate_args: ``if args.fp16: assert not args.bf16``). Oracle: that
assertion; the refusal is the same whatever the spec's dtype."""

from __future__ import annotations

import re

import pytest

from support.cli import export_estimate, first_json, run_cli

SPEC = """\
model: {zoo: llama3-8b}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 64, seq_len: 2048, dtype: DTYPE, runtime: megatron-lm}
plan: PLAN
"""
ARGS = ("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --micro-batch-size 2 "
        "--global-batch-size 64 --use-distributed-optimizer --bf16 --fp16")


def _estimate(folder, dtype, plan):
    (folder / "s.yaml").write_text(SPEC.replace("DTYPE", dtype).replace("PLAN", plan))
    code, text = run_cli("estimate", folder / "s.yaml", "--json")
    return code, first_json(text)


def _bridge_file(folder) -> str:
    """A Bridge overrides file autopar wrote for a bf16 plan, its precision stated on the
    model with both 16-bit fields true under mixed_precision: null."""
    code, doc = _estimate(folder, "bf16", "{tp: 2, pp: 2, microbatches: 8, zero: 1}")
    assert code == 0, doc
    text = export_estimate(folder, doc, "megatron-bridge", "bridge.yaml")
    text, n = re.subn(r"(?m)^mixed_precision: .*$", "mixed_precision: null", text)
    assert n == 1 and text.count("model: {") == 1, text
    return text.replace("model: {", "model: {bf16: true, fp16: true, ")


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp8"])
@pytest.mark.parametrize("route", ["megatron_args", "megatron_bridge"])
def test_the_pair_is_refused_whatever_the_dtype(tmp_path, dtype, route):
    if route == "megatron_args":
        plan = f'{{megatron_args: "{ARGS}"}}'
    else:
        (tmp_path / "b.yaml").write_text(_bridge_file(tmp_path))
        plan = "{megatron_bridge: b.yaml}"
    code, doc = _estimate(tmp_path, dtype, plan)
    assert code == 2, doc
    [problem] = doc["error"]["problems"]
    assert problem["file"] == str(tmp_path / "s.yaml") and problem["key"] == f"plan.{route}"
    assert "both" in problem["rule"] and "Megatron-LM refuses the pair" in problem["rule"], problem
    assert f"training.dtype {dtype}" in problem["rule"], problem
    assert "trains in fp16, but" not in problem["rule"] and "trains in bf16, but" not in problem["rule"]
