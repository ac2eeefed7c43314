"""Layouts no framework runs are refused naming the keys, the values and the rule (QA round
31: 2 key/value heads at tp 4 and vp_chunks 2 at pp 1 were priced as if they had run).
Oracles: Megatron-Core's attention divides num_query_groups by the TP size
(``divide(num_query_groups, tensor_model_parallel_size)``); an interleaved schedule
interleaves the stages of a pipeline, so it needs pp > 1."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.reading import Unmodelable, read_record
from support.runs import tiny_record

# the tiny record: 4 heads of h=64 on one A100; two GPUs for tp 2 / pp 2
TP2 = dict(hardware__num_gpus=2, parallelism__tp=2, training__global_batch_size=1)


def test_tp_not_dividing_the_kv_heads_is_refused():
    with pytest.raises(Unmodelable, match=r"parallelism\.tp = 2 does not divide the key/value "
                                          r"heads \(model\.num_kv_heads = 1\)"):
        read_record(tiny_record(model__num_kv_heads=1, **TP2))
    assert read_record(tiny_record(model__num_kv_heads=2, **TP2)).parallel.tp == 2


def test_virtual_chunks_without_a_pipeline_are_refused():
    with pytest.raises(Unmodelable, match=r"parallelism\.vp_chunks = 2 with pp = 1"):
        read_record(tiny_record(parallelism__vp_chunks=2))
    two = read_record(tiny_record(model__num_layers=4, hardware__num_gpus=2, parallelism__pp=2,
                                  parallelism__vp_chunks=2, training__global_batch_size=2))
    assert two.parallel.vp == 2
