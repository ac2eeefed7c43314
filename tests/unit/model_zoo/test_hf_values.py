"""Out-of-range values in a Hugging Face config are refused before anything is built
(QA round 5, M4): each names the file, the key, the value, the rule and the fix, exits 2
with no traceback, and nothing reaches a launch file. Before, a RoPE factor of -8, a
rope_theta of -1 or an epsilon of -1e-6 went into --rope-scaling-factor, --rotary-base
and --norm-epsilon, and Falcon's ffn_hidden_size -1 built a negative MLP.

Oracles: transformers' rules (``modeling_rope_utils``: the RoPE types of
``ROPE_INIT_FUNCTIONS``, each type's required keys, "factor field must be a float >= 1";
``GPTNeoXConfig.rotary_pct`` a share of the head; Gemma 2's soft-cap divides by the cap)
and Gemma 3's own refusal of a ``layer_types`` list that is not one entry per layer."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli
from support.hf_specs import write_hf_spec
from support.paths import REPO

HF = REPO / "model_zoo" / "hf"
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}

#: (bundled config, changes, the words the refusal must hold: key = value and the rule)
CASES = {
    "factor_negative": ("llama-3.1-8b", {"rope_scaling": dict(LLAMA3, factor=-8.0)},
                        ["rope_scaling.factor = -8.0", "must be a number of at least 1",
                         "'llama3'"]),
    "factor_zero": ("qwen3-8b", {"rope_scaling": {"rope_type": "yarn", "factor": 0}},
                    ["rope_scaling.factor = 0", "at least 1", "'yarn'"]),
    "factor_below_one": ("llama-3.1-8b", {"rope_scaling": {"type": "linear", "factor": 0.5}},
                         ["rope_scaling.factor = 0.5", "at least 1", "'linear'"]),
    "scaling_a_string": ("qwen3-8b", {"rope_scaling": "yarn"},
                         ["rope_scaling = 'yarn'", "must be an object", "or null"]),
    "unknown_type": ("llama-3.1-8b", {"rope_scaling": {"rope_type": "foo", "factor": 8.0}},
                     ["rope_type = 'foo'", "not a RoPE type transformers builds",
                      "default, linear, dynamic, yarn, longrope, llama3"]),
    "no_type": ("llama-3.1-8b", {"rope_scaling": {"factor": 8.0}},
                ["rope_scaling states no rope_type", "llama3"]),
    "llama3_key_missing": ("llama-3.1-8b", {"rope_scaling": {"rope_type": "llama3", "factor": 8.0}},
                           ["rope_type 'llama3' needs key 'original_max_position_embeddings'"]),
    "llama3_bands_upside_down": ("llama-3.1-8b", {"rope_scaling": dict(LLAMA3, high_freq_factor=0.5)},
                                 ["rope_scaling.high_freq_factor = 0.5",
                                  "must be at least low_freq_factor = 1.0"]),
    "theta_negative": ("qwen3-8b", {"rope_theta": -1}, ["rope_theta = -1",
                                                         "must be a positive number"]),
    "theta_string": ("qwen3-8b", {"rope_theta": "1e6"}, ["rope_theta = '1e6'",
                                                          "must be a positive number"]),
    "rms_eps_negative": ("qwen3-8b", {"rms_norm_eps": -1e-6},
                         ["rms_norm_eps = -1e-06", "must be a number in (0, 1)", "epsilon"]),
    "ln_eps_zero": ("gpt-neox-20b", {"layer_norm_eps": 0}, ["layer_norm_eps = 0", "(0, 1)"]),
    "ln_epsilon_negative": ("falcon-7b", {"layer_norm_epsilon": -1e-5},
                            ["layer_norm_epsilon = -1e-05", "(0, 1)"]),
    "falcon_ffn_negative": ("falcon-7b", {"ffn_hidden_size": -1},
                            ["ffn_hidden_size = -1", "must be a positive integer"]),
    "opt_ffn_zero": ("opt-6.7b", {"ffn_dim": 0}, ["ffn_dim = 0", "must be a positive integer"]),
    "softcap_string": ("gemma-2-9b", {"final_logit_softcapping": "thirty"},
                       ["final_logit_softcapping = 'thirty'", "must be a positive number",
                        "or null"]),
    "softcap_zero": ("gemma-2-9b", {"attn_logit_softcapping": 0},
                     ["attn_logit_softcapping = 0", "must be a positive number"]),
    "max_positions_zero": ("qwen3-8b", {"max_position_embeddings": 0},
                           ["max_position_embeddings = 0", "must be a positive integer"]),
    "qwen3_layer_types_short": ("qwen3-8b", {"layer_types": ["full_attention"]},
                                ["layer_types must list one entry per layer (36); it has 1"]),
    "neox_rotary_pct_above_one": ("gpt-neox-20b", {"rotary_pct": 2.0},
                                  ["rotary_pct = 2.0", "must be a number in (0, 1]"]),
    "neox_rotary_pct_zero": ("gpt-neox-20b", {"rotary_pct": 0},
                             ["rotary_pct = 0", "must be a number in (0, 1]"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_out_of_range_value_is_refused_naming_it(tmp_path, case):
    name, changes, words = CASES[case]
    config = json.loads((HF / f"{name}.json").read_text())
    config.update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, text = run_cli("model", path)
    flat = " ".join(text.split())
    assert code == 2, text
    assert str(path) in flat and "(fix:" in flat, text
    for word in words:
        assert word in flat, (word, text)
    assert "params" not in flat                    # nothing built, nothing printed of a model


def test_refused_values_do_not_reach_an_export(tmp_path):
    """The spec route (estimate) refuses the same file before pricing or writing."""
    config = json.loads((HF / "qwen3-8b.json").read_text())
    config.update(num_hidden_layers=4, rope_theta=-1)
    spec = write_hf_spec(tmp_path, config, "tp: 2, pp: 1, zero: 1, micro_batch_size: 1")
    code, text = run_cli("estimate", spec, "--json")
    assert code == 2 and "rope_theta = -1" in text and "must be a positive number" in text, text


@pytest.mark.parametrize("name, changes", [
    ("llama-3.1-8b", {"rope_scaling": LLAMA3}),
    ("llama-3.1-8b", {"rope_scaling": None}),
    ("llama-3.1-8b", {"rope_scaling": {"rope_type": "default"}}),
    ("qwen3-8b", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                   "original_max_position_embeddings": 32768}}),
    ("qwen3-8b", {"rope_scaling": {"type": "dynamic", "factor": 2.0}}),
    ("phi-3-mini-4k", {"rope_scaling": {"type": "su", "short_factor": [1.0] * 48,
                                        "long_factor": [1.5] * 48}}),
    ("gemma-2-9b", {"final_logit_softcapping": None}),
    ("qwen3-8b", {"layer_types": ["full_attention"] * 36}),
    # Llama 4 Scout's published rope_scaling (text_config): both band factors 1.0
    ("llama-3.1-8b", {"rope_scaling": dict(LLAMA3, factor=16.0, high_freq_factor=1.0)}),
])
def test_published_forms_are_still_read(tmp_path, name, changes):
    config = json.loads((HF / f"{name}.json").read_text())
    config.update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, text = run_cli("model", path)
    assert code == 0, text


def test_llama_4_text_config_is_refused_for_its_model_type_not_its_rope(tmp_path):
    """Llama-4-Scout's published text_config (rope_scaling llama3, factor 16, both band
    factors 1.0) was refused for its RoPE bands, with a fix to change values the model's
    authors publish; what autopar cannot build is the family (chunked attention, MoE
    with a shared expert): that is the error now."""
    config = {"model_type": "llama4_text", "hidden_size": 5120, "num_hidden_layers": 48,
              "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
              "intermediate_size": 8192, "intermediate_size_mlp": 16384, "vocab_size": 202048,
              "num_local_experts": 16, "num_experts_per_tok": 1, "attention_chunk_size": 8192,
              "rope_scaling": dict(LLAMA3, factor=16.0, high_freq_factor=1.0)}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, text = run_cli("model", path)
    flat = " ".join(text.split())
    assert code == 2 and "model_type 'llama4_text' is not supported" in flat, text
    assert "freq_factor" not in flat, text
