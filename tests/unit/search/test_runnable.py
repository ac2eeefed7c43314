"""A target runtime decides the search space (issue 29): the runnable optimum is the
best plan the framework can run, proven by the one formulation.

Oracle: brute force over the *free* per-layer space of every outer configuration
(tests/support/bruteforce.py: every split times every strategy combination,
priced without the cost tables, the DP or the MIP), keeping only the plans the
framework's exporter accepts (autopar_opt.export: its rules are written apart
from ir/target.py's, from the frameworks' documented rules). For Megatron the
oracle also keeps one recomputation mode for the model or a ``--recompute-method
block`` plan (the first N blocks of each stage), which the target's space searches in
every configuration (support.exportable.megatron_searched; ir/target.py
``Target.searches_blocks``).
The search's answer must equal that optimum, be proven (bound = value), export,
and its exported file pass the framework's own validation where it is installed
(tests/support/frameworks.py).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import replace

import pytest

from support.bruteforce import brute_force
from support.exportable import megatron_searched
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.export import ExportError, export_plan, plan_view
from autopar_opt.export.deepspeed import uniform_partition
from autopar_opt.ir.target import Target
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training
from autopar_opt.model_zoo.registry import build_model, get_cluster
from autopar_opt.search.configs import outer_configs
from autopar_opt.search.engine import SearchOptions, run_search
from autopar_opt.search.runnable import price_of_runnability, runnable_space

GRAPH = build_model("debug-moe", overrides={"num_layers": 2})
CLUSTER = get_cluster("debug-2x4")
TRAINING = Training(global_batch_size=8, seq_len=128)
#: hybrid sharding is searched on its own instance (below): with it, this one's
#: brute force would price 9 million plans per split
SPACE = SearchSpace(pp_degrees=(1, 2), tp_degrees=(1, 2), zero_levels=(0, 1, 3),
                    recompute=(Recompute.none, Recompute.full), ep_degrees=(1, 2),
                    etp_degrees=(0, 1), schedules=(Schedule.one_f_one_b,), microbatches=(1, 2, 4),
                    hybrid_sharding=(False,))
#: a dense model on the same two nodes of four, with hybrid sharding on offer (dp·cp = 8
#: ranks over 2 nodes at pp = 1): ZeRO over all 8 ranks or over each node's 4 (tp 1) / 2 (tp 2)
DENSE = build_model("debug", overrides={"num_layers": 2})
HYBRID_SPACE = SearchSpace(pp_degrees=(1, 2), tp_degrees=(1, 2), zero_levels=(0, 1, 3),
                           recompute=(Recompute.none,), schedules=(Schedule.one_f_one_b,),
                           microbatches=(1, 2), hybrid_zero_levels=(1, 3))
#: four nodes of two GPUs (the debug cluster's links), shard groups of one and two nodes on
#: offer: at pp = 1 the dp·cp = 8 ranks shard over 2 (tp 1) or 4 (tp 1, two nodes; tp 2)
WIDE = replace(CLUSTER, name="debug-4x2", nodes=4, gpus_per_node=2)
WIDE_SPACE = replace(HYBRID_SPACE, hybrid_shard_nodes=(1, 2), hybrid_zero_levels=(3,))
#: the oracle's instances: (graph, cluster, free space)
INSTANCES = {"moe": (GRAPH, CLUSTER, SPACE), "hybrid": (DENSE, CLUSTER, HYBRID_SPACE),
             "wide": (DENSE, WIDE, WIDE_SPACE)}
TARGETS = [Target("megatron"), Target("torchtitan", "0.3"), Target("torchtitan", "0.2"),
           Target("deepspeed")]


def _accepts(target: Target, graph=GRAPH, cluster=CLUSTER):
    fw = target.framework

    def accept(plan) -> bool:
        try:
            export_plan(plan, graph, cluster, TRAINING, fw, target.version)
        except ExportError as exc:
            # torchtitan has no flavour for this toy model: that refusal is about the
            # model, not the plan's parallelism; every other reason counts
            return "registers no model flavour" in str(exc) and len(exc.reasons) == 1
        # the megatron target searches one recomputation mode, and the block method in
        # every configuration (docstring)
        return fw != "megatron" or megatron_searched(plan, graph)
    return accept


@functools.lru_cache(maxsize=None)
def _oracle(target: Target, case: str = "moe") -> float:
    """The brute-force optimum over the plans the target's exporter accepts on the
    instance ``case`` of :data:`INSTANCES`; computed once per target for both solvers.
    Each configuration's brute force tries its plans of every split cheapest first and
    only those cheaper than the best so far (``below``). DeepSpeed refuses most plans, and
    its exporter was asked about 3.3 million plans of the MoE instance (2.5 minutes on 2
    cores): every plan of the stage splits its uniform partition does not give, and every
    plan of the configuration (pp 2, 4 micro-batches) it runs none of. Now it is asked
    about one: the first configuration's cheapest plan, which no plan of another
    configuration beats. The other targets' oracles ask about 10,000 at most."""
    graph, cluster, free = INSTANCES[case]
    best = math.inf
    space = runnable_space(free, target.framework, target.version)
    for cfg in outer_configs(graph, cluster, TRAINING, space):
        ref = brute_force(graph, cluster, TRAINING, free, cfg.pp, cfg.microbatches,
                          cfg.schedule, accept=_accepts(target, graph, cluster), below=best)
        if ref is not None:
            best = min(best, ref[0])
    return best


def _assert_runnable_optimum(target: Target, solver: str, case: str):
    """The target's search on the instance ``case`` finds the exporter's brute-force
    optimum (:func:`_oracle`), proves it, and its plan exports; the search result."""
    graph, cluster, free = INSTANCES[case]
    space = runnable_space(free, target.framework, target.version)
    res = run_search(graph, cluster, TRAINING, space, default_params(),
                     SearchOptions(solver=solver, time_limit_s=60, rel_gap=0.0,
                                   warm_start=solver != "highs"))
    assert res.plan is not None
    assert res.metrics.iteration_time_s == pytest.approx(_oracle(target, case), rel=1e-9)
    assert res.certificate.lower_bound == pytest.approx(res.metrics.iteration_time_s, rel=1e-9)
    assert _accepts(target, graph, cluster)(res.plan)
    return res


@pytest.mark.parametrize("solver", ["dp", "highs"])
@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.label())
def test_runnable_optimum_equals_brute_force_over_exportable_plans(target, solver):
    res = _assert_runnable_optimum(target, solver, "moe")
    free = run_search(GRAPH, CLUSTER, TRAINING, SPACE, default_params(),
                      SearchOptions(solver="dp", time_limit_s=60, rel_gap=0.0))
    assert free.metrics.iteration_time_s <= res.metrics.iteration_time_s * (1 + 1e-12)


@pytest.mark.parametrize("solver", ["dp", "highs"])
@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.label())
def test_runnable_optimum_with_hybrid_sharding_equals_brute_force(target, solver):
    """The same oracle where hybrid sharding is on offer: the exporters' own rules
    (one replica count; torchtitan no ZeRO-1; DeepSpeed MiCS at ZeRO-3 without TP)
    decide which hybrid plans count, and the DP (its key families) must find their
    optimum and prove it, as must the MILP (its uniformity rows)."""
    _assert_runnable_optimum(target, solver, "hybrid")


@pytest.mark.parametrize("solver", ["dp", "highs"])
@pytest.mark.parametrize("target", TARGETS[:2], ids=lambda t: t.label())
def test_runnable_optimum_with_shard_groups_of_several_nodes_equals_brute_force(target, solver):
    """Two shard-group sizes mean two replica counts, of which a runnable plan takes one
    (a uniform dimension): the DP's key families and the MILP's rows still reach the
    brute-force optimum over the exporter's accepted plans, and prove it."""
    space = runnable_space(WIDE_SPACE, target.framework, target.version)
    tables = build_cost_tables(DENSE, WIDE, TRAINING, space, default_params(), 1, 1,
                               Schedule.one_f_one_b, prune_dominated=False)
    groups = {s.zero_group for strats in tables.strategies for s in strats if s.hybrid}
    assert {2, 4} <= groups                       # one node's ranks and two nodes'
    _assert_runnable_optimum(target, solver, "wide")


def test_hybrid_plans_are_in_the_runnable_spaces():
    """Not vacuous: Megatron's and torchtitan's spaces hold hybrid strategies on the
    dense instance; DeepSpeed's none (0.19 removed MiCS)."""
    for target in TARGETS:
        space = runnable_space(HYBRID_SPACE, target.framework, target.version)
        tables = build_cost_tables(DENSE, CLUSTER, TRAINING, space, default_params(), 1, 1,
                                   Schedule.one_f_one_b, prune_dominated=False)
        hybrid = any(s.hybrid for strats in tables.strategies for s in strats)
        assert hybrid == (target.framework != "deepspeed"), target


def _memory_bound(framework: str, factor: float):
    """A 6-block debug-moe under ``framework`` with the capacity ``factor`` × the least
    memory of its pp=2, c=2 configuration: memory binds, so the analytic bounds leave
    configurations to the DP (the 2-block instance above is pruned by them alone)."""
    from autopar_opt.cost.context import user_reserve_for
    from autopar_opt.ir.hardware import GIB
    from autopar_opt.solvers.dp.common import least_memory

    graph = build_model("debug-moe", overrides={"num_layers": 6})
    space = runnable_space(replace(SPACE, pp_degrees=(1, 2, 4), zero_levels=(0, 1)), framework)
    tables = build_cost_tables(graph, CLUSTER, TRAINING, space, default_params(), 2, 2,
                               Schedule.one_f_one_b)
    reserve = user_reserve_for(least_memory(tables) / GIB * factor, CLUSTER.device.hbm_gib,
                               default_params())
    return graph, replace(TRAINING, memory_reserve_gib=reserve), space


@pytest.mark.parametrize("rel_gap", [0.0, 1e-3])
@pytest.mark.parametrize("framework,factor", [("megatron", 1.5), ("megatron", 2.0),
                                              ("deepspeed", 1.2), ("deepspeed", 2.0)])
def test_the_dp_warm_start_cut_at_the_incumbent_keeps_the_runnable_optimum(framework, factor,
                                                                           rel_gap):
    """The default route (``auto``, the DP warm start first): under a target the DP takes
    the search's incumbent as its cutoff, and a configuration it proves unable to beat it
    by more than the gap is pruned without a MIP. Differential oracle: the ``dp`` route
    without any cutoff at gap 0 (checked against brute force above). The answer is within
    the gap of that optimum, the bound at most the optimum, and at gap 0 the cut happens
    (the check discriminates)."""
    graph, training, space = _memory_bound(framework, factor)
    ref = run_search(graph, CLUSTER, training, space, default_params(),
                     SearchOptions(solver="dp", time_limit_s=60, rel_gap=0.0))
    best = ref.metrics.iteration_time_s
    assert ref.certificate.lower_bound == pytest.approx(best, rel=1e-9)
    res = run_search(graph, CLUSTER, training, space, default_params(),
                     SearchOptions(solver="auto", time_limit_s=60, rel_gap=rel_gap))
    value, cert = res.metrics.iteration_time_s, res.certificate
    assert best * (1 - 1e-9) <= value <= best * (1 + rel_gap) * (1 + 1e-9)
    assert value * (1 - rel_gap) * (1 - 1e-9) <= cert.lower_bound <= best * (1 + 1e-9)
    cut = [r for r in cert.configurations if r.pruned_by and "proven by the solver" in r.pruned_by]
    assert all(r.method == "dp" for r in cut)
    # at gap 0 the cut prunes a configuration in every case where a solved one did not
    # improve on the plans before it (records are in solve order); where each solved
    # configuration beat the last (the memory-aware bounds prune the rest of some cases
    # first) there is nothing for the cut to do
    solved = [r for r in cert.configurations if r.time_s > 0 and r.primal is not None]
    improving = all(b.primal < a.primal for a, b in zip(solved, solved[1:]))
    assert cut or rel_gap > 0 or improving, [(r.config.label(), r.status, r.primal) for r in solved]
    assert all(r.lower_bound <= min(r2.primal for r2 in ref.certificate.configurations
                                    if r2.config == r.config and r2.primal is not None)
               * (1 + 1e-9) for r in cut if any(r2.config == r.config and r2.primal is not None
                                                for r2 in ref.certificate.configurations))


def test_the_certificate_has_one_row_per_outer_configuration():
    """No enumeration of uniform settings: the target's search lists the same outer
    configurations as the free one (issue 29: 15k-35k rows before)."""
    space = runnable_space(SPACE, "megatron")
    res = run_search(GRAPH, CLUSTER, TRAINING, space, default_params(),
                     SearchOptions(solver="dp", time_limit_s=60, rel_gap=0.0))
    assert len(res.certificate.configurations) == len(outer_configs(GRAPH, CLUSTER, TRAINING, space))


def test_deepspeed_keeps_its_uniform_partition():
    space = runnable_space(SPACE, "deepspeed")
    res = run_search(GRAPH, CLUSTER, TRAINING, space, default_params(),
                     SearchOptions(solver="dp", time_limit_s=60, rel_gap=0.0))
    sizes = [len(st.layers) for st in res.plan.stages]
    assert sizes == uniform_partition(len(GRAPH), res.plan.pp)
    assert res.certificate.exact and res.certificate.gap == 0.0


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.label())
def test_milp_rows_equal_the_dp_label_rule(target):
    """formulations' uniform_choice/fixed_split rows and the DP's key families give
    the same optimum on every configuration (the differential check of the two; the
    DP's one-setting families: the rows state no block recomputation, which the search
    solves beside them, tests/unit/search/test_megatron_partial_recompute_scope.py)."""
    from autopar_opt.formulations.direct import DirectBuilder
    from autopar_opt.solvers.dp import solve_dp
    from autopar_opt.solvers.registry import get_backend

    space = runnable_space(SPACE, target.framework, target.version)
    highs = get_backend("highs")
    for cfg in outer_configs(GRAPH, CLUSTER, TRAINING, space):
        tables = build_cost_tables(GRAPH, CLUSTER, TRAINING, space, default_params(), cfg.pp,
                                   cfg.microbatches, cfg.schedule)
        if any(not s for s in tables.strategies):
            continue                  # no strategy at all (the micro-batch is too small)
        dp = solve_dp(tables, part="uniform")
        problem = DirectBuilder().build(tables)
        mip = highs.solve(problem.model, problem.problem_class, time_limit_s=30, rel_gap=1e-9)
        if dp.primal is None:
            assert mip.primal is None
            continue
        assert mip.primal == pytest.approx(dp.primal, rel=1e-7)
        assert tables.runnable(problem.invert(mip))


def test_price_of_runnability_brackets_the_two_optima():
    space = runnable_space(SPACE, "deepspeed")
    options = SearchOptions(solver="dp", time_limit_s=60, rel_gap=0.0)
    res = run_search(GRAPH, CLUSTER, TRAINING, space, default_params(), options)
    price = price_of_runnability(res, GRAPH, CLUSTER, TRAINING, space, default_params(), options, 30.0)
    lo, hi = price.price
    free = run_search(GRAPH, CLUSTER, TRAINING, SPACE, default_params(), options)
    exact = res.metrics.iteration_time_s / free.metrics.iteration_time_s - 1
    assert price.free_status == "optimal" and lo == pytest.approx(exact) == pytest.approx(hi)
    assert exact >= 0
    assert price_of_runnability(res, GRAPH, CLUSTER, TRAINING, space, default_params(), options,
                                0.0).note.startswith("no time")


@pytest.mark.parametrize("framework", ["megatron", "deepspeed"])
def test_exported_optimum_passes_the_framework(framework, tmp_path):
    """The runnable optimum's launch file passes the framework's own validation."""
    from support.frameworks import validate_deepspeed, validate_megatron

    pytest.importorskip("megatron.core" if framework == "megatron" else "deepspeed")
    space = runnable_space(SPACE, framework)
    res = run_search(GRAPH, CLUSTER, TRAINING, space, default_params(),
                     SearchOptions(solver="dp", time_limit_s=60, rel_gap=0.0))
    text = export_plan(res.plan, GRAPH, CLUSTER, TRAINING, framework).text
    view = plan_view(res.plan, GRAPH, CLUSTER, TRAINING)
    if framework == "megatron":
        assert validate_megatron(text, CLUSTER.num_devices)["dp"] == view.dp
        pytest.importorskip("megatron.training.arguments")
        from support.frameworks import validate_megatron_lm     # Megatron-LM's validate_args
        args = validate_megatron_lm(text, CLUSTER.num_devices, CLUSTER.device.arch)
        assert (args.data_parallel_size, args.pipeline_model_parallel_size) == (view.dp, view.pp)
    else:
        ds = validate_deepspeed(text, CLUSTER.num_devices, view.pp, view.num_experts)
        assert ds.train_batch_size == TRAINING.global_batch_size


def test_spec_target_defaults_to_the_runtime_and_none_keeps_the_free_space(tmp_path):
    from autopar_opt.spec import load_spec

    base = ("model: {zoo: debug-moe, overrides: {num_layers: 2}}\ncluster: {zoo: debug-2x4}\n"
            "training: {global_batch_size: 8, runtime: RT}\n")
    for runtime, fw in (("megatron-core", "megatron"), ("torchtitan", "torchtitan"),
                        ("deepspeed", "deepspeed"), ("pytorch-fsdp", "none")):
        path = tmp_path / f"{runtime}.yaml"
        path.write_text(base.replace("RT", runtime))
        assert load_spec(path).space.target.framework == fw
    path.write_text(base.replace("RT", "megatron-core") + "target: none\n")
    assert load_spec(path).space.runs_on is None
    path.write_text(base.replace("RT", "megatron-core") +
                    "target: {framework: torchtitan, version: '0.2'}\n")
    assert load_spec(path).space.target == Target("torchtitan", "0.2", "target")


def test_spec_target_errors_name_the_key(tmp_path):
    from autopar_opt.spec import SpecError, load_spec

    path = tmp_path / "s.yaml"
    path.write_text("model: {zoo: inception-v3}\ncluster: {zoo: debug-2x4}\n"
                    "training: {global_batch_size: 8}\ntarget: megatron\n")
    with pytest.raises(SpecError, match=r"target = 'megatron': megatron cannot run this model"):
        load_spec(path)
    path.write_text("model: {zoo: debug-moe}\ncluster: {zoo: debug-2x4}\n"
                    "training: {global_batch_size: 8}\ntarget: megatron\n"
                    "search: {schedules: [gpipe]}\n")
    with pytest.raises(SpecError, match=r"search.schedules\[0\] = 'gpipe': megatron does not run"):
        load_spec(path)
    # a runtime the target cannot run: Ulysses on torchtitan, DeepEP on DeepSpeed
    path.write_text("model: {zoo: debug-moe}\ncluster: {zoo: debug-2x4}\n"
                    "training: {global_batch_size: 8, seq_len: 1024, runtime_options: "
                    "{cp_comm_type: a2a}}\ntarget: torchtitan\nsearch: {cp_degrees: [1, 2]}\n")
    with pytest.raises(SpecError, match=r"training.runtime_options.cp_comm_type = 'a2a': "
                                        r"torchtitan has no Ulysses"):
        load_spec(path)
    path.write_text("model: {zoo: debug-moe}\ncluster: {zoo: debug-2x4}\n"
                    "training: {global_batch_size: 8, runtime_options: {moe_dispatcher: deepep}}\n"
                    "target: deepspeed\n")
    with pytest.raises(SpecError, match=r"training.runtime_options.moe_dispatcher = 'deepep': "
                                        r"DeepSpeed has no DeepEP"):
        load_spec(path)
    path.write_text("model: {zoo: debug-moe}\ncluster: {zoo: debug-2x4}\n"
                    "training: {global_batch_size: 8, runtime_options: {moe_dispatcher: deepep}}\n"
                    "target: torchtitan\n")
    assert load_spec(path).space.target.framework == "torchtitan"   # torchtitan runs DeepEP


def test_cli_solve_reports_the_target_and_the_price(tmp_path):
    from typer.testing import CliRunner

    from autopar_opt.cli.commands import app

    spec = tmp_path / "spec.yaml"
    spec.write_text("model: {zoo: debug-moe, overrides: {num_layers: 2}}\n"
                    "cluster: {zoo: debug-2x4}\ntraining: {global_batch_size: 8}\n"
                    "search: {pp_degrees: [1, 2], tp_degrees: [1, 2], zero_levels: [0, 1], "
                    "recompute: [none], microbatches: [1, 2]}\nsolver: {name: dp}\n")
    res = CliRunner().invoke(app, ["solve", str(spec), "--json", "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["search_space"]["target"]["framework"] == "megatron"
    run = doc["runnability"]
    assert run["free_status"] == "optimal" and run["price_low"] >= 0
    assert run["free_lower_bound"] <= doc["certificate"]["primal"]
    res = CliRunner().invoke(app, ["export", str(tmp_path / "out" / "plan.json"), "--to",
                                   "megatron"])
    assert res.exit_code == 0 and "--tensor-model-parallel-size" in res.stdout
    res = CliRunner().invoke(app, ["solve", str(spec), "--runnable-by", "deepspeed", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["search_space"]["runnable_by"] == "deepspeed"
    res = CliRunner().invoke(app, ["solve", str(spec), "--runnable-by", "alpa"])
    assert res.exit_code == 2 and "unknown framework" in res.output
    assert "--runnable-by = " in res.output and "use 'megatron', 'torchtitan'" in res.output
    res = CliRunner().invoke(app, ["solve", str(spec)])
    assert res.exit_code == 0 and "runnable by megatron: price of runnability" in res.stdout
    assert "stages 0" in res.stdout or "stage 0" in res.stdout        # the degrees are named


def test_runnable_by_a_framework_that_cannot_run_the_spec_names_option_value_rule_and_fix(tmp_path):
    """--runnable-by is held to the rules of a stated ``target:``: a model the framework
    cannot build (inception-v3 is not a chain), free stage sizes or a listed schedule it
    does not run is exit 2 naming the option, its value, the rule and the fix; before,
    the search ran and called its answer runnable."""
    from support.cli import run_cli

    spec = tmp_path / "inception.yaml"
    spec.write_text("model: {zoo: inception-v3}\ncluster: {zoo: debug-2x4}\n"
                    "training: {global_batch_size: 8}\n")
    code, text = run_cli("solve", spec, "--runnable-by", "megatron", "--out", tmp_path / "out")
    assert code == 2, text
    assert "--runnable-by = 'megatron': megatron cannot run this model: it is not a chain" in text
    assert "drop --runnable-by" in text and not (tmp_path / "out" / "plan.json").exists()
    spec = tmp_path / "moe.yaml"
    spec.write_text("model: {zoo: debug-moe, overrides: {num_layers: 2}}\n"
                    "cluster: {zoo: debug-2x4}\ntraining: {global_batch_size: 8, runtime: torchtitan}\n"
                    "search: {schedules: [gpipe, 1f1b], stage_devices: free}\n")
    code, text = run_cli("solve", spec, "--runnable-by", "deepspeed")
    assert code == 2, text
    assert "--runnable-by = 'deepspeed': deepspeed gives every pipeline stage the same devices" in text
    assert "set search.stage_devices: congruent" in text
    assert "deepspeed does not run the gpipe schedule" in text and "list only 1f1b" in text


def test_a_stated_target_that_cannot_run_or_does_not_exist_is_one_clear_problem(tmp_path):
    """``target:`` errors name the file, key, value, rule and fix, one line each (a
    wrong name was two lines naming pydantic's union members, 'target.literal[...]'
    and 'target.TargetSection')."""
    from support.cli import run_cli

    spec = tmp_path / "s.yaml"
    spec.write_text("model: {zoo: inception-v3}\ncluster: {zoo: debug-2x4}\n"
                    "training: {global_batch_size: 8}\ntarget: megatron\n")
    code, text = run_cli("solve", spec)
    assert code == 2 and f"{spec}: target = 'megatron': megatron cannot run this model" in text
    assert "use target: none (the free per-layer space)" in text
    for value, key in (("alpa", "target"), ("3", "target"), ("{framework: megatorn}", "target.framework")):
        spec.write_text("model: {zoo: debug}\ncluster: {zoo: debug-2x4}\n"
                        f"training: {{global_batch_size: 8}}\ntarget: {value}\n")
        code, text = run_cli("solve", spec)
        assert code == 2 and "1 problem" in text, text
        assert f"{spec}: {key} = " in text and "one of 'megatron', 'torchtitan', 'deepspeed' or 'none'" in text
        assert "literal[" not in text and "TargetSection" not in text


def test_a_target_priced_with_another_stacks_runtime_says_so(tmp_path):
    """The target decides which plans count, ``training.runtime`` how they are priced
    (overlaps, kernels, gradient reduction): where the two name different frameworks the
    output says which runtime priced the plans and how to price the target's own."""
    from support.cli import run_cli
    from autopar_opt.spec import load_spec

    spec = tmp_path / "s.yaml"
    base = "model: {zoo: debug}\ncluster: {zoo: debug-2x4}\ntraining: {global_batch_size: 8%s}\n"
    spec.write_text(base % "")
    code, text = run_cli("solve", spec, "--runnable-by", "deepspeed", "--out", tmp_path / "a")
    assert code == 0, text
    note = ("--runnable-by deepspeed: the plans follow deepspeed's rules but are priced with "
            "training.runtime megatron-core")
    assert note in text and "set training.runtime: deepspeed" in text
    doc = json.loads((tmp_path / "a" / "plan.json").read_text())
    assert any(note in n for n in doc["notices"])
    spec.write_text(base % ", runtime: deepspeed")
    code, text = run_cli("solve", spec, "--runnable-by", "deepspeed", "--out", tmp_path / "b")
    assert code == 0 and "priced with training.runtime" not in text
    spec.write_text(base % "" + "target: torchtitan\n")
    assert any("target torchtitan: the plans follow torchtitan's rules but are priced with "
               "training.runtime megatron-core" in n for n in load_spec(spec).notices)
    spec.write_text(base % ", runtime: torchtitan" + "target: torchtitan\n")
    assert not any("priced with" in n for n in load_spec(spec).notices)


def test_a_torchtitan_target_without_an_exported_flavour_says_so(tmp_path):
    """A torchtitan target keeps a model the export has no flavour for (torchtitan's
    models are code a user writes) and says so: the plans follow torchtitan's rules, the
    export is refused; a model it has a flavour for (Llama-3.1-8B) gets no such note."""
    from autopar_opt.spec import load_spec
    from support.paths import REPO
    path = tmp_path / "s.yaml"
    for config, noted in (("mixtral-8x7b-v0.1", True), ("llama-3.1-8b", False)):
        path.write_text(f"model: {{hf_config: {REPO / 'model_zoo' / 'hf' / (config + '.json')}}}\n"
                        "cluster: {zoo: 2x8-h100}\n"
                        "training: {global_batch_size: 32, seq_len: 4096, runtime: torchtitan}\n")
        spec = load_spec(path)
        assert spec.space.target.framework == "torchtitan"
        assert any("export has no model for" in n for n in spec.notices) is noted, spec.notices


def test_runnable_by_torchtitan_says_when_its_export_has_no_model(tmp_path):
    """A Llama block of a size no torchtitan flavour has: --runnable-by torchtitan keeps
    the target (torchtitan's models are code), says as a target does that the export is
    refused, and the export's refusal does not send the user back to solve with it."""
    import json

    from support.cli import run_cli
    from support.paths import REPO
    config = json.loads((REPO / "model_zoo" / "hf" / "llama-3.1-8b.json").read_text())
    config.update(hidden_size=1024, intermediate_size=4096, num_hidden_layers=4,
                  num_attention_heads=8, num_key_value_heads=8)
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = tmp_path / "spec.yaml"
    spec.write_text("model: {hf_config: config.json}\n"
                    "cluster: {nodes: 1, gpus_per_node: 8, device: H100-SXM-80GB}\n"
                    "training: {global_batch_size: 16, seq_len: 2048, dtype: bf16}\n"
                    "search: {pp_degrees: [1], tp_degrees: [1, 2]}\n")
    code, text = run_cli("solve", spec, "--runnable-by", "torchtitan", "--out", tmp_path / "out")
    assert code == 0, text
    assert "--runnable-by torchtitan: the plans follow torchtitan's parallelism rules, but " \
           "autopar's torchtitan export has no model for" in " ".join(text.split())
    code, text = run_cli("export", tmp_path / "out" / "plan.json", "--to", "torchtitan")
    assert code == 2 and "registers no model flavour" in text
    assert "the plan was searched for torchtitan already" in text and "solve again" not in text


QWEN3_4B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 2560,
            "intermediate_size": 9728, "num_hidden_layers": 36, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
            "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
            "tie_word_embeddings": True, "hidden_act": "silu"}   # Qwen/Qwen3-4B config.json


@pytest.mark.parametrize("framework", ["megatron", "deepspeed", "torchtitan"])
def test_the_uniform_warm_start_is_a_plan_the_target_runs(framework, tmp_path):
    """QA round 5 (H2): Qwen3-4B at 64k tokens on 8 A100-40GB. The best uniform plan,
    the solver's first incumbent and the answer when nothing beats it within the gap,
    took the embedding's and head's first option (ZeRO-0: they have no recomputation
    to match) beside ZeRO-1/2 blocks; solve certified it 'runnable by' the target and
    the target's exporter refused it. Oracle: the exporter accepts the answer, and
    every uniform candidate kept keeps the target's one-value-per-dimension rule."""
    from autopar_opt.search.baselines import ClosestIndex, runnable_choice
    from autopar_opt.spec import load_spec
    (tmp_path / "qwen3-4b.json").write_text(json.dumps(QWEN3_4B))
    # full recomputation only: with none beside it the megatron answer is now a block plan
    # (Megatron block method, N = 14 of 36, one stage, 306.0 s against 349.8 s) with dp = 1,
    # where no ZeRO level is left to keep uniform
    (tmp_path / "s.yaml").write_text(
        "model: {hf_config: qwen3-4b.json}\ncluster: {zoo: 1x8-a100-40}\n"
        f"training: {{global_batch_size: 64, seq_len: 65536}}\ntarget: {framework}\n"
        + ("search: {recompute: [full]}\n" if framework == "megatron" else ""))
    spec = load_spec(tmp_path / "s.yaml")
    result = run_search(spec.graph, spec.cluster, spec.training, spec.space, default_params(),
                        SearchOptions(time_limit_s=60))
    plan = result.plan
    export_plan(plan, spec.graph, spec.cluster, spec.training, framework)   # raises if refused
    zeros = {s.zero for layer, s in zip(spec.graph.layers, (x for st in plan.stages
                                                          for x in st.strategies))
             if layer.params > 0}
    assert len(zeros) == 1
    # the closest option to the answer's block strategy on the embedding keeps its ZeRO level
    tables = build_cost_tables(spec.graph, spec.cluster, spec.training, spec.space,
                               default_params(), pp=1, microbatches=plan.microbatches,
                               schedule=plan.schedule)
    embed, base = tables.strategies[0], plan.stages[0].strategies[1]
    assert base.zero > 0 and embed[ClosestIndex(embed)(base)].zero == base.zero
    picks = [ClosestIndex(strats)(base) for strats in tables.strategies]
    assert runnable_choice(tables, tuple(picks))
    mixed = list(picks)
    mixed[0] = next(k for k, s in enumerate(embed) if s.layout == base.layout and s.zero != base.zero)
    assert not runnable_choice(tables, tuple(mixed))
    # a warm-start plan that breaks the rule is not the target search's incumbent
    from autopar_opt.search.engine import runs_plan
    assert runs_plan(spec.space.runs_on, plan, spec.graph) and runs_plan(None, plan, spec.graph)
    first = plan.stages[0]
    broken = replace(plan, stages=[replace(first, strategies=[embed[mixed[0]]] + first.strategies[1:])]
                     + plan.stages[1:])
    assert not runs_plan(spec.space.runs_on, broken, spec.graph)
    # and given as the search's warm start, the answer is still one the target runs
    again = run_search(spec.graph, spec.cluster, spec.training, spec.space, default_params(),
                       SearchOptions(time_limit_s=60), incumbent=broken)
    assert runs_plan(spec.space.runs_on, again.plan, spec.graph)
