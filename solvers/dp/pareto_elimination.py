"""Exact min-sum variable elimination under one knapsack: Pareto labels of (cost, memory).

Problem: one choice ``c_v`` per variable, minimise ``Σ_v U_v[c_v] + Σ_(u,v) C_uv[c_u, c_v]``
subject to ``Σ_v W_v[c_v] ≤ capacity`` (memory per device: every term unary).
:func:`~autopar_opt.solvers.dp.elimination.solve_min_sum` solves it without the knapsack;
here every table entry holds the Pareto set of ``(cost, memory)`` pairs of the partial
assignments it summarises instead of one minimum (bucket elimination over the semiring
of Pareto sets: ⊕ = union + Pareto filter, ⊗ = pairwise sums + filter; Dechter 1999; the
label DP of :mod:`autopar_opt.solvers.dp.dag` does the same for layer graphs). A pair
with no less cost and no less memory than another is dropped: the other completes to a
plan at least as good in both. A pair whose memory alone exceeds the capacity is dropped
(memory only grows). The elimination order is
:func:`~autopar_opt.solvers.dp.elimination.greedy_order`'s.

Every factor is *ragged*: for each entry of its scope (row-major) a run of labels in flat
arrays (``offsets``, ``cost``, ``memory``), each label with back-pointers (the eliminated
variable's choice and the label it used in every part), so one elimination step is a
handful of numpy operations over all entries at once: gather every combination of the
parts' labels, drop what overflows, and keep each entry's Pareto front (a sort by
entry, cost, memory and a running minimum of memory within each entry).

Cost: the tables of the unconstrained elimination times the labels per entry;
:class:`ParetoTooLarge` past ``max_labels`` labels made in one step (the caller then
solves the MILP, which handles the knapsack row directly).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from autopar_opt.solvers.dp.elimination import EliminationTimeout, greedy_order

#: Most labels one elimination step may create before :class:`ParetoTooLarge`.
MAX_LABELS = 5_000_000


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


@dataclass
class _Factor:
    """Ragged labels over ``scope`` (module docstring). ``var`` / ``parts`` / ``pick`` /
    ``back``: for a factor made by eliminating ``var``: its choice per label and, per
    part, the label used."""

    scope: tuple[int, ...]
    offsets: np.ndarray
    cost: np.ndarray
    memory: np.ndarray
    var: int = -1
    parts: list["_Factor"] = field(default_factory=list)
    pick: np.ndarray | None = None
    back: list[np.ndarray] = field(default_factory=list)


def _dense(scope: tuple[int, ...], cost: np.ndarray, memory: np.ndarray, capacity: float) -> _Factor:
    """A table with one label per entry (none where the memory alone overflows)."""
    c, m = np.asarray(cost, dtype=float).ravel(), np.asarray(memory, dtype=float).ravel()
    keep = m <= capacity
    counts = keep.astype(np.int64)
    return _Factor(scope, np.concatenate([[0], np.cumsum(counts)]), c[keep], m[keep])


def _pareto_runs(row: np.ndarray, cost: np.ndarray, mem: np.ndarray) -> np.ndarray:
    """Indices of the labels on each row's (cost, memory) Pareto front (of equal pairs, one)."""
    if not len(row):
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((mem, cost, row))
    r, m = row[order], mem[order]
    _, mrank = np.unique(m, return_inverse=True)                   # exact integer ranks of memory
    span = np.int64(len(m) + 1)
    key = mrank.astype(np.int64) - r.astype(np.int64) * span       # later rows always lower
    run = np.minimum.accumulate(key)
    before = np.concatenate([[np.iinfo(np.int64).max], run[:-1]])
    new_row = np.concatenate([[True], r[1:] != r[:-1]])
    keep = new_row | (key < before)
    return order[keep]


def _eliminate(parts: list[_Factor], var: int, sizes: list[int], capacity: float,
               max_labels: int) -> tuple[_Factor, int]:
    """The factor over the parts' scope without ``var`` (``var`` -1: no variable, just the
    product of the parts); returns it and the labels generated."""
    scope = tuple(sorted({x for p in parts for x in p.scope} - {var}))
    full = scope + ((var,) if var >= 0 else ())
    shape = tuple(sizes[x] for x in full)
    n = math.prod(shape)
    grids = np.indices(shape).reshape(len(full), n) if full else np.zeros((0, 1), dtype=np.int64)
    pos = {x: i for i, x in enumerate(full)}
    starts, lens = [], []
    for p in parts:
        if p.scope:
            entry = np.ravel_multi_index(tuple(grids[pos[x]] for x in p.scope),
                                         tuple(sizes[x] for x in p.scope))
        else:
            entry = np.zeros(n, dtype=np.int64)
        starts.append(p.offsets[entry])
        lens.append(p.offsets[entry + 1] - p.offsets[entry])
    total = np.ones(n, dtype=np.int64)
    for ln in lens:
        total *= ln
    made = int(total.sum())
    if made > max_labels:
        raise ParetoTooLarge(f"{made:,} Pareto labels in one elimination step (limit {max_labels:,})")
    combo = np.repeat(np.arange(n), total)
    local = np.arange(made) - np.repeat(np.cumsum(total) - total, total)
    cost, mem = np.zeros(made), np.zeros(made)
    back = [None] * len(parts)
    for i in range(len(parts) - 1, -1, -1):
        ln = lens[i][combo]
        digit = local % np.maximum(ln, 1)
        local = local // np.maximum(ln, 1)
        label = starts[i][combo] + digit
        back[i] = label
        cost += parts[i].cost[label]
        mem += parts[i].memory[label]
    fit = mem <= capacity
    if not fit.all():
        combo, cost, mem = combo[fit], cost[fit], mem[fit]
        back = [b[fit] for b in back]
    kv = sizes[var] if var >= 0 else 1
    row = combo // kv
    keep = _pareto_runs(row, cost, mem)
    row = row[keep]
    counts = np.bincount(row, minlength=n // kv)
    return _Factor(scope, np.concatenate([[0], np.cumsum(counts)]), cost[keep], mem[keep], var, parts,
                   (combo[keep] % kv) if var >= 0 else None, [b[keep] for b in back]), made


def solve_min_sum_capacity(unary: list[np.ndarray], weight: list[np.ndarray],
                           pairs: list[tuple[int, int]], tables: list[np.ndarray], capacity: float,
                           deadline: float | None = None,
                           max_labels: int = MAX_LABELS) -> ParetoResult:
    """Minimise the min-sum objective subject to ``Σ weight ≤ capacity`` exactly."""
    sizes = [len(u) for u in unary]
    order, _ = greedy_order(sizes, pairs)
    factors: dict[int, _Factor] = {}
    touching: list[set[int]] = [set() for _ in sizes]
    ids = iter(range(1 << 62))

    def add(f: _Factor) -> None:
        fid = next(ids)
        factors[fid] = f
        for x in f.scope:
            touching[x].add(fid)

    for v, (u, w) in enumerate(zip(unary, weight)):
        add(_dense((v,), u, w, capacity))
    for (a, b), t in zip(pairs, tables):
        add(_dense((a, b), t, np.zeros(np.shape(t)), capacity))
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
        made, count = _eliminate(parts, v, sizes, capacity, max_labels)
        peak = max(peak, count)
        if not len(made.cost):
            return ParetoResult(None, math.inf, math.inf, order, peak)
        if made.scope:
            add(made)
        else:
            finals.append(made)
    if not finals:                                   # no variables at all
        return ParetoResult([], 0.0, 0.0, order, peak)
    last, _ = _eliminate(finals, -1, sizes, capacity, max_labels)
    if not len(last.cost):
        return ParetoResult(None, math.inf, math.inf, order, peak)
    best = int(np.argmin(last.cost))
    choice = [0] * len(sizes)
    stack = [(f, int(b[best])) for f, b in zip(last.parts, last.back)]
    while stack:
        f, label = stack.pop()
        if f.var < 0:
            continue
        choice[f.var] = int(f.pick[label])
        stack += [(p, int(b[label])) for p, b in zip(f.parts, f.back)]
    return ParetoResult(choice, float(last.cost[best]), float(last.memory[best]), order, peak)
