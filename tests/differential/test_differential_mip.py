"""Differential: MILP(HiGHS) == MIQP(SCIP) == brute force on 32 seeded instances.

Chains and DAGs of 3-5 layers, 1-2 stages; every fourth instance runs on a
tight memory budget (reserve chosen so that the unconstrained brute-force
optimum does not fit), so memory is binding there.
"""

from __future__ import annotations

import pytest

from autopar_opt.cost.context import user_reserve_for
from autopar_opt.cost.params import default_params
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.formulations import build_formulation
from autopar_opt.solvers.registry import get_backend
from autopar_opt.core.result import Termination
from autopar_opt.ir.training import Training
from support.bruteforce import brute_force
from support.mip_instances import random_instance, tables_for

CASES = [(seed, 3 + seed % 3, seed % 2 == 0, 1 + (seed // 2) % 2, seed % 4 == 3) for seed in range(32)]


def _tight_training(graph, cluster, training, space, pp):
    """A reserve that leaves 90% of the memory the free optimum uses."""
    free = brute_force(graph, cluster, training, space, pp, 4)
    if free is None:
        return training
    params = default_params()
    peak = max(evaluate(free[1], graph, cluster, training).peak_memory_gib)
    modelled = (peak - params.memory_reserve_gib) / (1 + params.memory_fragmentation)
    return Training(training.global_batch_size, training.seq_len,
                    memory_reserve_gib=user_reserve_for(0.9 * modelled, cluster.device.hbm_gib, params))


@pytest.mark.parametrize("seed,n,dag,pp,tight", CASES)
def test_milp_miqp_bruteforce_agree(seed, n, dag, pp, tight):
    graph, cluster, training, space = random_instance(seed, n, dag)
    if tight:
        training = _tight_training(graph, cluster, training, space, pp)
    ref = brute_force(graph, cluster, training, space, pp, 4)
    t = tables_for(graph, cluster, training, space, pp, 4)
    milp, miqp = build_formulation(t, "milp"), build_formulation(t, "miqp")
    r1 = get_backend("highs").solve_model(milp.matrix(), milp.problem_class, time_limit_s=60, rel_gap=1e-9)
    ok, why = get_backend("scip").available()
    r2 = (get_backend("scip").solve_model(miqp.model, miqp.problem_class, time_limit_s=60, rel_gap=1e-9)
          if ok else None)
    for res, f in ((r1, milp), (r2, miqp)):
        if res is None:
            continue
        if ref is None:
            assert res.termination is Termination.infeasible
            continue
        assert res.termination is Termination.optimal, res.message
        assert res.primal == pytest.approx(ref[0], rel=1e-6)
        assert evaluate(f.decode(), graph, cluster, training).iteration_time_s == pytest.approx(ref[0], rel=1e-6)
