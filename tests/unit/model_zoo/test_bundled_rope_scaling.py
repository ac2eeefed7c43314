"""The bundled Hugging Face configs carry the RoPE scaling their published config.json
states (QA round 5, M2: Llama 3.1's and DeepSeek-V3's were left out, so the Megatron-LM
export of the bundled Llama 3.1 trained plain RoPE at 131,072 positions)."""

from __future__ import annotations

import pytest

from autopar_opt.model_zoo.hf_config import build_hf_graph, load_hf_config
from support import paths


def build_model(name: str):
    config, origin = load_hf_config(paths.REPO / "model_zoo" / "hf" / f"{name}.json")
    return build_hf_graph(config, 4096, origin=str(origin))


@pytest.mark.parametrize("name", ["llama-3.1-8b", "llama-3.1-405b"])
def test_llama_3_1_scaling(name):
    # meta-llama/Llama-3.1-8B and -405B config.json: rope_type llama3, factor 8,
    # low/high frequency factors 1 and 4, original length 8192
    assert build_model(name).arch.rope_scaling == ("llama3", 8.0, 1.0, 4.0, 8192)


def test_deepseek_v3_yarn():
    # deepseek-ai/DeepSeek-V3 config.json: yarn, factor 40, mscale 1, mscale_all_dim 1,
    # beta_fast 32, beta_slow 1, original length 4096
    arch = build_model("deepseek-v3").arch
    assert arch.rope_scaling[:2] == ("yarn", 40.0) and arch.rope_scaling[4] == 4096
    assert arch.yarn == (1.0, 1.0, 32.0, 1.0)
