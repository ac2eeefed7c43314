"""The ceiling of the block decoder: the best placement it can emit, by an exact DP.

The block decoder (``gdp --decoder block``, and random search's candidates) cuts the
class order of a :class:`~autopar_opt.learn.placement_space.PlacementSpace` into
consecutive blocks, block ``j`` on accelerator ``j``, host-only classes on the first
host (:meth:`PlacementSpace.from_blocks`). Its space is the set of interval partitions
of that one order, much narrower than the exact search's (every chain of ideals), so
its best plan can be far from the optimum whatever the learning does. This module
computes that best plan exactly:

    dp[b][j] = min_{i<j} max(dp[b-1][i], L_b(i, j)),   ceiling = max(dp[k][m], host load)

over ``k`` blocks (``exact_k``: all non-empty, GDP's block decoder; otherwise blocks may
be empty, random search's), with ``L_b(i, j)`` the max-load of accelerator ``b`` holding
the classes at ranks ``[i, j)`` (``inf`` over its memory): their time plus ``w_h`` for every
hyperedge ``h`` (a node and its consumers) it holds part of but not all of. A hyperedge
with a member on the host is never wholly inside a block. For a fixed ``i`` the cut is

    cut(i, j) = Σ_h w_h [h meets [i, j)] − Σ_h w_h [h ⊆ [i, j)],

both cumulative in ``j`` (the first member at or after ``i``; the last member, for
hyperedges starting at or after ``i``): ``O(m·(m + H))`` time, ``O(k·m²)`` for the DP.

Every interval partition of a topological order is contiguous, so the DP is exact when
the class order is topological (the class graph is acyclic). Where colour classes form
a cycle (a backward-only class's mirrored edges close one on bert_l-3 training), the
space orders each cycle's classes consecutively and the DP forbids the boundaries
inside a cycle (:func:`cycle_cuts`), which every contiguous block plan avoids. Host-only
classes in the contiguous variant are refused (ValueError) rather than given an
optimistic figure (the host is a device of the chain too, and host-only classes
around several blocks can close a cycle through it).
"""

from __future__ import annotations

import numpy as np

#: Above this many classes the ceiling is not computed (m² memory).
MAX_CLASSES = 6000


def _hyperedges(space) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per node-level hyperedge: its member ranks (flat, with ids), host flags, weights."""
    p = space.problem
    rank_of_node = space.rank[space.class_of]
    host_rank = space.host_only[space.order]
    ids, ranks, weights = [], [], []
    for u, cons in enumerate(p.consumers()):
        if cons.size == 0 or p.comm[u] == 0:
            continue
        r = np.unique(rank_of_node[np.r_[u, cons]])
        ids.append(np.full(len(r), len(weights)))
        ranks.append(r)
        weights.append(float(p.comm[u]))
    if not weights:
        e = np.zeros(0, dtype=np.int64)
        return e, e, np.zeros(0, dtype=bool), np.zeros(0)
    flat_r = np.concatenate(ranks)
    return np.concatenate(ids), flat_r, host_rank[flat_r], np.array(weights)


def cut_matrix(space) -> np.ndarray:
    """``cut[i, j]`` for blocks ``[i, j)`` (``j > i``; other entries meaningless)."""
    m = space.num_classes
    hid, hrank, hhost, w = _hyperedges(space)
    H = len(w)
    has_host = np.zeros(H, dtype=bool)
    np.logical_or.at(has_host, hid, hhost)
    lo = np.full(H, m + 1)
    np.minimum.at(lo, hid[~hhost], hrank[~hhost])
    hi = np.full(H, -1)
    np.maximum.at(hi, hid[~hhost], hrank[~hhost])
    members_at: list[list[int]] = [[] for _ in range(m)]
    for h, r in zip(hid[~hhost].tolist(), hrank[~hhost].tolist()):
        members_at[r].append(h)
    first = np.full(H, m)                    # first accelerator member at rank >= i (m: none)
    whole = ~has_host
    cut = np.zeros((m, m + 1))
    for i in range(m - 1, -1, -1):
        if members_at[i]:
            first[members_at[i]] = i
        meets = np.bincount(first + 1, weights=w, minlength=m + 2)[:m + 1]
        inside = whole & (lo >= i)
        within = np.bincount(hi[inside] + 1, weights=w[inside], minlength=m + 2)[:m + 1]
        cut[i] = np.cumsum(meets) - np.cumsum(within)
    return cut


def block_loads(space) -> tuple[list[np.ndarray], float]:
    """``L_b`` (``(m, m + 1)``, ``inf`` where ``j <= i`` or over memory) for every
    accelerator ``b`` in block order, and the host's load (host-only classes)."""
    m = space.num_classes
    order, host = space.order, space.host_only[space.order]
    cut = cut_matrix(space)
    size = np.zeros(m)
    np.add.at(size, space.class_of, space.problem.size_bytes)
    size_r = np.where(host, 0.0, size[order])
    cs = np.r_[0.0, np.cumsum(size_r)]
    upper = np.arange(m + 1)[None, :] > np.arange(m)[:, None]
    loads = []
    for d in space.accel:
        t = np.where(host, 0.0, space.class_time[order, d])
        ct = np.r_[0.0, np.cumsum(t)]
        L = ct[None, :] - ct[:m, None] + cut
        over = cs[None, :] - cs[:m, None] > space.cap[d] * (1 + 1e-9)
        loads.append(np.where(upper & ~over, L, np.inf))
    host_load = 0.0
    if len(space.host) and space.host_only.any():
        host_load = float(space.class_time[space.host_only, space.host[0]].sum())
    return loads, host_load


def cycle_cuts(space) -> np.ndarray:
    """``(m + 1,)`` block boundaries that would split a cycle of colour classes: position
    ``r`` (a block ending before rank ``r``) lies strictly inside some class edge that
    runs back in the order (``rank[v] < r <= rank[u]`` for an order edge ``u -> v``).
    The space orders each strongly connected component's classes consecutively, so the
    other boundaries cut the order between components, and every interval partition
    that avoids these is contiguous (QA round 12: a backward-only class's mirrored
    edges close such cycles on bert_l-3 training; the ceiling was refused before)."""
    m = space.num_classes
    ru = space.rank[space.class_of[space.order_src]]
    rv = space.rank[space.class_of[space.order_dst]]
    back = ru > rv
    mark = np.zeros(m + 2)
    np.add.at(mark, rv[back] + 1, 1.0)
    np.add.at(mark, ru[back] + 1, -1.0)
    return np.cumsum(mark)[:m + 1] > 0


def block_ceiling(space, exact_k: bool = True) -> float:
    """The best max-load the block decoder can emit (module docstring); ``inf`` if none
    is feasible. Raises ValueError above :data:`MAX_CLASSES` classes."""
    m = space.num_classes
    if m > MAX_CLASSES:
        raise ValueError(f"{space.problem.name}: {m} classes; the block ceiling is computed up "
                         f"to {MAX_CLASSES}")
    if space.contiguous and space.host_only.any():
        raise ValueError(f"{space.problem.name}: host-only classes; the block ceiling is "
                         "computed for instances whose classes all run on an accelerator")
    loads, host_load = block_loads(space)
    if space.contiguous:
        cut_inside = cycle_cuts(space)
        for L in loads:
            L[cut_inside[:m], :] = np.inf
            L[:, cut_inside] = np.inf
    dp = np.full(m + 1, np.inf)
    dp[0] = 0.0
    for L in loads:
        new = np.full(m + 1, np.inf)
        new[1:] = np.maximum(dp[:m, None], L[:, 1:]).min(axis=0)
        dp = new if exact_k else np.minimum(new, dp)
    return float(max(dp[m], host_load))
