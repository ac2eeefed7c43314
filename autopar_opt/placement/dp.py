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

from autopar_opt.ideals import DEFAULT_LIMIT, IdealLattice, enumerate_ideals
from autopar_opt.placement.condense import Condensed

#: Ideals × hyperedges up to which the pricer keeps a dense count matrix (int32).
DENSE_LIMIT = 40_000_000
#: Default guard on the number of nested ideal pairs the DP scans.
MAX_PAIRS = 60_000_000


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
             deadline: float | None = None, upper_bound: float = np.inf) -> DPResult:
    """Exact contiguous max-load on the condensed problem (see the module docstring).

    ``upper_bound``: the value of a known feasible placement. Pairs whose part
    needs more time than that on its fastest type (``Σ_{u∈S} min_τ t_τ(u) >
    upper_bound``) are skipped: they cannot be in a placement better than the
    known one, so the optimum is unchanged (if no placement beats the bound
    the DP may return ``inf`` and the caller keeps its own). Raises
    :class:`DPTooLarge` (or :class:`~autopar_opt.ideals.TooManyIdeals`) before
    any long computation when the lattice is beyond the guards.
    """
    start = time.perf_counter()
    if cond.num_units > 20_000:
        raise DPTooLarge(f"{cond.num_units:,} units: too many for the DP over ideals "
                         f"(the lattice is at least that large and the pricing matrix "
                         f"grows with ideals x units); use the decomposition bound")
    lat = enumerate_ideals(cond.num_units, [tuple(e) for e in cond.prec.tolist()], limit=ideal_limit)
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
    counts = [dt.count for dt in types]
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
    for j in range(1, m):
        if deadline is not None and time.perf_counter() > deadline:
            hit = True
            break
        subs = lat.sub_ideals(j)
        if np.isfinite(slack):
            subs = subs[prefix[j] - prefix[subs] <= slack]
        pairs += subs.size
        loads = pricer.loads(j, subs)
        for si in range(1, len(states)):
            best, bt, bs = np.inf, -1, 0
            for t, ps in enumerate(prev[si]):
                if ps < 0:
                    continue
                cand = np.maximum(dp[ps, subs], loads[t])
                k = int(np.argmin(cand))
                if cand[k] < best:
                    best, bt, bs = float(cand[k]), t, int(subs[k])
            dp[si, j], back_t[si, j], back_s[si, j] = best, bt, bs
    unit_device = _backtrack(lat, states, prev, back_t, back_s, counts) if not hit else None
    return DPResult(value=float(dp[-1, m - 1]) if not hit else float("nan"),
                    unit_device=unit_device, num_ideals=m, num_pairs=pairs,
                    wall_time_s=time.perf_counter() - start, deadline_hit=hit)


def _backtrack(lat: IdealLattice, states, prev, back_t, back_s, counts) -> np.ndarray | None:
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
