"""A framework target admits strategies per layer (autopar_opt.ir.target.Target.admitted).

Every framework recomputes transformer layers only, so on the embedding and the head
a space that lists only ``recompute: [full]`` leaves them running without
recomputation instead of with no strategy at all (DeepSeek-V3's example, whose space
is ``recompute: [full]``, was proven infeasible under the Megatron target before)."""

from __future__ import annotations

import dataclasses

import pytest

from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.ir.target import BLOCK_KINDS, Target
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training
from autopar_opt.model_zoo.registry import build_model, get_cluster
from autopar_opt.solvers.dp import solve_dp


@pytest.mark.parametrize("framework", ["megatron", "torchtitan", "deepspeed"])
def test_full_recompute_only_space_keeps_the_embedding_and_head(framework):
    graph = build_model("debug")
    cluster = get_cluster("debug-2x4")
    training = Training(global_batch_size=16, seq_len=128)
    space = SearchSpace(recompute=(Recompute.full,), zero_levels=(0,),
                        target=Target(framework, "0.3" if framework == "torchtitan" else "", "test"))
    tables = build_cost_tables(graph, cluster, training, space, default_params(), 2, 4,
                               Schedule.one_f_one_b)
    for layer, strats in zip(graph.layers, tables.strategies):
        assert strats, layer.name
        modes = {s.recompute for s in strats}
        assert modes == ({Recompute.full} if layer.kind in BLOCK_KINDS else {Recompute.none}), layer.name
    res = solve_dp(tables)
    assert res.has_solution and tables.runnable(res.solution)
    # the same space without a target: the non-block layers keep what the space lists
    free = build_cost_tables(graph, cluster, training, dataclasses.replace(space, target=None),
                             default_params(), 2, 4, Schedule.one_f_one_b)
    assert all(strats for strats in free.strategies)
