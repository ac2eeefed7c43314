"""Micro-batching of a published run from what it states, else from its
framework's documented default (issue 28 point 5).

Oracles: ``B = b·c·dp`` worked by hand for each case, and the frameworks'
own rules: DeepSpeed's ``_set_batch_related_parameters`` (run here on a
config object when DeepSpeed is installed), torchtitan 0.3.0's
``local_batch_size`` / ``pipeline_parallel_microbatch_size`` defaults (read
from its config class when installed) and Megatron-Core's
``virtual_pipeline_model_parallel_size`` default.
"""

from __future__ import annotations

import pytest

from autopar_opt.calibration.reading import Unmodelable, read_record
from autopar_opt.calibration.reading.batching import (
    TORCHTITAN_LOCAL_BATCH, TORCHTITAN_PP_MICROBATCH, read_batches)
from autopar_opt.calibration.reading.parallel import interleaving_default
from autopar_opt.calibration.reading.schema import Training
from autopar_opt.ir.runtime import runtime_named


def _batches(runtime="megatron-lm", framework="Megatron-LM", dp=8, pp=1, **fields):
    notes: list[str] = []
    b = read_batches(Training(**fields), dp, notes, pp=pp, runtime=runtime_named(runtime),
                     framework=framework)
    return (b.global_batch, b.micro_batch, b.microbatches), notes


def test_stated_global_and_micro_batch_fix_the_count():
    # 512 = 4 · c · 8  ->  c = 16
    assert _batches(global_batch_size=512, micro_batch_size=4)[0] == (512, 4, 16)


def test_stated_global_batch_and_accumulation_fix_the_micro_batch():
    # 512 = b · 16 · 8  ->  b = 4, whatever the framework
    (got, notes) = _batches("torchtitan", "torchtitan", global_batch_size=512,
                            grad_accum_steps=16)
    assert got == (512, 4, 16)
    assert "512/(16·8) = 4" in notes[0]


def test_stated_micro_batch_and_accumulation_fix_the_global_batch():
    assert _batches(micro_batch_size=2, grad_accum_steps=3)[0] == (48, 2, 3)   # 2·3·8


def test_three_stated_values_that_disagree_are_refused():
    with pytest.raises(Unmodelable, match="grad_accum_steps = 4 disagrees"):
        _batches(global_batch_size=512, micro_batch_size=4, grad_accum_steps=4)
    with pytest.raises(Unmodelable, match="not a multiple of grad_accum_steps"):
        _batches(global_batch_size=100, grad_accum_steps=3)
    with pytest.raises(Unmodelable, match="global_batch_size is not stated"):
        _batches(micro_batch_size=4)


def test_plain_deepspeed_default_is_one_micro_batch_of_the_whole_rank_batch():
    # DeepSpeed with only train_batch_size = 512 on dp 8: accumulation 1, micro 64
    got, notes = _batches("deepspeed", "DeepSpeed ZeRO-3", global_batch_size=512)
    assert got == (512, 64, 1)
    assert "_set_batch_related_parameters" in notes[0]
    # Megatron-DeepSpeed: Megatron's --micro-batch-size decides, not DeepSpeed
    got, notes = _batches("deepspeed", "Megatron-DeepSpeed", global_batch_size=512)
    assert got == (512, 1, 64) and "assumed" in notes[0]


def test_deepspeed_own_rule_agrees():
    cfg_mod = pytest.importorskip("deepspeed.runtime.config")

    class Cfg:                      # the attributes _set_batch_related_parameters reads
        train_batch_size, train_micro_batch_size_per_gpu = 512, None
        gradient_accumulation_steps, world_size = None, 8

    cfg = Cfg()
    cfg_mod.DeepSpeedConfig._set_batch_related_parameters(cfg)
    got, _ = _batches("deepspeed", "DeepSpeed ZeRO-3", global_batch_size=512)
    assert got == (512, cfg.train_micro_batch_size_per_gpu, cfg.gradient_accumulation_steps)


def test_torchtitan_defaults():
    # no PP: local_batch_size 8 -> 512 / (8·8) = 8 accumulation steps
    got, notes = _batches("torchtitan", "torchtitan", global_batch_size=512)
    assert got == (512, 8, 8) and "local_batch_size 8" in notes[0]
    # PP: micro-batches of pipeline_parallel_microbatch_size 1 -> 512 / 8 = 64
    got, notes = _batches("torchtitan", "torchtitan", pp=4, dp=8, global_batch_size=512)
    assert got == (512, 1, 64) and "pipeline_parallel_microbatch_size 1" in notes[0]
    # 40 / 8 = 5 samples per rank: local_batch_size 8 cannot have run -> assumption
    got, notes = _batches("torchtitan", "torchtitan", global_batch_size=40)
    assert got == (40, 1, 5) and "assumed" in notes[0]


def test_torchtitan_defaults_are_its_own():
    configs = pytest.importorskip("torchtitan.config.configs")
    fields = {**configs.TrainingConfig.__dataclass_fields__,
              **configs.ParallelismConfig.__dataclass_fields__}
    assert fields["local_batch_size"].default == TORCHTITAN_LOCAL_BATCH
    assert fields["pipeline_parallel_microbatch_size"].default == TORCHTITAN_PP_MICROBATCH
    assert fields["global_batch_size"].default == -1
    assert fields["pipeline_parallel_schedule"].default == "1F1B"


def test_megatron_has_no_default_and_says_so():
    got, notes = _batches(global_batch_size=512)
    assert got == (512, 1, 64)
    assert notes == ["micro_batch_size not stated: 1 (assumed: Megatron-LM's --micro-batch-size "
                     "has no default, megatron/training/arguments.py)"]


def test_interleaving_default_is_cited_per_framework():
    mp = pytest.importorskip("megatron.core.model_parallel_config")
    assert mp.ModelParallelConfig.__dataclass_fields__[
        "virtual_pipeline_model_parallel_size"].default is None
    assert "virtual_pipeline_model_parallel_size is None" in interleaving_default(
        runtime_named("megatron-core"))
    assert "'1F1B'" in interleaving_default(runtime_named("torchtitan"))
    assert "TrainSchedule" in interleaving_default(runtime_named("deepspeed"))
    assert "assumed" in interleaving_default(runtime_named("pytorch-fsdp"))


def test_a_record_built_from_its_accumulation_steps():
    """Through the reader: the record's micro-batch follows from its global
    batch and accumulation, and the build prices that many micro-batches."""
    from autopar_opt.calibration.build import build_run

    from support.runs import tiny_record

    rec = tiny_record(model__num_layers=4, hardware__num_gpus=8, parallelism__pp=2,
                      parallelism__dp=4, parallelism__vp_chunks=None,
                      training__micro_batch_size=None, training__global_batch_size=96,
                      training__grad_accum_steps=12, training__framework="Megatron-Core",
                      measured__iteration_time_s=1.0)
    r = read_record(rec)
    assert (r.batches.micro_batch, r.batches.microbatches) == (2, 12)       # 96 = 2·12·4
    texts = [a.text for a in r.assumptions]
    assert any("virtual_pipeline_model_parallel_size is None" in t for t in texts)
    run = build_run(r)
    assert run.microbatch_samples == 2 * 4
    assert run.training.global_batch_size == 96
