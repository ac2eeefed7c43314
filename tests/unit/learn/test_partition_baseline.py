"""The METIS baseline: balanced k-way parts of the unit graph, priced by the evaluator,
the best feasible placement kept (METIS ignores contiguity: its first partition's
violations are reported, not hidden)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pymetis", reason="the METIS baseline needs pymetis (learn extra)")

from autopar_opt.learn.partition_baseline import metis_parts, metis_placement  # noqa: E402
from autopar_opt.learn.place_graph import unit_graph  # noqa: E402
from autopar_opt.placement import evaluate_placement, load_public  # noqa: E402
from support.paths import DATA  # noqa: E402

THROUGHPUT = DATA / "placement" / "throughput"


def test_metis_balances_the_accelerator_time():
    p = load_public(THROUGHPUT / "OperatorGraphs_resnet50_inference.json")
    g = unit_graph(p, True)
    parts = metis_parts(g, 6, seed=0, ufactor=30)
    t = g.time[:, 0]
    share = np.bincount(parts, weights=t, minlength=6) / t.sum()
    assert set(parts.tolist()) == set(range(6)) and share.max() < 1 / 6 * 1.35


def test_metis_placement_is_priced_by_the_evaluator_and_reports_violations():
    p = load_public(THROUGHPUT / "OperatorGraphs_resnet50_inference.json")
    r = metis_placement(p, contiguous=True, seeds=2)
    m = evaluate_placement(p, r.assignment, contiguous=True)
    assert m.feasible and r.value == pytest.approx(m.value, rel=1e-12)
    assert r.tries == 6 and 1 <= r.feasible_tries <= r.tries
    bert = load_public(THROUGHPUT / "LayerGraphs_bert24_inference.json")
    r = metis_placement(bert, contiguous=True, seeds=1)
    assert r.value is None and not r.first_feasible
    assert any("not contiguous" in v for v in r.first_violations)
    loose = metis_placement(bert, contiguous=False, seeds=1)       # fine without contiguity
    assert loose.value == pytest.approx(r.first_value, rel=1e-12)
