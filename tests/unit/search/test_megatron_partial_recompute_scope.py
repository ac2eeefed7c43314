"""The megatron target's space takes one recomputation setting for the model; Megatron-LM
also runs partial recomputation (``--recompute-method block --recompute-num-layers N``: the
first N layers of every stage), which the space leaves out, and the outputs now say so
(QA round 13: they said nothing, and on this instance the best block plan is 14.2% faster
than the target's proven optimum).

Oracle: brute force (tests/support/bruteforce.py, priced apart from the cost tables) over
every plan Megatron's exporter writes, with and without the one-mode rule; the free space's
bound must lie under the best block plan (the statement's "the price of runnability bounds
its gain")."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from support.bruteforce import brute_force
from support.exportable import one_recompute_mode
from autopar_opt.cost.params import default_params
from autopar_opt.export import ExportError, export_plan
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.recompute_pattern import block_layers, stage_blocks
from autopar_opt.ir.target import Target
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training
from autopar_opt.model_zoo.registry import build_model, get_cluster
from autopar_opt.search.configs import outer_configs
from autopar_opt.search.engine import SearchOptions, run_search
from autopar_opt.search.runnable import price_of_runnability, runnable_space

SEQ = 8192
GRAPH = build_model("gpt-1.7b", seq_len=SEQ, overrides={"num_layers": 4})
_A100 = get_cluster("dgx-a100-8")
#: two A100s with 6.8 GiB each: no recomputation does not fit, full recomputation of every
#: layer does, and recomputing the first of each stage's 4 layers fits too
CLUSTER = make_cluster("a100x2", 1, 2, replace(_A100.device, hbm_gib=6.8, memory_gb=6.8),
                       _A100.intra_node, _A100.inter_node)
TRAINING = Training(global_batch_size=8, seq_len=SEQ, dtype="bf16")
RC = (Recompute.none, Recompute.full)
SPACE = SearchSpace(pp_degrees=(1, 2), tp_degrees=(1, 2), zero_levels=(0, 1), recompute=RC,
                    schedules=(Schedule.one_f_one_b,), microbatches=(2, 4, 8),
                    hybrid_sharding=(False,))


def _best(one_mode: bool):
    def accept(plan) -> bool:
        try:
            export_plan(plan, GRAPH, CLUSTER, TRAINING, "megatron")
        except ExportError:
            return False
        return not one_mode or one_recompute_mode(plan, GRAPH)
    best = (math.inf, None)
    for cfg in outer_configs(GRAPH, CLUSTER, TRAINING, runnable_space(SPACE, "megatron")):
        ref = brute_force(GRAPH, CLUSTER, TRAINING, SPACE, cfg.pp, cfg.microbatches,
                          cfg.schedule, accept=accept)
        if ref is not None and ref[0] < best[0]:
            best = ref
    return best


def test_the_megatron_target_says_partial_recomputation_is_not_searched():
    uniform, (block, plan) = _best(True)[0], _best(False)
    assert block_layers(stage_blocks(plan, GRAPH)) == 1      # the first 1 of 4 per stage
    assert block == pytest.approx(uniform * (1 - 0.142), rel=1e-2)
    space = runnable_space(SPACE, "megatron")
    options = SearchOptions(solver="dp", time_limit_s=30, rel_gap=0.0)
    res = run_search(GRAPH, CLUSTER, TRAINING, space, default_params(), options)
    assert res.metrics.iteration_time_s == pytest.approx(uniform, rel=1e-9)  # the one-mode space
    run = price_of_runnability(res, GRAPH, CLUSTER, TRAINING, space, default_params(), options, 30.0)
    said = run.to_dict()["unsearched"]
    assert "--recompute-method block" in said and "not searched" in said
    assert run.free_lower <= block * (1 + 1e-9)        # the price of runnability bounds the gain


def test_only_megatron_with_both_modes_says_it():
    assert Target("megatron").unsearched(RC)
    assert Target("megatron").unsearched((Recompute.full,)) == ""
    assert Target("megatron").unsearched((Recompute.none, Recompute.selective)) == ""
    for other in (Target("torchtitan", "0.3"), Target("deepspeed"), Target("none")):
        assert other.unsearched(RC) == ""
