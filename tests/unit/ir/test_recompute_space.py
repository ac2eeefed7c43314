"""The recomputation modes of ``search.recompute`` are the ones a plan's blocks use,
and a larger space never has a worse optimum (autopar_opt.ir.strategies._recompute_options).

Found by a new user (session 24): with FlashAttention no attention core is stored, so
``selective`` frees nothing; the enumeration dropped it on every block whatever else
the space held. ``recompute: [selective, full]`` then forced full recomputation
(Llama 3 70B on 64 H100: 65.1 s "optimal"), while ``[selective]`` alone fell back to
no recomputation, a mode the space excluded (60.5 s): a subset with a better optimum.
A mode that frees nothing is only dominated when ``none`` is on offer."""

from __future__ import annotations

import dataclasses

import pytest

from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.ir.target import BLOCK_KINDS
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training
from autopar_opt.model_zoo.registry import build_model, get_cluster
from autopar_opt.solvers.dp import solve_dp

R = Recompute


def _flash_debug():
    """The debug decoder as FlashAttention builds it: no attention core stored
    (``act_attn_bytes`` 0, as every zoo Llama), the core's FLOPs still re-run by
    selective recomputation."""
    g = build_model("debug")
    layers = [dataclasses.replace(layer, act_attn_bytes=0.0) if layer.kind in BLOCK_KINDS
              else layer for layer in g.layers]
    return dataclasses.replace(g, layers=layers)


GRAPH = _flash_debug()
CLUSTER = get_cluster("debug-2x4")
TRAINING = Training(global_batch_size=16, seq_len=128)


def _tables(modes: tuple[Recompute, ...]):
    space = SearchSpace(recompute=modes, zero_levels=(0,))
    return build_cost_tables(GRAPH, CLUSTER, TRAINING, space, default_params(), 2, 4,
                             Schedule.one_f_one_b)


def _optimum(modes: tuple[Recompute, ...]) -> tuple[float, set[Recompute]]:
    """The DP optimum of the space and the modes its blocks use."""
    tables = _tables(modes)
    res = solve_dp(tables)
    assert res.primal is not None, modes
    plan = tables.plan_of(res.solution)
    kind = {layer.name: layer.kind for layer in GRAPH.layers}
    used = {s.recompute for st in plan.stages for s, name in zip(st.strategies, st.layers)
            if kind[name] in BLOCK_KINDS}
    return res.primal, used


@pytest.mark.parametrize("modes", [(R.selective,), (R.selective, R.full), (R.full,),
                                   (R.none, R.selective, R.full)])
def test_blocks_are_offered_exactly_the_listed_modes_that_can_pay(modes):
    """Blocks: every listed mode, less a mode that frees nothing when none is listed;
    the embedding and the head: none as well (no framework recomputes them)."""
    tables = _tables(modes)
    for layer, strats in zip(GRAPH.layers, tables.strategies):
        offered = {s.recompute for s in strats}
        if layer.kind in BLOCK_KINDS:
            expected = set(modes) - ({R.selective} if R.none in modes else set())
        else:
            assert R.none in offered, layer.name
            expected = offered                    # what it frees on them is the layer's own
        assert offered == expected, (layer.name, offered)


def test_a_larger_space_never_has_a_worse_optimum_and_plans_stay_inside_it():
    sel, sel_used = _optimum((R.selective,))
    both, both_used = _optimum((R.selective, R.full))
    full, full_used = _optimum((R.full,))
    every, _ = _optimum((R.none, R.selective, R.full))
    assert sel_used == {R.selective} and full_used == {R.full}
    assert both_used <= {R.selective, R.full}
    assert both <= min(sel, full) * (1 + 1e-9)
    assert every <= both * (1 + 1e-9)
    # selective frees nothing here and re-runs the core: strictly slower than none
    assert every < sel
