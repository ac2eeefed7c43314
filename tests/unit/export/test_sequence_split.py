"""Sequence parallelism splits each context-parallel rank's tokens over the tp ranks, so
Megatron-LM and torchtitan need a sequence length those ranks divide (QA round 11: a
Llama-3-8B plan at seq_len 4100, tp 8 with sequence parallelism, was exported to both and
admitted by both targets; Megatron-Core's ``_split_along_first_dim`` asserts "First
dimension of the tensor should be divisible by tensor parallel size", torchtitan 0.3.0's
trainer raises "Training sequence length (4100) must be divisible by 8")."""

from __future__ import annotations

import json

import pytest

from autopar_opt.export import ExportError, export_plan
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.target import Target, sequence_split_problem
from autopar_opt.ir.training import Schedule, Training
from autopar_opt.model_zoo.hf_config import build_hf_graph
from autopar_opt.model_zoo.registry import get_cluster
from support import paths

LLAMA = build_hf_graph(json.loads((paths.REPO / "model_zoo" / "hf" / "llama-3.1-8b.json")
                                  .read_text()), 4100, name="llama3-8b")
CLUSTER = get_cluster("debug-2x4")          # 8 GPUs


def test_megatron_core_asserts_it():
    torch = pytest.importorskip("torch")
    mappings = pytest.importorskip("megatron.core.tensor_parallel.mappings")

    class Group:                 # a tp group of 8 (rank 0), as _split_along_first_dim reads it
        def size(self):
            return 8

        def rank(self):
            return 0
    with pytest.raises(AssertionError, match="divisible by tensor parallel size"):
        mappings._split_along_first_dim(torch.zeros(4100, 1, 2), Group())
    assert mappings._split_along_first_dim(torch.zeros(4096, 1, 2), Group()).shape[0] == 512


@pytest.mark.parametrize("framework,tp,cp,sp,seq,bad", [
    ("megatron", 8, 1, True, 4100, True), ("megatron", 4, 1, True, 4100, False),
    ("megatron", 8, 1, False, 4100, False), ("megatron", 2, 2, True, 12, False),
    ("torchtitan", 2, 2, True, 12, True), ("torchtitan", 2, 2, True, 16, False),
    ("torchtitan", 8, 1, True, 4100, True), ("deepspeed", 8, 1, True, 4100, False),
    ("none", 8, 1, True, 4100, False)])
def test_the_rule(framework, tp, cp, sp, seq, bad):
    assert (sequence_split_problem(framework, tp, cp, sp, seq) is not None) is bad


@pytest.mark.parametrize("framework", ["megatron", "torchtitan"])
def test_the_target_and_the_export_keep_to_it(framework):
    training = Training(global_batch_size=8, seq_len=4100)
    s = Strategy(1, 8, 1, True, 3)
    block = LLAMA.layers[1]
    target = Target(framework, "0.3" if framework == "torchtitan" else "", "test")
    assert target.admitted(block, [s], 1, 4100) == []
    assert target.admitted(block, [s], 1, 4096) == [s]
    plan = Plan([StagePlan([layer.name for layer in LLAMA.layers], [s] * len(LLAMA.layers))],
                8, Schedule.one_f_one_b)
    with pytest.raises(ExportError, match="4100"):
        export_plan(plan, LLAMA, CLUSTER, training, framework)
