"""End-to-end search: global optimum = brute force over every configuration,
certificate properties, exit codes and the plan.json contract."""

from __future__ import annotations

import json

import pytest

from support.bruteforce import brute_force

from autopar_opt.cost.context import user_reserve_for
from autopar_opt.cost.params import default_params
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.search.configs import outer_configs
from autopar_opt.search.engine import SearchOptions, run_search
from autopar_opt.model_zoo.synthetic import random_chain, random_dag, small_cluster
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training
from support import paths

ROOT = paths.REPO
SPACE = SearchSpace(zero_levels=(0, 3), recompute=(Recompute.none, Recompute.full),
                    sequence_parallel=(False,), schedules=(Schedule.gpipe, Schedule.one_f_one_b))


def global_brute_force(graph, cluster, training, space):
    best = None
    for cfg in outer_configs(graph, cluster, training, space):
        res = brute_force(graph, cluster, training, space, cfg.pp, cfg.microbatches, cfg.schedule)
        if res and (best is None or res[0] < best):
            best = res[0]
    return best


@pytest.mark.parametrize("solver", ["highs", "dp"])
@pytest.mark.parametrize("seed", range(6))
def test_search_finds_the_global_optimum(seed, solver):
    """Over every (pp, c, schedule): search primal == brute-force global optimum;
    global lower bound ≤ primal ≤ every configuration's primal; evaluate(plan) == primal."""
    graph = (random_chain if seed % 2 else random_dag)(100 + seed, 3)
    cluster = small_cluster(1, 2)
    params = default_params()
    cap = [40.0, 1.2][seed % 2]          # loose, tight (GiB of modelled bytes)
    training = Training(global_batch_size=4, seq_len=1024,
                        memory_reserve_gib=max(0.0, user_reserve_for(cap, 40.0, params)))
    result = run_search(graph, cluster, training, SPACE, params,
                        SearchOptions(solver=solver, time_limit_s=60, rel_gap=1e-9))
    oracle = global_brute_force(graph, cluster, training, SPACE)
    cert = result.certificate
    if oracle is None:
        assert result.plan is None and result.status(1e-9) == "infeasible"
        return
    assert cert.primal == pytest.approx(oracle, rel=1e-6)
    assert evaluate(result.plan, graph, cluster, training, params).iteration_time_s == pytest.approx(cert.primal, rel=1e-9)
    exact_dp = solver == "dp" and not graph.is_chain() and any(r.status == "heuristic" for r in cert.configurations)
    if not exact_dp:
        assert cert.lower_bound <= cert.primal * (1 + 1e-9)
    for rec in cert.configurations:
        if rec.primal is not None:
            assert cert.lower_bound <= rec.primal * (1 + 1e-9)
            assert rec.primal >= cert.primal * (1 - 1e-9)


def test_infeasible_search_is_proven_and_explained(tmp_path):
    """A 1 GiB device budget cannot hold any plan: every configuration proven
    infeasible, exit code 3, and the document gives the least memory needed."""
    from autopar_opt.cli.solve import solve_command
    spec = tmp_path / "spec.yaml"
    spec.write_text((ROOT / "examples" / "quickstart.yaml").read_text()
                    .replace("memory_reserve_gib: 0.0", "memory_reserve_gib: 79.2"))
    code = solve_command(str(spec), out_dir=str(tmp_path / "out"), quiet=True)
    assert code == 3
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert doc["status"] == "infeasible" and doc["plan"] is None
    assert doc["infeasibility"]["least_memory_gib"] > doc["infeasibility"]["capacity_gib"]
    assert doc["certificate"]["lower_bound"] == "inf"
    assert doc["certificate"]["exact"] is True          # the +inf bound is a proof
    assert (tmp_path / "out" / "report.html").exists()
    html = (tmp_path / "out" / "report.html").read_text()
    assert "Proven infeasible" in html and "NOT proven" not in html


def test_infeasible_summary_says_proven_infeasible(tmp_path, capsys):
    """The console summary of a proven-infeasible search says so, without the
    'no proof' note of a search that merely found no plan."""
    from autopar_opt.cli.solve import solve_command
    spec = tmp_path / "spec.yaml"
    spec.write_text((ROOT / "examples" / "quickstart.yaml").read_text()
                    .replace("memory_reserve_gib: 0.0", "memory_reserve_gib: 79.2"))
    assert solve_command(str(spec)) == 3
    out = capsys.readouterr().out
    assert "proven infeasible" in out and "no proof" not in out


def test_solve_json_contract(tmp_path, capsys):
    """`autopar solve --json` prints the document with the keys the issue requires."""
    from autopar_opt.cli.solve import solve_command
    code = solve_command(str(ROOT / "examples" / "quickstart.yaml"), json_output=True,
                         out_dir=str(tmp_path), export_models=True)
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    for key in ("iteration_time_s", "samples_per_s", "tokens_per_s", "mfu", "peak_memory_gib"):
        assert key in doc["metrics"]
    for key in ("primal", "lower_bound", "gap", "configurations"):
        assert key in doc["certificate"]
    for rec in doc["certificate"]["configurations"]:
        assert {"pp", "microbatches", "schedule", "status", "primal", "lower_bound", "time_s",
                "pruned_by"} <= rec.keys()
        if rec["status"] == "pruned":
            assert rec["pruned_by"] and rec["lower_bound"] >= doc["certificate"]["primal"]
    solved = [r for r in doc["certificate"]["configurations"] if r["model_hash"]]
    assert solved and all(len(r["model_hash"]) == 64 for r in solved)
    assert list((tmp_path / "models").glob("*.mps"))
    # each recorded hash is an exported file's (QA round 9: the price-of-runnability search
    # wrote its free-space model over the file under the same name)
    import hashlib
    files = {hashlib.sha256(f.read_bytes()).hexdigest() for f in (tmp_path / "models").glob("*.mps")}
    assert {r["model_hash"] for r in solved} <= files
    assert doc["solver"]["name"] == "highs" and doc["solver"]["version"]
    assert doc["metrics"]["iteration_time_s"] == pytest.approx(doc["certificate"]["primal"])
    names = [b["name"] for b in doc["baselines"]]
    assert names == ["pure data parallelism", "best uniform Megatron-style", "user plan"]
    for b in doc["baselines"]:
        if b["metrics"] and b["metrics"]["feasible"]:
            assert b["metrics"]["iteration_time_s"] >= doc["metrics"]["iteration_time_s"] * (1 - 1e-9) \
                or b["name"] == "user plan"


def test_time_limit_keeps_a_valid_certificate():
    """With almost no time the search still returns a valid (possibly loose) bound."""
    graph = random_chain(7, 4)
    cluster = small_cluster(1, 2)
    training = Training(global_batch_size=4, seq_len=1024)
    result = run_search(graph, cluster, training, SPACE, default_params(),
                        SearchOptions(solver="highs", time_limit_s=1e-6))
    cert = result.certificate
    oracle = global_brute_force(graph, cluster, training, SPACE)
    assert cert.lower_bound <= oracle * (1 + 1e-9)
    assert all(r.status in ("not_solved", "pruned", "infeasible", "optimal", "feasible")
               for r in cert.configurations)


@pytest.mark.parametrize("solver", ["dp", "highs"])
def test_second_pass_closes_configurations_the_first_pass_cut_short(monkeypatch, solver):
    """Starve the first pass (every configuration gets 0 s, so none is solved):
    the time left over then goes to the configurations left open, and the search proves
    the same optimum as an unhurried search (itself tied to brute force above);
    the re-solved records say so."""
    from autopar_opt.search import engine
    graph = random_chain(5, 10)
    cluster = small_cluster(1, 4)
    training = Training(global_batch_size=16, seq_len=1024)
    options = SearchOptions(solver=solver, time_limit_s=60, rel_gap=1e-9)
    reference = run_search(graph, cluster, training, SPACE, default_params(), options).certificate
    monkeypatch.setattr(engine, "_time_share", lambda remaining, rest, incumbent: 0.0)
    cert = run_search(graph, cluster, training, SPACE, default_params(), options).certificate
    assert any("left over" in r.message for r in cert.configurations)
    assert cert.primal == pytest.approx(reference.primal, rel=1e-9)
    assert cert.gap <= 1e-9 and reference.gap <= 1e-9


def test_configurations_within_the_target_gap_are_recorded_not_solved():
    """A configuration whose bound is within the target gap of the incumbent (and below
    it) cannot move the certificate's gap above the target: the search records its bound
    and does not solve it (Search.within_gap, called by Search.solve). With an incumbent
    placed just above the configurations' bounds, exactly those within 30% are left so;
    with a 0% target none is; a bound at or above the incumbent is left to the pruning."""
    import math
    from types import SimpleNamespace

    from autopar_opt.core.bounds import Status
    from autopar_opt.search.engine import Search

    graph = random_chain(0, 6)
    cluster = small_cluster(2, 4)
    training = Training(global_batch_size=16, seq_len=1024)
    space = SearchSpace(zero_levels=(0, 1), recompute=(Recompute.none, Recompute.full))
    for gap in (0.3, 0.0):
        search = Search(graph, cluster, training, space, default_params(),
                        SearchOptions(solver="highs", time_limit_s=60, rel_gap=gap))
        bounds = sorted(b.value for _, _, b in search.prepared if math.isfinite(b.value))
        inc = (bounds[0] + bounds[-1]) / 2              # some bounds below it, some above
        search.best = (SimpleNamespace(iteration_time_s=inc), None, None)
        search.tightened = {cfg for cfg, _, _ in search.prepared}   # keep the bounds as built
        skipped = 0
        for k, (cfg, _, bound) in enumerate(search.prepared):
            within = math.isfinite(bound.value) and inc * (1 - gap) <= bound.value < inc
            rec = search.within_gap(k)
            assert (rec is not None) == within, (cfg.label(), bound.value, inc)
            if within:
                out = search.solve(k, 10.0)           # recorded, not solved
                assert out.status is Status.not_solved and out.primal is None
                assert out.lower_bound == bound.value and out.time_s == 0.0
                assert "within the target gap" in out.message
                skipped += 1
        assert (skipped > 0) == (gap > 0), (gap, skipped, bounds, inc)


def test_a_search_stopped_by_the_memory_limit_says_so(tmp_path, capsys):
    """QA round 9: models over the --memory-limit budget left no plan, and the summary said
    "no plan was found within the time limit" with the advice to raise --time-limit."""
    from autopar_opt.cli.solve import solve_command
    code = solve_command(str(ROOT / "examples" / "quickstart.yaml"), solver="highs",
                         memory_limit_gib=1e-5, warm_start=False, out_dir=str(tmp_path))
    out = " ".join(capsys.readouterr().out.split())
    assert code == 4
    assert "was not built (the MILP" in out and "over the memory budget" in out
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert doc["infeasibility"]["advice"][0].startswith("raise --memory-limit")
    assert "within the time limit" not in doc["infeasibility"]["reason"]


def test_runnable_by_torchtitan_0_2_says_what_torchtitan_says(capsys):
    """QA round 9: --runnable-by torchtitan-0.2 said neither the runtime it is priced with
    nor that the export has no torchtitan model for gpt-1.7b; torchtitan said both."""
    from autopar_opt.cli.solve import solve_command
    said = {}
    for target in ("torchtitan", "torchtitan-0.2"):
        assert solve_command(str(ROOT / "examples" / "quickstart.yaml"), solver="dp",
                             json_output=True, runnable_by=target) == 0
        said[target] = json.loads(capsys.readouterr().out)["notices"]
    for target, notices in said.items():
        assert any("priced with training.runtime megatron-core" in n for n in notices), target
        assert any("torchtitan export has no model for gpt-1.7b" in n for n in notices), target


def test_no_warm_start_says_when_no_mip_ran(capsys):
    """QA round 9: --solver auto --no-warm-start met the gap with the route's bound and
    solved no MIP, while the help promises an independent MIP check: said now."""
    from autopar_opt.cli.solve import solve_command
    spec = str(ROOT / "examples" / "quickstart.yaml")
    assert solve_command(spec, solver="auto", json_output=True, warm_start=False) == 0
    doc = json.loads(capsys.readouterr().out)
    assert any(n.startswith("--no-warm-start: no MIP was solved") for n in doc["notices"])
    assert solve_command(spec, solver="highs", json_output=True, warm_start=False) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not any("no MIP was solved" in n for n in doc["notices"])
