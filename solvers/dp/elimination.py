"""Exact min-sum variable elimination over unary and pairwise cost tables.

Problem: one choice ``c_v ∈ {0..K_v-1}`` per variable, minimise
``Σ_v U_v[c_v] + Σ_(u,v) C_uv[c_u, c_v]``. This is PaSE's problem
(Elango, IPDPS 2021, Sec. IV: a DP over a vertex order whose state is the
assignment of the *dependent set*) written as bucket elimination
(Dechter, "Bucket elimination: a unifying framework for reasoning", AIJ 1999):
eliminating ``v`` adds every table that mentions ``v`` into a dense numpy
array over ``v`` and its current neighbours, and replaces them by its minimum
over ``v`` (the argmin is kept for decoding). That array is never built whole:
it is summed and minimised one block of its leading axes at a time
(:data:`BLOCK_ENTRIES`), so a step keeps only its result, and the memory of a run
is the tables it creates (:func:`elimination_bytes`, known before it runs). The
cost of a step is the size of that array, so the order is chosen greedily by **min-weight** (the product
of the neighbours' domain sizes, i.e. the size of the table created), ties by
**min-fill** (fewest new interaction edges), then by index — the classical
heuristics of Kjærulff (1990) for triangulation. The result is exact whatever
the order; the order only decides time and memory.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass

import numpy as np

#: Largest step (entries of its sum over the eliminated variable and its neighbours) run by
#: default: a bound on the time of one step (its memory is one block, see BLOCK_ENTRIES).
MAX_ENTRIES = 60_000_000


class EliminationTooWide(RuntimeError):
    """The chosen order needs a table larger than the limit (message gives the size)."""


class EliminationTimeout(RuntimeError):
    """The deadline passed during elimination."""


@dataclass
class EliminationResult:
    """Optimal choice per variable, its value, the order used and its widest table."""

    choice: list[int]
    value: float
    order: list[int]
    widest_entries: int


def greedy_order(sizes: list[int], pairs: list[tuple[int, int]]) -> tuple[list[int], int]:
    """Min-weight / min-fill elimination order and the largest table it creates.

    Returns the order and the largest ``Π size`` over ``{v} ∪ neighbours(v)``
    at the time ``v`` is eliminated. Scores live in a heap and are recomputed
    only for the vertices whose neighbourhood an elimination changed (the
    eliminated vertex's neighbours and theirs), so a step costs about the
    neighbourhood's size rather than the graph's.
    """
    n = len(sizes)
    adj: list[set[int]] = [set() for _ in range(n)]
    for u, v in pairs:
        if u != v:
            adj[u].add(v)
            adj[v].add(u)
    logs = [math.log(max(s, 1)) for s in sizes]

    def score(v: int) -> tuple[float, int, int]:
        nb = adj[v]
        fill = sum(1 for a in nb for b in nb if a < b and b not in adj[a])
        return (sum(logs[w] for w in nb), fill, v)

    current = {v: score(v) for v in range(n)}
    heap = list(current.values())
    heapq.heapify(heap)
    order, widest, done = [], 0, [False] * n
    while heap:
        item = heapq.heappop(heap)
        v = item[2]
        if done[v] or current[v] != item:
            continue
        nb = adj[v]
        widest = max(widest, math.prod(sizes[w] for w in nb) * sizes[v])
        for a in nb:
            adj[a] |= nb - {a}
            adj[a].discard(v)
        done[v] = True
        order.append(v)
        touched = set(nb)
        for a in nb:
            touched |= adj[a]
        adj[v] = set()
        for w in touched:
            if not done[w]:
                current[w] = score(w)
                heapq.heappush(heap, current[w])
    return order, widest


def _expand(arr: np.ndarray, scope: tuple[int, ...], full: list[int], sizes: list[int]) -> np.ndarray:
    """``arr`` over ``scope`` viewed as broadcastable over the axes ``full``."""
    pos = {x: i for i, x in enumerate(scope)}
    perm = [pos[x] for x in full if x in pos]
    shape = [sizes[x] if x in pos else 1 for x in full]
    return np.ascontiguousarray(arr.transpose(perm)).reshape(shape)


#: Entries of one block of an elimination step: the step's table is never built whole,
#: only one block of its leading axes at a time (8 MB of float64), which stays in the
#: processor's cache while every factor is added into it and the minimum is taken.
BLOCK_ENTRIES = 1 << 20

#: Bytes kept per entry of every table an elimination creates: the minimum (float64,
#: until a later step consumes it) and the arg-minimum (int32, kept for decoding).
BYTES_PER_CREATED_ENTRY = 12


def created_entries(sizes: list[int], order: list[int], pairs: list[tuple[int, int]]) -> int:
    """Entries of all the tables the elimination in ``order`` creates (each step's
    minimum over its neighbours' domains): with :data:`BYTES_PER_CREATED_ENTRY` per
    entry, an upper bound on the memory of the tables it keeps, known before any is built."""
    adj: list[set[int]] = [set() for _ in sizes]
    for u, v in pairs:
        if u != v:
            adj[u].add(v)
            adj[v].add(u)
    total = 0
    for v in order:
        nb = adj[v]
        total += math.prod(sizes[w] for w in nb)
        for a in nb:
            adj[a] |= nb - {a}
            adj[a].discard(v)
        adj[v] = set()
    return total


def elimination_bytes(sizes: list[int], pairs: list[tuple[int, int]]) -> tuple[float, int]:
    """Memory of :func:`solve_min_sum` on these domains and pairs, before anything is
    built, and its widest step: the created tables (:func:`created_entries`) plus one
    block of the widest step (:data:`BLOCK_ENTRIES`, with its sum, minimum and argmin)."""
    order, widest = greedy_order(sizes, pairs)
    block = min(widest, BLOCK_ENTRIES) * 8 * 3
    return float(BYTES_PER_CREATED_ENTRY * created_entries(sizes, order, pairs) + block), widest


def _eliminate(factors: list[tuple[tuple[int, ...], np.ndarray]], full: list[int],
               sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Minimum over the last axis of ``full`` of the sum of ``factors`` and its argmin,
    computed one block of leading axes at a time (the sum is never built whole)."""
    shape = [sizes[x] for x in full]
    views = [_expand(arr, fscope, full, sizes) for fscope, arr in factors]
    best = np.empty(shape[:-1])
    arg = np.empty(shape[:-1], dtype=np.int32)
    # blocks: one index of each of the first lead-1 axes, a range of axis lead-1, the rest whole
    lead, inner = 0, math.prod(shape)
    while lead < len(shape) - 1 and inner > BLOCK_ENTRIES:
        inner //= shape[lead]
        lead += 1
    step = max(1, BLOCK_ENTRIES // max(inner, 1))
    keys: list[tuple[slice, ...]] = [()]
    for axis in range(lead):
        width = 1 if axis < lead - 1 else step
        keys = [(*k, slice(i, i + width)) for k in keys for i in range(0, shape[axis], width)]
    for key in keys:
        block = [len(range(*k.indices(shape[a]))) for a, k in enumerate(key)] + shape[len(key):]
        total = np.empty(block)
        for i, view in enumerate(views):
            sub = view[tuple(k if view.shape[a] != 1 else slice(None) for a, k in enumerate(key))]
            if i == 0:
                np.copyto(total, sub)
            else:
                np.add(total, sub, out=total)
        a = np.argmin(total, axis=-1)
        arg[key] = a
        best[key] = np.take_along_axis(total, a[..., None], axis=-1)[..., 0]
    return best, arg


def solve_min_sum(unary: list[np.ndarray], pairs: list[tuple[int, int]], tables: list[np.ndarray],
                  deadline: float | None = None, max_entries: int = MAX_ENTRIES) -> EliminationResult:
    """Minimise ``Σ_v unary[v][c_v] + Σ_e tables[e][c_u, c_v]`` exactly.

    Raises :class:`EliminationTooWide` when a step would span more than
    ``max_entries`` entries (its time) and :class:`EliminationTimeout` past ``deadline``.
    """
    sizes = [len(u) for u in unary]
    order, widest = greedy_order(sizes, pairs)
    if widest > max_entries:
        raise EliminationTooWide(f"the min-weight order needs a table of {widest:,} entries "
                                 f"(limit {max_entries:,})")
    factors: dict[int, tuple[tuple[int, ...], np.ndarray]] = {}
    touching: list[set[int]] = [set() for _ in sizes]

    next_id = [0]

    def add(scope: tuple[int, ...], arr: np.ndarray) -> None:
        fid = next_id[0]
        next_id[0] += 1
        factors[fid] = (scope, arr)
        for x in scope:
            touching[x].add(fid)

    for v, u in enumerate(unary):
        add((v,), np.asarray(u, dtype=float))
    for (u, v), t in zip(pairs, tables):
        add((u, v), np.asarray(t, dtype=float))
    constant = 0.0
    backs: list[tuple[int, tuple[int, ...], np.ndarray]] = []
    for v in order:
        if deadline is not None and time.monotonic() > deadline:
            raise EliminationTimeout
        fids = sorted(touching[v])
        scope = sorted({x for f in fids for x in factors[f][0]} - {v})
        parts = []
        for f in fids:
            fscope, arr = factors.pop(f)
            parts.append((fscope, arr))
            for x in fscope:
                touching[x].discard(f)
        best, arg = _eliminate(parts, scope + [v], sizes)
        backs.append((v, tuple(scope), arg))
        if scope:
            add(tuple(scope), best)
        else:
            constant += float(best)
    choice = [0] * len(sizes)
    for v, scope, arg in reversed(backs):
        choice[v] = int(arg[tuple(choice[x] for x in scope)]) if scope else int(arg)
    return EliminationResult(choice, constant, order, widest)
