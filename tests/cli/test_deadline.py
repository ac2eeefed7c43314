"""Issue 15: every phase of the DP honours its deadline, and a DP cut short still
answers with a feasible plan and a sound bound.

No timed assertion: the deadline is driven by a fake clock (the DP asks
``autopar_opt.solvers.dp.common.past``, which reads ``common.time.monotonic``), so
a run can be cut after exactly ``k`` clock readings, in every phase (the
bisection of the bottleneck floor, the completion bounds, the speculative,
beam and exact passes). Oracles: the uncut DP's optimum (tied to brute force
and the MILP by tests/differential/test_dp_bruteforce.py and tests/unit/solvers/test_dp.py): every cut
run's lower bound is at most that optimum, its plan fits and ``evaluate(plan)``
equals its value; the least-memory plan's peak equals ``least_memory`` (the
exact min-max partition).
"""

from __future__ import annotations

import math
import time

import pytest

from autopar_opt.core.result import Termination
from autopar_opt.cost.context import user_reserve_for
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.ir.hardware import GIB
from autopar_opt.search.engine import SearchOptions, run_search
from autopar_opt.solvers.dp import chain, common, solve_dp, stages
from autopar_opt.solvers.dp.common import fits, iteration_time, least_memory, least_memory_plan, stage_terms
from autopar_opt.spec import load_spec
from autopar_opt.model_zoo.synthetic import random_chain, small_cluster
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training
from support import paths

ROOT = paths.REPO
SPACE = SearchSpace(zero_levels=(0, 3), sequence_parallel=(False, True),
                    recompute=(Recompute.none, Recompute.full))


class FakeClock:
    """``monotonic()`` reads 0 for the first ``k`` calls, then +inf (every deadline passed)."""

    def __init__(self, k: float) -> None:
        self.k, self.calls = k, 0

    def monotonic(self) -> float:
        self.calls += 1
        return 0.0 if self.calls <= self.k else math.inf


def _tables(seed: int, n: int = 6, pp: int = 2, c: int = 4, factor: float = 1.3):
    """A random chain whose capacity is ``factor`` × the least memory any plan needs."""
    graph, cluster = random_chain(seed, n), small_cluster(2, 4)
    training = Training(global_batch_size=8 * c, seq_len=1024)
    tables = build_cost_tables(graph, cluster, training, SPACE, default_params(), pp, c,
                               Schedule.one_f_one_b)
    cap = least_memory(tables) / GIB * factor
    training = Training(global_batch_size=8 * c, seq_len=1024,
                        memory_reserve_gib=user_reserve_for(cap, cluster.device.hbm_gib, default_params()))
    return (build_cost_tables(graph, cluster, training, SPACE, default_params(), pp, c,
                              Schedule.one_f_one_b), graph, cluster, training)


@pytest.mark.parametrize("seed", range(12))
def test_least_memory_plan_reaches_the_least_memory(seed):
    tables, graph, cluster, training = _tables(seed, n=5 + seed % 4, pp=[1, 2, 4][seed % 3],
                                               factor=[0.9, 1.0001, 1.5][seed // 3 % 3])
    plan = least_memory_plan(tables)
    need = least_memory(tables)
    if need > tables.capacity_bytes * (1 + 1e-12):
        assert plan is None
        return
    assert plan is not None and fits(tables, plan)
    assert max(stage_terms(tables, plan)[3]) == pytest.approx(need, rel=1e-12)
    assert sorted(set(plan.stage)) == list(range(tables.pp))       # every stage used, in order
    assert plan.stage == sorted(plan.stage)
    metrics = evaluate(tables.plan_of(plan), graph, cluster, training)
    assert metrics.feasible
    assert metrics.iteration_time_s == pytest.approx(iteration_time(tables, plan), rel=1e-9)


@pytest.mark.parametrize("decomposition", [True, False])
@pytest.mark.parametrize("seed", [2, 3])
def test_a_dp_cut_in_any_phase_keeps_a_feasible_plan_and_a_sound_bound(seed, decomposition, monkeypatch):
    """With the stage decomposition (issue 18: its plan is the first incumbent, built
    before any pass) and without it (as when its tables are too costly to build)."""
    if not decomposition:
        monkeypatch.setattr(stages, "MAX_ENTRIES", 0)
    tables, graph, cluster, training = _tables(seed, n=5)
    full = solve_dp(tables)
    assert full.termination is Termination.optimal
    counting = FakeClock(math.inf)
    monkeypatch.setattr(common, "time", counting)
    assert solve_dp(tables, 1e6).termination is Termination.optimal
    total = counting.calls                       # clock readings of an uncut run
    cuts = sorted(set(range(0, total, max(1, total // 10))) | set(range(max(0, total - 4), total)))
    seen = set()
    for k in cuts:
        monkeypatch.setattr(common, "time", FakeClock(k))
        res = solve_dp(tables, 1e6)
        assert res.has_solution, (k, res.message)
        assert fits(tables, res.solution)
        metrics = evaluate(tables.plan_of(res.solution), graph, cluster, training)
        assert metrics.feasible
        assert metrics.iteration_time_s == pytest.approx(res.primal, rel=1e-9)
        assert res.lower_bound <= full.primal * (1 + 1e-9), (k, res.lower_bound, full.primal)
        assert res.primal >= full.primal * (1 - 1e-9)
        if res.termination is Termination.optimal:
            assert res.primal == pytest.approx(full.primal, rel=1e-9)
        else:
            assert res.termination is Termination.feasible and "time limit" in res.message
            seen.add("least-memory" if "least-memory plan" in res.message
                     else "decomposition" if "stage decomposition" in res.message else "beam")
    # the cuts reached the fallback (cut before any plan: with the decomposition, while it is
    # built) and the first incumbent: the decomposition's plan when it has one that fits with
    # its working sets (it packs stored memory only), else a beam pass's
    monkeypatch.setattr(common, "time", time)
    dp = chain.ChainDP(tables, None)
    chain.set_bottleneck_floor(dp, math.inf)
    first = "decomposition" if chain.stage_decomposition(dp)[0] is not None else "beam"
    assert {"least-memory", first} <= seen, seen


def test_the_first_beam_pass_reads_the_clock(monkeypatch):
    """The first beam pass (no incumbent yet) stops at its deadline: it used to run
    to its end whatever the time (issue 15: 1-3 s past a short limit on the largest
    models). Clock: the check before the pass passes, every later one has expired."""
    tables, *_ = _tables(1, n=8)
    dp = chain.ChainDP(tables, deadline=1e9)
    dp.root_bound()                              # bounds built before the clock runs out
    clock = FakeClock(1)
    monkeypatch.setattr(common, "time", clock)
    assert chain._incumbent(tables, 4, dp, restricted=False) == (None, math.inf)
    assert clock.calls >= 2                      # the pass itself asked the clock
    monkeypatch.setattr(common, "time", FakeClock(math.inf))
    inc, ub = chain._incumbent(tables, 4, dp, restricted=False)   # with time, it finds a plan
    assert inc is not None and math.isfinite(ub)


@pytest.mark.parametrize("target", ["none", "runtime"])
def test_an_expired_deadline_on_a_frontier_model_still_answers(target, monkeypatch):
    """Llama-3.1-405B on 16,384 H100 (pp = 16, 32 micro-batches: 128 layers) with a
    deadline that has already passed: no pass runs, the answer is the least-memory
    plan (it fits), the bound is the simple one (proven), and the termination says the
    time limit cut it (before issue 15 this took 2-4 s: bounds and the first beam
    pass ran whatever the deadline). Under the runtime's target (Megatron: one
    setting for the whole model) the answer is a runnable least-memory plan and the
    bound the least of the key families' proven bounds (each at least the simple one)."""
    import dataclasses

    from autopar_opt.ir.target import Target
    from autopar_opt.solvers.dp.uniform import key_bound, key_families

    spec = load_spec(ROOT / "examples" / "llama31_405b_16384_h100.yaml")
    space = spec.space if target == "runtime" else dataclasses.replace(
        spec.space, target=Target("none", "", "test"))
    tables = build_cost_tables(spec.graph, spec.cluster, spec.training, space,
                               spec.cost_params, 16, 32, Schedule.one_f_one_b)
    assert (tables.uniform_keys is not None) == (target == "runtime")
    monkeypatch.setattr(common, "time", FakeClock(0))
    res = solve_dp(tables, 1e-9)
    assert res.termination is Termination.feasible and "least-memory plan" in res.message
    assert fits(tables, res.solution) and tables.runnable(res.solution)
    simple = common.simple_lower_bound(tables)
    if target == "none":
        assert res.lower_bound == pytest.approx(simple, rel=1e-12)
    else:
        families = key_families(tables)
        assert res.lower_bound == pytest.approx(min(key_bound(tables, f.allowed) for f in families),
                                                rel=1e-12)
        assert res.lower_bound >= simple * (1 - 1e-12)
    assert res.lower_bound <= res.primal


@pytest.mark.parametrize("solver", ["dp", "highs"])
def test_a_search_whose_dp_deadlines_all_expire_still_certifies(solver, monkeypatch):
    """Every DP deadline already passed (the DP warm start for HiGHS, the whole
    solver for ``dp``): the search still returns a plan whose evaluate() is its
    value, with a bound at most the optimum of an uncut search."""
    spec = load_spec(ROOT / "tests" / "data" / "specs" / "good" / "spec.yaml")
    args = (spec.graph, spec.cluster, spec.training, spec.space, spec.cost_params)
    uncut = run_search(*args, SearchOptions(solver=solver, time_limit_s=60, rel_gap=0.0))
    assert uncut.status(0.0) == "optimal"
    monkeypatch.setattr(common, "time", FakeClock(0))
    cut = run_search(*args, SearchOptions(solver=solver, time_limit_s=60, rel_gap=0.0))
    assert cut.plan is not None
    metrics = evaluate(cut.plan, spec.graph, spec.cluster, spec.training, spec.cost_params)
    assert metrics.feasible
    assert metrics.iteration_time_s == pytest.approx(cut.certificate.primal, rel=1e-9)
    assert cut.certificate.lower_bound <= uncut.certificate.primal * (1 + 1e-9)
    assert cut.certificate.primal >= uncut.certificate.primal * (1 - 1e-9)
    if solver == "dp":   # nothing but the cut DP ran: its least-memory plans, no optimality proof
        assert cut.status(0.0) == "feasible"
        assert any("least-memory plan" in (r.message or "") for r in cut.certificate.configurations)
    else:                # the MIP after the cut warm start proves the optimum
        assert cut.status(0.0) == "optimal"
        assert cut.certificate.primal == pytest.approx(uncut.certificate.primal, rel=1e-9)
