"""A class of backward nodes only (a loss node, say) is ordered as the exact DP orders it
(QA round 12). The DP gives such a class an artificial forward unit whose precedence
edges mirror its backward edges (as the authors' ``createArtificialForwardNodes``), but
the evaluator and the random/annealing searchers checked contiguity on the forward
edges only, so they accepted plans outside the DP's space: on bert_l-3 training an
annealed plan priced 65.303093, under the DP's "proven" optimum 65.303149, and the
answer stated a lower bound above its own value.

Oracle (hand and brute force): f0 -> f1 forward (times 1, 5), f1 -> L -> b1 -> b0
backward (L alone in its class, time 4; b0, b1 in the classes of f0, f1, time 1),
free transfers, two accelerators. L runs after b1's device, so {f0, b0, L} | {f1, b1}
(6) is not contiguous; the best contiguous plan is {f0, b0, f1, b1} | {L}: 8. Brute
force over all 32 assignments with the evaluator finds 8, the exact method proves 8,
and a searcher never reports less."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from autopar_opt.placement.evaluate import evaluate_placement
from autopar_opt.placement.importers.public_json import problem_from_public
from autopar_opt.placement.solve import solve_placement
from support.placement_cases import place_with_searcher

F0, F1, L, B1, B0 = range(5)
GRAPH = {"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0,
         "nodes": [{"id": i, "supportedOnFpga": 1, "cpuLatency": 99, "fpgaLatency": t,
                    "isBackwardNode": int(i >= L), "size": 1, **({"colorClass": c} if c else {})}
                   for i, t, c in ((F0, 1, "c0"), (F1, 5, "c1"), (L, 4, None), (B1, 1, "c1"),
                                   (B0, 1, "c0"))],
         "edges": [{"sourceId": u, "destId": v, "cost": 0}
                   for u, v in ((F0, F1), (F1, L), (L, B1), (B1, B0))]}


def _brute(problem) -> float:
    best = np.inf
    for a in itertools.product(range(2), repeat=problem.num_nodes):
        m = evaluate_placement(problem, np.array(a), contiguous=True)
        if m.feasible:
            best = min(best, m.value)
    return best


def test_the_evaluator_space_is_the_exact_space():
    problem = problem_from_public(GRAPH)
    spread = evaluate_placement(problem, [0, 1, 0, 1, 0], contiguous=True)
    assert spread.value == pytest.approx(6.0) and not spread.feasible
    assert _brute(problem) == pytest.approx(8.0)
    assert solve_placement(problem).value == pytest.approx(8.0)


@pytest.mark.parametrize("searcher", ["random", "anneal"])
def test_a_searcher_never_beats_the_proven_optimum(tmp_path, searcher):
    doc = place_with_searcher(tmp_path, GRAPH, searcher)
    assert doc["value"] == pytest.approx(8.0) and doc["lower_bound"] == pytest.approx(8.0)
    assert doc["searcher"]["value"] >= 8.0 - 1e-9
