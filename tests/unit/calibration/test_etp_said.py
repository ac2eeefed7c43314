"""An MoE record's unstated expert tensor parallelism (tp, Megatron-Core's default) is said when
tp > 1 (QA round 11: taken without a word, while etp 1 instead moved a Mixtral 8x7B record from
73.5 to 80.8 predicted samples/s)."""

from __future__ import annotations

from autopar_opt.calibration.reading import read_record
from support.runs import tiny_record

TP2 = dict(model__name="tiny MoE", model__num_experts=4, model__top_k=2,
           hardware__num_gpus=2, parallelism__tp=2, training__global_batch_size=1)


def _said(**changes) -> list[str]:
    return [n for n in read_record(tiny_record(**{**TP2, **changes})).notes()
            if n.startswith("parallelism.etp not stated")]


def test_unstated_etp_is_said_at_tp_above_one_only():
    assert _said() == ["parallelism.etp not stated: tp = 2 (Megatron-Core "
                       "--expert-tensor-parallel-size defaults to the tensor-parallel size)"]
    assert _said(parallelism__etp=1) == [] and _said(parallelism__etp=2) == []
    assert _said(parallelism__tp=1, hardware__num_gpus=1) == []
