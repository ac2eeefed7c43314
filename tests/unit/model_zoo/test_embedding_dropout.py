"""The input embedding keeps its dropout mask only where the model trains with dropout.

Korthikanti et al. 2022, Sec. 4.3: the input embedding keeps its dropout's ``s·h`` mask
(1 byte per element at 16-bit training); the lookup's backward reads only the token ids.
PyTorch's dropout at p = 0 returns its input and draws no mask
(``aten/src/ATen/native/Dropout.cpp``, ``_dropout_impl``). So a model trained without
dropout (Llama: HF ``attention_dropout`` 0.0, no hidden dropout) keeps nothing there, as
its blocks keep no masks (``transformer_block(dropout=False)``). Oracle: s·h by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.reading import read_record
from autopar_opt.model_zoo.hf_config import build_hf_graph
from autopar_opt.model_zoo.registry import build_model
from autopar_opt.model_zoo.transformer import decoder_lm, embedding
from support.runs import tiny_record

HF = Path(__file__).resolve().parents[3] / "model_zoo" / "hf"


def test_the_mask_by_hand():
    """s = 4, h = 8: one 1-byte mask element per hidden value, 32 bytes, replicated
    over tensor parallelism (split only by sequence parallelism); none without dropout."""
    kept = embedding("e", 4, 8, 32)
    gone = embedding("e", 4, 8, 32, dropout=False)
    assert (kept.act_bytes, kept.act_replicated_bytes) == (32, 32)
    assert (gone.act_bytes, gone.act_replicated_bytes) == (0, 0)
    assert gone.params == kept.params == 32 * 8 and gone.output_bytes == kept.output_bytes


def test_the_zoo_builders_pass_the_flag():
    """decoder_lm's dropout reaches the embedding; the zoo's Llama 3 8B (dropout: false)
    keeps nothing at s = 16, h = 4096, while its blocks' replicated part is 8·s·h."""
    assert decoder_lm("m", 1, 4, 8, 2, 32, 32).layers[0].act_bytes == 32
    assert decoder_lm("m", 1, 4, 8, 2, 32, 32, dropout=False).layers[0].act_bytes == 0
    g = build_model("llama3-8b", seq_len=16)
    assert g.layers[0].act_bytes == 0
    assert g.layers[1].act_replicated_bytes == pytest.approx(8 * 16 * 4096)


@pytest.mark.parametrize("config, mask", [
    ("llama-3.1-8b.json", 0),            # attention_dropout 0.0, no hidden dropout key
    ("deepseek-v3.json", 0),             # the MoE readers too
    ("mpt-7b.json", 0),                  # resid_pdrop 0.0 (its own embedding call)
    ("gpt2-xl.json", 16 * 1600),         # resid_pdrop / attn_pdrop default 0.1
])
def test_the_hf_readers_pass_the_flag(config, mask):
    graph = build_hf_graph(json.loads((HF / config).read_text()), 16)
    assert graph.layers[0].act_bytes == mask


@pytest.mark.parametrize("dropout, mask", [(False, 0), (True, 32 * 64)])
def test_the_calibration_builders_pass_the_flag(dropout, mask):
    """The tiny record (s = 32, h = 64) with model.dropout stated; and as a MoE record
    (calibration/moe_build.py builds its own embedding)."""
    dense = build_run(read_record(tiny_record(model__dropout=dropout)))
    assert dense.graph.layers[0].act_bytes == mask
    moe = build_run(read_record(tiny_record(model__dropout=dropout, model__num_experts=4,
                                            model__moe_router_topk=1)))
    assert any(layer.is_moe for layer in moe.graph.layers)
    assert moe.graph.layers[0].act_bytes == mask
