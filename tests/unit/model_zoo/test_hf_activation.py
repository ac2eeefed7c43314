"""The MLP activation is the config's, never assumed (issue 28 point 3: explicit fields beat
defaults). Oracles: transformers' own reading (``LlamaMLP``: ``ACT2FN[config.hidden_act]``
on the gate of a three-matrix MLP; GPT-2's ``activation_function``; Gemma's
``hidden_activation``, GELU-tanh when absent) and its activation table, which refuses an
unknown name."""

from __future__ import annotations

import json

import pytest

from autopar_opt.ir.arch import describe
from autopar_opt.ir.target import framework_model_problem
from autopar_opt.model_zoo.hf_config import HfConfigError, build_hf_graph, load_hf_config
from support.paths import REPO

HF = REPO / "model_zoo" / "hf"


def _arch(tmp_path, name: str, **changes):
    config = json.loads((HF / f"{name}.json").read_text())
    config.update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    loaded, _ = load_hf_config(path)
    return build_hf_graph(loaded, 1024).arch


@pytest.mark.parametrize("act, said", [("silu", "SwiGLU"), ("swish", "SwiGLU"),
                                       ("relu", "ReGLU"), ("gelu", "GeGLU (exact GELU)"),
                                       ("gelu_pytorch_tanh", "GeGLU")])
def test_a_llama_config_states_its_gated_activation(tmp_path, act, said):
    arch = _arch(tmp_path, "llama-3.1-8b", hidden_act=act)
    assert arch.gated and f"{said} MLP of 14336 (3 matrices)" in describe(arch)
    # Megatron-LM's --swiglu is SiLU gating only: another gate is not runnable by it
    problem = framework_model_problem("megatron", build_hf_graph(
        load_hf_config(tmp_path / "config.json")[0], 2048), [])
    assert (problem is None) is (arch.activation == "silu")


def test_an_unknown_activation_is_refused_with_transformers_names(tmp_path):
    with pytest.raises(HfConfigError, match=r"hidden_act = 'swishglu_foo' is not an activation "
                                            r"transformers knows.*fix: one of .*'?silu"):
        _arch(tmp_path, "llama-3.1-8b", hidden_act="swishglu_foo")
    with pytest.raises(HfConfigError, match=r"did you mean 'silu'"):
        _arch(tmp_path, "llama-3.1-8b", hidden_act="slu")


def test_gpt2_and_opt_read_activation_function(tmp_path):
    assert "ReLU MLP" in describe(_arch(tmp_path, "gpt2-xl", activation_function="relu"))
    assert "GELU MLP" in describe(_arch(tmp_path, "gpt2-xl"))          # gelu_new: GELU
    assert "ReLU MLP" in describe(_arch(tmp_path, "opt-6.7b"))
    assert "GELU MLP" in describe(_arch(tmp_path, "opt-6.7b", activation_function="gelu"))


def test_gemma_without_hidden_activation_is_gelu_tanh(tmp_path):
    """Gemma 1's config says hidden_act "gelu"; transformers runs GELU-tanh unless
    hidden_activation says otherwise (GemmaConfig)."""
    arch = _arch(tmp_path, "gemma-7b")
    assert arch.activation == "gelu_tanh" and "GeGLU MLP" in describe(arch)
    assert _arch(tmp_path, "gemma-7b", hidden_activation="gelu").activation == "gelu"
