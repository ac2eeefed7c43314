"""The stage-partition bound of the chain DP (solvers/dp/partition.py) against brute force.

Oracles, on the seeded tiny chains of tests/differential/test_dp_bruteforce.py (memory-bound,
slack and infeasible capacities, GPipe and 1F1B, pp ∈ {1,2,3}):

- the bottleneck floor (:meth:`CoverBound.least_bottleneck`) is ≤ the optimum's
  ``max_i p_i`` and the root bound (with that floor) is ≤ the optimum;
- an exact pass at threshold = the optimum (the partition test on) still finds
  a plan of exactly that value, and one just below it finds none: the test
  never drops an optimal plan;
- the coverage test is monotone in the bottleneck allowed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from support.dp_cases import SPACE, make_instance, seeded_case
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.solvers.dp.chain import ChainDP, set_bottleneck_floor
from autopar_opt.solvers.dp.partition import CoverBound, hull_slopes

SEEDS = [s for s in range(160) if make_instance(s).graph.is_chain()][:60]


@pytest.mark.parametrize("seed", SEEDS)
def test_partition_bound_is_below_the_brute_force_optimum(seed: int) -> None:
    tables, ref = seeded_case(seed)
    dp = ChainDP(tables, None)
    const = tables.params.iteration_overhead_s
    set_bottleneck_floor(dp, math.inf)
    if ref is None:
        return
    opt = ref[0] - const
    # the brute-force plan's own stage times (evaluate): tables.assignment_of maps a
    # strategy pruned as dominated to a kept one that dominates it, whose time can be
    # below the plan's, so the tables would give a smaller reference than the plan's own
    inst = make_instance(seed)
    p = [st.time_s for st in evaluate(ref[1], inst.graph, inst.cluster, inst.training,
                                      tables.params).stages]
    assert dp.bott_floor <= max(p) * (1 + 1e-9) + 1e-15
    assert dp.root_bound() <= opt * (1 + 1e-9) + 1e-15
    # the partition test never drops an optimal plan, and the pass is exact at its threshold
    found = dp.run(None, opt)
    assert found is not None and found[0] == pytest.approx(opt, rel=1e-9)
    assert dp.run(None, opt * (1 - 1e-6) - 1e-12) is None


def test_some_seeds_are_memory_bound_with_pipelining() -> None:
    """The seeds above include pipelined instances whose floor is above the average
    stage time, i.e. where the partition bound sees a forced imbalance."""
    beyond = 0
    for seed in SEEDS:
        inst = make_instance(seed)
        tables = build_cost_tables(inst.graph, inst.cluster, inst.training, SPACE, default_params(),
                                   inst.pp, inst.c, inst.schedule)
        if tables.pp < 2 or tables.microbatches < 2 or any(len(s) == 0 for s in tables.strategies):
            continue
        dp = ChainDP(tables, None)
        set_bottleneck_floor(dp, math.inf)
        avg = sum(float(t.min()) for t in tables.time) / tables.pp
        beyond += dp.bott_floor > avg * (1 + 1e-6)
    assert beyond >= 3


def test_coverage_grows_with_the_bottleneck() -> None:
    """cover(x)[0][0] is nondecreasing in the grid value x (the rounding-up rule needs it)."""
    rng = np.random.default_rng(0)
    n, pp = 12, 3
    time = [rng.uniform(1, 2, 4) for _ in range(n)]
    mem = [[rng.uniform(1, 3, 4) * (pp - j) for _ in range(n)] for j in range(pp)]
    cb = CoverBound(time, mem, 10.0, [np.arange(4)] * n)
    cb.set_grid_origin(1.0)
    reach = [int(cb.cover(x)[0][0]) for x in range(0, 8000, 200)]
    assert reach == sorted(reach) and reach[0] < n <= reach[-1]


def test_hull_slopes_are_the_breakpoints_of_the_lower_envelope() -> None:
    """Points (mem, time): (0, 10), (1, 6), (2, 5), (3, 1), (4, 9). Lower hull (0,10)-(1,6)-(3,1):
    slopes -4 and -2.5, so λ ∈ {2.5, 4}; (2, 5) lies above the chord (1,6)-(3,1), (4, 9) is dominated."""
    got = hull_slopes(np.array([0.0, 1, 2, 3, 4]), np.array([10.0, 6, 5, 1, 9]))
    assert sorted(got) == pytest.approx([2.5, 4.0])
