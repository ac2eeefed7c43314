"""A warm-start plan whose strategy the cost tables pruned as dominated maps to a kept
strategy that dominates it (``CostTables.assignment_of``), never merely to the fastest
kept one of its layout (review finding: the fastest may need more memory, so the MILP
start did not fit).

Instance: a tiny decoder (2 blocks, h=256) on 4 GPUs, pp=2 (embedding and first
block in stage 0, which holds 2 micro-batches under 1F1B), batch 64, c=4, every layer on
``dp2·tp1·rc-full``, ZeRO levels 0 and 2 in the space. In every layer that strategy
is pruned: its ZeRO-2 twin ``dp2·tp1·z2·rc-full`` has the same time, activations and
working set and fewer gradient and optimizer bytes. (A ZeRO-3 twin no longer
dominates it: its gathered parameters are a working set the ZeRO-0 one does not
hold, ``memory.working_set_bytes``.) The fastest kept strategy of the layout is
``dp2·tp1·z2`` (no recomputation), whose activations are much larger. With the
device capacity set to the plan's own largest stage memory (priced from the
unpruned tables, the oracle), the dominating start fits and the fastest one does not.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autopar_opt.core.assignment import Assignment
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.formulations.block_solve import plan_time
from autopar_opt.formulations.direct import build_direct
from autopar_opt.model_zoo.transformer import decoder_lm
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.solvers.dp.common import fits, stage_terms
from autopar_opt.ir.strategies import Strategy
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training

SPACE = SearchSpace(zero_levels=(0, 3), sequence_parallel=(False, True),
                    recompute=(Recompute.none, Recompute.full))
RC = Strategy(dp=2, tp=1, recompute=Recompute.full)


SPACE_Z2 = dataclasses.replace(SPACE, zero_levels=(0, 2))


def _tables(prune: bool, space: SearchSpace = SPACE, batch: int = 16):
    graph = decoder_lm("tiny", 2, 256, 256, 4, 1024, 1000)
    return build_cost_tables(graph, small_cluster(1, 4), Training(global_batch_size=batch, seq_len=256),
                             space, default_params(), 2, 4, Schedule.one_f_one_b,
                             prune_dominated=prune)


def _plan(names: list[str], strategies: list[Strategy]) -> Plan:
    """Embedding and first block in stage 0, the rest in stage 1."""
    return Plan([StagePlan(names[:2], strategies[:2]), StagePlan(names[2:], strategies[2:])], 4,
                Schedule.one_f_one_b)


def _rows_hold(form, x: np.ndarray) -> bool:
    m = form.matrix
    ax = m.A @ x
    return bool(np.all(ax >= m.row_lo - 1e-7) and np.all(ax <= m.row_hi + 1e-7))


def test_a_pruned_strategy_maps_to_a_kept_one_that_dominates_it() -> None:
    full, kept = _tables(False, SPACE_Z2, 64), _tables(True, SPACE_Z2, 64)
    names = [layer.name for layer in full.graph.layers]
    plan = _plan(names, [RC] * len(names))
    pruned = [u for u in range(len(names)) if RC not in kept.strategies[u]]
    assert pruned == [0, 1, 2, 3]            # the embedding, both blocks and the head
    ref = full.assignment_of(plan)           # the plan itself: RC is in every unpruned list
    cap = float(max(stage_terms(full, ref)[3]))
    tight, tight_full = (dataclasses.replace(t, capacity_bytes=cap) for t in (kept, full))
    assert fits(tight_full, ref)

    asg = tight.assignment_of(plan)
    for u in range(len(names)):
        k, r = asg.choice[u], ref.choice[u]
        got = tight.strategies[u][k]
        assert got.layout == RC.layout
        for mine, theirs in ((tight.time, full.time), (tight.sync, full.sync),
                             (tight.weight_bytes, full.weight_bytes),
                             (tight.act_bytes, full.act_bytes),
                             (tight.working_bytes, full.working_bytes)):
            assert mine[u][k] <= theirs[u][r] * (1 + 1e-12)
    assert [tight.strategies[u][asg.choice[u]] for u in pruned] == \
        [Strategy(dp=2, tp=1, zero=2, recompute=Recompute.full)] * 4
    assert fits(tight, asg)
    assert plan_time(tight, asg) <= plan_time(tight_full, ref) * (1 + 1e-12)
    # the MILP warm start written from it satisfies every row (memory rows included)
    form = build_direct(tight, symmetry=False)
    assert _rows_hold(form, form.start_vector(plan))

    # the old mapping, the fastest kept strategy of the layout, does not fit
    fastest = Assignment(asg.stage, [
        min((k for k, s in enumerate(tight.strategies[u]) if s.layout == RC.layout),
            key=lambda k: tight.time[u][k]) for u in range(len(names))])
    assert not fits(tight, fastest)
    assert not _rows_hold(form, form.start_vector(fastest))


def test_a_strategy_no_kept_one_dominates_keeps_the_fastest_of_its_layout() -> None:
    """ZeRO-1 is outside SPACE (levels 0 and 3). On the embedding ``dp2·tp1·z1`` is as
    fast as the kept ``dp2·tp1`` with fewer weight bytes and less sync, and faster than
    the kept ZeRO-3 one: no kept strategy dominates it, so the start takes the fastest
    kept strategy of its layout (``dp2·tp1``), as before. In the blocks and the head the
    kept ``dp2·tp1·z3`` no longer dominates it either (its gathered parameters are a
    working set ZeRO-1 does not hold, ``memory.working_set_bytes``): the fastest kept
    one there too. A layout outside the tables is refused."""
    kept = _tables(True)
    z1 = Strategy(dp=2, tp=1, zero=1)
    names = [layer.name for layer in kept.graph.layers]
    assert all(kept.dominating_kept(u, z1) is None for u in range(len(names)))
    asg = kept.assignment_of(_plan(names, [z1] * len(names)))
    got = [kept.strategies[u][k] for u, k in enumerate(asg.choice)]
    assert got == [Strategy(dp=2, tp=1)] * 4
    with pytest.raises(ValueError, match="not in the search space"):
        kept.assignment_of(_plan(names, [Strategy(dp=2, tp=1)] + [Strategy(dp=1, tp=1)] * 3))
