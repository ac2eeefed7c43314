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
    full set; within a level lexicographic by bitset, so ids are
    deterministic):

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
import scipy.sparse as sp

#: Default guard on the number of ideals (the DP's memory grows with it).
DEFAULT_LIMIT = 200_000
#: Rows of a level processed at once (bounds the ``rows × n`` bool scratch).
_CHUNK = 4096

Closure = Literal["pred", "succ"]


class TooManyIdeals(ValueError):
    """The graph has more ideals than the guard allows (message says how to proceed)."""

    def __init__(self, reached: int, limit: int, level: int, num_nodes: int):
        self.reached, self.limit = reached, limit
        super().__init__(
            f"the graph has more than {limit:,} ideals (reached {reached:,} after "
            f"{level} of {num_nodes} levels); the exact DP over ideals is out of reach: "
            f"coarsen the graph, raise the limit, or use the MILP / decomposition bound")


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


def _edge_arrays(num_nodes: int, edges: Iterable[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    arr = np.asarray(list(edges), dtype=np.int64).reshape(-1, 2)
    if arr.size and (arr.min() < 0 or arr.max() >= num_nodes):
        raise ValueError(f"edge endpoint outside 0..{num_nodes - 1}")
    if arr.size and np.any(arr[:, 0] == arr[:, 1]):
        raise ValueError("self-loop in the edge list; the graph must be a DAG")
    arr = np.unique(arr, axis=0) if arr.size else arr
    return arr[:, 0], arr[:, 1]


def topological_order(num_nodes: int, edges: Iterable[tuple[int, int]]) -> np.ndarray:
    """A topological order (Kahn, smallest id first among ready nodes); ValueError on a cycle."""
    import heapq
    src, dst = _edge_arrays(num_nodes, edges)
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


def _pred_matrix(num_nodes: int, src: np.ndarray, dst: np.ndarray, closed: Closure) -> sp.csr_array:
    """``P[u, v] = 1`` when ``u`` must be in any closed set that holds ``v``."""
    if closed == "pred":
        rows, cols = src, dst
    elif closed == "succ":
        rows, cols = dst, src
    else:
        raise ValueError(f"closed must be 'pred' or 'succ', not {closed!r}")
    data = np.ones(rows.size, dtype=np.float32)
    return sp.csr_array((data, (rows, cols)), shape=(num_nodes, num_nodes))


def enumerate_ideals(num_nodes: int, edges: Iterable[tuple[int, int]], *,
                     closed: Closure = "pred", limit: int = DEFAULT_LIMIT) -> IdealLattice:
    """All ideals (``closed="pred"``) or upsets (``closed="succ"``) of a DAG.

    Level ``L + 1`` is obtained from level ``L`` by adding every node whose
    required neighbours are all in the set (one sparse product per chunk of
    ``_CHUNK`` sets), deduplicated with ``np.unique`` on the bitset rows. The
    covers are recorded on the way. Raises :class:`TooManyIdeals` past
    ``limit`` and ``ValueError`` on a cycle.
    """
    src, dst = _edge_arrays(num_nodes, edges)
    topological_order(num_nodes, zip(src.tolist(), dst.tolist()))   # cycle check
    need = _pred_matrix(num_nodes, src, dst, closed)
    required = np.asarray(need.sum(axis=0)).ravel()
    w = _words(num_nodes)
    bit = np.left_shift(np.uint64(1), (np.arange(num_nodes) & 63).astype(np.uint64))
    word = np.arange(num_nodes) >> 6
    levels = [np.zeros((1, w), dtype=np.uint64)]
    covers: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    total, offset = 1, 0
    for level in range(num_nodes):
        cur = levels[-1]
        cand_parent, cand_node = [], []
        for lo in range(0, cur.shape[0], _CHUNK):
            member = unpack_rows(cur[lo:lo + _CHUNK], num_nodes)
            count = (need.T @ member.T.astype(np.float32)).T
            ok = (~member) & (count == required)
            r, v = np.nonzero(ok)
            cand_parent.append(r + lo)
            cand_node.append(v)
        parent = np.concatenate(cand_parent)
        node = np.concatenate(cand_node)
        cand = cur[parent].copy()
        cand[np.arange(parent.size), word[node]] |= bit[node]
        nxt, inverse = np.unique(cand, axis=0, return_inverse=True)
        total += nxt.shape[0]
        if total > limit:
            raise TooManyIdeals(total, limit, level + 1, num_nodes)
        covers.append((offset + parent, node, offset + cur.shape[0] + inverse.ravel()))
        offset += cur.shape[0]
        levels.append(nxt)
    masks = np.concatenate(levels)
    sizes = np.repeat(np.arange(len(levels)), [lv.shape[0] for lv in levels])
    level_start = np.concatenate([[0], np.cumsum([lv.shape[0] for lv in levels])])
    empty = np.zeros(0, dtype=np.int64)
    c_src, c_node, c_dst = ((np.concatenate(x) for x in zip(*covers)) if covers
                            else (empty, empty, empty))
    order = np.argsort(c_dst, kind="stable")
    return IdealLattice(num_nodes=num_nodes, closed=closed, masks=masks, sizes=sizes,
                        level_start=level_start, cover_src=c_src[order].astype(np.int64),
                        cover_node=c_node[order].astype(np.int64),
                        cover_dst=c_dst[order].astype(np.int64))


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
