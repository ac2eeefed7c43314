"""gpt-oss from its Hugging Face config: parameter counts against the model card's
Table 1 (total and active, both sizes), its alternating 128-token windows, what it
computes that is not priced, and the Megatron exports that do not write it."""

from __future__ import annotations

import json

import pytest

from autopar_opt.cli.model import model_summary
from autopar_opt.cost.assumptions import cost_assumptions
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.training import Training
from autopar_opt.model_zoo.hf_config import build_hf_graph
from support.paths import REPO

CFG = json.loads((REPO / "model_zoo" / "hf" / "gpt-oss-20b.json").read_text())
#: gpt-oss-120b's config differs in depth and expert count (36 layers, 128 experts)
CFG_120B = dict(CFG, num_hidden_layers=36, num_local_experts=128,
                layer_types=["sliding_attention", "full_attention"] * 18)


@pytest.mark.parametrize("cfg,total,active", [(CFG, 20.91e9, 3.61e9), (CFG_120B, 116.83e9, 5.13e9)])
def test_counts_are_the_model_cards(cfg, total, active):
    """Model card Table 1 (rounded to 10 M): total, and active per token without the
    input embedding (the card's convention)."""
    summary = model_summary(build_hf_graph(cfg, 4096))
    assert round(summary["params_total"], -7) == total
    assert round(summary["params_active_no_embedding"], -7) == active


def test_block_by_hand():
    """A gpt-oss-20b block: Q 2880x64x64 + bias, K and V 2880x8x64 + biases, O + bias,
    64 sinks; router 2880x32 + bias; 32 experts of gate/up 2880x5760 + 5760 and down
    2880x2880 + 2880; two RMSNorm vectors."""
    h, f, e = 2880, 2880, 32
    attn = h * 4096 + 4096 + 2 * (h * 512 + 512) + 4096 * h + h + 64
    experts = e * (h * 2 * f + 2 * f + f * h + h)
    block = build_hf_graph(CFG, 4096).layers[1]
    assert block.params == attn + h * e + e + experts + 2 * h
    assert block.expert_params == experts and block.top_k == 4


def test_windows_alternate():
    g = build_hf_graph(CFG, 4096)
    assert g.attention_windows() == [128, 0] * 12
    bare = {k: v for k, v in CFG.items() if k not in ("layer_types", "sliding_window")}
    assert build_hf_graph(bare, 4096).attention_windows() == [128, 0] * 12   # GptOssConfig defaults


def test_unpriced_and_megatron_refusal(tmp_path):
    from autopar_opt.spec import load_spec
    g = build_hf_graph(CFG, 4096)
    (line,) = [x for x in cost_assumptions(g, make_cluster("c", 1, 8, "H100-SXM-80GB"),
                                           Training(global_batch_size=8, seq_len=4096))
               if "not priced" in x]
    assert "sinks" in line and "swiglu_limit 7" in line and "YaRN" in line
    path = tmp_path / "s.yaml"
    path.write_text(f"model: {{hf_config: {REPO / 'model_zoo' / 'hf' / 'gpt-oss-20b.json'}}}\n"
                    "cluster: {zoo: 2x8-h100}\ntraining: {global_batch_size: 32, seq_len: 4096}\n")
    spec = load_spec(path)
    assert spec.space.target.free and any("attention sinks" in n for n in spec.notices)
