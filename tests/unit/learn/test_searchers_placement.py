"""Searchers on operator-graph placement (the public instances vendored under
tests/data/placement): feasible contiguous plans priced by evaluate_placement,
the searchers' own price equal to it, and the published optimum of the
smallest instance reached with a fixed seed."""

from __future__ import annotations


import numpy as np
import pytest

from autopar_opt.learn.base import run_searcher
from autopar_opt.learn.placement_space import PlacementSpace
from autopar_opt.placement import evaluate_placement, load_public
from support import paths

DATA = paths.DATA / "placement" / "throughput"
#: contiguous max-load optimum (Tarnawski et al. 2020; data README), to ~1e-4 relative
BERT24_OPT = 17.7899


@pytest.fixture(scope="module")
def bert24():
    return PlacementSpace(load_public(DATA / "LayerGraphs_bert24_inference.json"))


@pytest.fixture(scope="module")
def bert_l3_training():
    return PlacementSpace(load_public(DATA / "OperatorGraphs_bert_l-3_training.json"))


def test_table_price_equals_evaluate_placement_on_random_moves(bert_l3_training):
    space = bert_l3_training
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(30):
        cand = space.random_candidate(rng)
        for _ in range(int(rng.integers(0, 6))):
            cand = space.neighbour(cand, rng)
        priced = space.price(cand)
        m = evaluate_placement(space.problem, space.node_assignment(cand), contiguous=True)
        assert priced.time_s == pytest.approx(m.value, rel=1e-9)
        assert priced.feasible == m.feasible
        seen.add(priced.feasible)
    assert seen == {True, False}      # both kinds were exercised


@pytest.mark.parametrize("name, samples", [("random", 300), ("anneal", 300)])
def test_searchers_return_feasible_placements_priced_by_evaluate(name, samples, bert_l3_training):
    space = bert_l3_training
    res = run_searcher(name, space, 120.0, seed=0, max_samples=samples)
    m = evaluate_placement(space.problem, res.plan["assignment"], contiguous=True)
    assert res.feasible and m.feasible and m.contiguous
    assert res.value == pytest.approx(m.value, rel=1e-12)
    assert res.trace[-1].best == pytest.approx(res.value, rel=1e-9)


def test_anneal_reaches_the_published_optimum_of_bert24(bert24):
    res = run_searcher("anneal", bert24, 120.0, seed=0, max_samples=3000)
    assert res.value == pytest.approx(BERT24_OPT, rel=1e-4)


def test_gdp_on_a_placement_graph_returns_a_contiguous_plan(bert24):
    pytest.importorskip("torch", reason="GDP needs the learn extra (PyTorch)")
    res = run_searcher("gdp", bert24, 120.0, seed=0, max_samples=64)
    m = evaluate_placement(bert24.problem, res.plan["assignment"], contiguous=True)
    assert res.feasible and m.feasible
    assert res.value == pytest.approx(m.value, rel=1e-12)
    assert res.value >= BERT24_OPT * (1 - 1e-4)


def test_dqn_refuses_placement_with_a_reason(bert24):
    pytest.importorskip("torch", reason="DQN needs the learn extra (PyTorch)")
    with pytest.raises(ValueError, match="layer-strategy space"):
        run_searcher("dqn", bert24, 1.0, seed=0)


def test_place_cli_reports_the_searcher_against_the_proven_bound():
    from typer.testing import CliRunner

    from autopar_opt.cli.commands import app

    result = CliRunner().invoke(app, ["place", str(DATA / "LayerGraphs_bert24_inference.json"),
                                      "--searcher", "anneal", "--budget-s", "1", "--seed", "1",
                                      "--json"])
    assert result.exit_code == 0, result.output
    import json

    doc = json.loads(result.stdout)
    block = doc["searcher"]
    assert block["name"] == "anneal" and block["seed"] == 1
    problem = load_public(DATA / "LayerGraphs_bert24_inference.json")
    m = evaluate_placement(problem, block["plan"]["assignment"], contiguous=True)
    assert block["value"] == pytest.approx(m.value, rel=1e-12)
    assert block["lower_bound"] == pytest.approx(doc["lower_bound"])
    assert block["value"] >= doc["lower_bound"] * (1 - 1e-9)
    assert doc["status"] == "optimal" and block["optimum"] == pytest.approx(doc["value"])


def test_searcher_plan_is_kept_when_the_exact_side_ends_worse(bert24):
    """An exact result that ran out of time (simulated: its plan twice as slow) is
    replaced by the searcher's better plan; the proven bound stays."""
    import dataclasses

    from autopar_opt.placement import solve_placement
    from autopar_opt.cli.place import keep_better

    exact = solve_placement(bert24.problem, objective="max-load", contiguous=True)
    timed_out = dataclasses.replace(exact, value=2 * exact.value, status="feasible")
    found = run_searcher("anneal", bert24, 120.0, seed=0, max_samples=3000)
    kept = keep_better(timed_out, found)
    assert kept.value == pytest.approx(found.value, rel=1e-12)
    assert kept.lower_bound == exact.lower_bound and kept.status == "optimal"
    assert kept.metrics.value == pytest.approx(found.value, rel=1e-12)
    assert "anneal plan" in kept.method
    assert keep_better(exact, found) is exact          # nothing better: unchanged


def test_place_cli_refuses_a_searcher_for_latency():
    from typer.testing import CliRunner

    from autopar_opt.cli.commands import app

    result = CliRunner().invoke(app, ["place", str(DATA / "LayerGraphs_bert24_inference.json"),
                                      "--objective", "latency", "--searcher", "anneal"])
    assert result.exit_code == 2
    assert "max-load only" in result.output
