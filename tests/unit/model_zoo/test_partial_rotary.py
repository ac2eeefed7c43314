"""Partial rotary embeddings are read wherever a config states them (QA round 5, M1):
``partial_rotary_factor`` (Phi-3.5/Phi-4-mini 0.75, StableLM 0.25; transformers' RoPE
initialisation reads it for every family) and GPT-NeoX's ``rotary_pct`` (default 0.25,
``GPTNeoXConfig``; Pythia's and GPT-NeoX-20B's value). The architecture says it and the
launch files carry it: Megatron-LM's ``--rotary-percent`` (checked by Megatron-LM's own
parser) and Megatron-Bridge's ``rotary_percent`` (checked by Bridge itself where it is
installed). Before, only Phi (1/2) and Nemotron were read: Phi-4-mini launched full RoPE."""

from __future__ import annotations

import json

import pytest

from autopar_opt.export.megatron import model_args
from autopar_opt.ir.arch import describe
from autopar_opt.model_zoo.hf_config import build_hf_graph
from support.cli import run_cli
from support.hf_specs import write_hf_spec
from support.paths import REPO

HF = REPO / "model_zoo" / "hf"


def _phi4_mini(**changes) -> dict:
    """Phi-4-mini's published dimensions on the bundled Phi-3 config (model_type phi3:
    24 query / 8 key-value heads of 128, MLP 8192, 200,064 tokens, tied, RoPE on 75%)."""
    config = json.loads((HF / "phi-3-mini-4k.json").read_text())
    config.update(dict(num_attention_heads=24, num_key_value_heads=8, vocab_size=200064,
                       tie_word_embeddings=True, partial_rotary_factor=0.75, sliding_window=None,
                       max_position_embeddings=131072), **changes)
    return {k: v for k, v in config.items() if v is not None}


def _neox(**changes) -> dict:
    config = json.loads((HF / "gpt-neox-20b.json").read_text())
    config.update(changes)
    return {k: v for k, v in config.items() if v is not None}


def test_phi4_mini_rotates_three_quarters_of_each_head():
    arch = build_hf_graph(_phi4_mini(), 4096).arch
    assert arch.rotary_fraction == 0.75
    assert "RoPE on 75% of each head" in describe(arch)
    full = build_hf_graph(_phi4_mini(partial_rotary_factor=None), 4096).arch
    assert full.rotary_fraction == 1.0 and "RoPE," in describe(full)   # Phi-3's default


def test_gpt_neox_rotary_pct_is_read_with_its_default():
    assert build_hf_graph(_neox(), 2048).arch.rotary_fraction == 0.25     # stated: 0.25
    assert build_hf_graph(_neox(rotary_pct=None), 2048).arch.rotary_fraction == 0.25
    half = build_hf_graph(_neox(rotary_pct=0.5), 2048).arch
    assert half.rotary_fraction == 0.5 and "RoPE on 50% of each head" in describe(half)
    view = type("View", (), {"arch": half, "seq_len": 2048})()
    args = model_args(view)          # Megatron refuses NeoX's parallel block; the flag is right
    assert args[args.index("--rotary-percent") + 1] == "0.5"


def test_the_model_command_says_it(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_phi4_mini()))
    code, text = run_cli("model", path)
    assert code == 0 and "RoPE on 75% of each head" in text, text


def _export(tmp_path, target: str) -> str:
    config = dict(_phi4_mini(), num_hidden_layers=4)
    spec = write_hf_spec(tmp_path, config, "tp: 2, pp: 1, zero: 1, micro_batch_size: 1")
    code, text = run_cli("estimate", spec, "--json")
    assert code == 0, text
    (tmp_path / "est.json").write_text(text)
    out = tmp_path / f"out.{target}"
    code, said = run_cli("export", tmp_path / "est.json", "--to", target, "--out", out)
    assert code == 0, said
    return out.read_text()


def test_megatron_lm_parses_the_rotary_percent(tmp_path):
    text = _export(tmp_path, "megatron")
    assert "--rotary-percent 0.75" in text
    pytest.importorskip("megatron.training.arguments")
    from support.frameworks import validate_megatron_lm
    args = validate_megatron_lm(text, 16, "hopper")
    assert args.rotary_percent == 0.75 and args.position_embedding_type == "rope"


def test_megatron_bridge_takes_the_rotary_percent(tmp_path):
    text = _export(tmp_path, "megatron-bridge")
    assert "rotary_percent: 0.75" in text
    from support.bridge import bridge_missing, validate_bridge
    if bridge_missing():
        pytest.skip(bridge_missing())
    path = tmp_path / "bridge.yaml"
    path.write_text(text)
    _, results = validate_bridge([{"name": "phi4", "path": str(path), "world": 16,
                                   "gpus_per_node": 8, "recipe": "pretrain_common"}])
    r = results["phi4"]
    assert r["ok"], r.get("error", "")
    assert r["derived"]["rotary_percent"] == 0.75
