"""The context-parallel refusal speaks about the model it refuses.

Before: every refusal said "seq_len N is not a multiple of 2*cp (Megatron-Core's
load-balanced causal context parallelism ...)" and suggested another
seq_len, also for a ViT, whose 257 tokens are fixed by image_size 224 /
patch_size 14 (16x16 patches + 1 class token; training.seq_len is refused
there) and whose attention is not causal; a Swin (no single sequence) was told
to set training.seq_len, which is refused too.

Oracles: exit 2, no traceback, key and value; for the fixed-length models the
words naming what fixes the count and the cp that fits (257 is odd, so only
cp 1; ViT-Huge with patch 32: 7x7 + 1 = 50 tokens, 2*cp divides 50 for cp 1,
5, 25), and no "causal" and no "seq_len that is"; for gpt-1.7b (causal) the
old words; for BERT (bidirectional) no "causal".
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from support.cli import run_cli as _cli

CLUSTER = {"zoo": "dgx-a100-8"}


def _estimate(tmp_path: Path, model: dict, training: dict, plan: dict,
              search: dict | None = None) -> str:
    spec = {"model": model, "cluster": CLUSTER, "training": {"global_batch_size": 64, **training},
            "plan": {"pp": 1, "microbatches": 8, **plan}}
    if search:
        spec["search"] = search
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    code, text = _cli("estimate", path)
    assert code == 2, text
    assert "spec.yaml" in text
    return text


def test_vit_names_image_and_patch_and_suggests_cp_1(tmp_path):
    text = _estimate(tmp_path, {"zoo": "vit-huge-32"}, {}, {"tp": 1, "cp": 2},
                     {"cp_degrees": [1, 2]})
    assert ("plan.cp = 2: vit-huge-32's 257 tokens are fixed by image_size 224 / patch_size 14 "
            "(16x16 patches + 1 class token), and 257 is not a multiple of 2*cp = 4") in text
    assert "plan.cp = 2" in text and "use cp: 1" in text
    assert "search.cp_degrees[1] = 2" in text and "remove it, or list only cp 1" in text
    assert "causal" not in text and "seq_len that is" not in text, text


def test_vit_whose_token_count_has_cp_divisors_lists_them(tmp_path):
    text = _estimate(tmp_path, {"zoo": "vit-huge-32", "overrides": {"patch_size": 32}}, {},
                     {"tp": 1, "cp": 2})
    assert "50 tokens are fixed by image_size 224 / patch_size 32 (7x7 patches" in text
    assert "use a cp with 50 a multiple of 2*cp: 1, 5, 25" in text, text
    assert "causal" not in text


@pytest.mark.parametrize("zoo,words", [
    ("swin-huge-32", "swin-huge-32's token count is fixed by image_size 224 / patch_size 4"),
    ("inception-v3", "inception-v3's token count is fixed by its input image (a CNN")])
def test_models_without_one_sequence_are_told_to_use_cp_1(tmp_path, zoo, words):
    text = _estimate(tmp_path, {"zoo": zoo}, {}, {"tp": 1, "cp": 2})
    assert "plan.cp = 2" in text and words in text and "use cp: 1" in text, text
    assert "set training.seq_len" not in text and "causal" not in text


def test_causal_model_keeps_the_causal_words_and_seq_len_fix(tmp_path):
    text = _estimate(tmp_path, {"zoo": "gpt-1.7b"}, {"seq_len": 2050}, {"tp": 1, "cp": 2})
    assert ("seq_len 2050 is not a multiple of 2*cp = 4 (Megatron-Core's load-balanced causal "
            "context parallelism") in text
    assert "or a seq_len that is a multiple of 4" in text


def test_bidirectional_model_is_not_called_causal(tmp_path):
    text = _estimate(tmp_path, {"zoo": "bert-huge-32"}, {"seq_len": 510}, {"tp": 1, "cp": 2})
    assert "seq_len 510 is not a multiple of 2*cp = 4 (Megatron-Core's context parallelism" in text
    assert "causal" not in text and "1, 3, 5, 15, 17, 51" in text, text
