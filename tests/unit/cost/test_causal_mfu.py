"""MFU counts attention whole, as published MFUs do; the causal count says the work done.

Oracle: by hand, a causal decoder's attention cores count ``12·h·s²`` per block and
sequence (``4·s²·h`` forward: the score and value products; backward twice), of which a
causal kernel computes half; an encoder's cores are not causal. The solve summary and
plan.json carry both figures.
"""

from __future__ import annotations

import json

import pytest

from autopar_opt.cost.compute import uncomputed_attention_share
from autopar_opt.model_zoo.registry import build_model


def test_a_causal_decoder_leaves_half_its_attention_count_uncomputed():
    s = 131072
    graph = build_model("llama3-8b", seq_len=s)
    h, blocks = 4096, 32
    total = sum(layer.flops_fwd + layer.flops_bwd for layer in graph.layers)
    assert uncomputed_attention_share(graph.layers) == pytest.approx(blocks * 6 * h * s * s / total,
                                                                      rel=1e-9)
    assert 0.40 < uncomputed_attention_share(graph.layers) < 0.42       # most of the step at 128k
    assert uncomputed_attention_share(build_model("llama3-8b", seq_len=2048).layers) < 0.04


def test_an_encoder_computes_its_whole_attention_count():
    assert uncomputed_attention_share(build_model("bert-huge-32").layers) == 0.0


def test_the_summary_and_plan_json_give_both(tmp_path):
    from support.cli import run_cli
    spec = tmp_path / "spec.yaml"
    spec.write_text("model: {zoo: llama3-8b}\ncluster: {zoo: 2x8-h100}\n"
                    "training: {global_batch_size: 16, seq_len: 65536}\n"
                    "search: {pp_degrees: [1], tp_degrees: [4, 8], cp_degrees: [2, 4]}\n")
    code, text = run_cli("solve", spec, "--out", tmp_path / "out")
    assert code == 0, text
    m = json.loads((tmp_path / "out" / "plan.json").read_text())["metrics"]
    share = uncomputed_attention_share(build_model("llama3-8b", seq_len=65536).layers)
    assert m["mfu_causal"] == pytest.approx(m["mfu"] * (1 - share), rel=1e-9)
    said = f"MFU {100 * m['mfu']:.1f}% ({100 * m['mfu_causal']:.1f}% counting causal attention's " \
           "computed half)"
    assert said in " ".join(text.split())
    assert f"{100 * m['mfu_causal']:.1f}% counting causal" in (tmp_path / "out" / "report.html").read_text()
