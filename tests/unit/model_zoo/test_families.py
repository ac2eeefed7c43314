"""Known architecture families (issue 28, point 3): the table and its sources.

Oracles: the models' own published configs, bundled in ``model_zoo/hf`` (each
family's tying and MLP type must agree with them), and names whose family and
size are written out by hand.
"""

from __future__ import annotations

import json

import pytest

from autopar_opt.model_zoo.families import families, family_named, model_size
from support import paths

HF = paths.REPO / "model_zoo" / "hf"


@pytest.mark.parametrize("name, family, size", [
    ("LLAMA3_8B", "llama3", "8b"), ("LLAMA3.1_405B", "llama3", "405b"),
    ("Llama 3 / 3.1", "llama3", None), ("Llama-2-7B shape", "llama2", "7b"),
    ("LLaMA-65B", "llama", "65b"), ("Mixtral-8x7B", "mixtral", "8x7b"),
    ("Mistral-7B", "mistral", "7b"), ("Qwen2.5-7B", "qwen2", "7b"), ("Qwen3-8B", "qwen3", "8b"),
    ("Qwen-14B", "qwen", "14b"), ("GPT-NeoX-20B", "gpt_neox", "20b"),
    ("BLOOM-176B", "bloom", "176b"), ("Nemotron-4 15B", "nemotron4", "15b"),
    ("GPT-2 1B", "gpt2", "1b"), ("GPT-3 175B", "gpt3", "175b"),
    # a generic Megatron "GPT" is no family: its shape is whatever the run set
    ("GPT 22B", None, "22b"), ("GPT 32B", None, "32b"), ("GPT 2B", None, "2b"),
])
def test_family_and_size_of_a_name(name, family, size):
    fam = family_named(name)
    assert (fam.key if fam else None) == family
    assert model_size(name) == size


def test_every_family_and_count_cites_its_source():
    fams = families()
    assert len(fams) >= 20
    assert len({f.key for f in fams}) == len(fams)
    for fam in fams:
        assert fam.source and fam.mlp in ("gated", "plain")
        assert fam.norm in ("rmsnorm", "layernorm") and fam.biases in ("none", "qkv", "all")
        assert fam.positions in ("rope", "learned", "alibi", "relative")
        for count in fam.models.values():
            assert count.source and count.params > 0
            assert count.active is None or count.active < count.params


#: Bundled HF config -> the family it belongs to.
CONFIGS = {"llama-3.1-8b": "llama3", "llama-3.1-405b": "llama3", "mistral-7b-v0.1": "mistral",
           "mixtral-8x7b-v0.1": "mixtral", "qwen2-7b": "qwen2", "qwen3-8b": "qwen3",
           "gpt-neox-20b": "gpt_neox", "gpt2-xl": "gpt2", "bert-base-uncased": "bert",
           "t5-large": "t5", "gemma-7b": "gemma", "gemma-2-9b": "gemma2", "gemma-2-27b": "gemma2",
           "gemma-3-1b": "gemma3", "opt-6.7b": "opt", "bloom-7b1": "bloom", "falcon-7b": "falcon"}


@pytest.mark.parametrize("config, key", sorted(CONFIGS.items()))
def test_the_table_agrees_with_the_published_configs(config, key):
    """Tying (``tie_word_embeddings``, default true) and the gated MLP of the
    SwiGLU model types, as each model's own config.json states them."""
    cfg = json.loads((HF / f"{config}.json").read_text())
    fam = family_named(config)
    assert fam is not None and fam.key == key
    assert fam.tied_for(model_size(config)) is cfg.get("tie_word_embeddings", True)
    assert (fam.mlp == "gated") is (cfg["model_type"] in {"llama", "mistral", "mixtral", "qwen2",
                                                         "qwen3", "gemma", "gemma2",
                                                         "gemma3_text"})


def test_published_counts_match_the_bundled_sources():
    """The counts the families publish agree with model_zoo/hf/SOURCES.yaml
    (written from the model cards) within their rounding."""
    import yaml

    sources = yaml.safe_load((HF / "SOURCES.yaml").read_text())
    pairs = {"llama-3.1-8b": ("llama3", "8b"), "mistral-7b-v0.1": ("mistral", "7b"),
             "mixtral-8x7b-v0.1": ("mixtral", "8x7b"), "qwen2-7b": ("qwen2", "7b"),
             "gpt-neox-20b": ("gpt_neox", "20b"), "gpt2-xl": ("gpt2", "xl"),
             "gemma-7b": ("gemma", "7b"), "gemma-2-9b": ("gemma2", "9b"),
             "gemma-2-27b": ("gemma2", "27b"), "gemma-3-1b": ("gemma3", "1b"),
             "mpt-7b": ("mpt", "7b"), "minitron-4b-base": ("nemotron4", "4b"),
             "starcoder2-3b": ("starcoder2", "3b"), "granite-3.1-2b-base": ("granite", "2b"),
             "command-r-v01": ("command_r", "35b")}
    for config, (key, size) in pairs.items():
        fam = next(f for f in families() if f.key == key)
        published = fam.published(size)
        assert published.params == pytest.approx(sources[config]["params_total"], rel=0.01)


@pytest.mark.parametrize("name, key", [
    ("Minitron-4B-Base", "nemotron4"),               # pruned Nemotron-4: its architecture
    ("Llama-3.1-Minitron-4B-Width-Base", "llama3"),  # pruned Llama 3.1: Llama's
    ("Mistral-NeMo-Minitron-8B-Base", "mistral"),    # pruned Mistral NeMo: Mistral's
    ("StarCoder2-15B", "starcoder2"), ("granite-3.1-8b-base", "granite"),
    ("Command R+", "command_r"), ("c4ai-command-r-v01", "command_r"),
])
def test_newer_families_are_known_by_name(name, key):
    """A record or spec naming these models gets their family's block facts; a Minitron
    takes the architecture of the model it was pruned from."""
    fam = family_named(name)
    assert fam is not None and fam.key == key
