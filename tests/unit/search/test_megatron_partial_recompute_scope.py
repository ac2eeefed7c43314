"""Megatron-LM's partial recomputation (``--recompute-method block --recompute-num-layers N``:
full recomputation of the first N layers of every model chunk, none of the others) in the
megatron target's space: searched in every configuration (the DP's block families,
solvers/dp/uniform.py ``block_families``, solved beside the MIP's one-setting rows,
search/inner.py ``with_block_families``): with one stage and under the interleaved
schedule, whose stage split is fixed, as fixed per-layer sets; in a 1F1B pipeline of
several stages, whose split is free, as a rule the DP's labels carry
(solvers/dp/stage_prefix.py). QA round 13: the best block plan was 14.2% faster than the
target's proven optimum, which searched one recomputation setting for the model; QA round
34: the best 1F1B block plan (pp = 2) was 1.3% under the optimum then proven.

Oracle: brute force (tests/support/bruteforce.py, priced apart from the cost tables, the DP
and the MIP) over every plan Megatron's exporter writes, kept to those the space holds
(support.exportable.megatron_searched), per outer configuration; the search's optimum (DP,
MILP with and without the DP warm start) must equal it, be proven, price under evaluate()
as the solver said, and its bound and every configuration's lie under the plans of that
configuration. The space the search covers is every plan Megatron's exporter writes."""

from __future__ import annotations

import functools
import math
from dataclasses import replace

import pytest

from support.bruteforce import brute_force
from support.exportable import megatron_accepts
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.export import ExportError, export_plan, plan_view
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.recompute_pattern import block_layers, recompute_text, stage_blocks
from autopar_opt.ir.target import Target
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training
from autopar_opt.model_zoo.registry import build_model, get_cluster
from autopar_opt.search.bounds import analytic_lower_bound
from autopar_opt.search.configs import outer_configs
from autopar_opt.search.engine import Search, SearchOptions, run_search, runs_plan
from autopar_opt.search.inner import InnerSolver
from autopar_opt.search.runnable import price_of_runnability, runnable_space
from autopar_opt.solvers.dp import solve_dp

SEQ = 8192
_A100 = get_cluster("dgx-a100-8")


def _a100s(gib: float, n: int = 2):
    return make_cluster(f"a100x{n}-{gib}", 1, n, replace(_A100.device, hbm_gib=gib, memory_gb=gib),
                        _A100.intra_node, _A100.inter_node)


TRAINING = Training(global_batch_size=8, seq_len=SEQ, dtype="bf16")
RC = (Recompute.none, Recompute.full)
#: GPT-1.7B cut to 4 layers: one stage of 4 blocks or two of 1-3 (QA round 13's instance)
GPT4 = build_model("gpt-1.7b", seq_len=SEQ, overrides={"num_layers": 4})
SPACE = SearchSpace(pp_degrees=(1, 2), tp_degrees=(1, 2), zero_levels=(0, 1), recompute=RC,
                    schedules=(Schedule.one_f_one_b,), microbatches=(2, 4, 8),
                    hybrid_sharding=(False,))
#: GPT-1.7B cut to 8 layers on two stages of one A100 each: 1F1B (free split) and
#: interleaved with 2 virtual stages (4 blocks per rank, 2 per chunk: N = 1 recomputes
#: the first of each chunk)
GPT8 = build_model("gpt-1.7b", seq_len=SEQ, overrides={"num_layers": 8})
PIPE = SearchSpace(pp_degrees=(2,), tp_degrees=(1,), zero_levels=(0,), recompute=RC,
                   schedules=(Schedule.one_f_one_b, Schedule.interleaved), microbatches=(4, 8),
                   hybrid_sharding=(False,))
#: (graph, cluster, free space): 6.6 GiB: no recomputation does not fit at pp = 1, full
#: recomputation of every layer does, and so does recomputing the first of 4 (QA round 13's
#: instance at 6.8 GiB; 6.6 since session 35's refit lowered the allocator overhead, at which
#: 6.8 GiB fits the plan without recomputation);
#: 80 GiB: nothing binds; the pipeline at PIPE_GIB: the best one-mode plan takes 1.3727 s,
#: the interleaved block plan (N = 1) 1.2688 s, the 1F1B block plan (N = 1, 4 + 4 blocks)
#: 1.2528 s; four stages of one A100 at 8 GiB under 1F1B: the best one-mode plan (full
#: recomputation) 1.0162 s, the block plan N = 2 on an uneven split (1/3/3/1 blocks: the
#: one-block stages recompute all of theirs) 0.9442 s
PIPE_GIB = 12.5
PIPE4 = replace(PIPE, pp_degrees=(4,), schedules=(Schedule.one_f_one_b,))
INSTANCES = {"tight": (GPT4, _a100s(6.6), SPACE), "roomy": (GPT4, _a100s(80.0), SPACE),
             "pipeline": (GPT8, _a100s(PIPE_GIB), PIPE),
             "pipeline4": (GPT8, _a100s(8.0, 4), PIPE4)}
PARAMS = default_params()


def _space(case: str) -> SearchSpace:
    return runnable_space(INSTANCES[case][2], "megatron")


def _exportable(graph, cluster):
    """``accept(plan)``: Megatron's exporter writes the plan (any recomputation)."""
    def accept(plan) -> bool:
        try:
            export_plan(plan, graph, cluster, TRAINING, "megatron")
        except ExportError:
            return False
        return True
    return accept


@functools.lru_cache(maxsize=None)
def _per_config(case: str, which: str) -> dict:
    """Per outer configuration of the target, the brute-force optimum ``(value, plan)``
    over the exportable plans: ``searched`` those the space holds, ``one`` one
    recomputation mode for the model, ``all`` every one (None: none fits)."""
    graph, cluster, free = INSTANCES[case]
    accept = (_exportable(graph, cluster) if which == "all"
              else megatron_accepts(graph, cluster, TRAINING, blocks=which == "searched"))
    return {cfg: brute_force(graph, cluster, TRAINING, free, cfg.pp, cfg.microbatches,
                             cfg.schedule, accept=accept, vp=cfg.vp)
            for cfg in outer_configs(graph, cluster, TRAINING, _space(case))}


def _best(case: str, which: str) -> tuple[float, object]:
    found = [r for r in _per_config(case, which).values() if r is not None]
    return min(found, key=lambda r: r[0]) if found else (math.inf, None)


def _search(case: str, solver: str, warm: bool = True):
    graph, cluster, _ = INSTANCES[case]
    return run_search(graph, cluster, TRAINING, _space(case), PARAMS,
                      SearchOptions(solver=solver, time_limit_s=60, rel_gap=0.0, warm_start=warm))


ROUTES = [("dp", True), ("highs", False), ("highs", True)]


@pytest.mark.parametrize("solver,warm", ROUTES, ids=["dp", "milp", "dp+milp"])
@pytest.mark.parametrize("case", sorted(INSTANCES))
def test_the_optimum_is_the_best_exportable_plan_the_space_holds(case, solver, warm):
    graph, cluster, _ = INSTANCES[case]
    best, _ = _best(case, "searched")
    assert best == _best(case, "all")[0]        # the space holds every exportable plan
    res = _search(case, solver, warm)
    assert res.metrics.iteration_time_s == pytest.approx(best, rel=1e-9)
    assert res.certificate.lower_bound == pytest.approx(best, rel=1e-9)
    assert not any("differs from evaluate" in (r.message or "") for r in res.certificate.configurations)
    assert megatron_accepts(graph, cluster, TRAINING)(res.plan)
    per = _per_config(case, "searched")
    for rec in res.certificate.configurations:      # no configuration's bound passes its plans
        ref = per[rec.config]
        assert ref is None or rec.lower_bound <= ref[0] * (1 + 1e-9), rec.config.label()


def test_block_plans_win_where_memory_binds():
    """The tight instance: the one-stage plan recomputing the first of its 4 blocks is
    13.5% faster than the best one-mode plan (0.6543 s against 0.7571 s at 6.6 GiB; QA
    round 13 said 14.2% at 6.8 GiB under the calibration of its day), and the search finds
    and proves it."""
    one, block = _best("tight", "one")[0], _best("tight", "searched")
    assert block_layers(stage_blocks(block[1], GPT4)) == 1
    assert block[0] == pytest.approx(one * (1 - 0.135), rel=1e-3)
    res = _search("tight", "dp")
    assert "--recompute-method block --recompute-num-layers 1" in recompute_text(res.plan, GPT4)
    # the roomy one: no recomputation at all
    assert _best("roomy", "searched")[0] == pytest.approx(_best("roomy", "one")[0], rel=1e-12)


def test_free_split_block_plans_are_searched():
    """1F1B pipelines, whose stage split is free: two stages (QA round 34's instance, the
    optimum proven 1.252811 s under the calibration of its day, 1.253136 s after session
    34's refit, 1.249464 s after session 35's: the N = 1 block plan, where the interleaved
    block plan gave 1.268775 s (1.26532 s after session 35's refit); held
    to the brute force over every exportable plan) and four on an uneven split whose one-block stages recompute all of
    theirs (N = 2); each is better than the one-mode plans, found and proven."""
    res = _search("pipeline", "dp")
    assert res.plan.pp == 2 and res.plan.schedule is Schedule.one_f_one_b
    assert block_layers(stage_blocks(res.plan, GPT8)) == 1
    best = _best("pipeline", "searched")[0]      # brute force over every exportable plan
    assert res.metrics.iteration_time_s == pytest.approx(best, rel=1e-9)
    assert res.certificate.lower_bound == pytest.approx(best, rel=1e-6)
    res4 = _search("pipeline4", "dp")
    blocks = [len(b) for b in stage_blocks(res4.plan, GPT8)]
    assert block_layers(stage_blocks(res4.plan, GPT8)) == 2 and min(blocks) < 2 < max(blocks)
    for case, found in (("pipeline", res), ("pipeline4", res4)):
        assert found.metrics.iteration_time_s < _best(case, "one")[0] * (1 - 0.01)


def test_interleaved_block_plans_are_searched():
    """The pipeline instance: the interleaved optimum recomputes the first block of each
    chunk (Megatron block, N = 1), better than its one-mode plans."""
    per, one = _per_config("pipeline", "searched"), _per_config("pipeline", "one")
    inter = [c for c in per if c.vp > 1 and per[c] is not None]
    assert inter
    assert any(block_layers(stage_blocks(per[c][1], GPT8), c.vp) == 1
               and (one[c] is None or per[c][0] < one[c][0] * (1 - 1e-6)) for c in inter)


def test_analytic_bounds_and_dp_equal_milp_per_configuration():
    """Every configuration: the analytic bound lies under its brute-force optimum (block
    plans included), and the DP, the MILP (its one-setting rows and the DP's block
    families beside them) and the brute force agree."""
    for case in INSTANCES:
        graph, cluster, _ = INSTANCES[case]
        space, per = _space(case), _per_config(case, "searched")
        inner = InnerSolver(SearchOptions(solver="highs", time_limit_s=30, rel_gap=0.0,
                                          warm_start=False))
        for cfg, ref in per.items():
            tables = build_cost_tables(graph, cluster, TRAINING, space, PARAMS, cfg.pp,
                                       cfg.microbatches, cfg.schedule, vp=cfg.vp)
            bound = analytic_lower_bound(tables).value
            dp = solve_dp(tables)
            mip = inner.solve(tables, 30.0, cfg)
            if ref is None:
                assert dp.primal is None and mip.result.primal is None
                continue
            assert bound <= ref[0] * (1 + 1e-9)
            assert dp.primal == pytest.approx(ref[0], rel=1e-9)
            assert mip.result.primal == pytest.approx(ref[0], rel=1e-9)
            assert mip.bounds.lower == pytest.approx(ref[0], rel=1e-9)
            assert tables.runnable(mip.assignment) and tables.runnable(dp.solution)
            for asg, value in ((dp.solution, dp.primal), (mip.assignment, mip.result.primal)):
                plan = tables.plan_of(asg)              # evaluate() = the solver's objective
                assert evaluate(plan, graph, cluster, TRAINING, PARAMS).iteration_time_s == \
                    pytest.approx(value, rel=1e-9)


def test_the_outputs_say_what_is_searched():
    """Nothing Megatron runs is left out any more: the outputs' ``unsearched`` line is
    empty (a 1F1B pipeline's block plans are searched), and the free space's bound lies
    under every exportable plan (the price of runnability)."""
    for target in (Target("megatron"), Target("torchtitan", "0.3"), Target("deepspeed"),
                   Target("none")):
        assert target.unsearched() == ""
    graph, cluster, _ = INSTANCES["tight"]
    space = _space("tight")
    options = SearchOptions(solver="dp", time_limit_s=30, rel_gap=0.0)
    res = run_search(graph, cluster, TRAINING, space, PARAMS, options)
    run = price_of_runnability(res, graph, cluster, TRAINING, space, PARAMS, options, 30.0)
    assert run.to_dict()["unsearched"] == ""                   # pp = 2 under 1F1B searched
    assert run.free_lower <= _best("tight", "all")[0] * (1 + 1e-9)
    assert res.metrics.iteration_time_s == pytest.approx(_best("tight", "all")[0], rel=1e-9)


@pytest.mark.parametrize("case", ["tight", "pipeline", "pipeline4"])
def test_the_found_block_plan_passes_megatron(case):
    """The found plan's launch file passes Megatron-Core's and Megatron-LM's own checks."""
    pytest.importorskip("megatron.core")
    from support.frameworks import validate_megatron, validate_megatron_lm

    graph, cluster, _ = INSTANCES[case]
    res = _search(case, "dp")
    text = export_plan(res.plan, graph, cluster, TRAINING, "megatron").text
    view = plan_view(res.plan, graph, cluster, TRAINING)
    config = validate_megatron(text, cluster.num_devices)["config"]
    n = block_layers(stage_blocks(res.plan, graph), res.plan.vp_chunks if res.plan.vp_chunks > 1
                     else 1)
    if n is not None:
        assert (config.recompute_method, config.recompute_num_layers) == ("block", n)
    pytest.importorskip("megatron.training.arguments")
    args = validate_megatron_lm(text, cluster.num_devices, cluster.device.arch)
    assert (args.data_parallel_size, args.pipeline_model_parallel_size) == (view.dp, view.pp)


def test_a_block_plan_the_space_holds_is_a_warm_start():
    """The engine's warm-start admission (search.engine.runs_plan) follows the same rule:
    a block plan with one stage, interleaving or a 1F1B pipeline is a plan the target runs
    (and seeds the search, whose answer and bound stay the optimum's), and none is in a
    space without both recomputation modes."""
    mega = Target("megatron")
    tight, inter, pipe = (_best("tight", "searched")[1], _best("pipeline", "searched")[1],
                          _best("pipeline", "all")[1])
    assert block_layers(stage_blocks(pipe, GPT8)) == 1 and pipe.pp == 2     # 1F1B, pp = 2
    assert runs_plan(mega, tight, GPT4, RC) and runs_plan(mega, inter, GPT8, RC)
    assert runs_plan(mega, pipe, GPT8, RC) and not runs_plan(mega, pipe, GPT8, (Recompute.full,))
    assert not runs_plan(mega, tight, GPT4) and not runs_plan(mega, tight, GPT4, (Recompute.full,))
    graph, cluster, _ = INSTANCES["tight"]
    options = SearchOptions(solver="highs", time_limit_s=30, rel_gap=0.0)
    search = Search(graph, cluster, TRAINING, _space("tight"), PARAMS, options, incumbent=tight)
    assert search.seeded is not None                      # admitted as the incumbent
    res = search.run()
    assert res.metrics.iteration_time_s == pytest.approx(_best("tight", "searched")[0], rel=1e-9)
    assert res.certificate.lower_bound == pytest.approx(res.metrics.iteration_time_s, rel=1e-9)
    graph, cluster, _ = INSTANCES["pipeline"]          # the 1F1B block plan seeds a search
    search = Search(graph, cluster, TRAINING, _space("pipeline"), PARAMS, options, incumbent=pipe)
    assert search.seeded is not None
    res = search.run()
    assert res.metrics.iteration_time_s == pytest.approx(_best("pipeline", "searched")[0], rel=1e-9)
    assert res.certificate.lower_bound == pytest.approx(res.metrics.iteration_time_s, rel=1e-9)


@pytest.mark.parametrize("form", ["milp", "miqp"])
@pytest.mark.parametrize("case", ["tight", "pipeline", "pipeline4"])
def test_scip_routes_reach_the_same_optimum(case, form):
    """The Pyomo route (SCIP, MILP and MIQP forms, no DP warm start): its one-setting
    model and the DP's block families beside it give the brute-force optimum, proven."""
    from autopar_opt.solvers.registry import get_backend

    ok, why = get_backend("scip").available()
    if not ok:
        pytest.skip(why)
    graph, cluster, _ = INSTANCES[case]
    res = run_search(graph, cluster, TRAINING, _space(case), PARAMS,
                     SearchOptions(solver="scip", form=form, time_limit_s=60, rel_gap=0.0,
                                   warm_start=False))
    best = _best(case, "searched")[0]
    assert res.metrics.iteration_time_s == pytest.approx(best, rel=1e-9)
    assert res.certificate.lower_bound == pytest.approx(best, rel=1e-9)
    assert any(r.method.endswith("+block-dp") for r in res.certificate.configurations)


#: 1F1B pipelines of GPT8 whose optimum is a block plan on an uneven split or with N > 1:
#: (stages of one A100, GiB): three stages at 9.6 GiB (N = 2 over 2/3 blocks), two at 11.5
#: (N = 3 of 4), four at 7.0 (N = 2 over 1/2/3)
SWEEP = [(3, 9.6), (2, 11.5), (4, 7.0)]


@pytest.mark.parametrize("solver,warm", [("dp", True), ("highs", False)], ids=["dp", "milp"])
@pytest.mark.parametrize("pp,gib", SWEEP)
def test_free_split_sweep_equals_brute_force(pp, gib, solver, warm):
    """More 1F1B pipelines: the search's proven optimum is the brute-force optimum over
    every plan Megatron's exporter writes, and it is a block plan of the kind named."""
    cluster = _a100s(gib, pp)
    free = replace(PIPE, pp_degrees=(pp,), schedules=(Schedule.one_f_one_b,))
    space = runnable_space(free, "megatron")
    found = [brute_force(GPT8, cluster, TRAINING, free, cfg.pp, cfg.microbatches, cfg.schedule,
                         accept=_exportable(GPT8, cluster), vp=cfg.vp)
             for cfg in outer_configs(GPT8, cluster, TRAINING, space)]
    best = min((r for r in found if r is not None), key=lambda r: r[0])
    assert block_layers(stage_blocks(best[1], GPT8)) in (2, 3)
    res = run_search(GPT8, cluster, TRAINING, space, PARAMS,
                     SearchOptions(solver=solver, time_limit_s=60, rel_gap=0.0, warm_start=warm))
    assert res.metrics.iteration_time_s == pytest.approx(best[0], rel=1e-9)
    assert res.certificate.lower_bound == pytest.approx(best[0], rel=1e-9)
