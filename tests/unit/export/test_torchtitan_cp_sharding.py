"""torchtitan shards the parameters over its FSDP mesh ``dp_shard x cp`` whenever context
parallelism is on (torchtitan 0.3.0 ``ParallelDims.fsdp_enabled``: ``dp_shard_enabled or
cp_enabled``; ``parallel_dims.py`` builds ``fsdp = dp_shard * cp``, and the llama3/qwen3
``parallelize`` always calls ``apply_fsdp_to_decoder`` on ``[dp_replicate, fsdp]``).

So (QA round 11): a ZeRO-0 (DDP) plan with ``cp > 1`` is not one torchtitan runs (its
export wrote ``data_parallel_shard_degree = 1`` and torchtitan sharded the weights over
the cp ranks, resharding after forward), and a ZeRO-2 plan sharded over the cp ranks only
(hybrid sharding, ``dp_shard = 1``) must still carry ``fsdp_reshard_after_forward =
"never"`` (it was left out, so torchtitan resharded: ZeRO-3, not the plan priced)."""

from __future__ import annotations

import json

import pytest

from autopar_opt.export import ExportError, export_plan, plan_view
from autopar_opt.export.torchtitan import plan_from_torchtitan, torchtitan_config
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.target import Target
from autopar_opt.ir.training import Schedule, Training
from autopar_opt.model_zoo.hf_config import build_hf_graph
from autopar_opt.model_zoo.registry import get_cluster
from support import paths

LLAMA = build_hf_graph(json.loads((paths.REPO / "model_zoo" / "hf" / "llama-3.1-8b.json")
                                  .read_text()), 128, name="llama3-8b")
CLUSTER = get_cluster("debug-2x4")          # 8 GPUs
TRAINING = Training(global_batch_size=16, seq_len=128)


def _plan(zero: int, zero_group: int = 0) -> Plan:
    """One stage, dp 2 x tp 2 x cp 2 on every layer, 4 micro-batches."""
    s = Strategy(2, 2, 2, True, zero, zero_group=zero_group)
    return Plan([StagePlan([layer.name for layer in LLAMA.layers], [s] * len(LLAMA.layers))],
                4, Schedule.one_f_one_b)


@pytest.mark.parametrize("version", ["0.3", "0.2"])
def test_no_ddp_plan_with_context_parallelism(version):
    block = LLAMA.layers[1]
    target = Target("torchtitan", version, "test")
    assert target.strategy_problem(block, Strategy(2, 2, 2, True, 0), 1) is not None
    assert target.strategy_problem(block, Strategy(2, 2, 2, True, 3), 1) is None
    assert target.strategy_problem(block, Strategy(4, 2, 1, True, 0), 1) is None   # DDP, cp 1
    with pytest.raises(ExportError, match="ZeRO-0 with cp=2"):
        export_plan(_plan(0), LLAMA, CLUSTER, TRAINING, "torchtitan", version)


def test_zero2_over_the_cp_ranks_keeps_its_parameters_after_forward():
    plan = _plan(2, zero_group=2)           # shard group = the 2 cp ranks, 2 replicas
    par = torchtitan_config(plan_view(plan, LLAMA, CLUSTER, TRAINING))["parallelism"]
    assert (par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"],
            par["context_parallel_degree"]) == (2, 1, 2)
    assert par["fsdp_reshard_after_forward"] == "never"
    text = export_plan(plan, LLAMA, CLUSTER, TRAINING, "torchtitan").text
    assert "config.parallelism.fsdp_reshard_after_forward = 'never'" in text
    back = plan_from_torchtitan({"parallelism": par, "training": {
        "global_batch_size": 16, "local_batch_size": 2}}, LLAMA, CLUSTER.num_devices)
    assert back.to_dict() == plan.to_dict()
