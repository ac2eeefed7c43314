"""HiGHS at its default feasibility tolerances (1e-6 on rows, here GiB) can
accept a plan a few hundred bytes over memory as "optimal" and report a bound
above a plan that fits. ``solvers/highs.py`` sets the MIP and primal
feasibility tolerances to 1e-9. Oracle: the exact DP (its plan checked by
``fits``) on tiny-capacity instances found by the session-8 review, where the
default tolerances failed (block MILP 0.0589293 'optimal' above the DP's
feasible 0.0589285; a plan 470 B over its stage limit)."""

from __future__ import annotations

import pytest

from autopar_opt.cost.context import user_reserve_for
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.formulations.block_solve import solve_blocks
from autopar_opt.ir.hardware import GIB
from autopar_opt.model_zoo.transformer import decoder_lm
from autopar_opt.ir.runtime import RUNTIMES
from autopar_opt.solvers.dp import solve_dp
from autopar_opt.solvers.dp.common import fits, iteration_time, least_memory
from autopar_opt.solvers.registry import get_backend
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training


def _tables(blocks: int, pp: int, c: int, factor: float):
    graph = decoder_lm("tiny", blocks, 256, 256, 4, 1024, 1000)
    cluster = small_cluster(1, 2 * pp)
    space = SearchSpace(zero_levels=(0, 1, 3),
                        recompute=(Recompute.none, Recompute.selective, Recompute.full),
                        sequence_parallel=(False,), tp_degrees=(1, 2))
    rt = RUNTIMES["pytorch-ddp"]
    base = Training(global_batch_size=8, seq_len=256, runtime=rt)
    t = build_cost_tables(graph, cluster, base, space, default_params(), pp, c, Schedule.one_f_one_b)
    reserve = user_reserve_for(least_memory(t) / GIB * factor, cluster.device.hbm_gib, default_params())
    tr = Training(global_batch_size=8, seq_len=256, runtime=rt, memory_reserve_gib=reserve)
    return build_cost_tables(graph, cluster, tr, space, default_params(), pp, c, Schedule.one_f_one_b)


@pytest.mark.parametrize("blocks,pp,c,factor", [(6, 3, 4, 1.04324788381589),
                                                 (5, 2, 2, 1.1841150815207762)])
def test_block_milp_plan_fits_and_bound_not_above_exact_optimum(blocks, pp, c, factor):
    t = _tables(blocks, pp, c, factor)
    dp = solve_dp(t)
    assert fits(t, dp.solution)
    opt = dp.primal
    res, plan = solve_blocks(t, get_backend("highs"), time_limit_s=60, rel_gap=1e-9)
    assert plan is not None
    assert fits(t, plan)
    assert res.lower_bound <= opt * (1 + 1e-9)
    assert iteration_time(t, plan) == pytest.approx(opt, rel=1e-9)
