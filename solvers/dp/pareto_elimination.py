"""Exact min-sum variable elimination under one knapsack: Pareto labels of (cost, memory).

Problem: one choice ``c_v`` per variable, minimise ``Σ_v U_v[c_v] + Σ_(u,v) C_uv[c_u, c_v]``
subject to ``Σ_v W_v[c_v] ≤ capacity`` (memory per device: every term unary).
:func:`~autopar_opt.solvers.dp.elimination.solve_min_sum` solves it without the knapsack;
here every table entry holds the Pareto set of ``(cost, memory)`` pairs of the partial
assignments it summarises instead of one minimum (bucket elimination over the
semiring of Pareto sets: ⊕ = union + Pareto filter, ⊗ = pairwise sums + filter;
Dechter 1999; the multi-objective DP of PaSE's setting with memory, as the label DP
of :mod:`autopar_opt.solvers.dp.dag` does for layer graphs). A pair with no less cost
and no less memory than another is dropped: the other completes to a plan at least as
good in both. A pair whose memory alone exceeds the capacity is dropped (memory only
grows). The elimination order is :func:`~autopar_opt.solvers.dp.elimination.greedy_order`'s.

Cost: the tables of the unconstrained elimination times the number of labels per entry;
:class:`ParetoTooLarge` past ``max_labels`` labels alive at once (the caller then solves
the MILP, which handles the knapsack row directly).
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass

import numpy as np

from autopar_opt.solvers.dp.elimination import EliminationTimeout, greedy_order

#: Most labels alive at once before :class:`ParetoTooLarge`.
MAX_LABELS = 3_000_000


class ParetoTooLarge(RuntimeError):
    """The label sets grew past the limit (the message gives the count)."""


@dataclass
class ParetoResult:
    """Optimal choice (None: nothing fits), its cost and memory, the order, the most labels."""

    choice: list[int] | None
    value: float
    memory: float
    order: list[int]
    peak_labels: int


def _pareto(cost: np.ndarray, mem: np.ndarray) -> np.ndarray:
    """Indices of the non-dominated (cost, memory) pairs, least cost first."""
    order = np.lexsort((mem, cost))
    m = mem[order]
    best_before = np.r_[np.inf, np.minimum.accumulate(m)[:-1]]
    return order[m < best_before]


class _Factor:
    """Labels of every entry of a table over ``scope``: assignment -> (cost[], memory[],
    back[]); ``back`` row = (choice of the eliminated variable, label index in each
    part) for a factor made by eliminating ``var`` from ``parts`` (None: an input table)."""

    def __init__(self, scope: tuple[int, ...], entries: dict[tuple[int, ...], tuple],
                 var: int = -1, parts: list["_Factor"] | None = None) -> None:
        self.scope, self.entries, self.var, self.parts = scope, entries, var, parts or []


def _combine(parts: list[_Factor], full: dict[int, int], capacity: float):
    """Pareto labels of the sum of ``parts`` at assignment ``full`` with their label indices."""
    c, m = np.zeros(1), np.zeros(1)
    idx: list[np.ndarray] = []
    for p in parts:
        entry = p.entries.get(tuple(full[x] for x in p.scope))
        if entry is None:
            return None
        pc, pm = entry[0], entry[1]
        n0 = len(c)
        c = (c[:, None] + pc[None, :]).ravel()
        m = (m[:, None] + pm[None, :]).ravel()
        idx = [np.repeat(i, len(pc)) for i in idx] + [np.tile(np.arange(len(pc)), n0)]
        fit = m <= capacity
        if not fit.all():
            c, m, idx = c[fit], m[fit], [i[fit] for i in idx]
            if not len(c):
                return None
        keep = _pareto(c, m)
        c, m, idx = c[keep], m[keep], [i[keep] for i in idx]
    return c, m, idx


def solve_min_sum_capacity(unary: list[np.ndarray], weight: list[np.ndarray],
                           pairs: list[tuple[int, int]], tables: list[np.ndarray], capacity: float,
                           deadline: float | None = None,
                           max_labels: int = MAX_LABELS) -> ParetoResult:
    """Minimise the min-sum objective subject to ``Σ weight ≤ capacity`` exactly."""
    sizes = [len(u) for u in unary]
    order, _ = greedy_order(sizes, pairs)
    factors: dict[int, _Factor] = {}
    touching: list[set[int]] = [set() for _ in sizes]
    next_id = [0]

    def add(f: _Factor) -> None:
        fid = next_id[0]
        next_id[0] += 1
        factors[fid] = f
        for x in f.scope:
            touching[x].add(fid)

    for v, (u, w) in enumerate(zip(unary, weight)):
        add(_Factor((v,), {(k,): (np.array([float(u[k])]), np.array([float(w[k])]), None)
                           for k in range(sizes[v]) if w[k] <= capacity}))
    for (a, b), t in zip(pairs, tables):
        t = np.asarray(t, dtype=float)
        add(_Factor((a, b), {(i, j): (np.array([t[i, j]]), np.zeros(1), None)
                             for i in range(sizes[a]) for j in range(sizes[b])}))
    finals: list[_Factor] = []
    peak = 0
    for v in order:
        if deadline is not None and time.monotonic() > deadline:
            raise EliminationTimeout
        fids = list(touching[v])
        parts = [factors.pop(f) for f in fids]
        for f, part in zip(fids, parts):
            for x in part.scope:
                touching[x].discard(f)
        scope = tuple(sorted({x for p in parts for x in p.scope} - {v}))
        new: dict[tuple[int, ...], tuple] = {}
        alive = 0
        for assign in itertools.product(*[range(sizes[x]) for x in scope]):
            full = dict(zip(scope, assign))
            costs, mems, backs = [], [], []
            for k in range(sizes[v]):
                full[v] = k
                got = _combine(parts, full, capacity)
                if got is None:
                    continue
                c, m, idx = got
                costs.append(c)
                mems.append(m)
                backs.append(np.stack([np.full(len(c), k)] + idx, axis=1))
            if not costs:
                continue
            c, m, b = np.concatenate(costs), np.concatenate(mems), np.concatenate(backs)
            keep = _pareto(c, m)
            new[assign] = (c[keep], m[keep], b[keep])
            alive += len(keep)
        peak = max(peak, alive)
        if alive > max_labels:
            raise ParetoTooLarge(f"{alive:,} Pareto labels alive (limit {max_labels:,})")
        made = _Factor(scope, new, v, parts)
        if not new:
            return ParetoResult(None, math.inf, math.inf, order, peak)
        if scope:
            add(made)
        else:
            finals.append(made)
    got = _combine(finals, {}, capacity)
    if got is None:
        return ParetoResult(None, math.inf, math.inf, order, peak)
    c, m, idx = got
    best = int(np.argmin(c))
    choice = [0] * len(sizes)
    stack = [(f, (), int(i[best])) for f, i in zip(finals, idx)]
    while stack:
        f, key, label = stack.pop()
        back = f.entries[key][2]
        if back is None:
            continue
        row = back[label]
        full = dict(zip(f.scope, key))
        full[f.var] = int(row[0])
        choice[f.var] = int(row[0])
        for p, j in zip(f.parts, row[1:]):
            stack.append((p, tuple(full[x] for x in p.scope), int(j)))
    return ParetoResult(choice, float(c[best]), float(m[best]), order, peak)
