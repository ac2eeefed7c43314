"""A Megatron-Bridge overrides file brought back as a plan (``plan: {megatron_bridge: FILE}``).

Before, only a Megatron-LM command line could be read back (``plan.megatron_args``); the
file ``autopar export --to megatron-bridge`` writes had no way in. Oracle: a plan priced
from the spec (``estimate``), exported to Bridge, and read back prices the same, metric by
metric, with the same stages and strategies; a file of another model or precision is
refused naming the file's key."""

from __future__ import annotations

import json

import pytest

from support.cli import first_json, run_cli, write_spec

SPEC = """\
model: {zoo: MODEL}
cluster: {zoo: debug-2x4}
training: {global_batch_size: 16, seq_len: 128, dtype: bf16, runtime: megatron-core}
plan: PLAN
"""


def _spec(folder, name, model, plan):
    return write_spec(folder, name, SPEC, MODEL=model, PLAN=plan)


@pytest.mark.parametrize("model, plan", [
    ("debug", "{tp: 2, pp: 2, microbatches: 4, sequence_parallel: true, zero: 1}"),
    ("debug", "{tp: 1, pp: 2, microbatches: 4, schedule: interleaved, vp_chunks: 2, "
              "recompute: full}"),
    ("debug", "{tp: 2, pp: 1, microbatches: 2, zero: 3}"),
    ("debug-moe", "{tp: 1, pp: 2, ep: 4, microbatches: 4, zero: 1}"),
    ("debug", "{tp: 2, pp: 2, cp: 2, microbatches: 4, sequence_parallel: true, "
              "recompute: selective}"),
    ("debug", "{tp: 1, pp: 2, microbatches: 4, stage_layers: [2, 4]}"),
])
def test_an_exported_bridge_file_prices_as_the_plan_it_was_written_from(tmp_path, model, plan):
    code, text = run_cli("estimate", _spec(tmp_path, "s.yaml", model, plan), "--json")
    assert code == 0, text
    first = first_json(text)
    (tmp_path / "est.json").write_text(json.dumps(first))
    code, text = run_cli("export", tmp_path / "est.json", "--to", "megatron-bridge", "--out",
                         tmp_path / "bridge.yaml")
    assert code == 0, text
    back = _spec(tmp_path, "back.yaml", model, "{megatron_bridge: bridge.yaml}")
    code, text = run_cli("estimate", back, "--json")
    assert code == 0, text
    again = first_json(text)
    assert again["plan"] == first["plan"] and again["metrics"] == first["metrics"]


@pytest.fixture()
def exported(tmp_path):
    spec = _spec(tmp_path, "s.yaml", "debug", "{tp: 2, pp: 2, microbatches: 4}")
    code, text = run_cli("estimate", spec, "--json")
    (tmp_path / "est.json").write_text(json.dumps(first_json(text)))
    code, text = run_cli("export", tmp_path / "est.json", "--to", "megatron-bridge", "--out",
                         tmp_path / "bridge.yaml")
    assert code == 0, text
    return tmp_path, (tmp_path / "bridge.yaml").read_text()


@pytest.mark.parametrize("edit, words", [
    (("num_layers: 4", "num_layers: 8"),
     "model.num_layers (--num-layers) 8 but the model has 4 transformer layers"),
    (("mixed_precision: bf16_mixed", "mixed_precision: fp32"),
     "mixed_precision = 'fp32': not one of Bridge's recipes"),
    (("global_batch_size: 16", "global_batch_size: 32"),
     "train.global_batch_size (--global-batch-size) 32 differs from training.global_batch_size"),
])
def test_a_file_the_spec_contradicts_is_refused_naming_its_key(exported, edit, words):
    folder, text = exported
    (folder / "b.yaml").write_text(text.replace(*edit))
    code, out = run_cli("estimate", _spec(folder, "x.yaml", "debug", "{megatron_bridge: b.yaml}"),
                        "--json")
    assert code == 2, out
    [problem] = first_json(out)["error"]["problems"]
    assert problem["key"] == "plan.megatron_bridge" and problem["value"] == "b.yaml"
    assert words in problem["rule"], problem["rule"]
