"""Selective recomputation of a FlashAttention model, as each Megatron stack runs it:
Megatron-Core re-runs the fused core in the backward pass (``attention.py``:
``checkpoint_core_attention`` whatever the kernel, ``_checkpointed_attention_forward``),
the legacy Megatron-LM model does not checkpoint a FlashAttention core (``if not
self.use_flash_attn: if self.checkpoint_core_attention: ...``). Session 24: the
calibration build read both as no recomputation (three FlagPerf Megatron-Core rows)."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.compare import predict
from autopar_opt.calibration.reading import read_record
from autopar_opt.cost.params import default_params
from autopar_opt.ir.training import Recompute
from support.runs import tiny_record

LEGACY = "Megatron-LM with --use-flash-attn"
CORE = ("Megatron-LM with Megatron-Core (--use-mcore-models, --use-flash-attn, "
        "--transformer-impl transformer_engine)")


def _run(framework: str, recompute: str):
    rec = read_record(tiny_record(training__framework=framework, training__recompute=recompute,
                                  model__arch="GPT dense decoder, flash attention",
                                  model__seq_len=4096))
    return rec, build_run(rec)


@pytest.mark.parametrize("framework, kept", [(LEGACY, Recompute.none), (CORE, Recompute.selective)])
def test_each_stack_keeps_its_own_selective_recomputation(framework, kept):
    rec, run = _run(framework, "selective")
    assert rec.runtime.flash_attention and run.graph.layers[1].act_attn_bytes == 0
    assert run.plan.stages[0].strategies[1].recompute is kept


def test_megatron_core_pays_the_core_once_more_and_legacy_does_not():
    p = default_params()
    core_sel, core_none = (predict(_run(CORE, r)[1], p)[0] for r in ("selective", "none"))
    legacy_sel, legacy_none = (predict(_run(LEGACY, r)[1], p)[0] for r in ("selective", "none"))
    assert legacy_sel == pytest.approx(legacy_none, rel=1e-12)
    assert core_sel < core_none          # throughput: the core's forward runs twice
