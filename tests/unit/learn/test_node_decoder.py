"""The per-node decoder's space is the exact search's: on tiny instances every feasible
placement can be emitted and every emitted one is feasible (enumeration of all
assignments), so its ceiling is the proven optimum; pricing equals evaluate_placement."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from autopar_opt.learn.node_decoder import decode, price
from autopar_opt.learn.place_graph import lifo_topological_order, unit_graph
from autopar_opt.placement import DeviceType, PlacementProblem, evaluate_placement, solve_placement
from support.paths import DATA
from support.placement_cases import brute_force, random_problem

CASES = [(seed, training, hetero) for seed in range(8) for training, hetero in
         ((False, False), (True, False), (False, True))]


def _all_assignments(g) -> np.ndarray:
    m, D = g.time.shape
    return np.array(list(itertools.product(range(D), repeat=m)), dtype=np.int64).reshape(-1, m)


@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("seed, training, hetero", CASES)
def test_emitted_placements_are_exactly_the_feasible_ones(seed, training, hetero, contiguous):
    problem = random_problem(seed, n=4, training=training, hetero=hetero)
    g = unit_graph(problem, contiguous)
    every = _all_assignments(g)
    dec = decode(g, np.zeros(g.time.shape), forced=every)
    value, _ = price(g, every)
    feasible = []
    for b, dev in enumerate(every):
        m = evaluate_placement(problem, g.node_assignment(dev), contiguous=contiguous)
        feasible.append(m.feasible)
        if m.feasible:
            assert value[b] == pytest.approx(m.value, rel=1e-12)
    feasible = np.array(feasible)
    # sound: nothing infeasible is emitted; complete: nothing feasible is masked out
    assert np.array_equal(~dec.dead, feasible)
    if feasible.any():             # the decoder's ceiling is the exact optimum
        best = value[feasible].min()
        assert best == pytest.approx(brute_force(problem, "max-load", contiguous), rel=1e-9)
        if contiguous:
            assert best == pytest.approx(solve_placement(problem, contiguous=True).value, rel=1e-9)


def test_the_enumeration_exercises_both_outcomes():
    """The cases above include instances where memory, colours, host-only nodes and
    contiguity each reject some assignments (else the equality would be vacuous)."""
    rejected = emitted = 0
    for seed, training, hetero in CASES:
        g = unit_graph(random_problem(seed, n=4, training=training, hetero=hetero), True)
        dec = decode(g, np.zeros(g.time.shape), forced=_all_assignments(g))
        rejected += int(dec.dead.sum())
        emitted += int((~dec.dead).sum())
    assert rejected > 100 and emitted > 100


def _chain(n: int, cap: float) -> PlacementProblem:
    return PlacementProblem(name="chain", node_names=[f"n{i}" for i in range(n)],
                            node_ids=list(range(n)), edges=np.array([(i, i + 1) for i in range(n - 1)]),
                            time={"acc": np.ones(n)}, size_bytes=np.ones(n), comm=np.full(n, 0.1),
                            color=np.arange(n), is_backward=np.zeros(n, bool),
                            device_types=[DeviceType("acc", 2, cap, True)])


def test_a_memory_dead_end_is_flagged_and_the_placement_is_infeasible():
    """Chain a-b-c-d, two devices holding two nodes each: a on 0 and b on 1 leave c only
    device 1 (0 would close a cycle), and then d nowhere; the sample is flagged."""
    p = _chain(4, 2.0)
    g = unit_graph(p, True)
    assert g.order.tolist() == [0, 1, 2, 3]
    scores = np.array([[5.0, 0.0], [0.0, 5.0], [5.0, 0.0], [5.0, 0.0]])
    dec = decode(g, scores, greedy=True)
    assert dec.dead.tolist() == [True]
    assert dec.masks[0, 2].tolist() == [False, True]        # 0 would close a cycle
    assert dec.dev[0].tolist() == [0, 1, 1, 1]              # d forced onto the full device
    assert not evaluate_placement(p, g.node_assignment(dec.dev[0]), contiguous=True).feasible
    ok = decode(g, np.array([[5.0, 0], [5, 0], [0, 5], [0, 5]]), greedy=True)
    assert not ok.dead[0] and ok.dev[0].tolist() == [0, 0, 1, 1]


def test_samples_on_a_public_instance_are_feasible_and_priced_like_the_evaluator():
    from autopar_opt.placement import load_public

    p = load_public(DATA / "placement" / "throughput" / "OperatorGraphs_bert_l-3_training.json")
    g = unit_graph(p, True)
    rng = np.random.default_rng(0)
    dec = decode(g, rng.normal(size=(32, *g.time.shape)), rng)
    value, ratio = price(g, dec.dev)
    assert (~dec.dead).sum() >= 16
    for b in np.flatnonzero(~dec.dead):
        m = evaluate_placement(p, g.node_assignment(dec.dev[b]), contiguous=True)
        assert m.feasible and m.value == pytest.approx(value[b], rel=1e-9)
        assert max(m.memory_bytes[:3]) / p.device_types[0].memory_bytes == pytest.approx(ratio[b])


def test_lifo_order_is_topological_and_follows_chains():
    # two chains 0-1-2 and 3-4-5 joined at 6: LIFO finishes one chain before the other
    prec = np.array([(0, 1), (1, 2), (3, 4), (4, 5), (2, 6), (5, 6)])
    order = lifo_topological_order(7, prec).tolist()
    pos = {u: i for i, u in enumerate(order)}
    assert all(pos[a] < pos[b] for a, b in prec.tolist())
    assert order in ([0, 1, 2, 3, 4, 5, 6], [3, 4, 5, 0, 1, 2, 6])
    with pytest.raises(ValueError, match="cycle"):
        lifo_topological_order(2, np.array([(0, 1), (1, 0)]))


def test_recorded_state_terms_reproduce_every_greedy_choice():
    """The state terms the decoder records are the ones it scored with: the masked argmax
    of ``scores + state · W`` is the chosen device at every step (so the PPO
    log-probabilities computed from them are the sampling distribution's)."""
    from autopar_opt.placement import load_public

    p = load_public(DATA / "placement" / "throughput" / "OperatorGraphs_bert_l-6_training.json")
    g = unit_graph(p, True)
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(4, *g.time.shape))
    w = np.array([-2.0, 0.5, -6.0])
    dec = decode(g, scores, greedy=True, state_weights=w, fair=3.0)
    z = scores + dec.state @ w
    assert np.array_equal(np.where(dec.masks, z, -np.inf).argmax(axis=2), dec.dev)
    assert dec.state.shape == (4, g.num_units, g.num_devices, 3)
    assert (dec.state[..., 2] >= 0).all() and np.allclose(
        dec.state[..., 2], np.maximum(dec.state[..., 1] + g.time / 3.0 - 1, 0), atol=1e-6)
