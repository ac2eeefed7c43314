"""Ideals (downsets) of a DAG as numpy bitsets, and the transitions between them.

An **ideal** of a DAG ``G`` (also: downset, predecessor-closed set) is a node
set ``I`` such that ``v ∈ I`` and ``u → v`` imply ``u ∈ I``. With
``closed="succ"`` the same machinery enumerates **upsets** (successor-closed
sets: ``u ∈ I`` and ``u → v`` imply ``v ∈ I``), the sets Piper's DP works on.
Ideals are exactly the prefixes of the topological orders, and for two nested
ideals ``I' ⊆ I`` the difference ``I \\ I'`` is *contiguous* (convex: no path
leaves it and comes back); conversely every convex set is such a difference.
A chain ``∅ = I_0 ⊂ I_1 ⊂ … ⊂ I_k = V`` is therefore a split of the graph into
``k`` contiguous parts whose quotient graph is acyclic (Tarnawski et al.,
"Efficient Algorithms for Device Placement of DNN Graph Operators", NeurIPS
2020, §4: the exact max-load DP runs over such chains). Piper (Tarnawski et
al., NeurIPS 2021, §4) uses the same lattice with successor-closed sets.

API
---
``enumerate_ideals(num_nodes, edges, *, closed="pred", limit=DEFAULT_LIMIT)``
    All ideals, level by level (by cardinality), vectorised; raises
    :class:`TooManyIdeals` as soon as more than ``limit`` exist (the count of
    ideals can grow exponentially with the width of the graph).
``count_ideals(num_nodes, edges, *, closed="pred", limit=...)``
    Their number (the same enumeration; raises past ``limit``).
:class:`IdealLattice`
    The result, ordered by cardinality (``0`` is the empty set, ``m - 1`` the
    full set; within a level in discovery order, so ids are deterministic):

    - ``masks`` ``(m, W)`` uint64 bitsets (bit ``v % 64`` of word ``v // 64``),
      ``sizes`` ``(m,)`` cardinalities, ``level_start`` offsets per size;
    - the Hasse diagram (covers) as three aligned arrays ``cover_src``,
      ``cover_node``, ``cover_dst``: ``ideal[cover_dst] = ideal[cover_src] ∪
      {cover_node}``, sorted by ``cover_dst``;
    - ``members(ids)`` -> bool ``(len(ids), n)``; ``index_of(nodes)`` -> id;
      ``contains(sub, sup)``; ``difference(sub, sup)`` -> node ids;
    - ``subideal_matrix(max_bytes)`` -> packed bit matrix ``R`` with bit ``i``
      of row ``j`` set iff ``ideal i ⊆ ideal j`` (transitive closure of the
      covers, one OR per cover); ``sub_ideals(j)`` -> ids of all ``i`` with
      ``ideal i ⊆ ideal j`` (ascending, from the matrix);
    - ``num_pairs()`` -> the number of nested pairs ``(i ⊆ j)``, the size of
      the contiguous-set family the DP scans.

``ideal_chain_parts(lattice, chain)`` turns a chain of ideal ids into the
node sets of its parts. :func:`topological_order` and
:func:`transitive_reduction`-free inputs: the edge list may contain
duplicates and transitive edges; a cycle raises ``ValueError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Literal, Sequence

import numpy as np

#: Default guard on the number of ideals (the DP's memory grows with it).
DEFAULT_LIMIT = 200_000

Closure = Literal["pred", "succ"]


class TooManyIdeals(ValueError):
    """The graph has more ideals than the guard allows (message says how to proceed)."""

    def __init__(self, reached: int, limit: int, level: int, num_nodes: int,
                 width: int | None = None, nodes: str = "nodes"):
        self.reached, self.limit = reached, limit
        why = (f"at least 2^{width} = {2 ** width:,}: {width} of its {num_nodes} {nodes} are "
               "pairwise unordered, and every subset of them makes its own ideal"
               if width is not None else
               f"reached {reached:,} after {level} of {num_nodes} levels")
        super().__init__(
            f"the graph has more than {limit:,} ideals ({why}); the exact DP over ideals is "
            f"out of reach: coarsen the graph, raise the limit, or use the MILP / decomposition bound")


def _words(n: int) -> int:
    return max(1, (n + 63) // 64)


def pack_rows(member: np.ndarray) -> np.ndarray:
    """Bool ``(r, n)`` membership rows -> uint64 bitsets ``(r, W)``."""
    r, n = member.shape
    w = _words(n)
    padded = np.zeros((r, w * 64), dtype=bool)
    padded[:, :n] = member
    return np.packbits(padded, axis=1, bitorder="little").view("<u8").reshape(r, w)


def unpack_rows(masks: np.ndarray, n: int) -> np.ndarray:
    """uint64 bitsets ``(r, W)`` -> bool membership ``(r, n)``."""
    masks = np.ascontiguousarray(masks, dtype="<u8")
    bits = np.unpackbits(masks.view(np.uint8).reshape(masks.shape[0], -1), axis=1,
                         bitorder="little")
    return bits[:, :n].astype(bool)


def unique_rows(arr: np.ndarray) -> np.ndarray:
    """Distinct rows of an ``(E, 2)`` int array, sorted: ``np.unique(arr, axis=0)``
    without the ``numpy.ma`` import that ``np.unique`` triggers (about 25 ms of every
    short command's start-up)."""
    arr = np.asarray(arr).reshape(-1, 2)
    if arr.shape[0] < 2:
        return arr.copy()
    s = arr[np.lexsort((arr[:, 1], arr[:, 0]))]
    return s[np.r_[True, np.any(s[1:] != s[:-1], axis=1)]]


def unique_ints(arr: np.ndarray) -> np.ndarray:
    """Sorted distinct values of a 1-D array (``np.unique`` without ``numpy.ma``)."""
    s = np.sort(np.asarray(arr).ravel())
    return s[np.r_[True, s[1:] != s[:-1]]] if s.size else s


def _edge_arrays(num_nodes: int, edges: Iterable[tuple[int, int]] | np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    arr = np.asarray(edges if isinstance(edges, np.ndarray) else list(edges),
                     dtype=np.int64).reshape(-1, 2)
    if arr.size and (arr.min() < 0 or arr.max() >= num_nodes):
        raise ValueError(f"edge endpoint outside 0..{num_nodes - 1}")
    if arr.size and np.any(arr[:, 0] == arr[:, 1]):
        raise ValueError("self-loop in the edge list; the graph must be a DAG")
    arr = unique_rows(arr)
    return arr[:, 0], arr[:, 1]


def topological_order(num_nodes: int, edges: Iterable[tuple[int, int]] | np.ndarray) -> np.ndarray:
    """A topological order (Kahn, smallest id first among ready nodes); ValueError on a cycle.

    When every edge goes to a higher id that order is ``0, 1, ..., n-1`` (the
    smallest node not yet taken always has all its predecessors taken), returned
    without the heap: graphs numbered in order, as files and condensed units usually
    are, cost one comparison per edge."""
    import heapq
    src, dst = _edge_arrays(num_nodes, edges)
    if src.size == 0 or np.all(src < dst):
        return np.arange(num_nodes, dtype=np.int64)
    indeg = np.bincount(dst, minlength=num_nodes)
    order_idx = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[order_idx], np.arange(num_nodes + 1))
    heap = [int(v) for v in np.flatnonzero(indeg == 0)]
    heapq.heapify(heap)
    out: list[int] = []
    indeg = indeg.copy()
    while heap:
        u = heapq.heappop(heap)
        out.append(u)
        for v in dst[order_idx[starts[u]:starts[u + 1]]]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(heap, int(v))
    if len(out) != num_nodes:
        raise ValueError("the graph has a cycle; ideals are defined for DAGs only")
    return np.asarray(out, dtype=np.int64)


@dataclass
class IdealLattice:
    """All ideals of a DAG and their covers (see the module docstring)."""

    num_nodes: int
    closed: str
    masks: np.ndarray
    sizes: np.ndarray
    level_start: np.ndarray
    cover_src: np.ndarray
    cover_node: np.ndarray
    cover_dst: np.ndarray
    _index: dict[bytes, int] | None = field(default=None, repr=False)
    _reach: np.ndarray | None = field(default=None, repr=False)

    @property
    def num_ideals(self) -> int:
        return int(self.masks.shape[0])

    @property
    def full(self) -> int:
        """Id of the full node set (the last ideal)."""
        return self.num_ideals - 1

    def members(self, ids: Sequence[int] | np.ndarray | slice | None = None) -> np.ndarray:
        """Bool membership matrix ``(len(ids), n)`` (all ideals when ``ids`` is None)."""
        rows = self.masks if ids is None else self.masks[ids]
        return unpack_rows(np.atleast_2d(rows), self.num_nodes)

    def nodes(self, i: int) -> np.ndarray:
        """Node ids of ideal ``i`` (ascending)."""
        return np.flatnonzero(self.members([i])[0])

    def index_of(self, nodes: Iterable[int]) -> int:
        """Id of the ideal with exactly these nodes; KeyError when it is not an ideal."""
        if self._index is None:
            self._index = {row.tobytes(): i for i, row in enumerate(self.masks)}
        member = np.zeros((1, self.num_nodes), dtype=bool)
        member[0, list(nodes)] = True
        key = pack_rows(member)[0].tobytes()
        if key not in self._index:
            raise KeyError("this node set is not an ideal of the graph")
        return self._index[key]

    def contains(self, sub: int, sup: int) -> bool:
        """Whether ideal ``sub`` ⊆ ideal ``sup``."""
        return not np.any(self.masks[sub] & ~self.masks[sup])

    def difference(self, sub: int, sup: int) -> np.ndarray:
        """Node ids of ``ideal[sup] \\ ideal[sub]`` (a contiguous set when ``sub ⊆ sup``)."""
        diff = self.masks[sup] & ~self.masks[sub]
        return np.flatnonzero(unpack_rows(diff[None, :], self.num_nodes)[0])

    def subideal_matrix(self, max_bytes: int = 2 << 30) -> np.ndarray:
        """Packed ``(m, ⌈m/64⌉)`` uint64 matrix: bit ``i`` of row ``j`` iff ideal ``i`` ⊆ ``j``.

        Built as the transitive closure of the covers in cardinality order (each
        ideal ORs the rows of the ideals it covers), so its cost is
        ``#covers · m / 64`` word operations. ValueError when the matrix would
        exceed ``max_bytes`` (m² / 8 bytes).
        """
        if self._reach is not None:
            return self._reach
        m = self.num_ideals
        w = _words(m)
        if m * w * 8 > max_bytes:
            raise ValueError(f"the sub-ideal matrix of {m:,} ideals needs {m * w * 8 / 2**30:.1f} GiB "
                             f"(> {max_bytes / 2**30:.1f} GiB allowed); coarsen the graph first")
        reach = np.zeros((m, w), dtype=np.uint64)
        ids = np.arange(m)
        reach[ids, ids >> 6] = np.left_shift(np.uint64(1), (ids & 63).astype(np.uint64))
        starts = np.searchsorted(self.cover_dst, np.arange(m + 1))
        for j in range(1, m):
            src = self.cover_src[starts[j]:starts[j + 1]]
            if src.size:
                reach[j] |= np.bitwise_or.reduce(reach[src], axis=0)
        self._reach = reach
        return reach

    def sub_ideals(self, j: int) -> np.ndarray:
        """Ids ``i`` (ascending) with ideal ``i`` ⊆ ideal ``j`` (``j`` itself included)."""
        row = self.subideal_matrix()[j]
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[: self.num_ideals]
        return np.flatnonzero(bits)

    def num_pairs(self) -> int:
        """Number of nested pairs ``(i, j)`` with ideal ``i`` ⊆ ideal ``j`` (``i = j`` counted)."""
        reach = self.subideal_matrix()
        return int(np.unpackbits(reach.view(np.uint8)).sum())


def enumerate_ideals(num_nodes: int, edges: Iterable[tuple[int, int]], *,
                     closed: Closure = "pred", limit: int = DEFAULT_LIMIT) -> IdealLattice:
    """All ideals (``closed="pred"``) or upsets (``closed="succ"``) of a DAG.

    Breadth-first by cardinality. Every set carries its *frontier* (the nodes
    that may be added next: all required neighbours inside); adding ``v``
    only changes the frontier at ``v``'s dependants, so one cover costs
    ``O(deg(v))`` big-integer bitset operations, independent of the number of
    levels. Sets are deduplicated by their bitset. Raises
    :class:`TooManyIdeals` past ``limit`` and ``ValueError`` on a cycle.
    """
    src, dst = _edge_arrays(num_nodes, edges)
    topological_order(num_nodes, zip(src.tolist(), dst.tolist()))   # cycle check
    if closed == "pred":
        req_src, req_dst = src, dst          # v needs u when u -> v
    elif closed == "succ":
        req_src, req_dst = dst, src
    else:
        raise ValueError(f"closed must be 'pred' or 'succ', not {closed!r}")
    need = [0] * num_nodes                   # bitset of required nodes per node
    dependants: list[list[int]] = [[] for _ in range(num_nodes)]
    for u, v in zip(req_src.tolist(), req_dst.tolist()):
        need[v] |= 1 << u
        dependants[u].append(v)
    level = {0: tuple(v for v in range(num_nodes) if need[v] == 0)}
    masks: list[int] = [0]
    c_src: list[int] = []
    c_node: list[int] = []
    c_dst: list[int] = []
    sizes = [0]
    level_start = [0, 1]
    ids = {0: 0}
    for depth in range(num_nodes):
        nxt: dict[int, tuple[int, ...]] = {}
        for mask, frontier in level.items():
            me = ids[mask]
            for v in frontier:
                new = mask | (1 << v)
                if new not in nxt:
                    grown = [w for w in dependants[v] if need[w] & ~new == 0]
                    nxt[new] = tuple(sorted(set(frontier) - {v} | set(grown)))
                    ids[new] = len(masks)
                    masks.append(new)
                    sizes.append(depth + 1)
                    if len(masks) > limit:
                        raise TooManyIdeals(len(masks), limit, depth + 1, num_nodes)
                c_src.append(me)
                c_node.append(v)
                c_dst.append(ids[new])
        for mask in level:                   # ids of finished levels are no longer needed
            del ids[mask]
        level = nxt
        level_start.append(len(masks))
        if not nxt:
            break
    w = _words(num_nodes)
    nbytes = w * 8
    arr = np.frombuffer(b"".join(mk.to_bytes(nbytes, "little") for mk in masks),
                        dtype="<u8").reshape(len(masks), w).astype(np.uint64)
    order = np.argsort(np.asarray(c_dst), kind="stable")
    ls = np.asarray(level_start[:-1] if level_start[-1] == level_start[-2] else level_start)
    return IdealLattice(num_nodes=num_nodes, closed=closed, masks=arr,
                        sizes=np.asarray(sizes), level_start=ls,
                        cover_src=np.asarray(c_src, dtype=np.int64)[order],
                        cover_node=np.asarray(c_node, dtype=np.int64)[order],
                        cover_dst=np.asarray(c_dst, dtype=np.int64)[order])


#: :func:`antichain_width` gives up (None) past this many comparable pairs.
WIDTH_MAX_PAIRS = 300_000


def antichain_width(num_nodes: int, edges: Iterable[tuple[int, int]], *,
                    max_pairs: int = WIDTH_MAX_PAIRS) -> int | None:
    """The width of a DAG (its largest antichain: nodes no two of which are joined by a
    path), or None when its transitive closure has more than ``max_pairs`` pairs.

    Dilworth's theorem (1950): the width is ``n`` minus a maximum matching of the
    bipartite graph ``{(u, v): u reaches v}`` (the minimum chain cover). The graph has at
    least ``2^width`` ideals (and upsets): distinct subsets ``S`` of an antichain ``A``
    close to distinct ideals, since the ideal of ``S`` meets ``A`` in ``S``. So a width
    above ``log2(limit)`` proves :func:`enumerate_ideals` would pass ``limit``, without
    enumerating (QA round 35: a 329-unit GNMT graph, width 23, took 6 s to reach the
    200,000 guard)."""
    src, dst = _edge_arrays(num_nodes, edges)
    order = topological_order(num_nodes, zip(src.tolist(), dst.tolist()))
    succ: list[list[int]] = [[] for _ in range(num_nodes)]
    for u, v in zip(src.tolist(), dst.tolist()):
        succ[u].append(v)
    reach = [0] * num_nodes
    pairs = 0
    for u in order.tolist()[::-1]:
        r = 0
        for v in succ[u]:
            r |= (1 << v) | reach[v]
        reach[u] = r
        pairs += r.bit_count()
        if pairs > max_pairs:
            return None
    rows, cols = [], []
    for u, r in enumerate(reach):
        while r:
            low = r & -r
            rows.append(u)
            cols.append(low.bit_length() - 1)
            r ^= low
    if not rows:
        return num_nodes
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    closure = csr_matrix((np.ones(len(rows), dtype=np.int8), (rows, cols)),
                         shape=(num_nodes, num_nodes))
    matched = maximum_bipartite_matching(closure, perm_type="column")
    return num_nodes - int((matched >= 0).sum())


def count_ideals(num_nodes: int, edges: Iterable[tuple[int, int]], *, closed: Closure = "pred",
                 limit: int = DEFAULT_LIMIT) -> int:
    """Number of ideals (or upsets); :class:`TooManyIdeals` past ``limit``."""
    return enumerate_ideals(num_nodes, edges, closed=closed, limit=limit).num_ideals


def ideal_chain_parts(lattice: IdealLattice, chain: Sequence[int]) -> list[np.ndarray]:
    """Node sets ``ideal[c_t] \\ ideal[c_{t-1}]`` of a chain of ideal ids ``c_0 ⊆ c_1 ⊆ …``.

    ValueError when the chain is not nested.
    """
    parts = []
    for a, b in zip(chain[:-1], chain[1:]):
        if not lattice.contains(a, b):
            raise ValueError(f"ideal {a} is not contained in ideal {b}; not a chain")
        parts.append(lattice.difference(a, b))
    return parts
