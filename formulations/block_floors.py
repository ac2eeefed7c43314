"""Per-stage floors of a block chain and the split plan they give (issue 18).

``F_i(m)`` is the least total time of ``m`` identical blocks whose memory fits
stage ``i`` beside the least prefix/suffix stored memory there: an integer knapsack
(any strategy mix, ``sum of counts = m``, stored memory plus the largest working
set ``<= room``) solved exactly by Pareto fronts of (memory, time), one block at
a time, once per working-set level (:class:`StageFloor`). The block MILP uses it
as the stage-size cut ``p[i] >= F_i(m[i])`` (valid: resharding is ``>= 0``)
and, with the fronts' back pointers, builds its own first plan
(:func:`split_plan`): the least bottleneck ``B`` for which the stages' largest
block counts with ``F_i(m) + prefix/suffix time <= B`` cover the chain, each
stage filled with its knapsack solution, the prefix and suffix on their
least-memory strategies. It is a heuristic (priced exactly by the caller, and
kept only if it fits with the prefix's and suffix's working sets), not a bound.
"""

from __future__ import annotations

import numpy as np

from autopar_opt.core.assignment import Assignment
from autopar_opt.cost.tables import CostTables
from autopar_opt.formulations.chain_blocks import BlockChain, best_path
from autopar_opt.ir.hardware import GIB, MEM_EPS


class _Front:
    """``F[m]`` of the knapsack over some strategies within ``cap``, with back pointers."""

    def __init__(self, time: np.ndarray, mem: np.ndarray, cap: float, N: int,
                 ids: np.ndarray) -> None:
        self.F = np.full(N + 1, np.inf)
        self.F[0] = 0.0
        self.trace: list[tuple[np.ndarray, np.ndarray]] = [(np.zeros(0, int), np.zeros(0, int))]
        # a strategy no faster and no smaller than another never helps (swap it): the
        # fronts run over the others only (2 of 10-14 on the growth benchmark's blocks)
        keep = np.flatnonzero([not np.any((time <= time[k]) & (mem <= mem[k]) & (
            (time < time[k]) | (mem < mem[k]) | (np.arange(len(time)) < k))) for k in range(len(time))])
        self.types = ids[keep]
        time, mem = time[keep], mem[keep]
        fm, ft = np.zeros(1), np.zeros(1)
        K = len(time)
        for m in range(1, N + 1):
            cm, ct = (fm[:, None] + mem[None, :]).ravel(), (ft[:, None] + time[None, :]).ravel()
            ok = np.flatnonzero(cm <= cap)
            if not len(ok):
                break
            order = ok[np.lexsort((ct[ok], cm[ok]))]
            keep = order[ct[order] < np.minimum.accumulate(np.r_[np.inf, ct[order][:-1]])]
            fm, ft = cm[keep], ct[keep]
            self.trace.append((keep // K, keep % K))   # parent point, strategy added
            self.F[m] = ft[-1]


class StageFloor:
    """``F[m]`` for one stage with the back pointers of every front.

    With working sets ``work`` (GiB per strategy; the stage holds the largest of
    its blocks', :func:`~autopar_opt.cost.tables.stage_memory`) the knapsack is
    solved once per level ``L`` of the working set, over the strategies with
    ``work <= L`` within ``cap - L``, and ``F[m]`` is the least over the levels:
    exact, since a stage whose largest working set is ``L`` is a solution at
    level ``L``. Levels are those of the strategies on the (time, memory,
    working set) Pareto front (a dominated strategy is never needed)."""

    def __init__(self, time: np.ndarray, mem: np.ndarray, cap: float, N: int,
                 work: np.ndarray | None = None, base_work: float = 0.0) -> None:
        """``base_work``: a working set the stage holds besides its blocks (the
        prefix's or suffix's, for :func:`split_plan`): the level is then
        ``max(L, base_work)``."""
        work = np.zeros(len(time)) if work is None else np.asarray(work, float)
        idx = np.arange(len(time))
        front = [k for k in idx if not np.any((time <= time[k]) & (mem <= mem[k]) & (work <= work[k]) & (
            (time < time[k]) | (mem < mem[k]) | (work < work[k]) | (idx < k)))]
        levels = sorted({float(work[k]) for k in front}) or [0.0]
        self.fronts: list[_Front] = []
        for L in levels:
            sub = np.flatnonzero(work <= L)
            self.fronts.append(_Front(time[sub], mem[sub], cap - max(L, base_work), N, sub))
        stack = np.array([f.F for f in self.fronts])
        #: per block count, the level whose front reaches ``F[m]``
        self.pick = stack.argmin(axis=0)
        self.F = stack.min(axis=0)

    def counts(self, m: int, K: int) -> np.ndarray:
        """Block counts per strategy of the least-time ``m``-block solution."""
        out = np.zeros(K, dtype=int)
        front = self.fronts[int(self.pick[m])]
        idx = len(front.trace[m][0]) - 1 if m else 0
        for step in range(m, 0, -1):
            parent, kind = front.trace[step]
            out[front.types[kind[idx]]] += 1
            idx = parent[idx]
        return out


def stage_floors(tables: CostTables, chain: BlockChain) -> list[StageFloor]:
    """The :class:`StageFloor` of every stage (room: capacity minus the least
    prefix memory in stage 0 and the least suffix memory in the last stage).

    The room carries the same allowance as every feasibility test
    (``fits``, the DP: ``capacity + MEM_EPS`` GiB), so a stage that exactly
    fills the device is not lost to the round-off of a sum of GiB values."""
    pp, n, b = tables.pp, tables.num_layers, chain.start
    out = []
    for i in range(pp):
        room = float(tables.capacity_bytes)
        if chain.prefix and i == 0:
            room -= float(layer_bytes(tables, 0, i).min())
        if chain.suffix and i == pp - 1:
            room -= float(layer_bytes(tables, n - 1, i).min())
        out.append(StageFloor(np.asarray(tables.time[b], float), layer_bytes(tables, b, i) / GIB,
                              room / GIB + MEM_EPS, chain.count,
                              np.asarray(tables.working_bytes[b], float) / GIB))
    return out


def layer_bytes(tables: CostTables, u: int, i: int) -> np.ndarray:
    """``W + inflight_i·H`` of layer ``u`` per strategy in stage ``i`` (bytes)."""
    return np.asarray(tables.weight_bytes[u], float) + float(tables.inflight[i]) * np.asarray(tables.act_bytes[u], float)


def _memory_front(tables: CostTables, u: int, i: int) -> list[int]:
    """Strategies of layer ``u`` in stage ``i`` on the (stored memory, working set)
    Pareto front, least stored memory first."""
    m, x = layer_bytes(tables, u, i), np.asarray(tables.working_bytes[u], float)
    out, best = [], np.inf
    for k in np.lexsort((x, m)):
        if x[k] < best:
            out.append(int(k))
            best = x[k]
    return out


def split_plan(tables: CostTables, chain: BlockChain, floors: list[StageFloor]) -> Assignment | None:
    """The split heuristic of the module doc (None when no split fits), tried with the
    prefix and suffix on each strategy of their (stored memory, working set) front;
    the split of the least bottleneck ``B`` wins."""
    n, pp = tables.num_layers, tables.pp
    kps = _memory_front(tables, 0, 0) if chain.prefix else [None]
    kss = _memory_front(tables, n - 1, pp - 1) if chain.suffix else [None]
    best = None
    memo: dict[tuple, StageFloor] = {}
    for kp in kps:
        for ks in kss:
            got = _split_with(tables, chain, floors, kp, ks, memo)
            if got is not None and (best is None or got[0] < best[0]):
                best = got
    return None if best is None else best[1]


def _split_with(tables: CostTables, chain: BlockChain, floors: list[StageFloor],
                kp: int | None, ks: int | None, memo: dict) -> tuple[float, Assignment] | None:
    """The split with the prefix on ``kp`` and the suffix on ``ks``: its bottleneck and plan."""
    pp, n, N = tables.pp, tables.num_layers, chain.count
    lo = [0 if (pp > 1 and ((i == 0 and chain.prefix) or (i == pp - 1 and chain.suffix))) else 1
          for i in range(pp)]
    # stage 0 and the last stage hold the chosen prefix/suffix: their floors with its
    # stored memory and working set (the shared floors, a bound, assume the least)
    floors = list(floors)
    b = chain.start
    for i, u, k in ((0, 0, kp), (pp - 1, n - 1, ks)):
        if k is None:
            continue
        key = (i, kp, ks) if pp == 1 else (i, k)
        if key in memo:
            floors[i] = memo[key]
            continue
        room = float(tables.capacity_bytes) - float(layer_bytes(tables, u, i)[k])
        other = n - 1 if i == 0 else 0
        if pp == 1 and (kp if other == 0 else ks) is not None:   # one stage holds both
            room -= float(layer_bytes(tables, other, i)[kp if other == 0 else ks])
        base = max(float(tables.working_bytes[x][kx]) for x, kx in ((0, kp), (n - 1, ks))
                   if kx is not None and (pp == 1 or x == u))
        floors[i] = StageFloor(np.asarray(tables.time[b], float), layer_bytes(tables, b, i) / GIB,
                               room / GIB + MEM_EPS, N,
                               np.asarray(tables.working_bytes[b], float) / GIB, base / GIB)
        memo[key] = floors[i]
    extra = [0.0] * pp
    if kp is not None:
        extra[0] += float(tables.time[0][kp])
    if ks is not None:
        extra[pp - 1] += float(tables.time[n - 1][ks])
    cands = np.unique(np.concatenate([f.F[np.isfinite(f.F)] + e for f, e in zip(floors, extra)]))
    best = None
    for B in cands:      # the least B whose largest counts cover the chain
        top = [int(np.searchsorted(f.F + e, B, side="right")) - 1 for f, e in zip(floors, extra)]
        if all(t >= l for t, l in zip(top, lo)) and sum(top) >= N:
            best = top
            break
    bott = float(B) if best is not None else np.inf
    if best is None:
        return None
    m = list(best)
    while sum(m) > N:    # give back the block of the largest marginal time
        marg = [f.F[k] - f.F[k - 1] if k > l else -np.inf for f, k, l in zip(floors, m, lo)]
        m[int(np.argmax(marg))] -= 1
    K = len(tables.strategies[chain.start])
    stage, choice = [], []
    if kp is not None:
        stage.append(0)
        choice.append(kp)
    for i in range(pp):
        counts = floors[i].counts(m[i], K)
        used = {int(chain.gid[k]) for k in range(K) if counts[k]}
        if used:
            path = min((best_path(chain.reshard, used, f, h) for f in used for h in used if f != h or len(used) == 1),
                       key=lambda p: sum(chain.reshard[a, b] for a, b in zip(p, p[1:])))
            for l in dict.fromkeys(path):
                for k in range(K):
                    if chain.gid[k] == l:
                        choice += [k] * int(counts[k])
                        stage += [i] * int(counts[k])
    if ks is not None:
        stage.append(pp - 1)
        choice.append(ks)
    return (bott, Assignment(stage, choice)) if len(stage) == n else None
