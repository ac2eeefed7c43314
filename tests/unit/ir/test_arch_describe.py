"""The one-line architecture every output states (``ir.arch.describe``): what was built,
checked against each model's published design, and carried to ``autopar model``, the
solve summary, ``estimate``, plan.json and the report."""

from __future__ import annotations

import json

from autopar_opt.ir.arch import describe
from autopar_opt.model_zoo.hf_config import build_hf_graph
from autopar_opt.model_zoo.registry import build_model
from autopar_opt.reports.context import build_context
from autopar_opt.reports.render import render_html
from support.cli import run_cli
from support.paths import REPO

HF = REPO / "model_zoo" / "hf"


def _arch(name: str, seq_len: int = 1024):
    return build_hf_graph(json.loads((HF / f"{name}.json").read_text()), seq_len).arch


def test_minitron_reads_as_nemotron_4_is_published():
    """Nemotron-4 (arXiv 2402.16819 Sec. 2): GQA, squared ReLU, no bias, untied; Minitron-4B's
    config: 24 query / 8 key-value heads of 128, MLP 9216, RoPE on half of each head."""
    assert describe(_arch("minitron-4b-base")) == (
        "32 blocks of hidden 3072, grouped-query attention, 24 query / 8 key-value heads of "
        "128, squared-ReLU MLP of 9216 (2 matrices), LayerNorm (weights stored as 1+w), RoPE on "
        "50% of each head, untied embeddings, no biases, no dropout")


def test_moe_mla_and_classic_layouts():
    """DeepSeek-V3 (arXiv 2412.19437 Sec. 2: MLA, 3 dense then 58 MoE layers of 256 routed
    experts top-8 plus one shared), Falcon-7B (multi-query, parallel block), GPT-2 XL
    (learned positions, biases, dropout 0.1) and the zoo's GPT-3 (GELU, not SwiGLU)."""
    ds = describe(_arch("deepseek-v3"))
    assert "multi-latent attention, 128 heads (q rank 1536, kv rank 512, qk 128+64, v 128)" in ds
    assert "SwiGLU MLP of 18432 (3 matrices) on 3 blocks" in ds
    assert "MoE on 58 blocks: top-8 of 256 SwiGLU experts of 2048 + shared 2048" in ds
    falcon = describe(_arch("falcon-7b"))
    assert "multi-query attention, 71 query / 1 key-value head of 64" in falcon
    assert "attention and MLP in parallel" in falcon and "no biases" in falcon
    gpt2 = describe(_arch("gpt2-xl"))
    assert "learned positions" in gpt2 and "biases" in gpt2
    assert "dropout 0.1 (hidden) / 0.1 (attention)" in gpt2
    assert "GELU MLP of 49152 (2 matrices)" in describe(build_model("gpt3-175b").arch)


def test_every_output_states_it(tmp_path):
    """``autopar model``, the solve summary, plan.json and the report carry the line;
    ``estimate`` too."""
    config = HF / "minitron-4b-base.json"
    line = describe(_arch("minitron-4b-base"))
    code, text = run_cli("model", config)
    assert code == 0 and f"arch:    {line}" in text
    spec = tmp_path / "s.yaml"
    spec.write_text(f"model: {{hf_config: {config}}}\ncluster: {{zoo: 2x8-h100}}\n"
                    "training: {global_batch_size: 32, seq_len: 4096}\n"
                    "search: {pp_degrees: [1], tp_degrees: [1, 2], zero_levels: [1]}\n")
    code, text = run_cli("solve", spec, "--out", tmp_path / "o")
    assert code == 0, text
    assert f"architecture: {line}" in " ".join(text.split())
    doc = json.loads((tmp_path / "o" / "plan.json").read_text())
    assert doc["spec"]["model"]["architecture"] == line
    assert build_context(doc)["spec"]["model_architecture"] == line
    assert line in render_html(doc)
    est = tmp_path / "e.yaml"
    est.write_text(spec.read_text().split("search:")[0]
                   + "plan: {tp: 2, pp: 1, zero: 1, micro_batch_size: 1}\n")
    code, text = run_cli("estimate", est)
    assert code == 0, text
    assert line in " ".join(text.split())


def test_a_layer_list_has_no_architecture_line(tmp_path):
    """An explicit layer list records no architecture: nothing is said rather than guessed
    (plan.json's key is null, the report has no row)."""
    doc = json.loads((REPO / "tests" / "data" / "report" / "plan_feasible.json").read_text())
    doc["spec"]["model"]["architecture"] = None
    assert build_context(doc)["spec"]["model_architecture"] == ""
    assert "<th>Architecture</th>" not in render_html(doc)
