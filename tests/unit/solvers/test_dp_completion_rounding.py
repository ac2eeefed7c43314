"""Review finding F3: the chain DP's completion bound must stay a proven bound under rounding.

The bound of a label is ``h − λ_i·(C − mem) − C·Σ_{j>i} λ_j`` (solvers/dp/completion.py).
Where the Lagrangian relaxation is tight (the completion fills every stage's memory
exactly) ``h`` and the penalty are large and nearly equal, and before the fix the computed
difference came out a few ulps *above* the true remaining cost on most such instances.

Instances: chains whose strategies of one layer are identical (time ``a_v``, memory
``m_v``, no sync, no transfers), one large first layer (so the multipliers, which scale
with the model's total time, make the penalty about ``10⁴`` times the remaining time),
and layer memories that fill each stage's capacity exactly (checked in exact rational
arithmetic). Oracle: the exact least cost of a feasible completion, by enumerating the
stage splits with :class:`fractions.Fraction` (every completion costs ``Σ_{v>u} a_v``;
a split is feasible when its exact stage memories fit).

- the computed bound (unweighted ``Σ(p+o)``, ``Σp``, and stage-weighted) never exceeds
  the exact remaining cost (fails without the margin: ``rounding_margin`` set to 0);
- the margin costs under 1e-12 of the remaining cost (fails if it is made coarse, e.g.
  ``1e-9``): far inside the DP's pruning slack;
- the whole DP still proves these instances optimal, at the least ``iteration_time`` over
  every stage split that fits (the same tables). Before the fix it called them infeasible:
  its infeasibility proof compared the least memory with ``capacity·(1 + 1e-12)``, under the
  ``MEM_EPS`` allowance that ``fits`` and ``evaluate`` grant.

The same cancellation in the partition test (solvers/dp/partition.py, multipliers = the
layers' hull slopes, unbounded): on chains filled exactly, with one steep layer, the old code
rejected labels of the only plan that fits in 22 of these 24 cases, and on 96-layer chains
of that kind an exact DP pass with its threshold at the optimum's value found no plan (seeds 1
and 2), which the deepening reads as "optimum > tau": a wrong lower bound.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest

from autopar_opt.core.result import Termination
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.ir.hardware import GIB, MEM_EPS
from autopar_opt.solvers.dp import completion
from autopar_opt.solvers.dp.backend import DPBackend
from autopar_opt.core.assignment import Assignment
from autopar_opt.solvers.dp.common import fits, iteration_time, layer_memory
from autopar_opt.solvers.dp.chain import ChainDP, set_bottleneck_floor
from autopar_opt.solvers.dp.partition import CoverBound
from autopar_opt.model_zoo.synthetic import random_chain, small_cluster
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training
from support.bruteforce import stage_splits

SPACE = SearchSpace(zero_levels=(0,), sequence_parallel=(False,), recompute=(Recompute.none,))
SEEDS = range(40)


def full_chain(seed: int):
    """Tables of a chain whose stages can be filled exactly (module docstring), the
    per-stage layer groups that fill them, and the times/memories as exact fractions."""
    rng = random.Random(seed)
    pp = 1 + seed % 2
    per = 2 + seed % 3                      # layers per stage in the exactly-full split
    n = pp * per
    tables = build_cost_tables(random_chain(seed, n), small_cluster(1, 2),
                               Training(global_batch_size=16, seq_len=1024), SPACE,
                               default_params(), pp, 2, Schedule.one_f_one_b)
    cap = tables.capacity_bytes + MEM_EPS * GIB       # the DP's capacity (chain.py)
    a = [1e3 * (1 + rng.random())] + [1e-3 * (1 + rng.random()) for _ in range(n - 1)]
    m = []
    for _ in range(pp):
        group = [float(rng.randint(10 ** 8, 10 ** 9)) for _ in range(per - 1)]
        m += group + [cap - sum(group)]             # exact: partial sums are multiples of ulp(cap)
    for j in range(pp):
        assert sum(Fraction(x) for x in m[j * per:(j + 1) * per]) == Fraction(cap)
    for v in range(n):
        k = len(tables.time[v])
        tables.time[v], tables.sync[v] = np.full(k, a[v]), np.zeros(k)
        tables.weight_bytes[v], tables.act_bytes[v] = np.full(k, m[v]), np.zeros(k)
    for arrs in (tables.reshard, tables.cross_intra, tables.cross_inter):
        arrs[:] = [np.zeros_like(x) for x in arrs]
    return tables, cap, a, m


def exact_remaining(tables, cap: float, a: list[float], m: list[float], u: int, i: int,
                    mem: Fraction) -> Fraction | None:
    """Least exact cost of a feasible completion of a label at ``(u, i)`` with stage
    memory ``mem`` (None: none fits): every stage split of layers ``u+1..n−1`` over
    stages ``i..P−1`` (each later stage non-empty) with exact stage memories ``≤ cap``."""
    n, pp, c = tables.num_layers, tables.pp, Fraction(cap)
    rest = list(range(u + 1, n))

    def fits(start: int, stage: int, used: Fraction) -> bool:
        if stage == pp - 1:
            return used + sum(Fraction(m[v]) for v in rest[start:]) <= c
        return any(used + sum(Fraction(m[v]) for v in rest[start:e]) <= c
                   and fits(e, stage + 1, Fraction(0)) for e in range(start, len(rest)))
    return sum(Fraction(x) for x in a[u + 1:]) if fits(0, i, mem) else None


def _labels(tables, m):
    """Every state ``(u, i)`` of a label on the exactly-full split, with its exact memory."""
    per = tables.num_layers // tables.pp
    for u in range(tables.num_layers - 1):
        i = u // per
        yield u, i, sum(Fraction(x) for x in m[i * per:u + 1])


def _bounds(tables, cap):
    mem = [layer_memory(tables, j) for j in range(tables.pp)]
    allowed = [np.arange(len(x)) for x in tables.time]
    edge_of = {(u, v): e for e, (u, v) in enumerate(tables.edges)}
    return completion.CompletionBounds(tables, mem, cap, edge_of, allowed)


def _computed(cb, u: int, i: int, mem: Fraction) -> tuple[Fraction, Fraction]:
    hs, hp = cb.remaining(u, i, np.array([0]), np.array([float(mem)]))
    return Fraction(float(hs[0])), Fraction(float(hp[0]))


@pytest.mark.parametrize("seed", SEEDS)
def test_bound_never_exceeds_the_exact_completion_cost(seed: int) -> None:
    tables, cap, a, m = full_chain(seed)
    cb = _bounds(tables, cap)
    checked = 0
    for u, i, mem in _labels(tables, m):
        exact = exact_remaining(tables, cap, a, m, u, i, mem)
        assert exact is not None            # the split itself completes the label
        hs, hp = _computed(cb, u, i, mem)
        assert hs <= exact and hp <= exact, (u, i, float(hs - exact), float(hp - exact))
        checked += 1
    assert checked == tables.num_layers - 1


@pytest.mark.parametrize("seed", SEEDS)
def test_weighted_bound_never_exceeds_the_exact_completion_cost(seed: int) -> None:
    """Stage-weighted rest (pc = gc = 0) ≤ ``Σ_v (1 + (c−1)·w_stage(v))·a_v`` of the split's
    completion; with the split's stages all at weight ``1/(P−i)`` that is the exact cost of
    the weighted objective along it (a valid upper bound on its minimum)."""
    tables, cap, a, m = full_chain(seed)
    cb = _bounds(tables, cap)
    for u, i, mem in _labels(tables, m):
        k, lm = np.array([0]), np.array([float(mem)])
        w = cb.weighted(u, i, k, lm, np.zeros(1), np.zeros(1))
        assert w is not None
        scale = Fraction(1.0 + cb.c1 * (1.0 / (tables.pp - i)))   # the stage weight as _backward uses it
        along = scale * sum(Fraction(x) for x in a[u + 1:])
        assert Fraction(float(w[0])) <= along, (u, i, float(Fraction(float(w[0])) - along))


@pytest.mark.parametrize("seed", SEEDS[:10])
def test_margin_costs_under_1e12_of_the_remaining_cost(seed: int) -> None:
    """Here the bound is exact in exact arithmetic, so what it loses is the margin alone."""
    tables, cap, a, m = full_chain(seed)
    cb = _bounds(tables, cap)
    for u, i, mem in _labels(tables, m):
        exact = exact_remaining(tables, cap, a, m, u, i, mem)
        hs = _computed(cb, u, i, mem)[0]
        assert exact - hs <= Fraction(1e-12) * exact, (u, i, float((exact - hs) / exact))


def test_margin_formula() -> None:
    """ρ = 2·(2n + pp + 16)·2⁻⁵³ (completion.rounding_margin's error analysis), and at 1,024
    layers and 16 stages it stays under 5e-13 (the bound loses at most ~1e-10 of the optimum)."""
    assert completion.rounding_margin(4, 2) == 2 * (8 + 2 + 16) * 2.0 ** -53
    assert completion.rounding_margin(1024, 16) < 5e-13


@pytest.mark.parametrize("seed", SEEDS[:8])
def test_dp_proves_the_full_chains_optimal(seed: int) -> None:
    """Oracle: every stage split priced by ``iteration_time`` on the same tables (the
    strategies of a layer are identical, so the split is the whole plan)."""
    tables, _, _, _ = full_chain(seed)
    best = min(iteration_time(tables, a) for a in (Assignment(list(s), [0] * tables.num_layers)
                                                  for s in stage_splits(tables.num_layers, tables.pp))
               if fits(tables, a))
    res = DPBackend().solve_tables(tables, time_limit_s=None, rel_gap=0.0)
    assert res.termination is Termination.optimal
    assert fits(tables, res.solution)
    assert res.primal == pytest.approx(best, rel=1e-12)
    assert res.lower_bound == res.primal


# --- the partition test's Lagrangian differences (solvers/dp/partition.py) -------------------
# Its multipliers are the layers' own hull slopes, unbounded: here a first layer whose second
# strategy halves its time for 4 more bytes gives λ = 125 s/byte, so the prefix sums reach
# 1e13 s while the remaining stage times are 1e-4 s.


def steep_chain(seed: int, pp: int):
    """``(time, mem, cap, allowed, a, m)`` for :class:`CoverBound`: layer ``v`` has a light
    strategy (``a_v``, ``m_v``) and a heavy one (``a_v/2``, ``m_v + 4``); each of the ``pp``
    stages of the even split is filled exactly by its light layers, so that split with every
    layer light is the only plan that fits."""
    rng = random.Random(seed)
    per = 3 + seed % 3
    n = pp * per
    cap = float(rng.randint(10 ** 11, 2 * 10 ** 11)) + 0.5
    a = [1e3 * (1 + rng.random())] + [1e-4 * (1 + rng.random()) for _ in range(n - 1)]
    m = []
    for _ in range(pp):
        group = [float(rng.randint(10 ** 9, 2 * 10 ** 9)) for _ in range(per - 1)]
        m += group + [cap - sum(group)]
    time = [np.array([x, x / 2]) for x in a]
    mem = [[np.array([x, x + 4.0]) for x in m] for _ in range(pp)]
    return time, mem, cap, [np.arange(2)] * n, a, m, per


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("pp", [1, 2])
def test_partition_test_keeps_the_only_plan(seed: int, pp: int) -> None:
    """Every label of the only plan passes :meth:`CoverBound.feasible` with ``slack`` = its
    exact remaining stage time (rounded to float): that time is what the plan needs, so a
    proven ``need`` is at most it (the test allows its relative 1e-9)."""
    time, mem, cap, allowed, a, m, per = steep_chain(seed, pp)
    cover = CoverBound(time, mem, cap, allowed)
    for u in range(len(a) - 1):
        i = u // per
        used = float(sum(Fraction(x) for x in m[i * per:u + 1]))
        pc = float(sum(Fraction(x) for x in a[i * per:u + 1]))
        rest = float(sum(Fraction(x) for x in a[u + 1:]))
        ok = cover.feasible(u, i, np.array([pc]), np.array([used]), np.array([1e9]), np.array([rest]))
        assert ok[0], (u, i)


def steep_tables(seed: int, n: int = 96):
    """Cost tables of a ``pp = 1``, ``c = 2`` chain of ``n`` distinct layers (too many for the
    exact stage ranges, so the partition test uses its Lagrangian form) built like
    :func:`steep_chain`: light (``a_v``, ``m_v``) and heavy (``a_v/2``, ``m_v + 4``)
    strategies, the light memories filling the DP's capacity exactly. Every light plan is
    the only plan that fits; returns the tables and that plan."""
    rng = random.Random(seed)
    tables = build_cost_tables(random_chain(seed, n), small_cluster(1, 2),
                               Training(global_batch_size=16, seq_len=1024), STEEP_SPACE,
                               default_params(), 1, 2, Schedule.one_f_one_b)
    cap = tables.capacity_bytes + MEM_EPS * GIB
    a = [1e3 * (1 + rng.random())] + [1e-4 * (1 + rng.random()) for _ in range(n - 1)]
    m = [float(rng.randint(10 ** 8, 2 * 10 ** 8)) for _ in range(n - 1)]
    m.append(cap - sum(m))
    assert sum(Fraction(x) for x in m) == Fraction(cap)
    for v in range(n):
        k = len(tables.time[v])
        assert k >= 2
        time, mem = np.full(k, a[v]), np.full(k, m[v])
        time[1], mem[1] = a[v] / 2, m[v] + 4.0
        tables.time[v], tables.sync[v] = time, np.zeros(k)
        tables.weight_bytes[v], tables.act_bytes[v] = mem, np.zeros(k)
    for arrs in (tables.reshard, tables.cross_intra, tables.cross_inter):
        arrs[:] = [np.zeros_like(x) for x in arrs]
    light = Assignment([0] * n, [0] * n)
    assert fits(tables, light)
    return tables, light


STEEP_SPACE = SearchSpace(zero_levels=(0, 3), sequence_parallel=(False,),
                          recompute=(Recompute.none, Recompute.full))


@pytest.mark.parametrize("seed", range(3))
def test_exact_pass_at_the_optimum_finds_it(seed: int) -> None:
    """An exact pass with threshold ``tau`` must return a plan when one of value ``≤ tau``
    exists (chain.py: a pass that finds none "proves optimum > tau", and the deepening
    reports that as the lower bound). At ``tau`` = the only plan's value the old partition
    test pruned its labels (a wrong proof; with a worse incumbent the DP would have called
    it optimal)."""
    tables, light = steep_tables(seed)
    const = tables.params.iteration_overhead_s
    dp = ChainDP(tables, None)
    set_bottleneck_floor(dp, math.inf)
    assert dp.cover.exact is None               # the Lagrangian partition test is the one in use
    value = iteration_time(tables, light) - const
    found = dp.run(None, value)
    assert found is not None
    assert found[0] <= value * (1 + 1e-9)
    assert fits(tables, found[1])
