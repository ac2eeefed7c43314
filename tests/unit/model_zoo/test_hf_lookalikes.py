"""A Hugging Face config whose model_type autopar does not know but whose architecture a
reader handles is refused naming that reader and the fix, not with "not supported" and the
list of every family: Kimi K2 (DeepSeek-V3's keys, model_type kimi_k2) and Qwen2-VL /
Qwen2.5-VL (Qwen2's language model beside a vision tower, which is never dropped unsaid).

Oracle: the bundled DeepSeek-V3 and Qwen2-7B configs; the fix the refusal states, applied
to a copy, builds the same graph as the bundled config."""

from __future__ import annotations

import json

import pytest

from autopar_opt.model_zoo.hf_config import HfConfigError, build_hf_graph
from support.paths import REPO

HF = REPO / "model_zoo" / "hf"
VISION = {"depth": 32, "embed_dim": 1280, "hidden_size": 3584, "patch_size": 14}


def _cfg(name: str) -> dict:
    return json.loads((HF / f"{name}.json").read_text())


def _refusal(config: dict) -> str:
    with pytest.raises(HfConfigError) as caught:
        build_hf_graph(config, 4096)
    return str(caught.value)


def test_kimi_k2_names_deepseek_v3_and_the_fix():
    kimi = {**_cfg("deepseek-v3"), "model_type": "kimi_k2", "n_routed_experts": 384}
    said = _refusal(kimi)
    assert "not supported" not in said and "DeepSeek-V3" in said, said
    assert '"model_type": "deepseek_v3" in a copy' in said and "assumption" in said, said
    fixed = build_hf_graph({**kimi, "model_type": "deepseek_v3"}, 4096)   # the fix plans it
    assert fixed.total_params() > build_hf_graph(_cfg("deepseek-v3"), 4096).total_params()


def test_kimi_k2_without_deepseeks_keys_is_not_sent_to_its_reader():
    kimi = {k: v for k, v in _cfg("deepseek-v3").items() if k != "kv_lora_rank"}
    assert "is not supported; supported" in _refusal({**kimi, "model_type": "kimi_k2"})


@pytest.mark.parametrize("mt, nested", [("qwen2_vl", False), ("qwen2_5_vl", False),
                                        ("qwen2_5_vl", True)])
def test_qwen_vl_names_qwen2_and_its_vision_tower(mt, nested):
    text = _cfg("qwen2-7b")
    if nested:          # newer transformers: the language model under text_config
        config = {"model_type": mt, "vision_config": VISION,
                  "text_config": {**text, "model_type": f"{mt}_text"}}
    else:
        config = {**text, "model_type": mt, "vision_config": VISION}
    said = _refusal(config)
    assert "not supported" not in said and "model_type qwen2 reads" in said, said
    assert "vision tower (vision_config) is not modelled" in said, said
    assert ("its text_config object" if nested else "top-level keys without vision_config") in said
    part = dict(config["text_config"] if nested else config)
    part.pop("vision_config", None)
    got = build_hf_graph({**part, "model_type": "qwen2"}, 4096)     # the fix plans the text part
    assert got.total_params() == build_hf_graph(text, 4096).total_params()
