"""Offloading flags of a Megatron-LM command line (or Bridge file) are not priced as absent.

Before, ``--cpu-offloading-num-layers 2`` (activation offload of 2 of a rank's 4 layers),
``--optimizer-cpu-offload`` and Bridge's ``model.cpu_offloading`` /
``optimizer.optimizer_cpu_offload`` were accepted and priced without any offloading, nothing
said. Oracle: Megatron-LM's ``validate_args`` (``cpu_offloading_num_layers > 0`` turns
offloading on) and the spec's own term for it, ``training.activation_offload`` = N / L of
a rank's L layers (``ir/training.py``): the same command line reads (exit 0) once the spec
states 0.5, so the refusal is the contradiction's."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli

SPEC = """\
model: {zoo: debug}
cluster: {zoo: debug-2x4}
training: {global_batch_size: 16, seq_len: 128, dtype: bf16, runtime: megatron-core,
           activation_offload: SHARE}
plan: PLAN
"""
ARGS = "--tensor-model-parallel-size 2 --micro-batch-size 2 --global-batch-size 16 --bf16"


def _estimate(folder, plan, share="0"):
    (folder / "s.yaml").write_text(SPEC.replace("SHARE", share).replace("PLAN", plan))
    code, text = run_cli("estimate", folder / "s.yaml", "--json")
    return code, json.JSONDecoder().raw_decode(text[text.index("{\n"):])[0]


def _refused(code, doc, key, words):
    assert code == 2, doc
    problems = doc["error"]["problems"]
    assert any(p["key"] == key and words in p["rule"] for p in problems), problems


def test_activation_offload_is_checked_against_the_spec(tmp_path):
    plan = '{megatron_args: "' + ARGS + ' --cpu-offloading-num-layers 2"}'
    code, doc = _estimate(tmp_path, plan)
    _refused(code, doc, "plan.megatron_args", "2 of the 4 transformer layers a pipeline rank "
             "holds (0.5), but training.activation_offload is 0")
    code, doc = _estimate(tmp_path, plan, share="0.5")
    assert code == 0, doc


def test_optimizer_offload_is_refused(tmp_path):
    code, doc = _estimate(tmp_path, '{megatron_args: "' + ARGS + ' --optimizer-cpu-offload"}')
    _refused(code, doc, "plan.megatron_args", "--optimizer-cpu-offload: the plan and its price "
             "have no term")


@pytest.mark.parametrize("extra, words", [
    ("model: {tensor_model_parallel_size: 2, cpu_offloading: true, cpu_offloading_num_layers: 2}",
     "but training.activation_offload is 0"),
    ("model: {tensor_model_parallel_size: 2}\noptimizer: {optimizer_cpu_offload: true}",
     "--optimizer-cpu-offload"),
])
def test_the_bridge_keys_are_read_the_same(tmp_path, extra, words):
    (tmp_path / "bridge.yaml").write_text(
        extra + "\ntrain: {micro_batch_size: 2, global_batch_size: 16}\nmixed_precision: bf16_mixed\n")
    code, doc = _estimate(tmp_path, "{megatron_bridge: bridge.yaml}")
    _refused(code, doc, "plan.megatron_bridge", words)


def test_a_spec_offloading_what_the_command_line_does_not_is_refused(tmp_path):
    code, doc = _estimate(tmp_path, '{megatron_args: "' + ARGS + '"}', share="0.5")
    _refused(code, doc, "plan.megatron_args", "the command line offloads no activations (no "
             "--cpu-offloading-num-layers), but training.activation_offload is 0.5")


@pytest.mark.parametrize("flags, words", [
    ("--cpu-offloading-num-layers 4", "only for layers less than 4"),
    ("--cpu-offloading-num-layers 1 --recompute-granularity selective",
     "does not work when activation recomputation (selective) is enabled"),
])
def test_offloading_megatron_core_refuses_is_refused(tmp_path, flags, words):
    code, doc = _estimate(tmp_path, '{megatron_args: "' + ARGS + " " + flags + '"}', share="0.25")
    _refused(code, doc, "plan.megatron_args", words)


def test_offloading_with_a_pipeline_is_refused(tmp_path):
    plan = ('{megatron_args: "--pipeline-model-parallel-size 2 --micro-batch-size 2 '
            '--global-batch-size 16 --bf16 --cpu-offloading-num-layers 1"}')
    code, doc = _estimate(tmp_path, plan, share="0.5")
    _refused(code, doc, "plan.megatron_args", "no support for pipeline parallelism with CPU "
             "offloading")
