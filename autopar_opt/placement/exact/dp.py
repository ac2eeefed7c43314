"""Exact DP over ideals for contiguous max-load placement (Tarnawski et al., NeurIPS 2020, §4).

With ``dp[c][I]`` the least max-load of placing the units of ideal ``I`` on
``c = (c_1, …, c_T)`` devices of the ``T`` types (at most ``c_t`` of type ``t``),

    dp[c][I] = min_t min_{I' ⊆ I ideal} max(dp[c - e_t][I'], load_t(I \\ I')),

``dp[0][∅] = 0``; the answer is ``dp[counts][V]``. ``I' = I`` (an unused
device) costs 0. ``load_t(S)`` = time on type ``t`` + (if the type pays
communication) the weight of the hyperedges ``S`` cuts; ``inf`` if ``S``
exceeds the type's memory or holds a node that cannot run on it.

Vectorised pricing of all sub-ideals ``I'`` of one ``I`` at once: times, sizes
and unsupported counts are linear (``F(I) − F(I')``), and the cut weight of
``S = I \\ I'`` is

    cut(I', I) = w(P(I')) + Σ_{h ∈ P(I)} w_h · g_h,
    g_h = +1 if h ∩ I' = ∅, −1 if h ∩ I ⊆ I', else 0,

where ``P(X)`` is the set of hyperedges partly inside ``X`` (derived in
``docs``: a hyperedge inside ``I`` is cut iff it is partial in ``I'``; one
partial in ``I`` is cut iff ``S`` touches it). ``|h ∩ X|`` for every ideal is
one sparse product, so the work per ``I`` is ``#sub-ideals × |P(I)|``.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from autopar_opt.core.ideals import (DEFAULT_LIMIT, IdealLattice, TooManyIdeals, antichain_width,
                                     enumerate_ideals)
from autopar_opt.placement.condense import Condensed

#: Ideals × hyperedges up to which the pricer keeps a dense count matrix (int32).
DENSE_LIMIT = 40_000_000
#: Default guard on the number of nested ideal pairs the DP scans.
MAX_PAIRS = 60_000_000
#: Guard on device-count states x ideals: the DP keeps three tables of that many cells
#: (17 bytes a cell: about 0.5 GB at the guard).
MAX_STATE_CELLS = 30_000_000


class DPTooLarge(ValueError):
    """The lattice (or its pairs) is too large for the exact DP; the message says so."""


@dataclass
class DPResult:
    """Optimum of the contiguous max-load DP (exact: lower bound = value)."""

    value: float
    unit_device: np.ndarray        # device per unit
    num_ideals: int
    num_pairs: int
    wall_time_s: float
    deadline_hit: bool = False


def _prefix_sums(lat: IdealLattice, weights: np.ndarray) -> np.ndarray:
    """``Σ_{u ∈ ideal j} weights[u]`` for every ideal, along one cover per ideal (O(m))."""
    first = np.searchsorted(lat.cover_dst, np.arange(lat.num_ideals))
    out = np.zeros(lat.num_ideals)
    src, node = lat.cover_src, lat.cover_node
    for j in range(1, lat.num_ideals):
        k = first[j]
        out[j] = out[src[k]] + weights[node[k]]
    return out


class _Pricer:
    """Loads of every ``I \\ I'`` for the sub-ideals ``I'`` of one ideal ``I``.

    Memory is ``O(m·W)`` (the bitsets) plus the partial hyperedges of each ideal:
    no dense ideals × units matrix, so 10,000-unit graphs fit.
    """

    def __init__(self, cond: Condensed, lat: IdealLattice, types: list) -> None:
        self.masks = lat.masks
        self.w = cond.hyper_w
        self.hsize = np.array([h.size for h in cond.hyper], dtype=np.int64)
        flat = np.concatenate(cond.hyper) if cond.hyper else np.zeros(0, np.int64)
        self.flat_word, self.flat_shift = flat >> 6, (flat & 63).astype(np.uint64)
        self.offsets = np.concatenate([[0], np.cumsum(self.hsize)[:-1]]).astype(np.int64)
        self.partial: list[np.ndarray] = []
        self.count: list[np.ndarray] = []
        wp = np.zeros(lat.num_ideals)
        every = np.arange(len(cond.hyper))
        # small lattices keep the dense counts (fast gathers); large ones test bits
        self.dense = (np.zeros((lat.num_ideals, len(cond.hyper)), dtype=np.int32)
                      if lat.num_ideals * len(cond.hyper) <= DENSE_LIMIT else None)
        for lo in range(0, lat.num_ideals, 256):
            block = np.arange(lo, min(lo + 256, lat.num_ideals))
            cnt = self._counts(block, every)
            if self.dense is not None:
                self.dense[block] = cnt
            part = (cnt > 0) & (cnt < self.hsize)
            wp[block] = part.astype(float) @ self.w
            for r in range(block.size):
                p = np.flatnonzero(part[r])
                self.partial.append(p)
                self.count.append(cnt[r, p])
        self.wp = wp
        self.types = types
        self.time = [_prefix_sums(lat, np.where(np.isinf(cond.time[t.name]), 0.0, cond.time[t.name]))
                     for t in types]
        self.bad = [_prefix_sums(lat, np.isinf(cond.time[t.name]).astype(float)) for t in types]
        self.size = _prefix_sums(lat, cond.size_bytes)

    def _counts(self, ideals: np.ndarray, hyper: np.ndarray) -> np.ndarray:
        """``|h ∩ ideal|`` for ``ideals × hyper`` (bit tests on the bitsets)."""
        if hyper.size == 0:
            return np.zeros((ideals.size, 0), dtype=np.int64)
        sizes = self.hsize[hyper]
        idx = (np.repeat(self.offsets[hyper] - (np.cumsum(sizes) - sizes), sizes)
               + np.arange(int(sizes.sum())))
        words = self.masks[np.ix_(ideals, self.flat_word[idx])]
        bits = ((words >> self.flat_shift[idx]) & np.uint64(1)).astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(self.hsize[hyper])[:-1]])
        return np.add.reduceat(bits, starts, axis=1)

    def loads_all(self, sub: np.ndarray, sup: np.ndarray) -> np.ndarray:
        """``(T, P)`` loads of every pair ``sub[k] ⊆ sup[k]`` at once (dense counts only):
        the same formula as :meth:`loads`, one numpy pass instead of one per ideal."""
        a_sub, a_sup = self.dense[sub], self.dense[sup]
        part = (a_sup > 0) & (a_sup < self.hsize)
        g = part & (a_sub == 0)
        g = g.astype(float) - (part & (a_sub == a_sup)).astype(float)
        cut = self.wp[sub] + g @ self.w
        size = self.size[sup] - self.size[sub]
        out = np.empty((len(self.types), sub.size))
        for t, dt in enumerate(self.types):
            load = self.time[t][sup] - self.time[t][sub]
            if dt.pays_comm:
                load = load + cut
            bad = (self.bad[t][sup] - self.bad[t][sub] > 0.5) | (size > dt.memory_bytes * (1 + 1e-9))
            out[t] = np.where(bad, np.inf, np.maximum(load, 0.0))
        return out

    def loads(self, j: int, subs: np.ndarray) -> list[np.ndarray]:
        p = self.partial[j]
        if p.size:
            a_sub = self.dense[np.ix_(subs, p)] if self.dense is not None else self._counts(subs, p)
            g = (a_sub == 0).astype(float) - (a_sub == self.count[j]).astype(float)
            cut = self.wp[subs] + g @ self.w[p]
        else:
            cut = self.wp[subs].copy()
        out = []
        size = self.size[j] - self.size[subs]
        for t, dt in enumerate(self.types):
            load = self.time[t][j] - self.time[t][subs]
            if dt.pays_comm:
                load = load + cut
            bad = (self.bad[t][j] - self.bad[t][subs] > 0.5) | (size > dt.memory_bytes * (1 + 1e-9))
            out.append(np.where(bad, np.inf, np.maximum(load, 0.0)))
        return out


def solve_dp(cond: Condensed, *, ideal_limit: int = DEFAULT_LIMIT, max_pairs: int = MAX_PAIRS,
             deadline: float | None = None, upper_bound: float = np.inf,
             lattice: IdealLattice | None = None, combine: str = "max") -> DPResult:
    """Exact contiguous max-load on the condensed problem (see the module docstring).

    ``upper_bound``: the value of a known feasible placement. Pairs whose part
    needs more time than that on its fastest type (``Σ_{u∈S} min_τ t_τ(u) >
    upper_bound``) are skipped: they cannot be in a placement better than the
    known one, so the optimum is unchanged (if no placement beats the bound
    the DP may return ``inf`` and the caller keeps its own). Raises
    :class:`DPTooLarge` (or :class:`~autopar_opt.core.ideals.TooManyIdeals`) before
    any long computation when the lattice is beyond the guards. ``lattice``: the
    ideals of ``cond``'s precedence graph when the caller has them already.
    ``combine="sum"``: minimise the *sum* of the part loads instead of their maximum
    (the same recursion with ``+`` for ``max``): the serial time of the chain, an
    upper bound on the single-sample latency of the placement it returns (used as the
    latency incumbent, :mod:`autopar_opt.placement.bounds.latency`).
    """
    start = time.perf_counter()
    if cond.num_units > 20_000:
        raise DPTooLarge(f"{cond.num_units:,} units: too many for the DP over ideals "
                         f"(the lattice is at least that large and the pricing matrix "
                         f"grows with ideals x units); use the decomposition bound")
    if lattice is None:
        edges = [tuple(e) for e in cond.prec.tolist()]
        width = antichain_width(cond.num_units, edges)
        if width is not None and 2 ** width > ideal_limit:    # proven past the guard, at once
            raise TooManyIdeals(2 ** width, ideal_limit, 0, cond.num_units, width=width,
                                nodes="units (nodes after condensing and coarsening)")
    lat = lattice if lattice is not None else enumerate_ideals(
        cond.num_units, edges, limit=ideal_limit)
    m = lat.num_ideals
    if m * m // 2 > max_pairs * 20:
        raise DPTooLarge(f"{m:,} ideals: the DP would scan up to {m * m // 2:,} pairs "
                         f"(guard {max_pairs:,}); use the MILP or coarsen")
    tmin = np.min([np.where(np.isinf(cond.time[t.name]), np.inf, cond.time[t.name])
                   for t in cond.problem.device_types], axis=0)
    prefix = _prefix_sums(lat, np.where(np.isinf(tmin), 0.0, tmin))
    slack = upper_bound * (1 + 1e-9) if np.isfinite(upper_bound) else np.inf
    if not np.isfinite(slack):
        pairs = lat.num_pairs()
        if pairs > max_pairs:
            raise DPTooLarge(f"{pairs:,} nested ideal pairs > guard {max_pairs:,}")
    pairs = 0
    types = cond.problem.device_types
    # every device a placement uses holds at least one unit, so no type needs more states
    # than there are units: exact, and 2 x 65,536 devices on 3 units are 16 states, not
    # 4.3e9 (QA round 12: the state list alone filled 24 GB before any deadline check)
    counts = [min(dt.count, cond.num_units) for dt in types]
    num_states = int(np.prod([c + 1 for c in counts]))
    if num_states * m > MAX_STATE_CELLS:
        raise DPTooLarge(f"{num_states:,} device-count states x {m:,} ideals = "
                         f"{num_states * m:,} table cells > guard {MAX_STATE_CELLS:,}; "
                         "use the MILP or fewer device types")
    states = list(itertools.product(*(range(c + 1) for c in counts)))
    sidx = {s: i for i, s in enumerate(states)}
    prev = [[sidx[s[:t] + (s[t] - 1,) + s[t + 1:]] if s[t] > 0 else -1 for t in range(len(types))]
            for s in states]
    pricer = _Pricer(cond, lat, types)
    dp = np.full((len(states), m), np.inf)
    dp[:, 0] = 0.0
    back_t = np.full((len(states), m), -1, dtype=np.int8)
    back_s = np.zeros((len(states), m), dtype=np.int64)
    hit = False
    step = _StateStep(prev, counts, np.add if combine == "sum" else np.maximum)
    batch = _all_pairs(lat, pricer, prefix, slack)
    for j in range(1, m):
        if deadline is not None and time.perf_counter() > deadline:
            hit = True
            break
        if batch is not None:
            lo, hi = batch[0][j], batch[0][j + 1]
            subs, loads = batch[1][lo:hi], list(batch[2][:, lo:hi])
        else:
            subs = lat.sub_ideals(j)
            if np.isfinite(slack):
                subs = subs[prefix[j] - prefix[subs] <= slack]
            loads = pricer.loads(j, subs)
        pairs += subs.size
        step(dp, back_t, back_s, j, subs, loads)
    unit_device = _backtrack(lat, states, prev, back_t, back_s,
                             [dt.count for dt in types]) if not hit else None
    return DPResult(value=float(dp[-1, m - 1]) if not hit else float("nan"),
                    unit_device=unit_device, num_ideals=m, num_pairs=pairs,
                    wall_time_s=time.perf_counter() - start, deadline_hit=hit)


#: Nested pairs × hyperedges up to which every pair is priced in one numpy pass.
BATCH_LIMIT = 2_000_000


def _all_pairs(lat: IdealLattice, pricer: _Pricer, prefix: np.ndarray, slack: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Small lattices: every nested pair ``(i ⊆ j)`` (pruned like the scan) priced at once,
    as ``(offsets by j, sub-ideal ids, (T, P) loads)``; None above :data:`BATCH_LIMIT`."""
    m = lat.num_ideals
    if pricer.dense is None or m * m * max(1, pricer.w.size) > 8 * BATCH_LIMIT:
        return None
    reach = np.unpackbits(lat.subideal_matrix().view(np.uint8), axis=1,
                          bitorder="little")[:, :m].astype(bool)
    sup, sub = np.nonzero(reach)                       # ordered by sup, then sub ascending
    if np.isfinite(slack):
        keep = prefix[sup] - prefix[sub] <= slack
        sup, sub = sup[keep], sub[keep]
    if sub.size * max(1, pricer.w.size) > BATCH_LIMIT:
        return None
    offsets = np.searchsorted(sup, np.arange(m + 1))
    return offsets, sub, pricer.loads_all(sub, sup)


class _StateStep:
    """``dp[·, j]`` for every device-count state at once (numpy over states × sub-ideals).

    A part ``I \\ I'`` with ``I' ⊊ I`` reads ``dp[prev, I']`` of earlier ideals only,
    so all states are priced together. An unused device (``I' = I``, load 0) makes
    ``dp[c][I] = min_{c' ≤ c} best[c'][I]`` (componentwise), one running minimum per
    type axis of the state grid; the backtrack then steps to a smaller state with the
    same value. Ties keep the first type and the first sub-ideal.
    """

    def __init__(self, prev: list[list[int]], counts: list[int], combine=np.maximum) -> None:
        arr = np.array(prev, dtype=np.int64).reshape(len(prev), len(counts))
        self.combine = combine
        self.prev = arr
        self.rows = [np.flatnonzero(arr[:, t] >= 0) for t in range(len(counts))]
        self.src = [arr[r, t] for t, r in enumerate(self.rows)]
        self.num_states = len(prev)
        self.grid = tuple(c + 1 for c in counts)

    def __call__(self, dp: np.ndarray, back_t: np.ndarray, back_s: np.ndarray, j: int,
                 subs: np.ndarray, loads: list[np.ndarray]) -> None:
        proper = subs != j
        subs_p = subs[proper]
        best = np.full(self.num_states, np.inf)
        arg_t = np.full(self.num_states, -1, dtype=np.int64)
        arg_s = np.zeros(self.num_states, dtype=np.int64)
        if subs_p.size:
            cols = dp[:, subs_p]
            for t, (rows, src) in enumerate(zip(self.rows, self.src)):
                cand = self.combine(cols[src], loads[t][proper])
                k = np.argmin(cand, axis=1)
                val = cand[np.arange(rows.size), k]
                better = val < best[rows]
                best[rows[better]] = val[better]
                arg_t[rows[better]] = t
                arg_s[rows[better]] = subs_p[k[better]]
        best[0] = np.inf
        final = best.reshape(self.grid)
        for axis in range(len(self.grid)):
            final = np.minimum.accumulate(final, axis=axis)
        final = final.ravel()
        for t, (rows, src) in enumerate(zip(self.rows, self.src)):
            take = (final[rows] < best[rows]) & (final[src] == final[rows]) & (arg_s[rows] != j)
            take &= np.isfinite(final[rows])
            arg_t[rows[take]] = t
            arg_s[rows[take]] = j
        dp[1:, j] = final[1:]
        back_t[1:, j] = arg_t[1:]
        back_s[1:, j] = arg_s[1:]


def _backtrack(lat: IdealLattice, states, prev, back_t, back_s, counts) -> np.ndarray | None:
    """Device per unit from the back pointers; ``counts``: every type's real device count
    (the global numbering), which the DP's states may cap at the number of units."""
    si, j = len(states) - 1, lat.full
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    used = [0] * len(counts)
    unit_device = np.full(lat.num_nodes, -1, dtype=np.int64)
    while j != 0:
        t = int(back_t[si, j])
        if t < 0:
            return None                       # infeasible
        sub = int(back_s[si, j])
        if sub != j:
            unit_device[lat.difference(sub, j)] = first[t] + used[t]
            used[t] += 1
        si, j = prev[si][t], sub
    return unit_device
