"""The scalars of OLMoE, Granite and Cohere configs are values their transformers classes
take and their models run (QA round 37): before, ``clip_qkv: -1`` was said as "clip_qkv -1 on
Q, K and V", a text ``clip_qkv``, ``embedding_multiplier: "abc"`` or ``null`` and ``logit_scale:
null`` were dropped without a word, and ``logits_scaling: 0`` (a divisor) was taken. Oracle:
transformers' configuration classes (main at 008e5743): ``OlmoeConfig.clip_qkv: float | None``
("absolute value does not exceed this value", a clamp to [-clip_qkv, clip_qkv]),
``GraniteConfig``'s multipliers ``float | int`` (``GraniteForCausalLM`` divides the logits by
``logits_scaling``), ``CohereConfig.logit_scale`` (``CohereForCausalLM`` multiplies the logits
by it; ``Cohere2Config`` types it ``float``, default 0.0625). Values that are valid and not
priced are said."""

from __future__ import annotations

import json

import pytest

from autopar_opt.model_zoo.hf_config import HfConfigError, build_hf_graph, load_hf_config
from support.paths import REPO

RECONSTRUCTED = REPO / "tests" / "data" / "hf_reconstructed"
BUNDLED = REPO / "model_zoo" / "hf"
OLMOE = json.loads((RECONSTRUCTED / "olmoe-1b-7b-0924.json").read_text())
GRANITE = json.loads((BUNDLED / "granite-3.1-2b-base.json").read_text())
COHERE = json.loads((BUNDLED / "command-r-v01.json").read_text())
COHERE2 = json.loads((RECONSTRUCTED / "command-r7b-12-2024.json").read_text())


@pytest.mark.parametrize("config, key, value, words", [
    (OLMOE, "clip_qkv", -1, "clip_qkv = -1 must be a positive number"),
    (OLMOE, "clip_qkv", 0, "clip_qkv = 0 must be a positive number"),
    (OLMOE, "clip_qkv", "abc", "clip_qkv = 'abc' must be a positive number"),
    (GRANITE, "embedding_multiplier", "abc", "embedding_multiplier = 'abc' must be a number"),
    (GRANITE, "embedding_multiplier", None, "embedding_multiplier = null must be a number"),
    (GRANITE, "attention_multiplier", True, "attention_multiplier = True must be a number"),
    (GRANITE, "logits_scaling", 0, "logits_scaling = 0 must be a non-zero number"),
    (COHERE, "logit_scale", None, "logit_scale = null must be a number"),
    (COHERE, "logit_scale", "x", "logit_scale = 'x' must be a number"),
    (COHERE2, "logit_scale", None, "logit_scale = null must be a number"),
    (COHERE, "logit_scale", float("nan"), "logit_scale = nan"),
])
def test_a_scalar_its_class_does_not_take_is_refused_naming_key_value_and_fix(tmp_path, config,
                                                                               key, value, words):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(config, **{key: value})))
    with pytest.raises(HfConfigError) as err:
        load_hf_config(path)
    text = str(err.value)
    assert text.startswith(f"{path}: ") and words in text, text
    assert "fix: " in text, text


def test_valid_unpriced_scalars_are_said():
    """A null clip_qkv is no clipping (nothing to say); a positive one, Granite's negative
    multiplier, a logit_scale of 0 and Cohere's class default where the key is absent are
    valid, not priced, and said."""
    assert build_hf_graph(dict(OLMOE, clip_qkv=None), 2048).arch.unpriced == ()
    assert build_hf_graph(dict(OLMOE, clip_qkv=8.0), 2048).arch.unpriced == \
        ("clip_qkv 8 on Q, K and V",)
    granite = build_hf_graph(dict(GRANITE, embedding_multiplier=-12), 2048).arch.unpriced
    assert "embedding_multiplier -12 on the embedding output" in granite
    assert build_hf_graph(dict(COHERE, logit_scale=0), 2048).arch.unpriced == \
        ("logit_scale 0 on the output logits",)
    absent = {k: v for k, v in COHERE.items() if k != "logit_scale"}
    assert build_hf_graph(absent, 2048).arch.unpriced == \
        ("logit_scale 0.0625 on the output logits (CohereConfig's default)",)
    absent2 = {k: v for k, v in COHERE2.items() if k != "logit_scale"}
    assert build_hf_graph(absent2, 2048).arch.unpriced == \
        ("logit_scale 0.0625 on the output logits (Cohere2Config's default)",)
