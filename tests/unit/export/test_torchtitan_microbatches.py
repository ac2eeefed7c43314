"""torchtitan's 1F1B is ``torch.distributed.pipelining.Schedule1F1B``, whose constructor
raises "Number of microbatches (c) must be greater than or equal to the number of stages
(pp)" (torch 2.13 ``pipelining/schedules.py``; torchtitan 0.3.0 ``build_pipeline_schedule``
only logs a warning before building it). QA round 11: a torchtitan-target solve of
Llama-3-8B on 16 H100s with ``pp_degrees: [4], microbatches: [1, 2]`` returned pp=4 with 2
micro-batches, and ``export --to torchtitan`` wrote it. Now the target searches no such
configuration (the spec error names the key when none is left) and the export refuses it.
GPipe (``ScheduleGPipe``), Megatron-LM's and DeepSpeed's 1F1B have no such rule."""

from __future__ import annotations

import inspect

import pytest

from autopar_opt.export import ExportError, export_plan
from autopar_opt.ir.target import Target
from autopar_opt.ir.training import Schedule, SearchSpace, Training
from autopar_opt.search.configs import outer_configs
from support.export_cases import CLUSTER, QWEN, make_plan

TRAINING = Training(global_batch_size=16, seq_len=128)


def test_torch_schedule_1f1b_states_the_rule():
    """The rule as torch itself writes it (the installed torch, where it is)."""
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    source = inspect.getsource(schedules.Schedule1F1B.__init__)
    assert "n_microbatches < self._num_stages" in source
    assert "n_microbatches < self._num_stages" not in inspect.getsource(
        schedules.ScheduleGPipe)


def test_the_rule_is_torchtitans_1f1b_only():
    one = Schedule.one_f_one_b
    assert Target("torchtitan", "0.3").microbatch_problem(4, 2, one) is not None
    assert Target("torchtitan", "0.2").microbatch_problem(4, 3, one) is not None
    assert Target("torchtitan", "0.3").microbatch_problem(4, 4, one) is None
    assert Target("torchtitan", "0.3").microbatch_problem(4, 2, Schedule.gpipe) is None
    for other in ("megatron", "deepspeed", "none"):
        assert Target(other).microbatch_problem(4, 2, one) is None


def test_the_search_and_the_export_keep_to_it():
    space = SearchSpace(pp_degrees=(4,), tp_degrees=(1,), microbatches=(1, 2, 4, 8),
                        schedules=(Schedule.one_f_one_b,), target=Target("torchtitan", "0.3"))
    configs = outer_configs(QWEN, CLUSTER, TRAINING, space)
    assert sorted(cfg.microbatches for cfg in configs) == [4, 8]
    plan = make_plan([2, 2, 2, 2], dp=2, tp=1, zero=3, c=2, graph=QWEN)
    with pytest.raises(ExportError, match=r"2 < pp = 4"):
        export_plan(plan, QWEN, CLUSTER, TRAINING, "torchtitan")
    ok = make_plan([2, 2, 2, 2], dp=2, tp=1, zero=3, c=4, graph=QWEN)
    assert "pipeline_parallel_degree = 4" in export_plan(ok, QWEN, CLUSTER, TRAINING,
                                                         "torchtitan").text


def test_a_space_left_empty_by_it_names_the_key():
    from autopar_opt.search.configs import empty_space_problem

    space = SearchSpace(pp_degrees=(4,), tp_degrees=(1,), microbatches=(1, 2),
                        schedules=(Schedule.one_f_one_b,), target=Target("torchtitan", "0.3"))
    key, value, rule, fix = empty_space_problem(QWEN, CLUSTER, TRAINING, space)
    assert (key, value) == ("search.microbatches", [1, 2])
    assert "Schedule1F1B" in rule and "at least the pipeline degree" in fix
