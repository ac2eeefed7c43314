"""Single-sample latency: a strong incumbent and sound lower bounds (no MILP needed).

The latency model is :func:`~autopar_opt.placement.evaluate.block_latency`: every
communication-paying device runs its node set as one block of length ``load_d``
(time + sending + receiving, as in max-load) once all its outside inputs are
ready; host nodes run one by one as soon as their inputs are ready; the latency is
the longest path of this block graph, finite only when the blocks are contiguous
(the block graph is acyclic).

**Incumbent** (:func:`serial_incumbent`): the exact DP over ideals with ``+`` in
place of ``max`` (:func:`~autopar_opt.placement.dp.solve_dp`, ``combine="sum"``)
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
"""

from __future__ import annotations

import numpy as np

from autopar_opt.ideals import topological_order
from autopar_opt.placement.problem import PlacementProblem

#: Path length × accelerators × window above which :func:`path_bound` is skipped.
PATH_DP_LIMIT = 60_000_000


def longest_path(problem: PlacementProblem, weight: np.ndarray) -> list[int]:
    """Nodes of a maximum-weight path of the DAG (node weights ``weight``)."""
    n = problem.num_nodes
    preds: list[list[int]] = [[] for _ in range(n)]
    for u, v in problem.edges.tolist():
        preds[v].append(u)
    fin = np.zeros(n)
    back = np.full(n, -1, dtype=np.int64)
    for v in topological_order(n, [tuple(e) for e in problem.edges.tolist()]).tolist():
        if preds[v]:
            u = max(preds[v], key=lambda x: fin[x])
            fin[v], back[v] = fin[u] + weight[v], u
        else:
            fin[v] = weight[v]
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


def path_bound(problem: PlacementProblem, path: list[int]) -> float:
    """The segmentation DP of the module docstring on ``path`` (``inf``: no placement)."""
    t_acc, mem, t_host, k = _type_arrays(problem)
    p = np.asarray(path, dtype=np.int64)
    m = p.size
    if m == 0:
        return 0.0
    ta, th, size, comm = t_acc[p], t_host[p], problem.size_bytes[p], problem.comm[p]
    cum_t = np.r_[0.0, np.cumsum(np.where(np.isinf(ta), 0.0, ta))]
    cum_bad = np.r_[0, np.cumsum(np.isinf(ta))]
    cum_s = np.r_[0.0, np.cumsum(size)]
    recv = np.r_[0.0, comm[:-1]]                   # segment starting at a > 0 receives v_{a-1}
    send = np.r_[comm[:-1], 0.0]                   # segment ending at b < m sends v_{b-1}
    kk = min(k, m)
    # g[j, b]: least weight of v_0 … v_{b-1} with j accelerator segments
    g = np.full((kk + 1, m + 1), np.inf)
    g[0, 0] = 0.0
    first = np.searchsorted(cum_s, cum_s - mem * (1 + 1e-9), side="left")   # memory window
    if m * max(kk, 1) * int(np.max(np.arange(m + 1) - first)) > PATH_DP_LIMIT:
        return float("nan")
    for b in range(1, m + 1):
        g[:, b] = g[:, b - 1] + th[b - 1]          # v_{b-1} alone on the host
        if kk == 0:
            continue
        a = np.arange(first[b], b)
        ok = cum_bad[b] - cum_bad[a] == 0
        a = a[ok]
        if a.size == 0:
            continue
        seg = cum_t[b] - cum_t[a] + np.where(a > 0, recv[a], 0.0) + (send[b - 1] if b < m else 0.0)
        cand = g[:-1, a] + seg                      # (kk, |a|): one more accelerator segment
        g[1:, b] = np.minimum(g[1:, b], cand.min(axis=1))
    return float(g[:, m].min())


def latency_lower_bound(problem: PlacementProblem) -> tuple[float, dict]:
    """The best of the critical path (cheapest times, free transfers) and the path DP on a
    few long paths (by cheapest time, accelerator time and size); with the details."""
    from autopar_opt.placement.heuristics import critical_path_bound

    cp = critical_path_bound(problem)
    t_acc, _, t_host, _ = _type_arrays(problem)
    tmin = np.minimum(t_acc, t_host)
    best, info = cp, {"critical_path": cp}
    for name, w in (("cheapest", tmin), ("accelerator", np.where(np.isinf(t_acc), tmin, t_acc)),
                    ("size", problem.size_bytes / max(float(problem.size_bytes.max(initial=0)), 1.0)
                     + 1e-9 * tmin)):
        val = path_bound(problem, longest_path(problem, np.where(np.isfinite(w), w, 0.0)))
        info[f"path_{name}"] = None if not np.isfinite(val) else val
        if np.isfinite(val) or val == np.inf:
            best = max(best, val)
    return best, info


def serial_incumbent(cond, deadline: float | None = None, upper_bound: float = np.inf):
    """The sum-of-loads DP's placement (module docstring), as a device per original node,
    and its DP value (an upper bound on its latency); ``(None, inf)`` when the lattice is
    beyond the DP's guards or the deadline passed."""
    from autopar_opt.ideals import TooManyIdeals
    from autopar_opt.placement.dp import DPTooLarge, solve_dp

    try:
        res = solve_dp(cond, combine="sum", deadline=deadline, upper_bound=upper_bound,
                       max_pairs=20_000_000)
    except (DPTooLarge, TooManyIdeals):
        return None, np.inf
    if res.deadline_hit or res.unit_device is None or not np.isfinite(res.value):
        return None, np.inf
    return cond.expand(res.unit_device), res.value
