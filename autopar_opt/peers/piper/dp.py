"""Piper's problem solved exactly by dynamic programming over successor-closed sets.

Recurrence (Piper's ``Graph::runDP``, Tarnawski et al., NeurIPS 2021, §4, with
the per-stage TMPC choice solved exactly instead of greedily): for a
successor-closed set ``I`` (the *last* stages of the pipeline), ``s`` the sum
of their data degrees and ``q`` the devices they use,

    F[I][s][q] = min over J ⊂ I successor-closed, (t, d) with d | N:
                 max( F[J][s-d][q-t·d],  TPS(I \\ J, t, d, y = ceil(s/d)) )

with ``F[∅][0][0] = 0``; the answer is ``min_{s ≤ N, q ≤ k} F[V][s][q]``.
``s`` is the exact ``σ`` of the stage put in front, so ``y`` is exact. When
the instance has one tensor degree ``t₀``, ``q = t₀·s`` and the ``q`` axis
is dropped. The sets come from :mod:`autopar_opt.core.ideals` (``closed="succ"``)
after :func:`~autopar_opt.peers.piper.model.reduce_instance` removed the
nodes that cannot change any cost (GNMT: 17,914 sets → 100). Every
``F[I]`` is a dense numpy array; a transition is one shifted ``maximum`` and
``minimum`` per ``(J, t, d)``. The plan is rebuilt by walking back through
the table and re-deriving each stage's exact TMPC choice.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from autopar_opt.core.ideals import TooManyIdeals, enumerate_ideals
from autopar_opt.peers.outcome import PeerOutcome
from autopar_opt.peers.piper.evaluate import evaluate_piper
from autopar_opt.peers.piper.format import PiperInstance
from autopar_opt.peers.piper.model import PiperPlan, PiperStage, Prepared, reduce_instance
from autopar_opt.peers.piper.restore import restore_plan
from autopar_opt.peers.piper.stage import DegreeArrays, StageBatch
from autopar_opt.core.result import Termination

#: Largest number of successor-closed sets the DP enumerates.
IDEAL_LIMIT = 200_000


class _Timeout(RuntimeError):
    pass


def divisors(n: int, upto: int) -> list[int]:
    """Divisors of ``n`` that are ``<= upto``, ascending."""
    return [d for d in range(1, min(n, upto) + 1) if n % d == 0]


@dataclass
class _Cells:
    """Pareto cells of one successor-closed set: ``(s, q, value)`` and how each was reached."""

    s: np.ndarray
    q: np.ndarray
    v: np.ndarray
    back: np.ndarray | None = None      # (cells, 5): sub-set id, t, d, source cell, y


class _Shared:
    """What every pass of one solve has in common (built once, reused by each :class:`PassTable`).

    The passes differ only in their upper bound and mode; the lattice, the
    per-degree arrays, each step's sub-sets and each step's :class:`StageBatch`
    (its costs, memory and cut arrays, the dearest part of a pass) are the same,
    so they are kept here. Batches are kept up to :data:`BATCH_CACHE_BYTES`;
    past that a batch is rebuilt per pass (same values, more time).
    """

    def __init__(self, prep: Prepared, degrees: list[int]) -> None:
        edges = [(u, v) for u, v, _ in prep.edges]
        self.lat = enumerate_ideals(prep.n, edges, closed="succ", limit=IDEAL_LIMIT)
        self.members = self.lat.members()
        self.arrays = {t: DegreeArrays(prep, t) for t in degrees}
        self.subs: dict[int, np.ndarray] = {}
        self.batches: dict[tuple[int, int], StageBatch] = {}
        self.batch_bytes = 0
        self.knapsack_cache: dict = {}

    def sub_sets(self, j: int) -> np.ndarray:
        got = self.subs.get(j)
        if got is None:
            got = self.subs[j] = np.array([i for i in self.lat.sub_ideals(j) if i != j], dtype=np.int64)
        return got


#: Most bytes of stage batches one solve keeps between its passes (ResNet-50, 242 sets: ~130 MB).
BATCH_CACHE_BYTES = 512 * 2**20


class PassTable:
    """The DP over Pareto cells (see module docstring)."""

    def __init__(self, prep: Prepared, deadline: float | None, shared: _Shared | None = None) -> None:
        inst = prep.inst
        self.prep, self.deadline = prep, deadline
        self.degrees = sorted(t for t in prep.opts if any(o is not None for o in prep.opts[t]))
        self.single = len(self.degrees) == 1
        t0 = self.degrees[0]
        self.k, self.N = inst.devices, inst.microbatches
        self.smax = min(self.N, self.k // t0)
        self.qdim = 1 if self.single else self.k + 1
        self.shared = shared if shared is not None else _Shared(prep, self.degrees)
        self.arrays = self.shared.arrays
        self.lat = self.shared.lat
        self.members = self.shared.members
        self.cells: list[_Cells | None] = [None] * self.lat.num_ideals
        self.knapsacks = 0
        self.knapsack_cache = self.shared.knapsack_cache
        self.exact = True
        self.upper = math.inf        # value of a known plan: cells above it are dropped
        self.feasibility = False     # every stage that fits memory is worth 0: is there a plan?
        self.relaxation = False      # every stage that fits memory is worth lo(d): a lower bound
        self._work_bounds()

    def _work_bounds(self) -> None:
        """Per set: least Σ_v min p (for Σ d) and least Σ_v min t·p (for devices) of its complement."""
        inst, keep = self.prep.inst, self.prep.keep
        pmin = np.full(self.prep.n, np.inf)
        tpmin = np.full(self.prep.n, np.inf)
        for t in self.degrees:
            for v, o in enumerate(self.prep.opts[t]):
                if o is not None:
                    pmin[v] = min(pmin[v], float(o.p.min()))
                    tpmin[v] = min(tpmin[v], t * float(o.p.min()))
        outside = ~self.members
        self.rest_p = outside @ np.where(np.isfinite(pmin), pmin, 0.0)
        self.rest_tp = outside @ np.where(np.isfinite(tpmin), tpmin, 0.0)
        del inst, keep

    def _limits(self, j: int) -> tuple[int, int]:
        """Largest ``s`` and ``q`` a cell of set ``j`` may use and still leave enough for the rest.

        A plan of value ≤ U has ``d_i ≥ P_i/U`` in every stage, so the
        complement needs ``Σ d ≥ Σ min p / U`` and ``Σ t·d ≥ Σ min t·p / U``.
        """
        if not math.isfinite(self.upper) or self.upper <= 0:
            return self.smax, self.qdim - 1
        need_s = math.ceil(self.rest_p[j] / self.upper * (1 - 1e-9))
        need_q = math.ceil(self.rest_tp[j] / self.upper * (1 - 1e-9))
        if self.single:
            return min(self.smax, (self.k - need_q) // self.degrees[0], self.N - need_s), 0
        return min(self.smax, self.N - need_s), self.k - need_q

    def options(self, t: int) -> list[int]:
        return divisors(self.N, min(self.smax, self.k // t))

    def batch(self, subs: np.ndarray, j: int, t: int) -> StageBatch:
        member = self.members[j][None, :] & ~self.members[subs]
        return StageBatch(self.prep, self.arrays[t], member, max(self.smax, 1), self.knapsack_cache,
                          light=self.feasibility)

    def step_batch(self, j: int, t: int) -> StageBatch:
        """The batch of step ``j`` at degree ``t`` (every sub-set of ``j``), kept between passes."""
        sh = self.shared
        if self.feasibility:         # light batches serve pass 0 only
            return self.batch(sh.sub_sets(j), j, t)
        got = sh.batches.get((j, t))
        if got is None:
            got = self.batch(sh.sub_sets(j), j, t)
            size = got.member.size * 25      # member (bool), its float copy, base (2 floats)
            if sh.batch_bytes + size <= BATCH_CACHE_BYTES:
                sh.batches[(j, t)] = got
                sh.batch_bytes += size
        return got

    def run(self) -> None:
        self.cells[0] = _Cells(np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1))
        for j in range(1, self.lat.num_ideals):
            if self.deadline is not None and time.monotonic() > self.deadline:
                raise _Timeout
            self.cells[j] = self._step(j, self.shared.sub_sets(j))

    def _sources(self, subs: np.ndarray):
        parts = [(r, self.cells[i]) for r, i in enumerate(subs) if self.cells[i].v.size]
        if not parts:
            return None
        row = np.concatenate([np.full(c.v.size, r) for r, c in parts])
        cell = np.concatenate([np.arange(c.v.size) for _, c in parts])
        s0 = np.concatenate([c.s for _, c in parts])
        q0 = np.concatenate([c.q for _, c in parts])
        v0 = np.concatenate([c.v for _, c in parts])
        return row, cell, s0, q0, v0

    def _step(self, j: int, subs: np.ndarray) -> _Cells:
        src = self._sources(subs)
        empty = _Cells(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros((0, 5), np.int64))
        if src is None:
            return empty
        row, cell, s0, q0, v0 = src
        s_lim, q_lim = self._limits(j)
        self._shape = (max(s_lim, 0) + 1, max(q_lim, 0) + 1)      # every cell of this step fits
        found, deferred, bands, batches = [], [], [], {}
        for t in self.degrees:
            b = batches[t] = self.step_batch(j, t)
            live = np.flatnonzero(b.ok[row])       # sources still worth a larger d
            for d in self.options(t):
                s1, q1 = s0[live] + d, (q0[live] + t * d if not self.single else q0[live])
                fits = (s1 <= s_lim) & (q1 <= q_lim)
                live, s1, q1 = live[fits], s1[fits], q1[fits]     # a larger d fits no better
                y = -(-s1 // d)
                ok = y <= b.y_low[row[live]]
                at, s1, q1, y = live[ok], s1[ok], q1[ok], y[ok]
                if not at.size:
                    continue
                if self.feasibility:          # fits memory: value 0; a larger d is dominated
                    info = np.stack([subs[row[at]], np.full(at.size, t), np.full(at.size, d), cell[at], y], axis=1)
                    found.append((s1, q1, np.zeros(at.size), info))
                    live = np.setdiff1d(live, at, assume_unique=True)
                    continue
                r = row[at]
                lo = b.lo(d)[r]
                lb = np.maximum(v0[at], lo)
                if self.relaxation:           # every stage priced at its bound lo(d)
                    keep = lb <= self.upper
                    info = np.stack([subs[r], np.full(r.size, t), np.full(r.size, d), cell[at], y], axis=1)
                    found.append((s1[keep], q1[keep], lb[keep], info[keep]))
                    done = at[lo <= v0[at]]
                    if done.size:
                        live = np.setdiff1d(live, done, assume_unique=True)
                    continue
                keep = lb <= self.upper
                at, r, lb, lo, s1, q1, y = at[keep], r[keep], lb[keep], lo[keep], s1[keep], q1[keep], y[keep]
                fast = y <= b.y_fast[r]
                info = np.stack([subs[r], np.full(r.size, t), np.full(r.size, d), cell[at], y], axis=1)
                found.append((s1[fast], q1[fast], lb[fast], info[fast]))
                # value v0 reached: every larger d gives the same value on more s and q
                done = at[fast & (lo <= v0[at])]
                if done.size:
                    live = np.setdiff1d(live, done, assume_unique=True)
                band = ~fast
                if band.any():
                    bands.append((b, r[band], s1[band], q1[band], v0[at][band], lb[band], info[band]))
        if bands:
            prefix = _prefix_min(self._combine(found)[0])
            for t in self.degrees:
                part = [x for x in bands if x[0] is batches[t]]
                if not part:
                    continue
                r, s1, q1, v0, lb, info = (np.concatenate([x[i] for x in part]) for i in range(1, 7))
                keep = lb < prefix[s1, q1]        # else a known exact cell dominates it
                if keep.any():
                    self._band(batches[t], r[keep], s1[keep], q1[keep], v0[keep], info[keep], found, deferred)
        if deferred:
            self._exact_band(found, deferred)
        grid, back = self._combine(found)
        return _pareto(grid, back)

    def _band(self, b: StageBatch, row, s1, q1, v0, info, found: list, deferred: list) -> None:
        """Band candidates: greedy values (first pass) or LP-bounded knapsacks to run (exact pass).

        Where the LP bound equals the greedy value the greedy choice is exact
        and no knapsack is needed.
        """
        lp, greedy = b.relaxed(row, info[:, 2], info[:, 4])
        ub = np.maximum(v0, greedy)
        if not self.exact:
            found.append((s1, q1, ub, info))
            return
        lb = np.maximum(v0, lp * (1 - 1e-9))
        tight = greedy <= lp * (1 + 1e-12)
        done = tight & (ub <= self.upper)
        found.append((s1[done], q1[done], ub[done], info[done]))
        rest = ~tight & (lb <= self.upper)
        if rest.any():
            deferred.append((b, row[rest], s1[rest], q1[rest], v0[rest], lb[rest], info[rest]))

    def _exact_band(self, found: list, deferred: list) -> None:
        """Run the knapsacks that can still matter, in increasing LP bound.

        A candidate is skipped when a cell with no more ``s``, no more ``q``
        and a value ≤ its bound is already known (it cannot improve any cell
        that survives the Pareto filter); each exact value found tightens
        that test for the candidates after it.
        """
        grid, _ = self._combine(found)
        prefix = _prefix_min(grid)       # prefix[s, q] = least known value with no more s, q
        lb = np.concatenate([x[5] for x in deferred])
        which = np.concatenate([np.full(len(x[1]), i) for i, x in enumerate(deferred)])
        pos = np.concatenate([np.arange(len(x[1])) for x in deferred])
        exact = []
        for k in np.argsort(lb, kind="stable"):
            b, r, s1, q1, v0, _, info = deferred[which[k]]
            i = pos[k]
            ss, qq = int(s1[i]), int(q1[i])
            if lb[k] >= prefix[ss, qq]:
                continue
            self.knapsacks += 1
            got = b.exact(int(r[i]), int(info[i][2]), int(info[i][4]))
            if got is None:
                continue
            val = max(float(v0[i]), got[0])
            if val <= self.upper:
                exact.append((ss, qq, val, info[i]))
                if val < prefix[ss, qq]:
                    np.minimum(prefix[ss:, qq:], val, out=prefix[ss:, qq:])
        if exact:
            found.append((np.array([e[0] for e in exact]), np.array([e[1] for e in exact]),
                          np.array([e[2] for e in exact]), np.array([e[3] for e in exact])))

    def _combine(self, found) -> tuple[np.ndarray, np.ndarray]:
        """Dense grid of the least value per ``(s, q)`` and the back-pointer of each."""
        grid = np.full(self._shape, np.inf)
        back = np.zeros(self._shape + (5,), dtype=np.int64)
        found = [f for f in found if len(f[0])]
        if not found:
            return grid, back
        s = np.concatenate([f[0] for f in found])
        q = np.concatenate([f[1] for f in found])
        v = np.concatenate([f[2] for f in found])
        lin = s * self._shape[1] + q
        flat = grid.reshape(-1)
        np.minimum.at(flat, lin, v)
        best = np.flatnonzero(v == flat[lin])        # a candidate attaining its cell's least value
        info = np.concatenate([f[3] for f in found])
        back.reshape(-1, 5)[lin[best]] = info[best]
        return grid, back

    def answer(self) -> tuple[float, int]:
        full = self.cells[self.lat.full]
        if full.v.size == 0:
            return math.inf, -1
        c = int(np.argmin(full.v))
        return float(full.v[c]), c

    def walk_back(self, c: int) -> list[PiperStage]:
        """Stages (front first) of the plan at cell ``c`` of the full set."""
        stages: list[PiperStage] = []
        j = self.lat.full
        while j != 0:
            i, t, d, src, y = (int(x) for x in self.cells[j].back[c])
            b = self.batch(np.array([i]), j, t)
            got = b.exact(0, d, y)
            if got is None:
                raise RuntimeError("internal error: DP walk-back reached an infeasible stage")
            nodes = np.flatnonzero(self.members[j] & ~self.members[i])
            stages.append(PiperStage([int(v) for v in nodes], d, t, got[1]))
            j, c = i, src
        return stages


def _prefix_min(grid: np.ndarray) -> np.ndarray:
    """``P[s, q] = min grid[s' <= s, q' <= q]``."""
    return np.minimum.accumulate(np.minimum.accumulate(grid, axis=0), axis=1)


def _pareto(grid: np.ndarray, back: np.ndarray) -> _Cells:
    """Cells not dominated by a cell with no more ``s``, no more ``q`` and no larger value.

    Valid pruning: a smaller ``s`` gives every stage put in front a smaller or
    equal ``y`` (less memory) and a smaller ``Σ d``; a smaller ``q`` leaves
    more devices.
    """
    prefix = _prefix_min(grid)
    above = np.full_like(grid, np.inf)
    above[1:] = prefix[:-1]
    left = np.full_like(grid, np.inf)
    left[:, 1:] = prefix[:, :-1]
    keep = np.isfinite(grid) & (grid < np.minimum(above, left))
    s, q = np.nonzero(keep)
    return _Cells(s.astype(np.int64), q.astype(np.int64), grid[s, q], back[s, q])


def relaxation_bound(prep: Prepared, deadline: float | None, shared: _Shared | None = None,
                     work: float = 0.0) -> float:
    """A lower bound on the optimum, at least ``work``: the least ``max_i lo_i`` over the plans that fit.

    The DP of the other passes with every stage that fits memory (``y <=
    y_low``, the exact test) priced at ``lo(d)``, its cost with the fastest
    TMPC of every node, memory ignored: ``lo ≤ TPS`` stage by stage, and the
    Pareto pruning is valid for any stage price that depends on the cell only
    through ``y`` (module docstring), so its least value is ``≤`` the optimum.
    It keeps what the work bound drops: the stages that fit are small and
    their ``y`` bounded. On ResNet-50 at 1-2 GiB the work bound is 3-5 times
    below the optimum and this bound 1.1-1.2 times (k = 128, 1 GiB: work
    3.61, this 16.33, optimum 19.86), so the greedy ladder that starts from
    it finds its plan at its first or second rung instead of its sixth or
    seventh.

    The relaxed DP climbs :data:`RELAXATION_LADDER` times ``work``, pruned
    at each rung ``U`` (``lo ≥ P_i/d_i``, so :meth:`PassTable._limits` holds for
    it): a rung that finds a value found the relaxed optimum (every plan of
    relaxed value ``≤ U`` survives the pruning), and a rung that finds none
    proves the optimum above ``U``. Unpruned, this pass cost twice the whole
    solve at k = 1,024 and 8 GiB, where the work bound is already tight (the
    first rung finds it there); a finer ladder cost as much as the greedy
    one on ResNet at 1 GiB (each failed rung about one unpruned pass).
    Rounded down by ``1e-9`` relative (its sums are not ``fsum``).
    """
    lower = work
    for factor in RELAXATION_LADDER:
        table = PassTable(prep, deadline, shared)
        table.exact, table.relaxation = False, True
        table.upper = work * factor if work > 0 else math.inf
        table.run()
        value = table.answer()[0]
        if math.isfinite(value):
            return max(lower, value * (1 - 1e-9))
        lower = max(lower, table.upper)
    return lower


#: Upper bounds tried by :func:`relaxation_bound`, as multiples of the work bound.
RELAXATION_LADDER = (1.1, math.inf)

#: Upper bounds tried by the first (greedy) pass, as multiples of the work bound.
LADDER = (1.1, 1.25, 1.45, 1.7, 2.0, 3.0, math.inf)


def solve_piper_dp(inst: PiperInstance, time_limit_s: float | None = None,
                   on_incumbent: Callable[[float, PiperPlan, float], None] | None = None) -> PeerOutcome:
    """Exact optimum of Piper's problem (lower bound = optimum, or infeasibility proven).

    Pass 0 asks only whether any plan fits (every stage that fits memory is
    worth 0, so the cells are a 2-D Pareto front): it proves infeasibility.
    Pass 1 prices band stages greedily (an upper bound some TMPC choice
    attains) with an upper bound ``U`` on the plan value, first ``1.1`` times
    the work bound ``TPS ≥ Σ_v min_t t·p_v / k`` (every stage has
    ``TPS_i ≥ P_i/d_i``, so ``TPS·Σ t_i d_i ≥ Σ t_i P_i``); when that finds no
    plan (memory binds), ``U`` climbs :data:`LADDER` times
    :func:`relaxation_bound` until a plan is found; that plan is the
    incumbent. Pass 2 is exact,
    pruned by the incumbent. When the time limit stops pass 2, the incumbent
    is returned with that bound. ``on_incumbent(value, plan, bound)`` is
    told the first-pass plan and that bound as soon as they are known (a
    portfolio keeps them if a signal stops the exact pass).
    """
    start = time.monotonic()
    deadline = None if time_limit_s is None else start + time_limit_s

    def done(term: Termination, plan, value, bound, msg, stats=None) -> PeerOutcome:
        return PeerOutcome(term, plan, value, bound, time.monotonic() - start, "dp", msg, stats or {})

    prep = reduce_instance(inst)
    try:
        table = PassTable(prep, deadline)
        table.feasibility, table.exact = True, False
        table.run()
        if not math.isfinite(table.answer()[0]):
            return done(Termination.infeasible, None, None, math.inf,
                        "no plan fits: every split exceeds the memory per device or the devices",
                        {"successor_closed_sets": table.lat.num_ideals})
        work = float(table.rest_tp[0]) / inst.devices
        shared = table.shared
        base, relaxed, rung, tried = work, False, 0, -math.inf
        while True:
            upper = base * LADDER[rung] if base > 0 else math.inf
            if upper <= tried:           # a rung no higher than the one that failed
                rung += 1
                continue
            table = PassTable(prep, deadline, shared)
            table.exact, table.upper = False, upper
            table.run()
            if math.isfinite(table.answer()[0]) or rung == len(LADDER) - 1:
                break
            tried = upper
            if relaxed:
                rung += 1
            else:                        # the work bound is loose: climb from the relaxation bound
                base, relaxed, rung = relaxation_bound(prep, deadline, shared, work), True, 0
    except TooManyIdeals as exc:
        return done(Termination.error, None, None, -math.inf, f"{exc}; use --solver highs")
    except _Timeout:
        return done(Termination.time_limit_no_solution, None, None, -math.inf, "time limit reached")
    value, cell = table.answer()
    if not math.isfinite(value):
        return done(Termination.infeasible, None, None, math.inf,
                    "no plan fits: every split exceeds the memory per device or the devices",
                    {"successor_closed_sets": table.lat.num_ideals})
    incumbent = restore_plan(prep, PiperPlan(table.walk_back(cell)))
    first = evaluate_piper(inst, incumbent)
    if on_incumbent is not None:
        on_incumbent(first.tps, incumbent, min(base, first.tps))
    table.upper = min(value, first.tps) * (1 + 1e-12)
    table.exact = True
    try:
        table.run()
    except _Timeout:
        bound = min(base, first.tps)
        return done(Termination.feasible, incumbent, first.tps, bound,
                    "time limit reached in the exact pass: first-pass plan, relaxation bound",
                    {"successor_closed_sets": table.lat.num_ideals, "knapsacks": table.knapsacks})
    stats = {"nodes_after_reduction": prep.n, "successor_closed_sets": table.lat.num_ideals,
             "knapsacks": table.knapsacks}
    value, cell = table.answer()
    stages = table.walk_back(cell)
    plan = restore_plan(prep, PiperPlan(stages))
    metrics = evaluate_piper(inst, plan)
    # the table's value and the evaluator's differ only by round-off: the proof is for the plan
    bound = metrics.tps if abs(value - metrics.tps) <= 1e-9 * abs(metrics.tps) else min(value, metrics.tps)
    return done(Termination.optimal, plan, metrics.tps, bound,
                f"exact DP over {table.lat.num_ideals} successor-closed sets", stats)
