"""The random and annealing searchers on an instance with CPU cores only (QA round 12):
``--searcher random|anneal`` ended in numpy's "negative dimensions are not allowed"
(cutting the class order into k - 1 = -1 blocks). They keep work off the host, so with
no accelerator their one plan is everything on the first CPU core, priced by the
evaluator like any other, and the exact side answers the optimum.

Oracle (hand): CPU times 1, 2, 3 on a chain, two CPU cores that pay no transfers: all on
one core takes 6; the optimum splits {0, 1} | {2}: 3."""

from __future__ import annotations

import pytest

from support.placement_cases import place_with_searcher, public_chain

GRAPH = public_chain((1, 2, 3), fpga_size=0, fpgas=0, cpus=2, cost=9, on_fpga=False, size=5)


@pytest.mark.parametrize("searcher", ["random", "anneal"])
def test_cpu_cores_only(tmp_path, searcher):
    doc = place_with_searcher(tmp_path, GRAPH, searcher)
    assert doc["searcher"]["value"] == pytest.approx(6.0) and doc["searcher"]["feasible"]
    assert doc["value"] == pytest.approx(3.0) and doc["status"] == "optimal"
