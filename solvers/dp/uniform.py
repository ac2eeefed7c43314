"""The DP under a target's uniformity rule (issue 29; :mod:`autopar_opt.ir.target`).

A framework takes one value per uniform dimension (tp, cp, sp, ZeRO, ep, etp,
recomputation) for the whole model. Each strategy carries its key
(``CostTables.uniform_keys``: one value per dimension, ``-1`` where the
setting changes nothing on that layer); a plan is runnable iff one full key
``g`` matches every layer's strategy.

Label rule. A label of the chain DP (:mod:`~autopar_opt.solvers.dp.chain`)
carries the key its layers have fixed so far, and two labels of different keys
never compete: neither dominates the other, since a completion open to one is
closed to the other. The labels therefore split into independent families, one
per full key, and the DP runs family by family under **one** incumbent and one
cutoff (a best-first branch on the key): each family's label passes take only
the strategies of its key (``allowed``), families are visited in order of a
proven lower bound (:func:`key_bound`), a family whose bound reaches the
incumbent is closed without a pass, and a family's own search stops as soon as
it proves it cannot beat the incumbent (``solve_chain(cutoff=...)``). The
configuration's proven bound is the least bound over the families not closed
(the incumbent when all are), so the certificate is as tight as the free
space's; time a family does not use goes to the next one.

Keys are enumerated once per configuration from the distinct key tables of the
layer classes (identical layers share one), so a chain of 126 identical
blocks costs as much as one block.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from autopar_opt.core.assignment import Assignment
from autopar_opt.cost.tables import CostTables, fits
from autopar_opt.solvers.dp.chain import ChainOutcome, solve_chain
from autopar_opt.solvers.dp.common import (_least_memory_partition, fit_limit, iteration_time,
                                           layer_memory)


@dataclass(frozen=True)
class KeyFamily:
    """One full key and, per layer, the indices of the strategies that match it."""

    key: tuple[int, ...]
    allowed: list[np.ndarray]


def _compatible(rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """``[len(keys), len(rows)]``: row ``r`` matches key ``g`` in every dimension
    (``-1`` on either side matches anything)."""
    r, g = rows[None, :, :], keys[:, None, :]
    return ((r == g) | (r < 0) | (g < 0)).all(axis=2)


def key_families(tables: CostTables) -> list[KeyFamily]:
    """Every full key some runnable plan can take (each layer has a strategy of it),
    with its per-layer strategy sets; keys with identical sets are one family."""
    keys = tables.uniform_keys
    if keys is None:      # a fixed split without a target's rules (interleaving): one family
        every: dict[int, np.ndarray] = {}       # layers of one class share their array
        return [KeyFamily((), [every.setdefault(id(s), np.arange(len(s))) for s in tables.strategies])]
    classes: dict[int, np.ndarray] = {}
    for arr in keys:
        classes.setdefault(id(arr), arr)
    tabs = list(classes.values())
    if any(len(t) == 0 for t in tabs):
        return []
    dims = tabs[0].shape[1]
    domain = [sorted({int(v) for t in tabs for v in t[:, d] if v >= 0}) for d in range(dims)]
    # seed: the class that fixes the most dimensions; its wildcards expanded over the domain
    seed = max(tabs, key=lambda t: int((t >= 0).sum()) / max(len(t), 1))
    cands = {tuple(int(v) for v in row) for row in seed}
    for d in range(dims):
        if not domain[d]:
            continue
        grown = set()
        for c in cands:
            if c[d] >= 0:
                grown.add(c)
            else:
                grown.update(c[:d] + (v,) + c[d + 1:] for v in domain[d])
        cands = grown
    cand = np.array(sorted(cands), dtype=np.int64).reshape(len(cands), dims)
    ok = np.ones(len(cand), dtype=bool)
    compat: dict[int, np.ndarray] = {}
    for t in tabs:
        m = _compatible(t, cand)
        compat[id(t)] = m
        ok &= m.any(axis=1)
    families: dict[tuple, KeyFamily] = {}
    for j in np.flatnonzero(ok):
        per_class = {cid: np.flatnonzero(m[j]) for cid, m in compat.items()}
        allowed = [per_class[id(arr)] for arr in keys]     # shared by the layers of a class
        sig = tuple(tuple(a.tolist()) for a in (allowed[u] for u in _class_heads(keys)))
        families.setdefault(sig, KeyFamily(tuple(int(v) for v in cand[j]), allowed))
    return list(families.values())


def _class_heads(keys: list[np.ndarray]) -> list[int]:
    """One layer index per distinct key table (layers sharing a table share sets)."""
    seen: dict[int, int] = {}
    for u, arr in enumerate(keys):
        seen.setdefault(id(arr), u)
    return list(seen.values())


def key_bound(tables: CostTables, allowed: list[np.ndarray]) -> float:
    """A proven lower bound on every plan of one key family (``+inf``: none fits).

    As :func:`autopar_opt.search.bounds.analytic_lower_bound` on the family's
    strategies: ``T >= P·(1 + (c-1)/pp) + max_u min_k G + T0`` with ``P >= Σ_u
    min_k A``; a layer that fits alone in no strategy, or layers whose least
    stored memory exceeds ``pp`` stages, prove the family empty."""
    m = min(tables.inflight)
    lim = fit_limit(tables)
    total = sync = stored = held = 0.0
    memo: dict[tuple[int, int], tuple[float, float, float, float, float]] = {}
    for u, ks in enumerate(allowed):
        if not len(ks):
            return math.inf
        key = (id(tables.time[u]), id(ks))            # identical layers share both arrays
        if key not in memo:
            w, h, x = (tables.weight_bytes[u][ks], tables.act_bytes[u][ks],
                       tables.working_bytes[u][ks])
            memo[key] = (float(np.min(w + m * h + x)), float(np.min(w + m * h)),
                         float(np.min(x)), float(np.min(tables.time[u][ks])),
                         float(np.min(tables.sync[u][ks])))
        alone, least, x_min, t_min, g_min = memo[key]
        if alone > lim:
            return math.inf
        stored += least
        held = max(held, x_min)
        total += t_min
        sync = max(sync, g_min)
    if stored + held > tables.pp * lim:
        return math.inf
    pp, c = tables.pp, tables.rounds
    return total * (1 + (c - 1) / pp) + sync + tables.params.iteration_overhead_s


#: Least share of the time left that the next key family may use (the first families,
#: with the least bounds, are the likeliest to hold the optimum; what a family does not
#: use goes to the next one).
MIN_SHARE = 0.25


def solve_uniform(tables: CostTables, deadline: float | None = None, beam: int = 4,
                  rel_gap: float = 0.0, cutoff: float = math.inf) -> ChainOutcome:
    """The exact DP under the uniformity rule (module docstring): the best runnable
    plan and a proven bound over every key family. With ``rel_gap`` a family whose
    bound is within that relative gap of the incumbent is closed (the answer is then
    proven within the gap: ``exhaustive`` False, ``lower_bound`` the least open bound).

    ``cutoff``: the value of a plan the caller already holds (the search's incumbent,
    from another configuration). It closes families as this configuration's own
    incumbent does, so the answer may have no plan, or a plan worse than
    ``cutoff``, with ``exhaustive`` False and ``lower_bound >= cutoff·(1 - rel_gap)``
    (the least bound over the families it closed, or ``cutoff`` when every one of them
    was proven at least that): this configuration cannot beat the caller's plan by
    more than the gap, which is all the caller needs."""
    families = key_families(tables)
    bounds = [key_bound(tables, f.allowed) for f in families]
    order = sorted(range(len(families)), key=lambda j: bounds[j])
    inc, ub, labels = None, math.inf, 0
    open_bounds: list[float] = []
    fallback = False
    within = 1.0 - rel_gap
    for pos, j in enumerate(order):
        bar = min(ub, cutoff)        # a family whose bound reaches it (within the gap) is closed
        if bounds[j] >= bar * within * (1 - 1e-12):
            # sorted: every family left is closed by its bound (within the gap)
            open_bounds += [bounds[k] for k in order[pos:] if bounds[k] < bar]
            break
        if deadline is not None and time.monotonic() >= deadline:
            open_bounds += [bounds[k] for k in order[pos:] if bounds[k] < bar]
            break
        live = sum(1 for k in order[pos:] if bounds[k] < bar * within)
        share = None if deadline is None else time.monotonic() + max(
            deadline - time.monotonic(), 0.0) * max(1.0 / max(live, 1), MIN_SHARE)
        out = solve_chain(tables, share, beam, families[j].allowed, cutoff=bar * within)
        labels += out.labels
        if out.assignment is not None and out.value < ub and tables.runnable(out.assignment):
            inc, ub, fallback = out.assignment, out.value, out.fallback
        if not out.exhaustive and out.lower_bound < min(ub, cutoff):
            open_bounds.append(max(bounds[j], out.lower_bound))
    bar = min(ub, cutoff)
    open_bounds = [b for b in open_bounds if b < bar]
    # every family's optimum is at least its open bound, or at least ``bar``
    lower = min([bar] + open_bounds)
    if inc is None and not open_bounds:
        if math.isfinite(cutoff):     # every family proven at least the caller's plan
            return ChainOutcome(None, math.inf, False, labels, cutoff)
        return ChainOutcome(None, math.inf, True, labels, math.inf)   # no runnable plan fits
    if inc is None:
        # cut before any family found a plan: a runnable least-memory plan, as the free
        # DP answers with the least-memory plan (milliseconds; never a proof)
        inc = least_memory_runnable(tables, [families[j] for j in order])
        if inc is not None:
            ub, fallback = iteration_time(tables, inc), True
            lower = min(lower, ub)
    return ChainOutcome(inc, ub, not open_bounds and lower >= ub, labels, lower, fallback=fallback)


def least_memory_runnable(tables: CostTables, families: list[KeyFamily]) -> Assignment | None:
    """The first family (in the order given) whose least-memory plan fits: the
    stages of the least-memory partition of the whole space (or the target's fixed
    split), each layer on its least-memory strategy of the family. None when no
    family's does (a fallback only: not a proof that no runnable plan fits)."""
    n = tables.num_layers
    if tables.fixed_stage is not None:
        stage = list(tables.fixed_stage)
    else:
        _, cuts, _ = _least_memory_partition(tables)
        if cuts is None:
            return None
        stage = [0] * n
        for i, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
            for u in range(lo, hi):
                stage[u] = i
    mems = {i: layer_memory(tables, i) for i in set(stage)}
    for fam in families:
        choice = []
        for u, ks in enumerate(fam.allowed):
            if not len(ks):
                break
            m = mems[stage[u]][u][ks]
            choice.append(int(ks[int(np.argmin(m))]))
        else:
            asg = Assignment(stage, choice)
            if fits(tables, asg) and tables.runnable(asg):
                return asg
    return None


__all__ = ["KeyFamily", "key_bound", "key_families", "least_memory_runnable", "solve_uniform"]
