"""``--account-for-embedding-in-pipeline-split`` / ``--account-for-loss-in-pipeline-split``
(Bridge: ``model.account_for_*_in_pipeline_split``) are read as Megatron-Core splits.

Before, the importer ignored both flags: Llama-3 405B's 126 layers over pp 8 with both (the
embedding and the loss each counted as a layer: 128 / 8 = 16 per stage, one transformer layer
fewer on the first and the last stage) was refused as "126 transformer layers do not split
evenly", and a split Megatron-LM itself refuses (4 layers + the embedding = 5 over pp 2) was
read as the plain even split. Oracle: Megatron-Core's rule (``transformer_block.
get_num_layers_to_build``, ``validate_args``) by hand, and a second route: the same stages
written as ``--pipeline-model-parallel-layout Et*15|t*16|...|t*15L`` read to the same plan
and price."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli

SPEC = """\
model: {zoo: MODEL}
cluster: {zoo: debug-2x4}
training: {global_batch_size: 64, seq_len: 2048, dtype: bf16, runtime: megatron-core}
plan: PLAN
"""
BASE = "--tensor-model-parallel-size 1 --micro-batch-size 1 --global-batch-size 64 --bf16"
BOTH = "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"


def _estimate(folder, plan, model="llama3-405b"):
    path = folder / "s.yaml"
    path.write_text(SPEC.replace("MODEL", model).replace("PLAN", plan))
    code, text = run_cli("estimate", path, "--json")
    return code, json.JSONDecoder().raw_decode(text[text.index("{\n"):])[0]


def _args(folder, flags, model="llama3-405b"):
    return _estimate(folder, '{megatron_args: "' + BASE + " " + flags + '"}', model)


def test_both_flags_split_as_megatron_core_does(tmp_path):
    code, accounted = _args(tmp_path, "--pipeline-model-parallel-size 8 " + BOTH)
    assert code == 0, accounted
    blocks = [sum(name.startswith("block") for name in st["layers"])
              for st in accounted["plan"]["stages"]]
    assert blocks == [15, 16, 16, 16, 16, 16, 16, 15]          # (126 + 2) / 8 = 16, by hand
    layout = "Et*15|" + "t*16|" * 6 + "t*15L"
    code, written = _args(tmp_path, f"--pipeline-model-parallel-size 8 "
                                    f"--pipeline-model-parallel-layout {layout}")
    assert code == 0, written
    assert accounted["plan"] == written["plan"] and accounted["metrics"] == written["metrics"]


def test_the_bridge_keys_read_the_same(tmp_path):
    code, accounted = _args(tmp_path, "--pipeline-model-parallel-size 8 " + BOTH)
    (tmp_path / "bridge.yaml").write_text(
        "model: {tensor_model_parallel_size: 1, pipeline_model_parallel_size: 8,\n"
        "        account_for_embedding_in_pipeline_split: true,\n"
        "        account_for_loss_in_pipeline_split: true}\n"
        "train: {micro_batch_size: 1, global_batch_size: 64}\n"
        "mixed_precision: bf16_mixed\n")
    code2, bridge = _estimate(tmp_path, "{megatron_bridge: bridge.yaml}")
    assert code == code2 == 0, bridge
    assert bridge["plan"] == accounted["plan"] and bridge["metrics"] == accounted["metrics"]


@pytest.mark.parametrize("flags, words", [
    ("--pipeline-model-parallel-size 2 --account-for-embedding-in-pipeline-split",
     "the 4 transformer layers + 1 = 5 do not divide by --pipeline-model-parallel-size 2"),
    ("--pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 1 " + BOTH,
     "Megatron-Core refuses them together"),
    ("--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 " + BOTH,
     "with virtual pipeline stages"),
])
def test_a_split_megatron_refuses_is_refused(tmp_path, flags, words):
    code, doc = _args(tmp_path, flags, model="debug")
    assert code == 2, doc
    problems = doc["error"]["problems"]
    assert any(p["key"] == "plan.megatron_args" and words in p["rule"] for p in problems), problems
