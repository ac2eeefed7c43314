"""A torchtitan 0.2 job file that leaves keys out is read with torchtitan's own defaults.

Before, a missing ``[activation_checkpoint]`` table read as no checkpointing (torchtitan 0.2
runs ``mode = "selective"``, ``selective_ac_option = "2"``), a missing
``pipeline_parallel_microbatch_size`` as the whole local batch (torchtitan's default is 1:
1 micro-batch instead of 8, priced 25% slower), ``Interleaved1F1B`` as 1F1B, a pipeline
without ``module_fqns_per_model_part`` failed with an unrelated device-count error (then was
refused; now it takes torchtitan's own split), and torchtitan's own
``data_parallel_shard_degree = -1`` / unset ``global_batch_size`` (its llama3_8b.toml) were
refused. Oracle: torchtitan v0.2.2's dataclass defaults (``torchtitan/config/job_config.py``)
and a second route: the file with each default written out explicitly prices the same, and
the reading says which default it used; the default split is torchtitan's own function run
on the same settings."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli

HEAD = """\
model: {zoo: llama3-8b}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 64, seq_len: 2048, dtype: bf16, runtime: torchtitan}
"""
PLAN = "{tp: 1, pp: 2, microbatches: 8, zero: 2, schedule: gpipe}"


def _doc(text: str) -> dict:
    return json.JSONDecoder().raw_decode(text[text.index("{\n"):])[0]


def _estimate(folder, plan):
    path = folder / "s.yaml"
    path.write_text(HEAD + f"plan: {plan}\n")
    return run_cli("estimate", path, "--json")


def _job(folder) -> str:
    code, text = _estimate(folder, PLAN)
    assert code == 0, text
    (folder / "est.json").write_text(json.dumps(_doc(text)))
    code, text = run_cli("export", folder / "est.json", "--to", "torchtitan",
                         "--framework-version", "0.2", "--out", folder / "job.toml")
    assert code == 0, text
    return (folder / "job.toml").read_text()


def _read(folder, toml: str):
    (folder / "job2.toml").write_text(toml)
    code, text = _estimate(folder, "{torchtitan: job2.toml}")
    return code, _doc(text)


def _drop(toml: str, *starts: str) -> str:
    return "\n".join(line for line in toml.splitlines() if not line.startswith(starts)) + "\n"


@pytest.mark.parametrize("left_out, explicit, said", [
    (("[activation_checkpoint]", "mode ="),
     ('mode = "none"', 'mode = "selective"\nselective_ac_option = "2"'),
     "activation_checkpoint.selective_ac_option is not given: torchtitan 0.2's default \"2\""),
    (("pipeline_parallel_microbatch_size",), None,
     "pipeline_parallel_microbatch_size is not given: torchtitan 0.2's default 1"),
    (("data_parallel_shard_degree", "global_batch_size"), None,
     "data_parallel_shard_degree is -1 (torchtitan 0.2's default): the 16 devices"),
])
def test_a_key_left_out_takes_torchtitan_default_and_says_so(tmp_path, left_out, explicit,
                                                             said):
    toml = _job(tmp_path)
    if explicit is not None:
        assert explicit[0] in toml
        toml = toml.replace(*explicit)
    code, written = _read(tmp_path, toml)
    assert code == 0, written
    code, defaulted = _read(tmp_path, _drop(toml, *left_out))
    assert code == 0, defaulted
    assert defaulted["plan"] == written["plan"] and defaulted["metrics"] == written["metrics"]
    assert any(said in n for n in defaulted["notices"]), defaulted["notices"]


def test_default_checkpointing_is_not_read_as_none(tmp_path):
    toml = _job(tmp_path)
    code, none = _read(tmp_path, toml)
    code2, defaulted = _read(tmp_path, _drop(toml, "[activation_checkpoint]", "mode ="))
    assert code == code2 == 0
    blocks = [s["recompute"] for st in defaulted["plan"]["stages"] for s in st["strategies"][1:]]
    assert "full" in blocks and "none" in blocks             # every second block of a stage
    assert defaulted["metrics"] != none["metrics"]


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.replace('"GPipe"', '"Interleaved1F1B"'),
     "pipeline_parallel_schedule = 'Interleaved1F1B': the reading takes 1F1B or GPipe"),
    (lambda t: _drop(t, "module_fqns_per_model_part").replace(
        "[parallelism]", "[parallelism]\npipeline_parallel_layers_per_stage = 4"),
     "pipeline_parallel_layers_per_stage 4 makes ceil((32 layers + 1 + 1) / 4) = 9 stages"),
    (lambda t: t.replace('mode = "none"', 'mode = "memory_budget"'),
     "activation_checkpoint.mode = 'memory_budget'"),
    (lambda t: t.replace("pipeline_parallel_microbatch_size = 1",
                         "pipeline_parallel_microbatch_size = 3"),
     "local_batch_size 8 is not a multiple of parallelism.pipeline_parallel_microbatch_size 3"),
])
def test_what_the_reading_cannot_resolve_is_refused_naming_the_key(tmp_path, edit, words):
    code, doc = _read(tmp_path, edit(_job(tmp_path)))
    assert code == 2, doc
    problems = doc["error"]["problems"]
    assert any(p["key"] == "plan.torchtitan" and words in p["rule"] for p in problems), problems


def _torchtitan_split(pp: int, extra: dict) -> list[list[int]]:
    """The transformer layers per stage torchtitan 0.3.0 itself (the pinned release) builds
    for these settings: ``pipeline_llm``'s two steps, ``_get_pipeline_metadata`` and
    ``_generate_llm_fqn_per_model_part`` (torchtitan/distributed/pipeline_parallel.py, the
    rule torchtitan 0.2.2 exports as generate_llm_fqn_per_model_part)."""
    from types import SimpleNamespace

    configs = pytest.importorskip("torchtitan.config.configs")
    pipe = pytest.importorskip("torchtitan.distributed.pipeline_parallel")
    par = configs.ParallelismConfig(pipeline_parallel_degree=pp, **extra)
    meta = pipe._get_pipeline_metadata(SimpleNamespace(pp=pp), par,
                                       SimpleNamespace(layers=[None] * 32))   # llama3-8b
    return [[int(n.split(".")[1]) for n in part if n.startswith("layers.")]
            for part in pipe._generate_llm_fqn_per_model_part(*meta)]


@pytest.mark.parametrize("extra, sizes", [
    ({}, [8, 9, 8, 7]),     # 32 + 1 + 1 = 34 over 4: 9, 9, 8, 8 less the two weights
    ({"pipeline_parallel_first_stage_less_layers": 3}, [6, 9, 9, 8]),
    ({"pipeline_parallel_layers_per_stage": 9,
      "pipeline_parallel_last_stage_less_layers": 2}, [8, 9, 9, 6]),
])
def test_a_pipeline_without_stages_takes_torchtitans_own_split(tmp_path, extra, sizes):
    code, text = _estimate(tmp_path, "{tp: 1, pp: 4, microbatches: 16, zero: 2, "
                                     "schedule: 1f1b}")
    assert code == 0, text
    (tmp_path / "est.json").write_text(json.dumps(_doc(text)))
    code, text = run_cli("export", tmp_path / "est.json", "--to", "torchtitan",
                         "--framework-version", "0.2", "--out", tmp_path / "job.toml")
    assert code == 0, text
    toml = _drop((tmp_path / "job.toml").read_text(), "module_fqns_per_model_part")
    toml = toml.replace("[parallelism]", "[parallelism]\n" + "".join(
        f"{k} = {v}\n" for k, v in extra.items()))
    code, doc = _read(tmp_path, toml)
    assert code == 0, doc
    got = [[int(name[5:]) for name in st["layers"] if name.startswith("block")]
           for st in doc["plan"]["stages"]]
    assert [len(b) for b in got] == sizes
    assert got == _torchtitan_split(4, extra)
    assert any("torchtitan 0.2's own split" in n and f"per stage {sizes}" in n
               for n in doc["notices"]), doc["notices"]
