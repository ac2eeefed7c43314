"""The config's normalisation epsilon and RoPE scaling reach the launch files.

Oracles: the Hugging Face config (Qwen3's ``rms_norm_eps`` 1e-6; Llama 3.1's
``rope_scaling`` ``{rope_type: llama3, factor: 8, low_freq_factor: 1, high_freq_factor: 4,
original_max_position_embeddings: 8192}``), Megatron-LM's own parser (its
``norm_epsilon``, ``use_rope_scaling``, ``rope_scaling_factor``; Megatron-Core's
``RotaryEmbedding._apply_scaling`` fixes the other three constants at Llama 3.1's) and a
YaRN scaling, which Megatron's flags do not state: said, not dropped silently."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli
from support.paths import REPO

HF = REPO / "model_zoo" / "hf"
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}


def _export(tmp_path, name: str, target: str, **changes) -> tuple[str, str]:
    config = json.loads((HF / f"{name}.json").read_text())
    config.update(num_hidden_layers=4, **changes)
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = tmp_path / "spec.yaml"
    spec.write_text("model: {hf_config: config.json}\ncluster: {zoo: 2x8-h100}\n"
                    "training: {global_batch_size: 32, seq_len: 4096}\n"
                    "search: {pp_degrees: [1], tp_degrees: [2, 4]}\ntarget: megatron\n")
    code, text = run_cli("solve", spec, "--out", tmp_path / "out")
    assert code == 0, text
    out = tmp_path / f"args.{target}"
    code, text = run_cli("export", tmp_path / "out" / "plan.json", "--to", target, "--out", out)
    assert code == 0, text
    return out.read_text(), text


def test_qwen3_epsilon_is_written(tmp_path):
    text, _ = _export(tmp_path, "qwen3-8b", "megatron")
    assert "--norm-epsilon 1e-06" in text
    bridge, _ = _export(tmp_path, "qwen3-8b", "megatron-bridge")
    assert "layernorm_epsilon: 1.0e-06" in bridge
    llama, _ = _export(tmp_path, "llama-3.1-8b", "megatron")   # 1e-5: Megatron's default
    assert "--norm-epsilon" not in llama


def test_llama3_rope_scaling_is_written_and_megatron_parses_it(tmp_path):
    text, _ = _export(tmp_path, "llama-3.1-8b", "megatron", rope_scaling=LLAMA3_SCALING)
    assert "--use-rope-scaling \\\n--rope-scaling-factor 8" in text
    pytest.importorskip("megatron.training.arguments")
    from support.frameworks import validate_megatron_lm
    args = validate_megatron_lm(text, 16, "hopper")
    assert args.use_rope_scaling and args.rope_scaling_factor == 8.0 and args.rotary_base == 500000
    bridge, _ = _export(tmp_path, "llama-3.1-8b", "megatron-bridge", rope_scaling=LLAMA3_SCALING)
    assert "rope_scaling: true" in bridge and "rope_scaling_factor: 8.0" in bridge


def test_a_scaling_megatron_does_not_state_is_said(tmp_path):
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    text, said = _export(tmp_path, "qwen3-8b", "megatron", rope_scaling=yarn)
    assert "--use-rope-scaling" not in text
    assert "the config's RoPE scaling (yarn, factor 4, original length 32768) is not written" \
        in " ".join(said.split())
    other = dict(LLAMA3_SCALING, high_freq_factor=2.0)      # not Megatron-Core's constants
    text, said = _export(tmp_path, "llama-3.1-8b", "megatron", rope_scaling=other)
    assert "--use-rope-scaling" not in text and "is not written" in said


def test_the_architecture_line_says_the_scaling(tmp_path):
    from autopar_opt.ir.arch import describe
    from autopar_opt.model_zoo.hf_config import build_hf_graph, load_hf_config
    config = json.loads((HF / "llama-3.1-8b.json").read_text())
    config["rope_scaling"] = LLAMA3_SCALING
    (tmp_path / "config.json").write_text(json.dumps(config))
    arch = build_hf_graph(load_hf_config(tmp_path / "config.json")[0], 4096).arch
    assert arch.rope_scaling == ("llama3", 8.0, 1.0, 4.0, 8192) and arch.norm_eps == 1e-5
    assert "RoPE (llama3 scaling x8)" in describe(arch)


def _arch(tmp_path, name: str, **changes):
    from autopar_opt.model_zoo.hf_config import build_hf_graph, load_hf_config
    config = json.loads((HF / f"{name}.json").read_text())
    config.update(changes)
    (tmp_path / "config.json").write_text(json.dumps(config))
    return build_hf_graph(load_hf_config(tmp_path / "config.json")[0], 4096).arch


def test_torchtitan_says_what_its_flavour_fixes_otherwise(tmp_path):
    """torchtitan v0.2.0's llama3 flavours apply Llama 3.1's RoPE scaling to every size
    (RoPEScalingArgs 8, 1, 4, 8192) with norm_eps 1e-5; its qwen3 flavours use 1e-6 and no
    scaling. A config that states otherwise is said (the job file cannot override the
    model's args); a matching one is not."""
    from types import SimpleNamespace

    from autopar_opt.export.torchtitan import flavour_model_notes
    notes = lambda arch: flavour_model_notes(SimpleNamespace(arch=arch))  # noqa: E731
    assert notes(_arch(tmp_path, "llama-3.1-8b", rope_scaling=LLAMA3_SCALING)) == []
    said = notes(_arch(tmp_path, "llama-3.1-8b", rope_scaling=None))      # no scaling stated
    assert said == ["torchtitan's llama3 flavours apply RoPE scaling llama3, factor 8; the config "
                    "states none: the run's positions differ from the config's unless the model's "
                    "RoPE args are changed to match"]
    assert notes(_arch(tmp_path, "qwen3-8b")) == []
    said = notes(_arch(tmp_path, "qwen3-8b", rms_norm_eps=1e-5))
    assert said == ["torchtitan's qwen3 flavours use norm_eps 1e-06; the config states 1e-05: set "
                    "norm_eps in the model's args to match it"]
    assert notes(_arch(tmp_path, "mistral-7b-v0.1")) == []    # no flavour: the export refuses


def test_longrope_is_said_by_its_lengths_not_a_factor(tmp_path):
    """LongRoPE (Phi-3.5-mini, Phi-4-mini) has no single factor (a short and a long list
    per channel pair) and states its original length at the config's top level: said as
    "longrope from 4096 to 131072 positions" (QA round 5 L1: it read "longrope scaling x0"
    and the export note "(longrope, factor 0)")."""
    from autopar_opt.export.megatron import rope_scaling_note
    from autopar_opt.ir.arch import describe
    longrope = {"type": "longrope", "short_factor": [1.0] * 48, "long_factor": [1.5] * 48}
    arch = _arch(tmp_path, "phi-3-mini-4k", rope_scaling=longrope, max_position_embeddings=131072)
    assert "RoPE (longrope from 4096 to 131072 positions)" in describe(arch)
    assert "x0" not in describe(arch)
    note = rope_scaling_note(arch)
    assert "(longrope, original length 4096, extended to 131072)" in note and "factor" not in note


def test_the_zoo_llama_7b_epsilon_is_llama_1s(tmp_path):
    """LLaMA-1 trained with RMSNorm epsilon 1e-6 (its params.json norm_eps, the HF config's
    rms_norm_eps); the zoo entry stated none, so the export left Megatron's 1e-5 (QA round 9)."""
    from autopar_opt.model_zoo.registry import build_model

    assert build_model("llama-7b").arch.norm_eps == 1e-6
    spec = tmp_path / "spec.yaml"
    spec.write_text("model: {zoo: llama-7b}\ncluster: {zoo: 2x8-h100}\n"
                    "training: {global_batch_size: 32, seq_len: 2048}\n"
                    "plan: {tp: 2, micro_batch_size: 1}\n")
    code, text = run_cli("estimate", spec, "--json")
    assert code == 0, text
    doc = tmp_path / "est.json"
    doc.write_text(text[text.index("{"):])
    code, text = run_cli("export", doc, "--to", "megatron")
    assert code == 0 and "--norm-epsilon 1e-06" in text, text
