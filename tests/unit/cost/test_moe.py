"""Mixture-of-Experts and expert parallelism: hand-derived costs, Megatron-Core's
EP rules, and exactness (DP = MILP = brute force = evaluate on small MoE chains).
"""

from __future__ import annotations

import functools
import random
from dataclasses import replace

import pytest

from support.bruteforce import brute_force
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.cost.context import user_reserve_for
from autopar_opt.cost import moe
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.state import weight_bytes
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.cost.evaluate import PlanError, evaluate
from autopar_opt.formulations import build_formulation
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import GIB, LinkTier, make_cluster
from autopar_opt.solvers.dp.common import least_memory
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.solvers.dp.backend import DPBackend
from autopar_opt.solvers.registry import get_backend
from autopar_opt.core.result import ProblemClass, Termination
from autopar_opt.ir.strategies import Strategy, enumerate_strategies
from autopar_opt.model_zoo.synthetic import random_moe_chain, small_cluster
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training
from support import paths

SPACE = SearchSpace(zero_levels=(0, 1), sequence_parallel=(False,),
                    recompute=(Recompute.none, Recompute.full))


def _moe_layer(**kw) -> Layer:
    base = dict(name="m", kind=LayerKind.moe_block, flops_fwd=1e12, flops_bwd=2e12,
                params=8_000_000, expert_params=6_000_000, num_experts=8, top_k=2,
                expert_flops_fwd=4e11, act_bytes=1e8, expert_act_bytes=4e7, a2a_bytes=1e7,
                input_bytes=1e6, output_bytes=1e6, max_tp=8)
    base.update(kw)
    return Layer(**base)


def _ctx(nodes=2, gpn=8, d=16, b=16, intra=100.0, inter=10.0) -> StageContext:
    cl = make_cluster("t", nodes, gpn, "H100-SXM-80GB", LinkTier("nv", intra, 2.0),
                      LinkTier("ib", inter, 4.0))
    return StageContext(cl, Training(global_batch_size=b, seq_len=1024), default_params(), d, b)


# ---------------------------------------------------------------- rules
def test_ep_rules_follow_megatron_core():
    """With ETP = TP, ep divides dp*cp (experts fold into the dp*cp ranks); with
    ETP = 1, etp*ep divides tp*cp*dp (parallel_state.initialize_model_parallel's
    expert rank generator); ep divides the expert count; dense layers only take
    ep = 1."""
    layer = _moe_layer(num_experts=4)
    strats = enumerate_strategies(layer, 8, 8, SearchSpace(zero_levels=(0,), recompute=(
        Recompute.none,), sequence_parallel=(False,)), 8)
    pairs = {(s.dp, s.tp, s.ep) for s in strats if s.expert_tp == s.tp}
    assert pairs == {(8, 1, 1), (8, 1, 2), (8, 1, 4), (4, 2, 1), (4, 2, 2), (4, 2, 4),
                     (2, 4, 1), (2, 4, 2), (1, 8, 1)}
    folded = {(s.dp, s.tp, s.ep) for s in strats if s.expert_tp == 1 and s.tp > 1}
    assert folded == {(dp, tp, ep) for dp, tp in ((4, 2), (2, 4), (1, 8)) for ep in (1, 2, 4)}
    assert {s.etp for s in strats} == {0, 1}
    dense = replace(layer, kind=LayerKind.transformer_block, num_experts=0, expert_params=0)
    assert {s.ep for s in enumerate_strategies(dense, 8, 8, SPACE, 8)} == {1}
    only = SearchSpace(zero_levels=(0,), recompute=(Recompute.none,), sequence_parallel=(False,),
                       ep_degrees=(1, 4))
    assert {s.ep for s in enumerate_strategies(layer, 8, 8, only, 8)} == {1, 4}


def test_evaluate_refuses_ep_on_dense_layer():
    layer = replace(_moe_layer(), num_experts=0, expert_params=0, kind=LayerKind.transformer_block)
    from autopar_opt.ir.graph import LayerGraph
    g = LayerGraph.chain("g", [layer])
    plan = Plan([StagePlan(["m"], [Strategy(8, 1, ep=2)])], 1)
    with pytest.raises(PlanError, match="ep=2 needs an MoE layer"):
        evaluate(plan, g, small_cluster(1, 8), Training(global_batch_size=8, seq_len=1024))


# ---------------------------------------------------------------- costs by hand
def test_alltoall_intra_node_is_pairwise_exchange():
    """ep=4 at tp=2 spans 8 ranks of one node: (p-1)·α + (p-1)/p·m/β."""
    ctx = _ctx()
    eff = ctx.params.comm_efficiency
    m = 3e8
    got = moe.alltoall_tiers_time(ctx, 4, 2, m)
    assert got == pytest.approx(3 * 2e-6 + 0.75 * m / (100e9 * eff))


def test_alltoall_across_nodes_pays_the_inter_node_tier():
    """ep=16 at tp=1 spans 2 nodes: 8 members per node; the off-node half of
    every rank's data crosses the NIC (10 GB/s), the on-node 7/16 uses NVLink."""
    ctx = _ctx()
    eff, eff_inter = ctx.params.comm_efficiency, ctx.params.inter_comm_efficiency
    m = 3e8
    got = moe.alltoall_tiers_time(ctx, 16, 1, m)
    inter = 8 / 16 * m / (10e9 * eff_inter)
    intra = 7 / 16 * m / (100e9 * eff)
    assert got == pytest.approx(15 * 4e-6 + max(inter, intra))
    # 10x slower link for half of the data vs NVLink for 7/8 of it: ~5.7x at equal
    # efficiency, ~4.4x with the calibrated NVLink/network efficiencies
    assert got > 4 * moe.alltoall_tiers_time(ctx, 8, 1, m)


def test_alltoall_volume_passes_and_load():
    """4 all-to-alls per micro-batch (6 with full recomputation), each of
    a2a_bytes · b/(dp·cp) · load / tp bytes per rank; none at ep = 1."""
    ctx = _ctx(b=16)
    layer = _moe_layer(expert_load=1.5)
    s = Strategy(8, 2, ep=4)
    per_rank = 1e7 * 16 / 8 * 1.5 / 2
    one = moe.alltoall_tiers_time(ctx, 4, 2, per_rank)
    assert moe.alltoall_comm_time(layer, s, ctx) == pytest.approx(4 * one)
    full = replace(s, recompute=Recompute.full)
    assert moe.alltoall_comm_time(layer, full, ctx) == pytest.approx(6 * one)
    assert moe.alltoall_comm_time(layer, replace(s, ep=1), ctx) == 0.0


def test_expert_state_sharded_by_ep_and_zero_over_edp():
    """Mixed-precision Adam (2+2+12 bytes; a runtime without an fp32 gradient buffer).
    dp=8, tp=2, ep=4: dense 2M params / tp = 1M, experts 6M / (tp·ep) = 0.75M. ZeRO-1
    shards optimizer state over dp·cp = 8 (dense) and edp = 8/4 = 2 (experts)."""
    layer = _moe_layer()
    training = Training(global_batch_size=8, seq_len=1024, runtime=runtime_named("pytorch-fsdp"))
    s0 = Strategy(8, 2, ep=4)
    assert weight_bytes(layer, s0, training) == pytest.approx(1e6 * 16 + 0.75e6 * 16)
    s1 = replace(s0, zero=1)
    assert weight_bytes(layer, s1, training) == pytest.approx(1e6 * (4 + 12 / 8) + 0.75e6 * (4 + 12 / 2))
    dense = replace(layer, kind=LayerKind.transformer_block, num_experts=0, expert_params=0)
    assert weight_bytes(dense, Strategy(8, 2), training) == pytest.approx(4e6 * 16)


def test_load_imbalance_scales_routed_work_only():
    ctx = _ctx(b=16)
    s = Strategy(16, 1)
    even, skew = _moe_layer(), _moe_layer(expert_load=2.0)
    assert moe.busiest_flops(skew) == (1e12 + 4e11, 2e12 + 8e11)
    a, b = layer_cost(even, s, ctx), layer_cost(skew, s, ctx)
    assert b.compute_s > a.compute_s and b.flops == a.flops        # model FLOPs unchanged
    assert b.act_bytes - a.act_bytes == pytest.approx(4e7 * 16 / 16)


def test_expert_gradients_reduce_over_edp():
    """With ep = dp·cp every expert has one replica: only the dense part syncs."""
    ctx = _ctx(nodes=1, gpn=8, d=8, b=8)
    layer = _moe_layer()
    full_ep = layer_cost(layer, Strategy(8, 1, ep=8), ctx).sync_s
    dense_only = layer_cost(replace(layer, params=2_000_000, expert_params=0, num_experts=0),
                            Strategy(8, 1), ctx).sync_s
    step = 6e6 / 8 * ctx.params.optimizer_bytes_per_param / (ctx.cluster.device.hbm_gb_per_s * 1e9)
    assert full_ep == pytest.approx(dense_only + step)


# ---------------------------------------------------------------- exactness
def _instance(seed: int):
    rng = random.Random(seed)
    n = rng.randint(2, 4)
    pp = rng.choice([1, 2])
    nodes, gpn = rng.choice([(1, 4), (2, 2), (1, 8)] if pp == 1 else [(1, 4), (2, 4), (2, 2)])
    cluster = small_cluster(nodes, gpn, inter_gb_per_s=rng.choice([5.0, 25.0]))
    c = rng.choice([1, 2, 4])
    schedule = rng.choice([Schedule.gpipe, Schedule.one_f_one_b])
    training = Training(global_batch_size=8 * c, seq_len=1024)
    graph = random_moe_chain(seed, n)
    space = _space(seed)
    tables = build_cost_tables(graph, cluster, training, space, default_params(), pp, c, schedule)
    cap = least_memory(tables) / GIB * rng.choice([1.0001, 1.3, 50.0])
    reserve = user_reserve_for(cap, cluster.device.hbm_gib, default_params())
    training = Training(global_batch_size=8 * c, seq_len=1024, memory_reserve_gib=reserve)
    tables = build_cost_tables(graph, cluster, training, space, default_params(), pp, c, schedule)
    return graph, cluster, training, pp, c, schedule, tables


def _space(seed: int) -> SearchSpace:
    """Even seeds: experts split like the rest (ETP = TP); odd: experts without TP (ETP = 1)."""
    return replace(SPACE, etp_degrees=((0,), (1,))[seed % 2])


@functools.lru_cache(maxsize=None)
def _dp(seed: int):
    inst = _instance(seed)
    return inst, DPBackend().solve_tables(inst[-1], time_limit_s=None, rel_gap=0.0)


@pytest.mark.parametrize("seed", range(40))
def test_dp_equals_brute_force_on_moe_chains(seed):
    (graph, cluster, training, pp, c, schedule, tables), res = _dp(seed)
    assert any(s.ep > 1 for ss in tables.strategies for s in ss)
    ref = brute_force(graph, cluster, training, _space(seed), pp, c, schedule)
    assert ref is not None and res.termination is Termination.optimal
    assert res.primal == pytest.approx(ref[0], rel=1e-9)
    assert evaluate(tables.plan_of(res.solution), graph, cluster, training).iteration_time_s == \
        pytest.approx(res.primal, rel=1e-9)


@pytest.mark.parametrize("seed", range(8))
def test_milp_equals_dp_and_brute_force_on_moe_chains(seed):
    graph, cluster, training, pp, c, schedule, tables = _instance(seed)
    form = build_formulation(tables, "milp")
    res = get_backend("highs").solve_model(form.matrix(), ProblemClass.milp, time_limit_s=30,
                                           rel_gap=1e-9)
    ref = brute_force(graph, cluster, training, _space(seed), pp, c, schedule)
    assert res.termination is Termination.optimal
    assert res.primal == pytest.approx(ref[0], rel=1e-7)
    assert res.primal == pytest.approx(_dp(seed)[1].primal, rel=1e-7)
    plan = form.decode_values(res.solution)
    assert evaluate(plan, graph, cluster, training).iteration_time_s == \
        pytest.approx(res.primal, rel=1e-7)


@pytest.mark.parametrize("seed", range(3))
def test_miqp_on_scip_equals_milp_on_moe_chains(seed):
    pytest.importorskip("pyscipopt", reason="SCIP (pyscipopt) solves the MIQP")
    graph, cluster, training, pp, c, schedule, tables = _instance(seed)
    form = build_formulation(tables, "miqp")
    res = get_backend("scip").solve_model(form.model, form.problem_class, time_limit_s=30,
                                          rel_gap=1e-9)
    assert res.termination is Termination.optimal
    assert res.primal == pytest.approx(_dp(seed)[1].primal, rel=1e-6)


def test_moe_instances_choose_expert_parallelism_somewhere():
    """The seeded set is not degenerate: some optima use ep > 1, some ep = 1."""
    chosen = set()
    for seed in range(40):
        inst, res = _dp(seed)
        chosen |= {s.ep > 1 for st in inst[-1].plan_of(res.solution).stages for s, name in
                   zip(st.strategies, st.layers)}
    assert chosen == {True, False}


# ---------------------------------------------------------------- examples
def test_deepseek_v3_example_baseline_is_the_published_configuration():
    """DeepSeek-V3 report Sec. 3.2: PP16, EP64 spanning 8 nodes, ZeRO-1 DP, no TP."""

    from autopar_opt.spec import load_spec

    spec = load_spec(paths.REPO / "examples" / "deepseek_v3_2048_h800.yaml")
    plan = spec.plan
    assert plan.pp == 16 and spec.cluster.num_devices == 2048
    moe_strats = {s for st in plan.stages for s, name in zip(st.strategies, st.layers)
                  if spec.graph.layers[spec.graph.index(name)].is_moe}
    assert {(s.tp, s.ep, s.zero, s.dp) for s in moe_strats} == {(1, 64, 1, 128)}
    d = spec.cluster.num_devices // plan.pp
    ctx = StageContext(spec.cluster, spec.training, spec.cost_params, d, 128)
    ep64, ep8 = next(iter(moe_strats)), replace(next(iter(moe_strats)), ep=8)
    assert ep64.ep * ep64.tp // spec.cluster.gpus_per_node == 8      # spans 8 nodes
    layer = spec.graph.layers[10]
    # EP64 crosses nodes (IB tier), EP8 stays in one node (NVLink tier)
    assert moe.alltoall_comm_time(layer, ep64, ctx) > 2 * moe.alltoall_comm_time(layer, ep8, ctx)
    assert evaluate(plan, spec.graph, spec.cluster, spec.training, spec.cost_params).feasible
