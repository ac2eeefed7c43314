"""The hierarchical planner (``hp``, Mirhoseini et al. 2018): its pricing is the evaluator's,
it is deterministic for a seed, reaches the brute-force optimum of tiny instances, and says
"none found" instead of crashing where (almost) nothing is feasible.

Oracles: :func:`autopar_opt.placement.evaluate.evaluate_placement` on random placements
(the planner's own feasibility and max-load), brute force over every assignment
(tests/support/placement_cases.py), a hand-built instance with exactly one feasible
placement."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the hierarchical planner needs the learn extra")

from autopar_opt.learn.base import run_searcher  # noqa: E402
from autopar_opt.learn.hp import HPConfig, HPTask, hp_search  # noqa: E402
from autopar_opt.learn.placement_space import PlacementSpace  # noqa: E402
from autopar_opt.placement import DeviceType, PlacementProblem, evaluate_placement  # noqa: E402
from support.cli import run_cli  # noqa: E402
from support.paths import DATA  # noqa: E402
from support.placement_cases import brute_force, random_problem  # noqa: E402

BERT24 = DATA / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"
SMALL = HPConfig(placer_hidden=32, grouper_hidden=16, device_embed=8)


@pytest.mark.parametrize("seed, contiguous", [(1, True), (3, True), (4, False), (7, True)])
def test_planner_pricing_is_the_evaluators(seed, contiguous):
    """Feasibility (memory, device support, acyclic quotient) and max-load of random
    placements agree with evaluate_placement."""
    p = random_problem(seed, n=6, training=seed == 7)
    task = HPTask(p, contiguous)
    rng = np.random.default_rng(seed)
    dev = rng.integers(0, task.graph.num_devices, size=(300, task.graph.num_units))
    value, _, ok, why = task.check(dev)
    assert 0 < ok.sum() < len(dev) or not contiguous      # the sample exercises both sides
    for b in range(len(dev)):
        m = evaluate_placement(p, task.graph.node_assignment(dev[b]), objective="max-load",
                               contiguous=contiguous)
        assert bool(ok[b]) == m.feasible, (b, m.violations)
        if m.feasible:
            assert value[b] == pytest.approx(m.value, rel=1e-9)


@pytest.mark.parametrize("seed", [1, 2, 3, 5, 6])
def test_planner_on_tiny_instances_against_brute_force(seed):
    """Seed 0's run reaches the brute-force optimum of four of these five instances in 400
    samples; on random_problem(5) it stays at 1.164x. The published method guarantees
    nothing, so every instance is also held to a check that can fail: better than the mean
    of uniformly random feasible placements."""
    p = random_problem(seed, n=5)
    opt = brute_force(p, "max-load", True)
    res = run_searcher("hp", PlacementSpace(p), 120.0, seed=0, max_samples=400)
    assert res.feasible and res.plan is not None
    m = evaluate_placement(p, res.plan["assignment"], objective="max-load", contiguous=True)
    assert m.feasible and res.value == pytest.approx(m.value, rel=1e-12)
    assert res.trace[-1].best == pytest.approx(res.value, rel=1e-9)
    assert res.samples == 400 and res.info["iterations"] >= 1
    task = HPTask(p, True)
    dev = np.random.default_rng(0).integers(0, task.graph.num_devices,
                                            size=(4000, task.graph.num_units))
    value, _, ok, _ = task.check(dev)
    assert res.value < value[ok].mean()
    if seed == 5:
        assert res.value == pytest.approx(1.164 * opt, rel=1e-3)
    else:
        assert res.value == pytest.approx(opt, rel=1e-9)


def test_same_seed_same_run():
    space = PlacementSpace(random_problem(2, n=6))
    runs = [hp_search(space, 120.0, seed=5, max_samples=64, config=SMALL) for _ in range(2)]
    assert [(p.samples, p.best) for p in runs[0].trace[:-1]] == \
        [(p.samples, p.best) for p in runs[1].trace[:-1]]
    assert runs[0].value == runs[1].value
    assert (runs[0].plan or {}).get("assignment") == (runs[1].plan or {}).get("assignment")
    other = hp_search(space, 120.0, seed=6, max_samples=64, config=SMALL)
    assert other.samples == 64


def _one_feasible(memory: float) -> PlacementProblem:
    """a -> b -> c; ``a`` runs on the CPU only, ``b`` on type A only, ``c`` on type B only,
    one device of each type: the one feasible placement is (cpu, A, B), if memory allows."""
    inf = float("inf")
    return PlacementProblem(
        name="one_feasible", node_names=["a", "b", "c"], node_ids=[0, 1, 2],
        edges=np.array([[0, 1], [1, 2]]),
        time={"A": np.array([inf, 2.0, inf]), "B": np.array([inf, inf, 3.0]),
              "cpu": np.array([1.0, inf, inf])},
        size_bytes=np.array([1.0, 1.0, 1.0]), comm=np.array([0.5, 0.5, 0.5]),
        color=np.array([0, 1, 2]), is_backward=np.zeros(3, bool),
        device_types=[DeviceType("A", 1, memory), DeviceType("B", 1, memory),
                      DeviceType("cpu", 1, inf, False)])


@pytest.mark.parametrize("rule", ["fixed", "graded"])
def test_one_feasible_placement_is_found_or_none_is_reported(rule):
    p = _one_feasible(memory=1.0)
    res = hp_search(PlacementSpace(p), 120.0, seed=0, max_samples=200, infeasible=rule)
    only = evaluate_placement(p, [2, 0, 1], objective="max-load", contiguous=True)
    assert only.feasible
    if res.plan is None:
        assert not res.feasible and res.value is None
    else:
        assert res.feasible and res.plan["assignment"] == [2, 0, 1]
        assert res.value == pytest.approx(only.value, rel=1e-12)
    assert res.info["feasible_samples"] + sum(res.info["infeasible"].values()) >= res.samples


def test_nothing_feasible_says_none():
    res = hp_search(PlacementSpace(_one_feasible(memory=0.5)), 120.0, seed=0, max_samples=49)
    assert res.plan is None and res.value is None and not res.feasible
    # every sample breaks a rule: memory on an accelerator, or a unit where it cannot run
    assert res.info["feasible_samples"] == 0 and res.info["infeasible"]["memory"] > 0
    assert res.samples == 49          # the budget ends inside a batch
    # the counts are of the samples offered, not of the whole last batch (QA round 10:
    # 1,888 infeasible of 1,873 samples)
    assert all(n <= res.samples for n in res.info["infeasible"].values())


def test_bad_rule_and_layer_space_are_refused():
    with pytest.raises(ValueError, match="fixed' or 'graded"):
        hp_search(PlacementSpace(random_problem(1, n=4)), 1.0, infeasible="soft")
    with pytest.raises(ValueError, match="places operator graphs"):
        hp_search(object(), 1.0)


def test_cli_place_with_hp_writes_its_plan(tmp_path):
    out = tmp_path / "out"
    code, text = run_cli("place", BERT24, "--searcher", "hp", "--time-limit", "2", "--json",
                         "--out", out)
    assert code == 0, text
    block = json.loads(text)["searcher"]
    assert block["name"] == "hp" and block["info"]["groups"] == 32
    assert block["info"]["infeasible_reward_rule"] == "fixed"
    if block["value"] is not None:
        assert block["value"] >= block["lower_bound"] * (1 - 1e-9)
    doc = json.loads((out / "placement.json").read_text())
    assert doc["searcher"]["name"] == "hp" and doc["value"] is not None


def test_cli_solve_refuses_hp_cleanly():
    from support.paths import REPO

    code, text = run_cli("solve", REPO / "examples" / "quickstart.yaml", "--searcher", "hp")
    assert code == 2 and "--searcher = 'hp'" in text
    assert "it places operator graphs: autopar place" in text and "'anneal'" in text


def test_cli_place_refuses_a_searcher_it_does_not_run_in_the_common_format():
    """``place --searcher dqn`` (or a typo) is an option error with the closest name and
    the --json error object (session 24: a bare 'error:' line that listed dqn)."""
    import json as _json

    from support.paths import DATA

    graph = DATA / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"
    code, text = run_cli("place", graph, "--searcher", "dqn")
    assert code == 2 and "--searcher = 'dqn'" in text and "autopar solve" in text
    code, text = run_cli("place", graph, "--searcher", "anneall", "--json")
    assert code == 2 and "did you mean 'anneal'?" in text
    doc = _json.loads(text[text.index("{"):text.rindex("}") + 1])
    assert doc["error"]["problems"][0]["key"] == "--searcher"
