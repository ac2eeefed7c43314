"""Label dominance filter of the chain DP (:mod:`~autopar_opt.solvers.dp.chain`).

Rows are labels ``(S, M, pc, G, gc, mem, ws)`` of one state group (same stage, same layout of
the last layer), sorted by key ``S + (c−1)·M + G`` with ties broken so that a dominating
label comes first. Row ``x`` dominates a later row ``y`` when

    (mem_x ≤ mem_y and mem_x + ws_x ≤ mem_y + ws_y, or mem_x ≤ safe),  k_x ≤ k_y  and
    S_x + (c−1)·max(f, M_x−M_y, pc_x−pc_y) + max(f, G_x−G_y, gc_x−gc_y) ≤ S_y

(``f = 0``, or ``−inf`` in the last stage; the chain module's docstring proves that every
completion of ``y`` then costs at least as much after ``x``). The memory part: a completion
adds stored bytes ``a`` and working sets up to some ``r ≥ 0`` to the stage, which then holds
``mem + a + max(ws, r)``; ``mem_x + max(ws_x, r) ≤ mem_y + max(ws_y, r)`` for every ``r ≥ 0``
iff it holds at ``r = 0`` and for large ``r``, i.e. iff ``mem_x + ws_x ≤ mem_y + ws_y`` and
``mem_x ≤ mem_y`` (the difference is piecewise linear and monotone in ``r``), so every
completion that fits after ``y`` fits after ``x``. The relation is transitive,
so a row dominated by *any* earlier row, itself dominated or not, is dominated by a kept
one: the chain of dominators through strictly earlier rows ends at a row that no earlier
row dominates. Every filter below relies on that and only on that.

Cost (issue 18 item 3). The exact filter compares every row with every kept row:
O(L·kept) per group. On the memory-tight 512-layer chain the last exact pass creates
about 770 k candidate labels of which 640 k are dominated, and 87 % of those by one of
the 16 rows just before them in key order. :func:`dominated` therefore first removes
the rows that one of their :data:`WINDOW` predecessors dominates (O(L·WINDOW)) and runs
the blockwise all-pairs test only on the rest.
"""

from __future__ import annotations

import numpy as np

from autopar_opt.solvers.dp.common import DPTimeout, past

# label columns (as in chain.py)
_S, _M, _PC, _G, _GC, _MEM, _WS = range(7)
#: rows compared at once by the all-pairs test
BLOCK = 512
#: predecessors in key order each row is first compared with
WINDOW = 24


def dominated(lab: np.ndarray, ks: np.ndarray, c1: float, last: bool, safe: float,
              deadline: float | None = None) -> np.ndarray:
    """Rows (sorted by key) dominated by an earlier row (module docstring).

    Row ``x`` may dominate row ``y`` only if ``ks[x] ≤ ks[y]`` (their strategy
    indices; chain.py's symmetry rule: the plans that can follow ``y`` are then a
    subset of those that can follow ``x``, at the same costs)."""
    floor = -np.inf if last else 0.0
    out = window_dominated(lab, ks, c1, floor, safe, WINDOW)
    rest = np.flatnonzero(~out)
    if len(rest) > 1:
        out[rest] = _all_pairs(lab[rest], ks[rest], c1, floor, safe, deadline)
    return out


def window_dominated(lab: np.ndarray, ks: np.ndarray, c1: float, floor: float, safe: float,
                     width: int) -> np.ndarray:
    """Rows dominated by one of the ``width`` rows just before them (exact, not exhaustive)."""
    n = len(lab)
    out = np.zeros(n, dtype=bool)
    width = min(width, n - 1)
    if width < 1:
        return out
    idx = np.arange(n)[:, None] - np.arange(1, width + 1)[None, :]     # (n, width) earlier rows
    valid = idx >= 0
    idx = np.maximum(idx, 0)
    out[:] = (_dom_pairs(lab[idx], ks[idx], lab[:, None, :], ks[:, None], c1, floor, safe)
              & valid).any(axis=1)
    return out


def _dom_pairs(a: np.ndarray, ka: np.ndarray, b: np.ndarray, kb: np.ndarray, c1: float,
               floor: float, safe: float) -> np.ndarray:
    """Elementwise (broadcast) test: label ``a`` dominates label ``b`` (last axis = columns)."""
    held_a, held_b = a[..., _MEM] + a[..., _WS], b[..., _MEM] + b[..., _WS]
    ok = (((a[..., _MEM] <= b[..., _MEM]) & (held_a <= held_b)) | (a[..., _MEM] <= safe)) & (ka <= kb)
    d = np.maximum(np.maximum(a[..., _M] - b[..., _M], a[..., _PC] - b[..., _PC]), floor)
    g = np.maximum(np.maximum(a[..., _G] - b[..., _G], a[..., _GC] - b[..., _GC]), floor)
    return ok & (c1 * d + g + a[..., _S] <= b[..., _S])   # dom_matrix's order of operations


def _all_pairs(lab: np.ndarray, ks: np.ndarray, c1: float, floor: float, safe: float,
               deadline: float | None) -> np.ndarray:
    """Every row against every earlier kept row (and every earlier row of its block), blockwise."""
    n = len(lab)
    out = np.zeros(n, dtype=bool)
    kept_idx: list[np.ndarray] = []
    for start in range(0, n, BLOCK):
        if past(deadline):
            raise DPTimeout
        blk, kb = lab[start:start + BLOCK], ks[start:start + BLOCK]
        prev = np.concatenate(kept_idx) if kept_idx else np.zeros(0, dtype=int)
        hit = np.zeros(len(blk), dtype=bool)
        if len(prev):
            hit |= dom_matrix(lab[prev], ks[prev], blk, kb, c1, floor, safe).any(axis=0)
        inner = np.triu(dom_matrix(blk, kb, blk, kb, c1, floor, safe), 1)
        hit |= inner.any(axis=0)
        out[start:start + len(blk)] = hit
        kept_idx.append(np.flatnonzero(~hit) + start)
    return out


def dom_matrix(a: np.ndarray, ka: np.ndarray, b: np.ndarray, kb: np.ndarray, c1: float,
               floor: float, safe: float) -> np.ndarray:
    """``D[x, y]``: row ``x`` of ``a`` dominates row ``y`` of ``b`` (in-place operations:
    this O(L²) test is most of an exact pass's time)."""
    ok = np.less_equal.outer(a[:, _MEM], b[:, _MEM])
    ok &= np.less_equal.outer(a[:, _MEM] + a[:, _WS], b[:, _MEM] + b[:, _WS])
    ok |= (a[:, _MEM] <= safe)[:, None]
    ok &= np.less_equal.outer(ka, kb)
    d = np.subtract.outer(a[:, _M], b[:, _M])
    np.maximum(d, np.subtract.outer(a[:, _PC], b[:, _PC]), out=d)
    np.maximum(d, floor, out=d)
    g = np.subtract.outer(a[:, _G], b[:, _G])
    np.maximum(g, np.subtract.outer(a[:, _GC], b[:, _GC]), out=g)
    np.maximum(g, floor, out=g)
    d *= c1
    d += g
    d += a[:, _S, None]
    ok &= d <= b[None, :, _S]
    return ok
