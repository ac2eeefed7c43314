"""A DeepSpeed JSON config brought back as a plan (``plan: {deepspeed: FILE}``).

Before, the config ``autopar export --to deepspeed`` writes had no way back in (its reader,
plan_from_deepspeed, needed the launch notes and was used by tests only). The file does not
name the pipeline degree or the checkpointed layers (DeepSpeed's PipelineModule takes them in
code); the reading derives them by DeepSpeed's batch rule and the activation_checkpointing
section, and says so. Oracle: a plan priced from the spec, exported, and read back prices the
same, metric by metric, with the same stages and strategies; a file DeepSpeed or the spec
refuses is refused naming the file's key."""

from __future__ import annotations

import json

import pytest

from support.cli import first_json, run_cli, write_spec

HEAD = """\
model: {zoo: MODEL}
cluster: {zoo: debug-2x4}
training: {global_batch_size: 16, seq_len: 128, dtype: bf16, runtime: deepspeed}
"""


def _spec(folder, name, plan, model="debug"):
    return write_spec(folder, name, HEAD + "plan: PLAN\n", MODEL=model, PLAN=plan)


def _exported(folder, plan, model="debug") -> dict:
    code, text = run_cli("estimate", _spec(folder, "s.yaml", plan, model), "--json")
    assert code == 0, text
    first = first_json(text)
    (folder / "est.json").write_text(json.dumps(first))
    code, text = run_cli("export", folder / "est.json", "--to", "deepspeed", "--out",
                         folder / "ds.json")
    assert code == 0, text
    return first


@pytest.mark.parametrize("model, plan, stages, checkpointed", [
    ("debug", "{tp: 1, pp: 2, microbatches: 4, zero: 1}", 2, "none"),
    ("debug", "{tp: 1, pp: 2, microbatches: 4, recompute: full}", 2, "every transformer block"),
    ("debug", "{tp: 2, pp: 1, microbatches: 2, zero: 3}", 1, "none"),
    ("debug", "{tp: 1, pp: 1, microbatches: 2, zero: 2, recompute: full}", 1,
     "every transformer block"),
    ("debug-moe", "{tp: 1, pp: 1, ep: 4, microbatches: 2, zero: 1}", 1, "none"),
])
def test_an_exported_config_prices_as_the_plan_it_was_written_from(tmp_path, model, plan,
                                                                    stages, checkpointed):
    first = _exported(tmp_path, plan, model)
    code, text = run_cli("estimate", _spec(tmp_path, "back.yaml", "{deepspeed: ds.json}", model),
                         "--json")
    assert code == 0, text
    again = first_json(text)
    assert again["plan"] == first["plan"] and again["metrics"] == first["metrics"]
    said = " ".join(again["notices"])
    assert f") = {stages}, dp from train_batch_size" in said      # what was derived, said
    assert f"checkpointed is set in code: read as {checkpointed}" in said


@pytest.mark.parametrize("edit, words", [
    (lambda c: c.update(train_batch_size=32),
     "train_batch_size = 32, but the spec's training.global_batch_size is 16"),
    (lambda c: c.update(train_micro_batch_size_per_gpu=3), "do not divide the 8 devices"),
    (lambda c: c["zero_optimization"].update(stage=3),
     "PipelineEngine refuses ZeRO-2/3 with pipelining"),
    (lambda c: c.update(fp16={"enabled": True}, bf16={"enabled": False}),
     "fp16.enabled trains in fp16, but training.dtype is bf16"),
])
def test_a_config_deepspeed_or_the_spec_refuses_is_refused_naming_its_key(tmp_path, edit, words):
    _exported(tmp_path, "{tp: 1, pp: 2, microbatches: 4, zero: 1}")
    config = json.loads((tmp_path / "ds.json").read_text())
    edit(config)
    (tmp_path / "ds.json").write_text(json.dumps(config))
    code, text = run_cli("estimate", _spec(tmp_path, "x.yaml", "{deepspeed: ds.json}"), "--json")
    assert code == 2, text
    problems = first_json(text)["error"]["problems"]
    assert any(p["key"] == "plan.deepspeed" and p["value"] == "ds.json" and words in p["rule"]
               for p in problems), problems
