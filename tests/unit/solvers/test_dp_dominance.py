"""The chain DP's label dominance filter (solvers/dp/dominance.py) against plain oracles.

Oracle 1: the dominance relation written out per pair in plain Python (chain.py's
module docstring). On random label sets with many ties (small integer grids, so
that equal keys, equal memory, equal working sets and equal strategies are frequent), in the last stage
and not, with and without a safe memory level, the filter must keep an antichain
that covers every removed row:

- every removed row is dominated by some *kept* row (nothing is lost: the kept
  labels' completions include an optimal one whenever the removed ones' do);
- no kept row is dominated by an earlier kept row (the filter is complete).

The window pre-filter and the blockwise all-pairs test are exercised separately
(window 0 with a block of 7 rows; a wide window) and together.

Oracle 2: the whole DP with the filter's window and block shrunk or widened equals
the MILP (HiGHS on the direct matrix, cold) on memory-bound decoder chains long
enough that label groups span several blocks.

Oracle 3: the completion bounds, whose multiplier vectors are folded into one line per
slope, equal the maximum over every vector computed from the module's formula.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from autopar_opt.cost.context import user_reserve_for
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.ir.hardware import GIB
from autopar_opt.model_zoo.transformer import decoder_lm
from autopar_opt.solvers.dp import dominance
from autopar_opt.solvers.dp.chain import ChainDP, solve_chain
from autopar_opt.solvers.dp.common import fits, iteration_time, least_memory
from autopar_opt.ir.training import Schedule, SearchSpace, Training
from autopar_opt.model_zoo.synthetic import small_cluster


def _dominates(x: np.ndarray, y: np.ndarray, kx: int, ky: int, c1: float, last: bool, safe: float) -> bool:
    """Label ``x`` dominates label ``y``: the relation of chain.py's docstring, one pair."""
    S, M, PC, G, GC, MEM, WS = range(7)
    f = -math.inf if last else 0.0
    # no more stored memory and no more stored memory + working set (then every completion
    # that fits after y fits after x), or memory below the safe level
    if not (((x[MEM] <= y[MEM] and x[MEM] + x[WS] <= y[MEM] + y[WS]) or x[MEM] <= safe) and kx <= ky):
        return False
    d = max(f, x[M] - y[M], x[PC] - y[PC])
    g = max(f, x[G] - y[G], x[GC] - y[GC])
    return c1 * d + g + x[S] <= y[S]


def _labels(rng: np.random.Generator, n: int, c1: float):
    """Random labels on a small grid (ties everywhere), sorted as chain.py sorts a group."""
    pc = rng.integers(0, 5, n).astype(float)
    gc = rng.integers(0, 3, n).astype(float)
    M = np.maximum(pc, rng.integers(0, 6, n))
    G = np.maximum(gc, rng.integers(0, 4, n))
    S = pc + rng.integers(0, 8, n)
    mem = rng.integers(0, 6, n).astype(float)
    ws = rng.integers(0, 3, n).astype(float)
    lab = np.column_stack([S, M, pc, G, gc, mem, ws])
    ks = rng.integers(0, 3, n)
    key = S + c1 * M + G
    order = np.lexsort((gc, pc, mem + ws, mem, key))
    return lab[order], ks[order]


@pytest.mark.parametrize("window,block", [(0, 7), (dominance.WINDOW, 7), (64, 512), (3, 11)])
@pytest.mark.parametrize("seed", range(6))
def test_filter_keeps_a_covering_antichain(seed: int, window: int, block: int, monkeypatch) -> None:
    monkeypatch.setattr(dominance, "WINDOW", window)
    monkeypatch.setattr(dominance, "BLOCK", block)
    rng = np.random.default_rng(seed)
    removed_total = 0
    for last in (False, True):
        for safe in (-math.inf, 2.0):
            c1 = float(rng.choice([0.0, 1.0, 3.0]))
            lab, ks = _labels(rng, 60, c1)
            out = dominance.dominated(lab, ks, c1, last, safe)
            kept = np.flatnonzero(~out)
            for y in np.flatnonzero(out):
                assert any(_dominates(lab[x], lab[y], ks[x], ks[y], c1, last, safe) for x in kept), y
            for a, x in enumerate(kept):
                for y in kept[a + 1:]:
                    assert not _dominates(lab[x], lab[y], ks[x], ks[y], c1, last, safe), (x, y)
            removed_total += int(out.sum())
    assert removed_total > 0   # the grids make dominance frequent: the test is not vacuous


def test_window_alone_never_removes_an_undominated_row() -> None:
    """The window pass is the part that runs first: every row it removes is dominated by
    one of the ``width`` rows just before it, and with a full width it finds every row that
    any earlier row dominates."""
    rng = np.random.default_rng(11)
    lab, ks = _labels(rng, 50, 1.0)
    out = dominance.window_dominated(lab, ks, 1.0, 0.0, -math.inf, 4)
    for y in np.flatnonzero(out):
        assert any(_dominates(lab[x], lab[y], ks[x], ks[y], 1.0, False, -math.inf)
                   for x in range(max(0, y - 4), y))
    full = dominance.window_dominated(lab, ks, 1.0, 0.0, -math.inf, len(lab))
    want = [any(_dominates(lab[x], lab[y], ks[x], ks[y], 1.0, False, -math.inf) for x in range(y))
            for y in range(len(lab))]
    assert full.tolist() == want


def _tight_chain(blocks: int, pp: int, factor: float):
    """A decoder chain (identical blocks) on 2 GPUs per stage, capacity ``factor`` × the least
    memory any plan needs (every stage memory-bound)."""
    graph = decoder_lm("tiny", blocks, 256, 256, 4, 1024, 1000)
    cluster = small_cluster(1, 2 * pp)
    space = SearchSpace()
    base = Training(global_batch_size=16, seq_len=256)
    tables = build_cost_tables(graph, cluster, base, space, default_params(), pp, 4, Schedule.one_f_one_b)
    reserve = user_reserve_for(least_memory(tables) / GIB * factor, cluster.device.hbm_gib, default_params())
    training = Training(global_batch_size=16, seq_len=256, memory_reserve_gib=reserve)
    return build_cost_tables(graph, cluster, training, space, default_params(), pp, 4, Schedule.one_f_one_b)


def _milp_optimum(tables) -> float:
    from autopar_opt.formulations.direct import build_direct
    from autopar_opt.solvers.registry import get_backend
    form = build_direct(tables)
    res = get_backend("highs").solve_model(form.matrix, form.problem_class, time_limit_s=120, rel_gap=1e-9)
    # At its 1e-9 feasibility tolerances HiGHS may stop with its bound up to ~1.5e-5
    # below the incumbent (then reported feasible, not optimal): the incumbent is still
    # the oracle the DP must equal, and the bound must not exceed it.
    assert res.termination.value in ("optimal", "feasible")
    assert res.lower_bound <= res.primal * (1 + 1e-12)
    return float(res.primal)


@pytest.mark.parametrize("blocks,pp,factor", [(14, 2, 1.15), (12, 3, 1.3)])
def test_dp_equals_milp_with_the_filter_reshaped(blocks: int, pp: int, factor: float, monkeypatch) -> None:
    """An unbounded exact pass (threshold ``inf``: dominance alone prunes, groups of up to
    about 200 labels) and the whole solve, each with three shapes of the filter."""
    tables = _tight_chain(blocks, pp, factor)
    opt = _milp_optimum(tables)
    const = tables.params.iteration_overhead_s
    for window, block in ((dominance.WINDOW, dominance.BLOCK), (0, 5), (2, 9)):
        monkeypatch.setattr(dominance, "WINDOW", window)
        monkeypatch.setattr(dominance, "BLOCK", block)
        value, asg = ChainDP(tables, None).run(None, math.inf)
        assert value + const == pytest.approx(opt, rel=1e-9)
        assert fits(tables, asg) and iteration_time(tables, asg) == pytest.approx(opt, rel=1e-9)
        out = solve_chain(tables)
        assert out.exhaustive and fits(tables, out.assignment)
        assert out.value == pytest.approx(opt, rel=1e-9)


@pytest.mark.parametrize("blocks,pp,factor", [(10, 2, 1.1), (9, 3, 1.3)])
def test_completion_bound_by_slope_equals_the_multiplier_maximum(blocks: int, pp: int, factor: float) -> None:
    """CompletionBounds folds the multiplier vectors that share ``λ_i`` into one line per
    slope: its bounds equal ``max_λ (h_λ − λ_i·(C − mem) − C·Σ_{j>i} λ_j)`` over all vectors
    (the module's formula, computed here directly) for every state and random memories."""
    from autopar_opt.solvers.dp.completion import CompletionBounds
    tables = _tight_chain(blocks, pp, factor)
    dp = ChainDP(tables, None)
    cb = CompletionBounds(tables, dp.mem, dp.cap, dp.edge_of, dp.allowed)
    lam = np.array(cb.lambdas)
    assert min(len(s) for s, _ in cb._groups) < len(lam)   # some vectors do share a slope
    rng = np.random.default_rng(blocks)
    for u in range(tables.num_layers):
        for i in range(pp):
            k = rng.integers(0, len(tables.time[u]), 20)
            mem = rng.uniform(0, dp.cap, 20)
            pen = lam[:, i:i + 1] * (dp.cap - mem)[None, :] + dp.cap * lam[:, i + 1:].sum(axis=1)[:, None]
            want = [np.maximum((h[u][i][:, k] - pen).max(axis=0), 0.0) for h in (cb.H, cb.Hp)]
            got = cb.remaining(u, i, k, mem)
            for g, w in zip(got, want):
                assert np.allclose(g, w, rtol=1e-12, atol=1e-15)
            if cb.Hw[u][i] is not None:
                w = np.maximum((cb.Hw[u][i][:, k] - pen).max(axis=0), 0.0)
                pc, gc = rng.uniform(0, 1, 20), rng.uniform(0, 1, 20)
                assert np.allclose(cb.weighted(u, i, k, mem, pc, gc), (cb.c1 * pc + gc) / (pp - i) + w,
                                   rtol=1e-12, atol=1e-15)
