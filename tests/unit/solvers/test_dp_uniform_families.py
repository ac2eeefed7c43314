"""The DP under a target's uniformity rule, family by family (solvers/dp/uniform.py).

Oracle: brute force over the cost tables of tiny Megatron-target instances (every
split into ``pp`` stages times every combination of a key family's strategies,
kept when it fits and the target runs it, priced by ``iteration_time``), with
the capacity set to a factor of the least memory any plan needs so that memory
binds and some families have no plan at all. For every family:

- the chain DP restricted to it (``solve_chain(allowed=...)``) finds the family's
  optimum and proves it, and says "no plan" exactly when brute force finds none;
- the stage decomposition's bound (:func:`~autopar_opt.solvers.dp.chain.stage_decomposition`)
  and :func:`~autopar_opt.solvers.dp.uniform.key_bound` never exceed the family's
  optimum, and the decomposition's proof that nothing fits (bound ``+inf``) is
  only ever given where brute force finds no plan (and is given on some family:
  the test discriminates);

and :func:`~autopar_opt.solvers.dp.uniform.solve_uniform` returns the least family
optimum with a bound equal to it. The families include Megatron's block recomputation
(``searched_families``: the first block of a stage recomputes fully, the second not; with
two stages, whose split is free, a rule the labels carry, solvers/dp/stage_prefix.py),
whose plans the brute force keeps by ``CostTables.runnable``'s block rule and, for a
family of ``--recompute-num-layers N`` over a free split, by Megatron's rule itself: the
transformer layers at positions ``j < N`` of a stage recompute fully, the others not. The
whole-search check against the exporters' brute force is tests/unit/search/test_runnable.py
(and tests/unit/search/test_megatron_partial_recompute_scope.py for block plans).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from support.bruteforce import stage_splits
from autopar_opt.core.assignment import Assignment
from autopar_opt.cost.context import user_reserve_for
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables, fits
from autopar_opt.ir.hardware import GIB
from autopar_opt.ir.target import BLOCK_KINDS
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training
from autopar_opt.model_zoo.registry import build_model, get_cluster
from autopar_opt.search.runnable import runnable_space
from autopar_opt.solvers.dp.chain import ChainDP, set_bottleneck_floor, solve_chain, stage_decomposition
from autopar_opt.solvers.dp.common import iteration_time, least_memory
from autopar_opt.solvers.dp.uniform import (family_bound, least_recomputed, searched_families,
                                           solve_uniform)

GRAPH = build_model("debug-moe", overrides={"num_layers": 2})
CLUSTER = get_cluster("debug-2x4")
SPACE = runnable_space(SearchSpace(pp_degrees=(1, 2), tp_degrees=(1, 2), zero_levels=(0, 1),
                                   recompute=(Recompute.none, Recompute.full), ep_degrees=(1, 2),
                                   etp_degrees=(0, 1), schedules=(Schedule.one_f_one_b,),
                                   microbatches=(1, 2)), "megatron")


def _tables(pp: int, c: int, factor: float):
    """Tables whose capacity is ``factor`` × the least memory any plan of the free space needs."""
    base = Training(global_batch_size=8, seq_len=128)
    tables = build_cost_tables(GRAPH, CLUSTER, base, SPACE, default_params(), pp, c,
                               Schedule.one_f_one_b)
    reserve = user_reserve_for(least_memory(tables) / GIB * factor, CLUSTER.device.hbm_gib,
                               default_params())
    training = Training(global_batch_size=8, seq_len=128, memory_reserve_gib=reserve)
    return build_cost_tables(GRAPH, CLUSTER, training, SPACE, default_params(), pp, c,
                             Schedule.one_f_one_b)


def _megatron_block_rule(tables, stage, choice, n: int) -> bool:
    """Megatron's ``--recompute-num-layers n`` (``_checkpointed_forward``: layer ``j`` of
    a stage recomputes iff ``j < n``): the transformer layers at positions ``j < n`` of
    their stage recompute fully, the others not at all."""
    position: dict[int, int] = {}
    for u, (i, k) in enumerate(zip(stage, choice)):
        if tables.graph.layers[u].kind in BLOCK_KINDS:
            j = position.get(i, 0)
            position[i] = j + 1
            want = Recompute.full if j < n else Recompute.none
            if tables.strategies[u][k].recompute is not want:
                return False
    return True


def _family_optimum(tables, allowed, fam=None) -> float:
    """Least ``iteration_time`` over the runnable plans that fit and use ``allowed`` only
    (and keep Megatron's rule of ``fam``'s ``N`` when it is a free split's block family)."""
    best = math.inf
    for stage in stage_splits(tables.num_layers, tables.pp):
        for choice in itertools.product(*[a.tolist() for a in allowed]):
            asg = Assignment(list(stage), list(choice))
            if fam is not None and fam.prefix is not None \
                    and not _megatron_block_rule(tables, stage, choice, fam.block):
                continue
            if fits(tables, asg) and tables.runnable(asg):
                best = min(best, iteration_time(tables, asg))
    return best


CASES = [(pp, c, f) for pp, c in [(1, 1), (1, 2), (2, 1), (2, 2)] for f in (0.9, 1.0001, 1.3, 3.0)]


@pytest.mark.parametrize("pp,c,factor", CASES)
def test_every_key_family_against_brute_force(pp: int, c: int, factor: float) -> None:
    tables = _tables(pp, c, factor)
    assert tables.uniform_keys is not None        # the Megatron target's rule is on
    families = searched_families(tables)       # Megatron's block families with one stage too
    assert families
    assert any(f.block for f in families) or pp == 2
    assert not any(f.prefix is not None for f in families) or pp == 2   # a free split only
    if pp == 2 and factor == 3.0:
        assert any(f.prefix is not None for f in families)
    optima = []
    for fam in families:
        opt = _family_optimum(tables, fam.allowed, fam)
        optima.append(opt)
        kb = family_bound(tables, fam)
        assert kb <= opt * (1 + 1e-9) or (math.isinf(kb) and math.isinf(opt)), fam.key
        dp = ChainDP(tables, None, fam.allowed, symmetric=fam.symmetric, prefix=fam.prefix)
        set_bottleneck_floor(dp, math.inf)
        inc, ub, lb = stage_decomposition(dp)
        assert lb <= opt * (1 + 1e-9) or (math.isinf(opt) and lb == math.inf), (fam.key, lb, opt)
        out = solve_chain(tables, None, 4, fam.allowed, symmetric=fam.symmetric, prefix=fam.prefix)
        if math.isinf(opt):
            assert out.assignment is None and out.exhaustive and out.lower_bound == math.inf, fam.key
        else:
            assert out.exhaustive and out.value == pytest.approx(opt, rel=1e-9), fam.key
            assert fits(tables, out.assignment) and tables.runnable(out.assignment)
            assert all(k in ok for k, ok in zip(out.assignment.choice, fam.allowed))
            if fam.prefix is not None and out.value < min(optima[:-1], default=math.inf):
                assert _megatron_block_rule(tables, out.assignment.stage, out.assignment.choice,
                                            fam.block)
    best = min(optima)
    if pp == 2:
        # the N left out (a stage too small to hold more than N, or all the layers) hold no
        # plan better than the families kept: every runnable plan, every strategy
        every = _family_optimum(tables, [np.arange(len(s)) for s in tables.strategies])
        assert best == every if math.isinf(every) else best == pytest.approx(every, rel=1e-12)
    whole = solve_uniform(tables)
    if math.isinf(best):
        assert whole.assignment is None and whole.exhaustive
    else:
        assert whole.exhaustive and whole.value == pytest.approx(best, rel=1e-9)
        assert whole.lower_bound == pytest.approx(best, rel=1e-9)


def test_the_decomposition_proves_some_family_empty_and_the_others_are_kept() -> None:
    """Discriminating: at a capacity where memory binds, the decomposition closes some
    family with bound ``+inf`` (brute force: no plan) while another family has a plan."""
    closed = kept = 0
    for pp, c in [(1, 1), (1, 2), (2, 1), (2, 2)]:
        tables = _tables(pp, c, 1.0001)
        for fam in searched_families(tables):
            dp = ChainDP(tables, None, fam.allowed, symmetric=fam.symmetric)
            set_bottleneck_floor(dp, math.inf)
            lb = stage_decomposition(dp)[2]
            opt = _family_optimum(tables, fam.allowed)
            if lb == math.inf:
                assert math.isinf(opt)
                closed += 1
            elif math.isfinite(opt):
                kept += 1
    assert closed > 0 and kept > 0


@pytest.mark.parametrize("pp,c,factor", [(1, 2, 3.0), (2, 1, 1.3), (2, 2, 3.0), (2, 2, 1.3)])
@pytest.mark.parametrize("rel_gap", [0.0, 0.05])
def test_a_cutoff_keeps_every_answer_proven(pp: int, c: int, factor: float, rel_gap: float) -> None:
    """``solve_uniform(cutoff=...)``, the search's incumbent from another configuration:
    its bound never exceeds the optimum; above the optimum the cutoff changes no answer
    (optimum found, proven); at or below it the bound reaches ``cutoff·(1 - rel_gap)``
    (the configuration cannot beat the caller's plan by more than the gap) and any plan
    it returns is priced by ``iteration_time`` and runnable."""
    tables = _tables(pp, c, factor)
    best = min(_family_optimum(tables, f.allowed, f) for f in searched_families(tables))
    assert math.isfinite(best)
    free = solve_uniform(tables, rel_gap=rel_gap)
    for cutoff in (best * 1.2, best * 1.001, best, best * 0.97, best * 0.5):
        out = solve_uniform(tables, rel_gap=rel_gap, cutoff=cutoff)
        assert out.lower_bound <= best * (1 + 1e-9), cutoff
        if out.assignment is not None:
            assert out.value == pytest.approx(iteration_time(tables, out.assignment), rel=1e-12)
            assert fits(tables, out.assignment) and tables.runnable(out.assignment)
        if cutoff > best:
            assert out.value <= best * (1 + rel_gap) * (1 + 1e-9)
            assert out.value == pytest.approx(free.value, rel=1e-12)
            assert out.lower_bound >= out.value * (1 - rel_gap) * (1 - 1e-9)
        else:
            assert out.lower_bound >= cutoff * (1 - rel_gap) * (1 - 1e-9), cutoff
        assert not out.exhaustive or out.value == pytest.approx(best, rel=1e-9)


def _compositions(total: int, most: int):
    """Every tuple of positive parts of at most ``most`` summing to ``total``."""
    if total == 0:
        yield ()
        return
    for first in range(1, min(most, total) + 1):
        for rest in _compositions(total - first, most):
            yield (first,) + rest


@pytest.mark.parametrize("blocks", range(1, 10))
def test_least_recomputed_is_the_least_over_every_split(blocks: int) -> None:
    """``least_recomputed(N, B, K)`` (the layers Megatron's block method recomputes at
    least, over every split of ``B`` layers into stages of at most ``K``) equals the brute
    force over every such split of ``Σ_i min(N, k_i)``."""
    for most in range(1, blocks + 1):
        for n in range(1, blocks + 1):
            brute = min(sum(min(n, k) for k in parts) for parts in _compositions(blocks, most))
            assert least_recomputed(n, blocks, most) == brute, (n, blocks, most)
