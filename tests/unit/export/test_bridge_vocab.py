"""Megatron-Bridge keeps an explicit ``model.vocab_size`` unpadded (0.3.1
``_validate_and_set_vocab_size``), and Megatron-Core's ``VocabParallelEmbedding`` splits it
over the tp ranks with ``divide``; QA round 11: GPT-3 175B (50,257 tokens) at tp 8 was
exported to Bridge with ``vocab_size: 50257``, which fails to build. The Bridge export now
pads such a vocabulary as Megatron-LM does (a multiple of 128 x tp) and says so. Oracle:
Megatron-Core's own ``VocabUtility`` where installed, and the padding by hand."""

from __future__ import annotations

import json

import pytest

from autopar_opt.export import export_plan, plan_view
from autopar_opt.export.megatron import bridge_overrides
from autopar_opt.ir.training import Training
from autopar_opt.model_zoo.hf_config import build_hf_graph
from support import paths
from support.export_cases import CLUSTER, make_plan

TRAINING = Training(global_batch_size=16, seq_len=128)


def _llama(vocab: int):
    config = json.loads((paths.REPO / "model_zoo" / "hf" / "llama-3.1-8b.json").read_text())
    return build_hf_graph({**config, "num_hidden_layers": 2, "vocab_size": vocab}, 128,
                          name=f"llama-v{vocab}")


def test_megatron_core_needs_tp_to_divide_the_vocabulary():
    utils = pytest.importorskip("megatron.core.tensor_parallel.utils")
    with pytest.raises(AssertionError):
        utils.VocabUtility.vocab_range_from_global_vocab_size(50257, 0, 8)
    assert utils.VocabUtility.vocab_range_from_global_vocab_size(51200, 7, 8) == (44800, 51200)


@pytest.mark.parametrize("vocab,tp,written", [(128257, 2, 128512), (128256, 2, 128256),
                                              (50257, 1, 50257)])
def test_the_bridge_vocabulary_splits_over_tp(vocab, tp, written):
    graph = _llama(vocab)
    plan = make_plan([4], dp=8 // tp, tp=tp, sp=tp > 1, c=2, graph=graph)
    model = bridge_overrides(plan_view(plan, graph, CLUSTER, TRAINING))["model"]
    assert model["vocab_size"] == written and written % tp == 0
    notes = export_plan(plan, graph, CLUSTER, TRAINING, "megatron-bridge").notes
    assert any(f"model.vocab_size {written}" in n for n in notes) is (written != vocab)
