"""``solve --runnable-by``: the search covers exactly the plans a framework can run.

Oracle for Megatron-LM and torchtitan: the union of the uniform choices the
framework accepts, each solved by brute force over every stage split
(tests/support/bruteforce.py, independent of the cost tables, the DP and the MIP); the
runnable search must find that optimum and prove it. DeepSpeed: its space is
the uniform partition, priced by evaluate() for every choice.
"""

from __future__ import annotations

import math

import pytest

from support.bruteforce import brute_force
from autopar_opt.cost.params import default_params
from autopar_opt.export import export_plan
from autopar_opt.export.deepspeed import uniform_partition
from autopar_opt.model_zoo.registry import build_model, get_cluster
from autopar_opt.search.configs import outer_configs
from autopar_opt.search.engine import SearchOptions, run_search
from autopar_opt.search.runnable import run_runnable_search, uniform_choices
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training

GRAPH = build_model("debug-moe", overrides={"num_layers": 2})
CLUSTER = get_cluster("debug-2x4")
TRAINING = Training(global_batch_size=8, seq_len=128)
SPACE = SearchSpace(pp_degrees=(1, 2), tp_degrees=(1, 2), zero_levels=(0, 1, 3),
                    recompute=(Recompute.none, Recompute.full), ep_degrees=(1, 2, 4),
                    schedules=(Schedule.one_f_one_b,), microbatches=(1, 2, 4))
OPTIONS = SearchOptions(solver="dp", time_limit_s=60, rel_gap=0.0)


def _oracle(framework: str) -> float:
    best = math.inf
    for choice in uniform_choices(framework, GRAPH, SPACE, TRAINING.seq_len):
        space = choice.restrict(SPACE)
        for cfg in outer_configs(GRAPH, CLUSTER, TRAINING, space):
            ref = brute_force(GRAPH, CLUSTER, TRAINING, space, cfg.pp, cfg.microbatches,
                              cfg.schedule)
            if ref is not None and export_ok(framework, ref[1]):
                best = min(best, ref[0])
    return best


def export_ok(framework, plan) -> bool:
    try:
        export_plan(plan, GRAPH, CLUSTER, TRAINING, framework)
        return True
    except ValueError:
        return False


@pytest.mark.parametrize("framework", ["megatron", "torchtitan"])
def test_runnable_optimum_equals_brute_force_and_exports(framework):
    res = run_runnable_search(framework, GRAPH, CLUSTER, TRAINING, SPACE, default_params(),
                              OPTIONS)
    assert res.plan is not None
    export_plan(res.plan, GRAPH, CLUSTER, TRAINING, framework)      # runnable
    assert res.metrics.iteration_time_s == pytest.approx(_oracle(framework), rel=1e-9)
    assert res.certificate.lower_bound == pytest.approx(res.metrics.iteration_time_s, rel=1e-9)
    free = run_search(GRAPH, CLUSTER, TRAINING, SPACE, default_params(), OPTIONS)
    assert free.metrics.iteration_time_s <= res.metrics.iteration_time_s * (1 + 1e-12)


def test_torchtitan_choices_exclude_what_it_cannot_run():
    choices = uniform_choices("torchtitan", GRAPH, SPACE, 128)
    assert choices and all(c.zero != 1 and (c.tp == 1 or c.sp) for c in choices)
    assert all(c.ep == 1 or c.zero >= 2 for c in choices)       # ep | dp_shard*cp, cp = 1


def test_deepspeed_is_exhaustive_over_the_uniform_partition():
    res = run_runnable_search("deepspeed", GRAPH, CLUSTER, TRAINING, SPACE, default_params(),
                              OPTIONS)
    export_plan(res.plan, GRAPH, CLUSTER, TRAINING, "deepspeed")
    sizes = [len(st.layers) for st in res.plan.stages]
    assert sizes == uniform_partition(len(GRAPH), res.plan.pp)
    assert res.certificate.exact and res.certificate.gap == 0.0
    assert all(r.exhaustive for r in res.certificate.configurations)


def test_deepspeed_enumeration_stops_at_the_time_limit():
    """The exhaustive DeepSpeed search prices configurations only while its time limit
    lasts (issue 15); the ones left out are unsolved, without a bound, so nothing is
    claimed for them."""
    from dataclasses import replace

    res = run_runnable_search("deepspeed", GRAPH, CLUSTER, TRAINING, SPACE, default_params(),
                              replace(OPTIONS, time_limit_s=0.0))
    records = res.certificate.configurations
    assert records and res.plan is None
    assert all(r.status == "not_solved" and r.lower_bound == -math.inf for r in records)
    assert not res.certificate.exact


def test_megatron_choices_past_the_time_limit_are_recorded_without_a_bound():
    from dataclasses import replace

    res = run_runnable_search("megatron", GRAPH, CLUSTER, TRAINING, SPACE, default_params(),
                              replace(OPTIONS, time_limit_s=0.0))
    records = res.certificate.configurations
    assert records and res.plan is None
    assert all(r.status == "not_solved" and r.lower_bound == -math.inf for r in records)


def test_stop_signal_in_a_megatron_choice_leaves_the_later_choices_unsolved():
    polls = []

    def should_stop() -> bool:       # the stop arrives once the first configuration is done
        polls.append(1)
        return len(polls) >= 2
    from dataclasses import replace

    res = run_runnable_search("megatron", GRAPH, CLUSTER, TRAINING, SPACE, default_params(),
                              replace(OPTIONS, should_stop=should_stop, stop_signal=lambda: 15))
    assert res.interrupted_by == 15 and res.status(0.0) == "interrupted"
    records = res.certificate.configurations
    assert records[0].status != "not_solved"         # solved before the stop
    first = records[0].message.split("]")[0]         # "[megatron: <first choice>"
    later = [r for r in records if not r.message.startswith(first)]
    assert later and all(r.status == "not_solved" and r.lower_bound == -math.inf for r in later)


def test_sigint_during_the_deepspeed_enumeration_writes_an_interrupted_plan(tmp_path, monkeypatch):
    """A real SIGINT while the second configuration is priced: exit 130, plan.json and
    the report written, status interrupted, the configurations from the second on
    unsolved without a bound, the answer (if any) the first configuration's plan."""
    import json
    import os
    import signal

    from autopar_opt.search import runnable
    from autopar_opt.cli.solve import solve_command

    calls = []
    real = runnable._price_config

    def price(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)     # handled at the next bytecode
        return real(*args, **kwargs)
    monkeypatch.setattr(runnable, "_price_config", price)
    spec = tmp_path / "spec.yaml"
    spec.write_text("model: {zoo: debug-moe, overrides: {num_layers: 2}}\n"
                    "cluster: {zoo: debug-2x4}\ntraining: {global_batch_size: 8}\n"
                    "search: {pp_degrees: [1, 2], tp_degrees: [1, 2], zero_levels: [0, 1], "
                    "recompute: [none], microbatches: [1, 2]}\nsolver: {name: dp}\n")
    out = tmp_path / "out"
    assert solve_command(str(spec), out_dir=str(out), quiet=True, runnable_by="deepspeed") == 130
    doc = json.loads((out / "plan.json").read_text())
    assert doc["status"] == "interrupted" and (out / "report.html").exists()
    first, *rest = doc["certificate"]["configurations"]
    assert first["status"] in ("optimal", "infeasible") and rest
    assert all(r["status"] == "not_solved" and "interrupted" in r["message"] for r in rest)
    if first["status"] == "optimal":
        assert doc["certificate"]["primal"] == pytest.approx(first["primal"], rel=1e-12)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_cli_solve_runnable_by_records_the_restriction(tmp_path):
    import json

    from typer.testing import CliRunner

    from autopar_opt.cli.commands import app

    spec = tmp_path / "spec.yaml"
    spec.write_text("model: {zoo: debug-moe, overrides: {num_layers: 2}}\n"
                    "cluster: {zoo: debug-2x4}\ntraining: {global_batch_size: 8}\n"
                    "search: {pp_degrees: [1, 2], tp_degrees: [1, 2], zero_levels: [0, 1], "
                    "recompute: [none], microbatches: [1, 2]}\nsolver: {name: dp}\n")
    res = CliRunner().invoke(app, ["solve", str(spec), "--runnable-by", "megatron", "--json",
                                   "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["search_space"]["runnable_by"] == "megatron"
    assert all("[megatron:" in r["message"] for r in doc["certificate"]["configurations"])
    res = CliRunner().invoke(app, ["export", str(tmp_path / "out" / "plan.json"), "--to",
                                   "megatron"])
    assert res.exit_code == 0 and "--tensor-model-parallel-size" in res.stdout
    res = CliRunner().invoke(app, ["solve", str(spec), "--runnable-by", "alpa"])
    assert res.exit_code == 2 and "unknown framework" in res.output
