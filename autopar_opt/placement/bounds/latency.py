"""Single-sample latency: a strong incumbent and sound lower bounds (no MILP needed).

The latency model is :func:`~autopar_opt.placement.evaluate.block_latency`: every
communication-paying device runs its node set as one block of length ``load_d``
(time + sending + receiving, as in max-load) once all its outside inputs are
ready; host nodes run one by one as soon as their inputs are ready; the latency is
the longest path of this block graph, finite only when the blocks are contiguous
(the block graph is acyclic).

**Incumbent** (:func:`serial_incumbent`): the exact DP over ideals with ``+`` in
place of ``max`` (:func:`~autopar_opt.placement.exact.dp.solve_dp`, ``combine="sum"``)
minimises the sum of the part loads over every contiguous placement (memory,
CPU-only nodes, colour classes respected). A chain of parts runs in at most that
sum: the longest path visits each block once, and a host part run as individual
nodes finishes no later than the same nodes run as one block. So the DP's
placement is feasible and its evaluated latency is at most the DP's value.

**Lower bound** (:func:`path_bound`). Take any path ``P = v_1 → … → v_m`` of the
graph. In a placement of finite latency the blocks holding ``v_1 … v_m`` follow
each other along ``P`` without repetition (a block left and re-entered would be a
cycle), consecutive distinct blocks are joined in the block graph, so the latency
is at least the sum of those blocks' weights. An accelerator block holding the
segment ``v_a … v_{b-1}`` of ``P`` weighs at least ``Σ t_acc`` of the segment plus
``comm(v_{a-1})`` (it receives ``v_{a-1}``'s output, held elsewhere) plus
``comm(v_{b-1})`` (it sends to ``v_b``, held elsewhere), and its segment must fit
one device's memory; a host node weighs its host time. Minimising over every
segmentation of ``P`` (at most ``K`` accelerator segments, ``K`` = the number of
accelerators) is a 1-D DP, and its optimum is a lower bound on the latency of
every placement. With free transfers and no memory limit it reduces to the
critical path with the cheapest times; memory limits force cuts, and every cut
costs its transfer twice, which is what the critical-path bound misses.

Two strengthenings of a segment's weight (both tested against brute force):

- **Every path transfer** (:func:`path_transfers`): the block pays ``comm(v_j)``
  for each earlier path node ``v_j`` with a path consumer in the segment (not only
  ``v_{a-1}``: a skip connection into the segment is received too) and for each
  of its path nodes with a path consumer after it (sent). Earlier and later
  segments are other blocks, and the producers are distinct, so nothing is
  counted twice.
- **Side inputs** (:func:`side_charge`): an off-path producer ``w`` of a path node
  (attributed to its first consumer on the path, so counted once) is either in
  the block (it adds ``t_acc(w)`` and its size) or elsewhere (the block receives
  it: ``comm(w)``). With a memory price ``λ ≥ 0`` and the block's memory
  ``size ≤ mem``, the block weighs at least
  ``Σ_path (t + λ·size) + Σ_w min(t_w + λ·size_w, comm_w) + transfers − λ·mem``
  (Lagrangian relaxation of the memory row); the segment takes the larger of
  that and the ``λ = 0`` weight, so the DP stays additive and a price never
  weakens it. :func:`memory_prices` tries ``λ = 0`` and the quartiles of the
  side inputs' transfer cost per byte.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from autopar_opt.core.ideals import topological_order
from autopar_opt.placement.problem import PlacementProblem

#: Path length × accelerators × window above which :func:`path_bound` is skipped.
PATH_DP_LIMIT = 60_000_000
#: Most entries of the (path length)² transfer matrices of :func:`path_transfers` (two of
#: them, 8 bytes each: 256 MiB); a longer path is skipped (issue 33: a 10^5-node chain
#: asked for 74.5 GiB).
PATH_MATRIX_LIMIT = 16_000_000


def longest_path(problem: PlacementProblem, weight: np.ndarray,
                 check: Callable[[], None] | None = None) -> list[int]:
    """Nodes of a maximum-weight path of the DAG (node weights ``weight``); ``check`` (a
    deadline check that raises) is called every 2^16 nodes."""
    n = problem.num_nodes
    preds: list[list[int]] = [[] for _ in range(n)]
    for u, v in problem.edges.tolist():
        preds[v].append(u)
    fin = [0.0] * n
    back = np.full(n, -1, dtype=np.int64)
    w = np.asarray(weight, dtype=float).tolist()
    for i, v in enumerate(topological_order(n, problem.edges).tolist()):
        if check is not None and not i & 0xFFFF:
            check()
        if preds[v]:
            u = max(preds[v], key=fin.__getitem__)
            fin[v], back[v] = fin[u] + w[v], u
        else:
            fin[v] = w[v]
    fin = np.asarray(fin)
    if n == 0:
        return []
    v, path = int(np.argmax(fin)), []
    while v >= 0:
        path.append(v)
        v = int(back[v])
    return path[::-1]


def _type_arrays(problem: PlacementProblem) -> tuple[np.ndarray, float, np.ndarray, int]:
    """Cheapest accelerator time, the largest accelerator memory, cheapest host time,
    number of accelerators (``inf`` where a node cannot run)."""
    acc = [dt for dt in problem.device_types if dt.count > 0 and dt.pays_comm]
    host = [dt for dt in problem.device_types if dt.count > 0 and not dt.pays_comm]
    n = problem.num_nodes
    t_acc = np.min([problem.time[d.name] for d in acc], axis=0) if acc else np.full(n, np.inf)
    t_host = np.min([problem.time[d.name] for d in host], axis=0) if host else np.full(n, np.inf)
    mem = max((d.memory_bytes for d in acc), default=0.0)
    return t_acc, mem, t_host, sum(d.count for d in acc)


def _side_inputs(problem: PlacementProblem, p: np.ndarray) -> list[np.ndarray]:
    """Per path position, the off-path producers attributed to it (each to its first
    consumer on the path)."""
    on_path = np.zeros(problem.num_nodes, bool)
    on_path[p] = True
    pos = np.full(problem.num_nodes, -1, dtype=np.int64)
    pos[p] = np.arange(p.size)
    first = np.full(problem.num_nodes, p.size, dtype=np.int64)
    for u, v in problem.edges.tolist():
        if not on_path[u] and on_path[v]:
            first[u] = min(first[u], pos[v])
    side: list[list[int]] = [[] for _ in range(p.size)]
    for u in np.flatnonzero(first < p.size).tolist():
        side[int(first[u])].append(u)
    return [np.asarray(s, dtype=np.int64) for s in side]


def side_charge(problem: PlacementProblem, p: np.ndarray, lam: float) -> np.ndarray:
    """Per path position ``i``: ``Σ_w min(t_acc(w) + λ·size(w), comm(w))`` over the
    off-path producers ``w`` attributed to ``i`` (module docstring, side inputs)."""
    t_acc, _, _, _ = _type_arrays(problem)
    out = np.zeros(p.size)
    for i, ws in enumerate(_side_inputs(problem, p)):
        if ws.size:
            hold = np.where(np.isinf(t_acc[ws]), np.inf, t_acc[ws] + lam * problem.size_bytes[ws])
            out[i] = float(np.minimum(hold, problem.comm[ws]).sum())
    return out


def path_transfers(problem: PlacementProblem, p: np.ndarray) -> np.ndarray:
    """``T[a, b]``: transfers a block holding the path segment ``v_a … v_{b-1}`` pays for
    path nodes alone: ``comm(v_j)`` for every ``j < a`` with a path consumer in
    ``[a, b)`` (received) and for every ``j ∈ [a, b)`` with a path consumer at ``≥ b``
    (sent). Distinct producers, so no transfer is counted twice."""
    m = p.size
    pos = np.full(problem.num_nodes, -1, dtype=np.int64)
    pos[p] = np.arange(m)
    cons: list[list[int]] = [[] for _ in range(m)]
    for u, v in problem.edges.tolist():
        if pos[u] >= 0 and pos[v] > pos[u]:
            cons[int(pos[u])].append(int(pos[v]))
    comm = problem.comm[p]
    recv = np.zeros((m + 1, m + 2))
    send = np.zeros((m + 2, m + 2))
    for j, cs in enumerate(cons):
        if not cs or comm[j] == 0:
            continue
        cs_sorted = np.unique(cs)
        for a in range(j + 1, int(cs_sorted[-1]) + 1):   # received when next consumer < b
            nxt = int(cs_sorted[np.searchsorted(cs_sorted, a)])
            recv[a, nxt + 1] += comm[j]
        top = int(cs_sorted[-1])                         # sent: a ≤ j < b ≤ last consumer
        send[0, j + 1] += comm[j]
        send[j + 1, j + 1] -= comm[j]
        send[0, top + 1] -= comm[j]
        send[j + 1, top + 1] += comm[j]
    recv = np.cumsum(recv, axis=1)[:, :m + 1]
    send = np.cumsum(np.cumsum(send, axis=0), axis=1)[:m + 1, :m + 1]
    return recv + send


def path_dp_fits(problem: PlacementProblem, p: np.ndarray) -> bool:
    """Whether :func:`path_bound` on the path ``p`` stays within :data:`PATH_DP_LIMIT`
    steps and :data:`PATH_MATRIX_LIMIT` matrix entries (else it is skipped)."""
    _, mem, _, k = _type_arrays(problem)
    m = len(p)
    cum_s = np.r_[0.0, np.cumsum(problem.size_bytes[np.asarray(p, dtype=np.int64)])]
    first = np.searchsorted(cum_s, cum_s - mem * (1 + 1e-9), side="left")
    window = int(np.max(np.arange(m + 1) - first)) if m else 0
    return m * max(min(k, m), 1) * window <= PATH_DP_LIMIT and (m + 1) * (m + 2) <= PATH_MATRIX_LIMIT


def path_bound(problem: PlacementProblem, path: list[int], lam: float = 0.0) -> float:
    """The segmentation DP of the module docstring on ``path`` (``inf``: no placement),
    side inputs charged with the memory price ``lam`` (``λ ≥ 0``)."""
    t_acc, mem, t_host, k = _type_arrays(problem)
    p = np.asarray(path, dtype=np.int64)
    m = p.size
    if m == 0:
        return 0.0
    ta, th, size = t_acc[p], t_host[p], problem.size_bytes[p]
    lam = lam if np.isfinite(mem) else 0.0
    base = np.where(np.isinf(ta), 0.0, ta) + side_charge(problem, p, 0.0)
    cum_0 = np.r_[0.0, np.cumsum(base)]
    cum_t = np.r_[0.0, np.cumsum(np.where(np.isinf(ta), 0.0, ta + lam * size)
                                 + side_charge(problem, p, lam))]
    cum_bad = np.r_[0, np.cumsum(np.isinf(ta))]
    cum_s = np.r_[0.0, np.cumsum(size)]
    kk = min(k, m)
    first = np.searchsorted(cum_s, cum_s - mem * (1 + 1e-9), side="left")   # memory window
    if not path_dp_fits(problem, p):
        return float("nan")                        # checked before any quadratic array
    ends_ab = path_transfers(problem, p)           # (m+1, m+1): transfers of segment [a, b)
    # g[j, b]: least weight of v_0 … v_{b-1} with j accelerator segments
    g = np.full((kk + 1, m + 1), np.inf)
    g[0, 0] = 0.0
    for b in range(1, m + 1):
        g[:, b] = g[:, b - 1] + th[b - 1]          # v_{b-1} alone on the host
        if kk == 0:
            continue
        a = np.arange(first[b], b)
        ok = cum_bad[b] - cum_bad[a] == 0
        a = a[ok]
        if a.size == 0:
            continue
        ends = ends_ab[a, b]
        seg = np.maximum(cum_t[b] - cum_t[a] - lam * mem, cum_0[b] - cum_0[a]) + ends
        cand = g[:-1, a] + seg                      # (kk, |a|): one more accelerator segment
        g[1:, b] = np.minimum(g[1:, b], cand.min(axis=1))
    return float(g[:, m].min())


def memory_prices(problem: PlacementProblem, path: list[int]) -> list[float]:
    """``λ = 0`` and, with finite accelerator memory, the quartiles of the side inputs'
    transfer cost per byte (the price at which holding one stops paying off)."""
    _, mem, _, _ = _type_arrays(problem)
    p = np.asarray(path, dtype=np.int64)
    if not np.isfinite(mem) or p.size == 0:
        return [0.0]
    ws = np.concatenate([np.zeros(0, np.int64), *_side_inputs(problem, p)])
    ws = ws[problem.size_bytes[ws] > 0]
    if ws.size == 0:
        return [0.0]
    ratio = problem.comm[ws] / problem.size_bytes[ws]
    return [0.0, *np.unique(np.quantile(ratio, [0.25, 0.5, 0.75, 1.0])).tolist()]


def latency_lower_bound(problem: PlacementProblem, check: Callable[[], None] | None = None
                        ) -> tuple[float, dict]:
    """The best of the critical path (cheapest times, free transfers) and the path DP on a
    few long paths (by cheapest time, accelerator time and size); with the details.
    ``check`` (a deadline check that raises ``PhaseDeadline``) runs between and inside
    the passes; a path too long for the DP is skipped before its side inputs are priced."""
    from autopar_opt.placement.heuristics import critical_path_bound

    check = check or (lambda: None)
    cp = critical_path_bound(problem, check)
    t_acc, _, t_host, _ = _type_arrays(problem)
    tmin = np.minimum(t_acc, t_host)
    best, info = cp, {"critical_path": cp}
    for name, w in (("cheapest", tmin), ("accelerator", np.where(np.isinf(t_acc), tmin, t_acc)),
                    ("size", problem.size_bytes / max(float(problem.size_bytes.max(initial=0)), 1.0)
                     + 1e-9 * tmin)):
        check()
        path = longest_path(problem, np.where(np.isfinite(w), w, 0.0), check)
        if not path_dp_fits(problem, np.asarray(path, dtype=np.int64)):
            info[f"path_{name}"] = None
            continue
        val = max(path_bound(problem, path, lam) for lam in memory_prices(problem, path))
        info[f"path_{name}"] = None if not np.isfinite(val) else val
        if np.isfinite(val) or val == np.inf:
            best = max(best, val)
    return best, info


def serial_incumbent(cond, deadline: float | None = None, upper_bound: float = np.inf):
    """The sum-of-loads DP's placement (module docstring), as a device per original node,
    and its DP value (an upper bound on its latency); ``(None, inf)`` when the lattice is
    beyond the DP's guards or the deadline passed."""
    from autopar_opt.core.ideals import TooManyIdeals
    from autopar_opt.placement.exact.dp import DPTooLarge, solve_dp

    try:
        res = solve_dp(cond, combine="sum", deadline=deadline, upper_bound=upper_bound,
                       max_pairs=20_000_000)
    except (DPTooLarge, TooManyIdeals):
        return None, np.inf
    if res.deadline_hit or res.unit_device is None or not np.isfinite(res.value):
        return None, np.inf
    return cond.expand(res.unit_device), res.value
