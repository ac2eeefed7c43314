"""A torchtitan 0.2 job file brought back as a plan (``plan: {torchtitan: FILE}``).

Before, the TOML ``autopar export --to torchtitan --framework-version 0.2`` writes had no
way back in. Oracle: a plan priced from the spec, exported, and read back prices the same,
metric by metric, with the same stages and strategies (FSDP, hybrid sharding, tp x cp,
op-level checkpointing, ZeRO-2 GPipe pipelines, a tp 4 x pp 4 pipeline with full
checkpointing); a file of another model, batch, cluster or module layout is refused naming
the file's key, and torchtitan 0.3's Python module is refused saying why."""

from __future__ import annotations

import json

import pytest

from support.cli import first_json, run_cli, write_spec

HEAD = """\
model: {zoo: MODEL}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 64, seq_len: 2048, dtype: bf16, runtime: torchtitan}
"""


def _spec(folder, name, plan, model="llama3-8b"):
    return write_spec(folder, name, HEAD + "plan: PLAN\n", MODEL=model, PLAN=plan)


def _exported(folder, plan) -> dict:
    code, text = run_cli("estimate", _spec(folder, "s.yaml", plan), "--json")
    assert code == 0, text
    first = first_json(text)
    (folder / "est.json").write_text(json.dumps(first))
    code, text = run_cli("export", folder / "est.json", "--to", "torchtitan",
                         "--framework-version", "0.2", "--out", folder / "job.toml")
    assert code == 0, text
    return first


@pytest.mark.parametrize("plan", [
    "{tp: 1, pp: 1, microbatches: 4, zero: 3}",
    "{tp: 1, pp: 1, microbatches: 4, zero: 3, zero_group: 8}",
    "{tp: 2, pp: 1, cp: 2, microbatches: 4, zero: 3, sequence_parallel: true}",
    "{tp: 1, pp: 1, microbatches: 4, zero: 3, recompute: op}",
    "{tp: 1, pp: 2, microbatches: 8, zero: 2, schedule: gpipe}",
    "{tp: 4, pp: 4, microbatches: 16, sequence_parallel: true, recompute: full}",
])
def test_an_exported_job_file_prices_as_the_plan_it_was_written_from(tmp_path, plan):
    first = _exported(tmp_path, plan)
    code, text = run_cli("estimate", _spec(tmp_path, "back.yaml", "{torchtitan: job.toml}"),
                         "--json")
    assert code == 0, text
    again = first_json(text)
    assert again["plan"] == first["plan"] and again["metrics"] == first["metrics"]


@pytest.mark.parametrize("edit, words", [
    (('flavor = "8B"', 'flavor = "70B"'), "model.name/flavor 'llama3'/'70B', but the spec's "
                                          "model is torchtitan's 'llama3'/'8B'"),
    (("global_batch_size = 64", "global_batch_size = 128"),
     "training.global_batch_size = 128, but the spec's training.global_batch_size is 64"),
    (("data_parallel_shard_degree = 4", "data_parallel_shard_degree = 8"),
     "replicate*shard*tp*cp*pp = 32, but the cluster has 16 devices"),
    (('"layers.31"', '"layers.32"'), "names 'layers.32', not a module of the model"),
])
def test_a_job_file_the_spec_contradicts_is_refused_naming_its_key(tmp_path, edit, words):
    _exported(tmp_path, "{tp: 2, pp: 2, microbatches: 8, zero: 3, sequence_parallel: true}")
    job = tmp_path / "job.toml"
    assert edit[0] in job.read_text()
    job.write_text(job.read_text().replace(*edit))
    code, text = run_cli("estimate", _spec(tmp_path, "x.yaml", "{torchtitan: job.toml}"), "--json")
    assert code == 2, text
    problems = first_json(text)["error"]["problems"]
    assert any(p["key"] == "plan.torchtitan" and p["value"] == "job.toml" and words in p["rule"]
               for p in problems), problems


def test_a_torchtitan_0_3_module_is_refused_saying_why(tmp_path):
    (tmp_path / "job.py").write_text("# a torchtitan 0.3 job module\n")
    code, text = run_cli("estimate", _spec(tmp_path, "x.yaml", "{torchtitan: job.py}"), "--json")
    assert code == 2, text
    [problem] = first_json(text)["error"]["problems"]
    assert "reading it would mean running it" in problem["rule"]
    assert "--framework-version 0.2" in problem["fix"]
