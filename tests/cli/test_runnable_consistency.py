"""``--runnable-by`` is held to the rules a spec's ``target:`` is (found by a new user,
session 24): MPT's ALiBi positions were refused as ``target: {framework: megatron}`` but
certified "runnable by megatron" from the command line, and the export then refused the
plan with a circular fix ("solve again with --runnable-by megatron")."""

from __future__ import annotations

import yaml

from support.cli import run_cli

LAYERS = [{"name": "emb", "kind": "embedding", "params": 2e8, "flops_fwd": 0, "flops_bwd": 0,
           "act_bytes": 8e6, "output_bytes": 8e6, "max_tp": 8}] + [
    {"name": f"b{i}", "kind": "transformer_block", "params": 2e8, "flops_fwd": 8e11,
     "flops_bwd": 1.6e12, "act_bytes": 3e8, "input_bytes": 8e6, "output_bytes": 8e6,
     "tp_comm_bytes": 1.6e7, "max_tp": 8, "supports_sp": True} for i in range(4)] + [
    {"name": "head", "kind": "lm_head", "params": 2e8, "flops_fwd": 8e11, "flops_bwd": 1.6e12,
     "act_bytes": 4e8, "input_bytes": 8e6, "max_tp": 8}]


def test_runnable_by_refuses_a_model_the_framework_cannot_build(tmp_path):
    spec = tmp_path / "mpt.yaml"
    spec.write_text(yaml.safe_dump({"model": {"hf_config": "mpt-7b"},
                                    "cluster": {"zoo": "2x8-h100"},
                                    "training": {"global_batch_size": 64, "seq_len": 2048}}))
    code, text = run_cli("solve", spec, "--runnable-by", "megatron", "--out", tmp_path / "o")
    assert code == 2
    assert "--runnable-by = 'megatron': megatron cannot run this model: ALiBi" in text
    assert not (tmp_path / "o").exists()


def test_export_refusal_of_a_plan_searched_for_the_target_does_not_say_search_again(tmp_path):
    spec = tmp_path / "layers.yaml"
    spec.write_text(yaml.safe_dump({
        "model": {"name": "mylm", "seq_len": 2048, "layers": LAYERS},
        "cluster": {"zoo": "1x8-a100-40"}, "target": {"framework": "torchtitan"},
        "training": {"global_batch_size": 64},
        "search": {"pp_degrees": [1, 2], "recompute": ["none", "full"]}}))
    code, text = run_cli("solve", spec, "--out", tmp_path / "o", "--quiet")
    assert code == 0, text
    code, text = run_cli("export", tmp_path / "o" / "plan.json", "--to", "torchtitan")
    assert code == 2
    assert "torchtitan registers no model flavour" in text
    assert "searched for torchtitan already" in text and "solve again" not in text
