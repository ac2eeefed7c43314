"""Exact PaSE-style DP for DAGs without pipelining (``pp == 1``).

With one stage the objective of docs/DESIGN.md §3 is linear:
``T = c·(Σ_u A[u,k_u] + Σ_(u,v) R[e][k_u,k_v]) + Σ_u G[u,k_u]`` (+ constant),
because ``max p = Σp = p`` and there is no transfer. Memory is one global
knapsack ``Σ_u W[u,k_u] + inflight_0·Σ_u H[u,k_u] + max_u X[u,k_u] ≤ capacity``
(``X`` the working set of the layer in flight, :func:`~autopar_opt.cost.tables.stage_memory`).

Method (Elango, "PaSE: Parallelization Strategies for Efficient DNN
Training", IPDPS 2021, Sec. IV): visit the vertices in an order
``v_1..v_n``; after ``t`` vertices the *dependent set* ``D_t`` is the set of
visited vertices with an unvisited neighbour (in the undirected graph). The
cost of the rest depends on the visited part only through the strategies of
``D_t`` — in fact only through their *layouts* (tensor/sequence-parallel
degrees), since resharding costs depend on layouts alone — so the DP table is
indexed by an assignment of layouts to ``D_t`` (ZeRO level and recomputation
only change a vertex's own time, sync and memory, carried in the labels). The order is
PaSE's GENERATESEQ idea, implemented greedily: next visit the vertex (adjacent
to the visited part when possible) that leaves the smallest dependent set,
ties broken by topological index.

Memory is handled exactly with Pareto labels: every table entry keeps the
non-dominated ``(cost, memory, memory + working set)`` triples (a label with
more cost, more stored memory and more stored memory plus working set can never
be better for any completion: cost and memory add, the working set is a running
maximum, see :func:`_pareto3`), and
labels whose ``memory + working set`` exceeds the capacity are dropped (both
only grow). Optimal = least cost among the
final labels.

Complexity: O(n · K · Λ^|D| · L) label operations (``K`` strategies, ``Λ``
layouts per vertex, ``|D|`` the largest dependent set, ``L`` Pareto labels per entry; ``L = 1`` when memory
never binds).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict

import numpy as np

from autopar_opt.cost.tables import CostTables
from autopar_opt.solvers.dp.chain import DPTimeout
from autopar_opt.solvers.dp.common import MEM_EPS, Assignment, layer_memory
from autopar_opt.ir.hardware import GIB
from autopar_opt.ir.strategies import layout_ids


def generate_seq(n: int, edges: list[tuple[int, int]]) -> tuple[list[int], int]:
    """Greedy GENERATESEQ: a visiting order and its largest dependent set size."""
    adj: list[set[int]] = [set() for _ in range(n)]
    for u, v in edges:
        adj[u].add(v)
        adj[v].add(u)
    visited: set[int] = set()
    remaining = [len(a) for a in adj]      # unvisited neighbours of each vertex
    frontier: set[int] = set()
    order, widest = [], 0
    for _ in range(n):
        cands = {w for f in frontier for w in adj[f] if w not in visited} or \
                {min(w for w in range(n) if w not in visited)}
        best = min(cands, key=lambda v: (_frontier_after(v, frontier, adj, visited, remaining), v))
        order.append(best)
        visited.add(best)
        for w in adj[best]:
            remaining[w] -= 1
        frontier = {f for f in frontier | {best} if remaining[f] > 0}
        widest = max(widest, len(frontier))
    return order, widest


def _frontier_after(v: int, frontier: set[int], adj: list[set[int]], visited: set[int],
                    remaining: list[int]) -> int:
    closing = sum(1 for f in adj[v] if f in frontier and remaining[f] == 1)
    stays = 1 if any(w not in visited for w in adj[v]) else 0
    return len(frontier) - closing + stays


def _pareto2(cost: np.ndarray, mem: np.ndarray) -> np.ndarray:
    """Indices of the (cost, memory) Pareto-optimal labels, least cost first."""
    order = np.lexsort((mem, cost))
    m = mem[order]
    best_before = np.r_[np.inf, np.minimum.accumulate(m)[:-1]]
    return order[m < best_before]


def _pareto3(cost: np.ndarray, mem: np.ndarray, ws: np.ndarray, safe: float) -> np.ndarray:
    """Indices of the Pareto-optimal labels in (cost, memory, memory + working
    set), least cost first (of equal triples the first stays): a label no
    costlier, with no more memory and no more memory plus working set, fits
    every completion the other fits (:mod:`~autopar_opt.solvers.dp.dominance`);
    :func:`_pareto2` when no label has a working set. A label whose memory is at most ``safe`` fits
    whatever follows (the remaining layers' largest memory and the largest
    working set of any layer still fit): it dominates every costlier label."""
    if not np.any(ws):
        return _pareto2(cost, mem)
    held = mem + ws    # dominance on (memory, memory + working set): solvers/dp/dominance.py
    order = np.lexsort((held, mem, cost))
    m, w = mem[order], held[order]
    free = np.flatnonzero(m <= safe)
    if len(free):
        order, m, w = order[:free[0] + 1], m[:free[0] + 1], w[:free[0] + 1]
    n = len(order)
    out = np.zeros(n, dtype=bool)
    for start in range(0, n, 2048):   # earlier rows dominate later ones (transitive)
        blk = slice(start, min(n, start + 2048))
        hit = (m[:blk.stop, None] <= m[None, blk]) & (w[:blk.stop, None] <= w[None, blk])
        hit &= np.arange(blk.stop)[:, None] < np.arange(blk.start, blk.stop)[None, :]
        out[blk] = hit.any(axis=0)
    return order[~out]


def solve_dag_single_stage(tables: CostTables, deadline: float | None = None) -> tuple[Assignment | None, float]:
    """Optimal assignment for ``pp == 1`` (None when nothing fits) and its DP value.

    Raises :class:`DPTimeout` when ``deadline`` passes.
    """
    n, c = tables.num_layers, float(tables.microbatches)
    cap = tables.capacity_bytes + MEM_EPS * GIB
    mem = layer_memory(tables, 0)
    work = [np.asarray(x, dtype=float) for x in tables.working_bytes]
    node_cost = [c * a + g for a, g in zip(tables.time, tables.sync)]
    order, _ = generate_seq(n, tables.edges)
    pos = {v: t for t, v in enumerate(order)}
    back: dict[int, list[tuple[int, bool]]] = defaultdict(list)   # v -> (edge, v is dst)
    last_use = [pos[v] for v in range(n)]
    for e, (u, v) in enumerate(tables.edges):
        later, earlier = (v, u) if pos[v] > pos[u] else (u, v)
        back[later].append((e, later == v))
        last_use[earlier] = max(last_use[earlier], pos[later])
    # the key holds LAYOUTS, not strategies: every edge cost depends on the two
    # layouts only (checked by formulations.direct.collapse), so two partial
    # assignments that agree on the frontier's layouts have the same futures
    lay_of = [layout_ids(strats) for strats in tables.strategies]
    rep = []            # a representative strategy of every layout
    for ids in lay_of:
        first: dict[int, int] = {}
        for k, lid in enumerate(ids):
            first.setdefault(lid, k)
        rep.append(first)
    # stored memory under which a label fits whatever follows: the largest usable
    # memory of every vertex not yet visited plus the largest working set of any
    top_ws = max((float(x[np.isfinite(m)].max(initial=0.0)) for x, m in zip(work, mem)), default=0.0)
    most = [float(m[np.isfinite(m)].max(initial=0.0)) for m in mem]
    rest_after = np.concatenate([np.cumsum([most[v] for v in order][::-1])[::-1][1:], [0.0]])
    frontier: list[int] = []
    # table: frontier layouts -> (cost, memory, working set) arrays of its Pareto labels;
    # history[t][key] = (parts, part index per label, parent row per label)
    table: dict[tuple, tuple[np.ndarray, ...]] = {(): (np.zeros(1), np.zeros(1), np.zeros(1))}
    history: list[dict] = []
    for t, v in enumerate(order):
        if deadline is not None and time.monotonic() > deadline:
            raise DPTimeout
        new_front = [f for f in frontier + [v] if last_use[f] > t]
        idx = {f: j for j, f in enumerate(frontier)}
        parts: dict[tuple, list] = defaultdict(list)
        for key, (C, M, X) in table.items():
            full = dict(zip(frontier, key))
            for k in range(len(node_cost[v])):
                add = float(node_cost[v][k])
                for e, v_is_dst in back[v]:
                    other = tables.edges[e][0] if v_is_dst else tables.edges[e][1]
                    ko = rep[other][key[idx[other]]]
                    add += c * float(tables.reshard[e][ko, k] if v_is_dst else tables.reshard[e][k, ko])
                m, x = float(mem[v][k]), float(work[v][k])
                ws = np.maximum(X, x)
                rows = np.flatnonzero(M + m + ws <= cap)
                if not len(rows):
                    continue
                full[v] = lay_of[v][k]
                nkey = tuple(full[f] for f in new_front)
                parts[nkey].append((C[rows] + add, M[rows] + m, key, rows, k, ws[rows]))
        table, step = {}, {}
        for nkey, plist in parts.items():
            cost = np.concatenate([p[0] for p in plist])
            memv = np.concatenate([p[1] for p in plist])
            wsv = np.concatenate([p[5] for p in plist])
            which = np.concatenate([np.full(len(p[0]), j) for j, p in enumerate(plist)])
            prow = np.concatenate([p[3] for p in plist])
            keep = _pareto3(cost, memv, wsv, cap - top_ws - float(rest_after[t]))
            table[nkey] = (cost[keep], memv[keep], wsv[keep])
            step[nkey] = ([(p[2], p[4]) for p in plist], which[keep], prow[keep])
        history.append(step)
        frontier = new_front
    if () not in table:
        return None, math.inf
    cost_arr = table[()][0]
    row = int(np.argmin(cost_arr))
    cost = float(cost_arr[row])
    choice = [0] * n
    key: tuple = ()
    for t in range(n - 1, -1, -1):
        plist, which, prow = history[t][key]
        key, k = plist[int(which[row])]
        choice[order[t]] = k
        row = int(prow[row])
    return Assignment([0] * n, choice), cost
