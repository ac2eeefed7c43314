"""Chains of identical repeated blocks: detection and in-stage layout patterns (issue 18).

A transformer in the model zoo is a chain ``[prefix] + N identical blocks +
[suffix]`` (the embedding, ``N`` decoder blocks, the head). Inside one stage
the blocks are interchangeable, so a stage is described by how many blocks
use each strategy and by the order in which the blocks' *layouts* follow one
another (resharding and transfers depend on layouts only). This module finds
such a chain in the cost tables (:func:`block_chain`) and lists every in-stage
layout *pattern* with its least resharding cost (:func:`layout_patterns`);
:mod:`.blocks` builds the aggregated MILP from them.

Why a pattern is enough (the argument :mod:`.blocks` relies on). Let ``R`` be
the in-stage resharding cost between the layouts of two neighbouring blocks,
with ``R[l, l] = 0`` and the triangle inequality ``R[a, c] <= R[a, b] + R[b, c]``
(both checked on the tables, to ``TRIANGLE_TOL`` relative, or the chain is not
used). The body blocks of one stage form a walk ``w_1 .. w_T`` over layouts;
its resharding cost is ``sum_t R[w_t, w_t+1]``. Let ``U`` be the set of its
layouts, ``f = w_1``, ``h = w_T``. The subsequence ``w_1``, then the first
occurrence of every layout of ``U`` other than ``f`` and ``h`` (in walk
order), then ``w_T`` is a path ``f -> ... -> h`` through ``U`` visiting every
other layout once; by the triangle inequality its cost is at most the walk's.
Grouping the stage's blocks along that path (all blocks of a layout
together; when ``f = h`` and ``|U| >= 2`` the blocks of ``f`` split between
the two ends) gives the same multiset of strategies, the same first and last
layout, and no larger resharding cost. So the least resharding of a stage
depends only on ``(U, f, h)``: the least-cost such path (Held-Karp over
``U``), and a plan exists for ``(U, f, h)`` exactly when every layout of
``U`` has at least one block (two for ``f`` when ``f = h`` and ``|U| >= 2``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from autopar_opt.cost.tables import CostTables, identical_layers
from autopar_opt.formulations.base import FormulationError
from autopar_opt.ir.strategies import layout_ids

#: relative tolerance of the triangle-inequality check on the block resharding matrix
TRIANGLE_TOL = 1e-12
#: more body layouts than this and the patterns (n(n+1)·2^(n-2) per stage) are too many
MAX_LAYOUTS = 8


@dataclass(frozen=True)
class Pattern:
    """One in-stage layout pattern: the set ``mask`` of body layouts, the first
    ``f`` and last ``h``, the least resharding ``cost`` and the layout ``path``
    attaining it (``f`` twice when ``f = h`` and more than one layout)."""

    mask: int
    f: int
    h: int
    cost: float
    path: tuple[int, ...]
    #: a relaxed pattern stands for every set of more than ``exact_upto`` layouts
    #: with these ends: any layout may be used, ``cost`` is the least over those sets
    relaxed: bool = False

    def layouts(self) -> list[int]:
        return [l for l in range(self.mask.bit_length()) if self.mask >> l & 1]

    def need(self, layout: int) -> int:
        """Least number of blocks of ``layout`` the pattern needs (0 when unused)."""
        if not self.mask >> layout & 1:
            return 0
        if self.relaxed:
            return 1 if layout in (self.f, self.h) else 0
        return 2 if layout == self.f == self.h and self.mask != 1 << layout else 1


@dataclass(frozen=True)
class BlockChain:
    """Where the identical blocks lie in a chain and their layout data."""

    prefix: int              # layers before the body (0 or 1)
    suffix: int              # layers after it (0 or 1)
    count: int               # N identical body layers
    gid: np.ndarray          # layout group of every body strategy
    reshard: np.ndarray      # in-stage resharding between body layouts (nl x nl)

    @property
    def start(self) -> int:
        return self.prefix

    @property
    def body_edge(self) -> int:
        """A body-to-body edge (all of them carry the same matrices)."""
        return self.prefix

    @property
    def num_layouts(self) -> int:
        return int(self.reshard.shape[0])


def collapse(mat: np.ndarray, gu, gv) -> np.ndarray:
    """Strategy-pair matrix -> layout-pair matrix (see ``direct.collapse``)."""
    from autopar_opt.formulations.direct import collapse as _collapse
    return _collapse(mat, np.asarray(gu), np.asarray(gv))


def block_chain(tables: CostTables) -> tuple[BlockChain | None, str]:
    """The block structure of ``tables``, or ``None`` and the reason it has none.

    Needs: a chain (edges ``(u, u+1)`` only), congruent stages, at most one
    distinct layer before and after a run of at least two identical layers
    (:func:`~autopar_opt.cost.tables.identical_layers`) whose edges carry
    identical matrices, layout-only resharding with a zero diagonal and the
    triangle inequality, and at most :data:`MAX_LAYOUTS` body layouts.
    """
    n = tables.num_layers
    if list(tables.edges) != [(u, u + 1) for u in range(n - 1)]:
        return None, "not a chain"
    if any(tables.allowed_in_stage(i) is not None for i in range(tables.pp)):
        return None, "stages of different sizes"
    start = 0 if n >= 2 and identical_layers(tables, 0, 1) else 1
    end = start + 1
    while end < n and identical_layers(tables, end - 1, end):
        end += 1
    if end - start < 2 or n - end > 1:
        return None, "no run of identical layers with at most one layer on each side"
    body = range(start, end - 1)
    ref = start
    for arrs in (tables.reshard, tables.cross_intra, tables.cross_inter):
        if any(arrs[e] is not arrs[ref] and not np.array_equal(arrs[e], arrs[ref]) for e in body):
            return None, "block edges carry different matrices"
    gid = np.asarray(layout_ids(tables.strategies[start]))
    try:
        R = collapse(tables.reshard[ref], gid, gid)
        for e in {0, n - 2}:
            for arrs in (tables.reshard, tables.cross_intra, tables.cross_inter):
                collapse(arrs[e], layout_ids(tables.strategies[e]), layout_ids(tables.strategies[e + 1]))
    except FormulationError as exc:
        return None, str(exc)
    if len(R) > MAX_LAYOUTS:
        return None, f"{len(R)} block layouts (more than {MAX_LAYOUTS})"
    if np.any(np.diag(R) != 0.0):
        return None, "resharding between equal layouts is not zero"
    viol = R[:, None, :] - R[:, :, None] - R[None, :, :]     # [a, b, c] = R[a,c] - R[a,b] - R[b,c]
    if viol.max() > TRIANGLE_TOL * max(float(R.max()), 1e-300):
        return None, "block resharding violates the triangle inequality"
    return BlockChain(prefix=start, suffix=n - end, count=end - start, gid=gid, reshard=R), ""


def layout_patterns(R: np.ndarray, exact_upto: int | None = None) -> list[Pattern]:
    """Every pattern ``(U, f, h)`` with ``|U| <= exact_upto`` over the layouts of
    ``R`` with its least resharding (Held-Karp per first layout), sorted by
    ``(mask, f, h)``; then, when larger sets exist, one *relaxed* pattern per
    ``(f, h)`` and path kind (open, closed) for all of them, with the least
    cost over those sets (a relaxation: :func:`~.blocks.solve_blocks` checks
    the plan it decodes and refines when it must)."""
    full = _all_patterns(R)
    nl = len(R)
    if exact_upto is None or exact_upto >= nl:
        return full
    exact = [p for p in full if p.mask.bit_count() <= exact_upto]
    relaxed: dict[tuple[int, int], Pattern] = {}
    for p in full:
        if p.mask.bit_count() > exact_upto:
            key = (p.f, p.h)
            if key not in relaxed or p.cost < relaxed[key].cost:
                relaxed[key] = Pattern((1 << nl) - 1, p.f, p.h, p.cost, p.path, relaxed=True)
    return exact + [relaxed[k] for k in sorted(relaxed)]


def best_path(R: np.ndarray, used: set[int], f: int, h: int) -> tuple[int, ...]:
    """The least-cost layout path from ``f`` through ``used`` to ``h`` (``f``
    twice when ``f = h`` and other layouts are used): a relaxed pattern's decoding."""
    rest = sorted(used - {f, h})
    if not rest and f == h:
        return (f,)
    best, out = math.inf, ()
    for perm in itertools.permutations(rest):
        path = (f, *perm, h)
        cost = sum(float(R[a, b]) for a, b in zip(path, path[1:]))
        if cost < best:
            best, out = cost, path
    return out


def _all_patterns(R: np.ndarray) -> list[Pattern]:
    nl = len(R)
    out: dict[tuple[int, int, int], Pattern] = {}
    for f in range(nl):
        best: dict[tuple[int, int], tuple[float, tuple[int, ...]]] = {(1 << f, f): (0.0, (f,))}
        for mask in range(1 << nl):
            if not mask >> f & 1:
                continue
            for last in range(nl):
                got = best.get((mask, last))
                if got is None:
                    continue
                cost, path = got
                for nxt in range(nl):
                    if mask >> nxt & 1:
                        continue
                    key, c2 = (mask | 1 << nxt, nxt), cost + float(R[last, nxt])
                    if key not in best or c2 < best[key][0]:
                        best[key] = (c2, path + (nxt,))
        for (mask, last), (cost, path) in best.items():
            _keep(out, Pattern(mask, f, last, cost, path))
            if last != f:   # the closed form: back to f
                _keep(out, Pattern(mask, f, f, cost + float(R[last, f]), path + (f,)))
    return [out[k] for k in sorted(out)]


def _keep(out: dict, pat: Pattern) -> None:
    key = (pat.mask, pat.f, pat.h)
    if key not in out or pat.cost < out[key].cost:
        out[key] = pat
