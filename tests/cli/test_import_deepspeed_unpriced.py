"""A DeepSpeed config whose settings the plan cannot express is refused, not priced without them.

Before, ``plan: {deepspeed: ds.json}`` ignored ZeRO-Offload (``offload_optimizer`` /
``offload_param`` on the CPU), CPU or partitioned activation checkpoints, DeepSpeed-Ulysses'
``sequence_parallel_size`` and a file without ``bf16``/``fp16`` (DeepSpeed then trains in
fp32): each was priced as the GPU-resident bf16 plan, exit 0, nothing said; and a missing
``gradient_accumulation_steps`` was read as 1 without saying so. Oracle: DeepSpeed 0.19's own
config semantics (``runtime/zero/offload_config.py``, ``runtime/activation_checkpointing/
config.py``, ``DeepSpeedConfig._set_batch_related_parameters``); the unedited export still
reads (exit 0), so each refusal is the edit's."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli

SPEC = """\
model: {zoo: debug}
cluster: {zoo: debug-2x4}
training: {global_batch_size: 16, seq_len: 128, dtype: bf16, runtime: deepspeed}
plan: PLAN
"""


def _doc(text: str) -> dict:
    return json.JSONDecoder().raw_decode(text[text.index("{\n"):])[0]


def _run(folder, plan):
    path = folder / "s.yaml"
    path.write_text(SPEC.replace("PLAN", plan))
    code, text = run_cli("estimate", path, "--json")
    return code, _doc(text)


def _config(folder) -> dict:
    code, doc = _run(folder, "{tp: 1, pp: 1, microbatches: 2, zero: 2}")
    assert code == 0, doc
    (folder / "est.json").write_text(json.dumps(doc))
    code, text = run_cli("export", folder / "est.json", "--to", "deepspeed", "--out",
                         folder / "ds.json")
    assert code == 0, text
    return json.loads((folder / "ds.json").read_text())


@pytest.mark.parametrize("edit, words", [
    (lambda c: c["zero_optimization"].update(offload_optimizer={"device": "cpu"}),
     "zero_optimization.offload_optimizer.device = 'cpu': ZeRO-Offload"),
    (lambda c: c["zero_optimization"].update(offload_param={"device": "nvme"}),
     "zero_optimization.offload_param.device = 'nvme'"),
    (lambda c: c.update(activation_checkpointing={"cpu_checkpointing": True}),
     "activation_checkpointing.cpu_checkpointing = true"),
    (lambda c: c.update(activation_checkpointing={"partition_activations": True}),
     "activation_checkpointing.partition_activations = true"),
    (lambda c: c.update(sequence_parallel_size=2), "sequence_parallel_size = 2: DeepSpeed-Ulysses"),
    (lambda c: c.pop("bf16"), "neither bf16.enabled nor fp16.enabled: DeepSpeed trains in fp32"),
])
def test_a_setting_the_plan_cannot_price_is_refused_naming_its_key(tmp_path, edit, words):
    config = _config(tmp_path)
    code, doc = _run(tmp_path, "{deepspeed: ds.json}")
    assert code == 0, doc                                  # the export itself reads
    edit(config)
    (tmp_path / "ds.json").write_text(json.dumps(config))
    code, doc = _run(tmp_path, "{deepspeed: ds.json}")
    assert code == 2, doc
    problems = doc["error"]["problems"]
    assert any(p["key"] == "plan.deepspeed" and words in p["rule"] for p in problems), problems


def test_offload_device_none_reads_as_the_plan(tmp_path):
    config = _config(tmp_path)
    code, first = _run(tmp_path, "{deepspeed: ds.json}")
    config["zero_optimization"]["offload_optimizer"] = {"device": "none"}
    (tmp_path / "ds.json").write_text(json.dumps(config))
    code2, again = _run(tmp_path, "{deepspeed: ds.json}")
    assert code == code2 == 0 and again["metrics"] == first["metrics"]


def test_a_missing_accumulation_count_is_said(tmp_path):
    config = _config(tmp_path)
    code, first = _run(tmp_path, "{deepspeed: ds.json}")
    assert config.pop("gradient_accumulation_steps") == 2
    config["train_micro_batch_size_per_gpu"] *= 2          # the same batch in one micro-batch
    (tmp_path / "ds.json").write_text(json.dumps(config))
    code, doc = _run(tmp_path, "{deepspeed: ds.json}")
    assert code == 0, doc
    assert any("gradient_accumulation_steps is not given" in n and "read as 1" in n
               for n in doc["notices"]), doc["notices"]
    assert not any("gradient_accumulation_steps is not given" in n for n in first["notices"])


def test_a_config_without_its_micro_batch_is_refused_saying_why(tmp_path):
    config = _config(tmp_path)
    del config["train_micro_batch_size_per_gpu"]               # DeepSpeedExamples' style
    (tmp_path / "ds.json").write_text(json.dumps(config))
    code, doc = _run(tmp_path, "{deepspeed: ds.json}")
    assert code == 2, doc
    [problem] = doc["error"]["problems"]
    assert "train_micro_batch_size_per_gpu is not given: DeepSpeed derives it" in problem["rule"]
    assert "not a DeepSpeed config" not in problem["rule"]
