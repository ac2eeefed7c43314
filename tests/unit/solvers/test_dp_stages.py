"""The exact stage-range decomposition of the chain DP (solvers/dp/stages.py).

Oracles:

- ``f_j(s, e)`` (the run-shift table) equals the integer knapsack enumerated by brute
  force on every range of random chains built from runs of identical layers, and the
  same chain with every layer made distinct (no run shift) gives the same table;
- ``tail_time`` equals the enumerated knapsack for every budget, inside a run and with
  a short rest after it;
- on the seeded tiny chains of tests/differential/test_dp_bruteforce.py and on tiny decoder chains of
  identical blocks (memory-bound capacities, brute-forced): the decomposition bound is
  at most the optimum, its floor at most the optimum's ``max p``, its plan fits and is
  priced by ``iteration_time``, and an exact pass with the exact partition test at
  threshold = optimum finds it while one just below finds nothing;
- the bound is strictly stronger than the LP partition bound on some memory-bound
  chain (it is not a no-op).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from support.bruteforce import brute_force
from support.dp_cases import SPACE, make_instance, seeded_case
from autopar_opt.cost.context import user_reserve_for
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.ir.hardware import GIB
from autopar_opt.model_zoo.transformer import decoder_lm
from autopar_opt.solvers.dp.chain import ChainDP, set_bottleneck_floor, stage_decomposition, solve_chain
from autopar_opt.solvers.dp.common import fits, iteration_time, least_memory, stage_terms
from autopar_opt.solvers.dp.stages import StageRanges
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.ir.training import Schedule, Training

SEEDS = [s for s in range(160) if make_instance(s).graph.is_chain()][:40]


def _random_runs(seed: int, distinct: bool = False):
    """Chain of 2-4 runs of identical layers (1-4 layers each), 3 strategies, 2 stages."""
    rng, noise = np.random.default_rng(seed), np.random.default_rng(seed + 1000)
    time, mem = [], [[], []]
    for _ in range(rng.integers(2, 5)):
        t, m = rng.uniform(1, 3, 3), rng.uniform(1, 4, 3)
        for _ in range(rng.integers(1, 5)):
            jitter = noise.uniform(0, 1e-3, 3) if distinct else 0.0
            time.append(t + jitter)
            mem[0].append(m * 2 + jitter)
            mem[1].append(m + jitter)
    cap = float(rng.uniform(4, 12))
    return time, mem, cap


def _enumerate(time, mem_j, cap, s, e, budget=None):
    """Least Σ time over [s, e) with Σ memory ≤ budget (cap), by enumeration."""
    budget = cap if budget is None else budget
    best = math.inf
    for ks in itertools.product(*[range(len(time[v])) for v in range(s, e)]):
        m = sum(mem_j[v][k] for v, k in zip(range(s, e), ks))
        if m <= budget and m <= cap:
            best = min(best, sum(time[v][k] for v, k in zip(range(s, e), ks)))
    return best


@pytest.mark.parametrize("seed", range(12))
def test_range_table_equals_the_enumerated_knapsack(seed: int) -> None:
    time, mem, cap = _random_runs(seed)
    n = len(time)
    sr = StageRanges(time, mem, cap, [np.arange(3)] * n)
    assert sr.f, "a short chain is always cheap enough"
    assert sr.run.max() >= 2 or n <= 4
    for j in range(2):
        for s in range(n):
            for e in range(s + 1, min(n, s + 6) + 1):
                want = _enumerate(time, mem[j], cap, s, e)
                assert sr.f[j][s, e] == (pytest.approx(want, rel=1e-12) if math.isfinite(want) else math.inf), \
                    (j, s, e)
    # the same chain with every layer distinct: no run shift, every row built in full
    t2, m2, _ = _random_runs(seed, distinct=True)
    sr2 = StageRanges(t2, m2, cap, [np.arange(3)] * n)
    assert sr2.run.max() == 1
    for s in range(n):
        for e in range(s + 1, min(n, s + 5) + 1):
            want = _enumerate(t2, m2[0], cap, s, e)
            assert sr2.f[0][s, e] == (pytest.approx(want, rel=1e-12) if math.isfinite(want) else math.inf)


@pytest.mark.parametrize("seed", range(8))
def test_tail_time_equals_the_enumerated_knapsack(seed: int) -> None:
    time, mem, cap = _random_runs(seed)
    n = len(time)
    sr = StageRanges(time, mem, cap, [np.arange(3)] * n)
    budgets = np.linspace(0.5, cap, 7)
    checked = 0
    for s in range(n):
        for e in range(s + 1, min(n, s + 5) + 1):
            got = sr.tail_time(1, s, e, budgets)
            if got is None:
                continue
            want = [_enumerate(time, mem[1], cap, s, e, b) for b in budgets]
            assert np.allclose(got, want, rtol=1e-12), (s, e)
            checked += 1
    assert checked >= n


def _tail_ok_by_ends(sr: StageRanges, i, u, pc, mem, bott, end, psi_next, slack):
    """The partition test of :meth:`StageRanges.tail_ok` written end by end from
    :meth:`StageRanges.tail_time` (the form it had before the run's ends were batched)."""
    budget = sr.cap - mem
    ok = np.zeros(len(pc), dtype=bool)
    need = np.full(len(pc), np.inf)
    for e in range(u + 1, (int(end.max()) if len(end) else u) + 1):
        if not np.isfinite(psi_next[e]):
            continue
        tt = sr.tail_time(i, u + 1, e, budget)
        if tt is None:
            ok |= end >= e
            continue
        fine = (end >= e) & (pc + tt <= bott * (1 + 1e-9) + 1e-15)
        need = np.where(fine, np.minimum(need, tt + psi_next[e]), need)
    return ok | (np.isfinite(need) if slack is None else need <= slack * (1 + 1e-9) + 1e-15)


@pytest.mark.parametrize("seed", range(10))
def test_batched_tail_test_equals_the_end_by_end_test(seed: int) -> None:
    """``tail_ok`` (ends inside the run in one rank search, :meth:`StageRanges.run_times`)
    gives the same answer as the end-by-end test on random labels, bottlenecks, reaches and
    slacks, with some ``Ψ`` entries infinite; ``run_times`` equals ``tail_time`` entry by entry."""
    time, mem, cap = _random_runs(seed)
    n = len(time)
    sr = StageRanges(time, mem, cap, [np.arange(3)] * n)
    rng = np.random.default_rng(seed)
    both = 0
    for i in range(2):
        for u in range(n):
            s = u + 1
            if s < n:
                ells = np.arange(0, int(sr.run[s]) + 1)
                budget = rng.uniform(0, cap, 9)
                got = sr.run_times(i, s, ells, budget)
                for row, ell in enumerate(ells):
                    want = sr.tail_time(i, s, s + int(ell), budget)
                    assert np.array_equal(got[row], want), (i, u, ell)
            for _ in range(3):
                k = 12
                pc, m = rng.uniform(0, 6, k), rng.uniform(0, cap, k)
                end = rng.integers(u, n + 1, k)
                psi = rng.uniform(0, 8, n + 1)
                psi[rng.random(n + 1) < 0.3] = np.inf
                bott = float(rng.uniform(2, 12))
                slack = rng.uniform(0, 14, k) if rng.random() < 0.7 else None
                got = sr.tail_ok(i, u, pc, m, bott, end, psi, slack)
                want = _tail_ok_by_ends(sr, i, u, pc, m, bott, end, psi, slack)
                assert np.array_equal(got, want), (i, u)
                both += int(got.sum()) * int((~got).sum())
    assert both > 0   # both answers occur: the test discriminates


def _decoder_case(blocks: int, pp: int, factor: float):
    """Tiny decoder chain (identical blocks) on 2 GPUs per stage, capacity ``factor`` × the
    least memory any plan needs; the brute-force optimum."""
    graph = decoder_lm("tiny", blocks, 256, 256, 4, 1024, 1000)
    cluster = small_cluster(1, 2 * pp)
    tables = build_cost_tables(graph, cluster, Training(global_batch_size=16, seq_len=256), SPACE,
                               default_params(), pp, 4, Schedule.one_f_one_b)
    reserve = user_reserve_for(least_memory(tables) / GIB * factor, cluster.device.hbm_gib, default_params())
    training = Training(global_batch_size=16, seq_len=256, memory_reserve_gib=reserve)
    tables = build_cost_tables(graph, cluster, training, SPACE, default_params(), pp, 4, Schedule.one_f_one_b)
    ref = brute_force(graph, cluster, training, SPACE, pp, 4, Schedule.one_f_one_b)
    return tables, ref


def _check_against_optimum(tables, ref) -> float:
    """Every oracle of the module docstring on one instance; returns the bound's gain over the LP root."""
    const = tables.params.iteration_overhead_s
    dp = ChainDP(tables, None)
    set_bottleneck_floor(dp, math.inf)
    root = dp.root_bound() + const
    inc, ub, lb = stage_decomposition(dp)
    if ref is None:
        assert inc is None or not fits(tables, inc)
        return 0.0
    opt = ref[0]
    assert lb <= opt * (1 + 1e-9) + 1e-15
    if inc is not None:
        assert fits(tables, inc) and ub == iteration_time(tables, inc) and ub >= opt * (1 - 1e-9)
    found = dp.run(None, opt - const)
    assert found is not None and found[0] == pytest.approx(opt - const, rel=1e-9)
    assert dp.run(None, (opt - const) * (1 - 1e-6) - 1e-12) is None
    out = solve_chain(tables)
    assert out.exhaustive and out.value == pytest.approx(opt, rel=1e-9)
    # the floor is under the bottleneck of every plan, so of this optimal one
    assert dp.bott_floor <= max(stage_terms(tables, out.assignment)[0]) * (1 + 1e-9) + 1e-15
    return lb - root


@pytest.mark.parametrize("seed", SEEDS)
def test_decomposition_on_seeded_chains(seed: int) -> None:
    _check_against_optimum(*seeded_case(seed))


@pytest.mark.parametrize("blocks,pp,factor", [(3, 2, 1.05), (3, 2, 1.3), (4, 3, 1.1), (2, 2, 1.0001)])
def test_decomposition_on_runs_of_identical_blocks(blocks: int, pp: int, factor: float) -> None:
    tables, ref = _decoder_case(blocks, pp, factor)
    assert ref is not None
    _check_against_optimum(tables, ref)


def test_the_exact_bound_beats_the_lp_bound_somewhere() -> None:
    """Not a no-op: on a memory-bound chain of identical blocks the integer decomposition
    proves more than the LP partition bound (root bound)."""
    gains = [_check_against_optimum(*_decoder_case(b, pp, f)) for b, pp, f in [(3, 2, 1.05), (4, 3, 1.1)]]
    assert max(gains) > 0


@pytest.mark.parametrize("blocks,pp,factor", [(3, 2, 0.97), (4, 3, 0.99), (2, 2, 0.9)])
def test_the_decomposition_proves_that_no_plan_fits(blocks: int, pp: int, factor: float) -> None:
    """Below the least memory any plan needs, brute force finds no plan; the complete
    range tables admit no split (bound ``+inf``) and the chain DP answers "no plan",
    proven, without a label pass."""
    tables, ref = _decoder_case(blocks, pp, factor)
    assert ref is None
    dp = ChainDP(tables, None)
    set_bottleneck_floor(dp, math.inf)
    inc, ub, lb = stage_decomposition(dp)
    assert inc is None and ub == math.inf and lb == math.inf
    out = solve_chain(tables)
    assert out.assignment is None and out.exhaustive and out.lower_bound == math.inf
    assert out.labels == 0
