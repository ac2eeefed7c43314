"""Chain coarsening that provably keeps the max-load optimum (contiguous and not).

Contracting *every* edge of a chain of single-input/single-output nodes does
**not** keep the optimum of either objective: a chain ``a → b`` on two devices
with free transfers is best split (``max(t_a, t_b)``), and the contracted graph
can only give ``t_a + t_b``; the tests keep that counterexample and a seeded
search that finds more. What does keep the max-load optimum is contracting a
chain edge whose cut is *dominated*, shown by an exchange argument:

Let ``u → v`` be a precedence edge between units, ``u`` on device ``A`` (type
``α``), ``v`` on device ``B ≠ A`` (type ``β``), ``W(x)`` the total weight of the
hyperedges holding unit ``x`` and ``w_uv`` the weight of the hyperedges that
are exactly ``{u, v}``.

* **pull** ``v`` onto ``A`` (allowed when ``u`` is ``v``'s only predecessor, so
  every ideal of the chain that holds ``u`` stays an ideal with ``v`` added):
  ``Δload_A ≤ t_α(v) + W(v) − 2·w_uv`` (``t_α(v)`` when ``α`` pays no
  communication), ``Δload_B ≤ −t_β(v) + W(v) − 2·w_uv`` (``−t_β(v)`` when it
  pays none), every other device's load is unchanged (a hyperedge it touches is
  cut before and after), ``A`` gains ``size(v)`` bytes;
* **push** ``u`` onto ``B`` (allowed when ``v`` is ``u``'s only successor), the
  mirror image: ``Δload_B ≤ t_β(u) + W(u) − 2·w_uv``,
  ``Δload_A ≤ −t_α(u) + W(u) − 2·w_uv``, ``B`` gains ``size(u)``.

(Derivation: moving ``x`` only changes the payment of hyperedges holding ``x``;
one that ends up inside the destination part saves its weight there and at
the source, every other one costs the destination at most its weight and the
source at most its weight if it was uncut before.) If for **every** pair of
device types that ``u`` and ``v`` can sit on (``α ≠ β``, or ``α = β`` with two
devices of it) one of the two moves has both bounds ``≤ 0``, finite time at
the destination and no memory risk (size 0, or the whole graph fits in one
device of the destination type), then
some optimal placement keeps ``u`` and ``v`` together, and merging them keeps
the optimum. Contracting ``u → v`` with ``v``'s only predecessor ``u`` (or
``u``'s only successor ``v``) creates no cycle, so the rule is applied again on
the result until nothing changes (each step is exact on the problem it sees).

Where it is valid: the max-load objective, contiguous (the degree conditions
above) and non-contiguous (no degree condition: contiguity is not needed, and
a move never changes a third device's load). Where it is **not** applied: the
latency objective (moving a node onto a block delays everything after it on
that block, so an exchange bound on loads says nothing about the makespan), and
any chain edge that fails the test (e.g. elementwise operators whose output
costs as much to move as their input: then ``W(v) − 2 w_uv ≥ 0`` and ``t(v) > 0``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from autopar_opt.placement.condense import Condensed, merge_units

#: Contraction passes at most (each pass contracts a matching of chain edges).
MAX_PASSES = 64


@dataclass
class CoarsenReport:
    """What :func:`coarsen_chains` did (for ``details`` and reports)."""

    units_before: int
    units_after: int
    contracted: int
    passes: int
    stopped_early: bool = False


def _type_pairs(cond: Condensed) -> list[tuple[int, int]]:
    """Ordered pairs of device-type indices that can hold two different devices."""
    types = cond.problem.device_types
    return [(a, b) for a, ta in enumerate(types) for b, tb in enumerate(types)
            if ta.count > 0 and tb.count > 0 and (a != b or ta.count >= 2)]


def _moves_ok(cond: Condensed, x: np.ndarray, dst: int, src: int, slack: np.ndarray) -> np.ndarray:
    """For every unit ``x[i]``: moving it from a device of type ``src`` to one of type
    ``dst`` never raises a load and cannot break memory (``slack`` = ``W(x) − 2·w_uv``)."""
    types = cond.problem.device_types
    td, ts = types[dst], types[src]
    t_dst = cond.time[td.name][x]
    risky = cond.size_bytes.sum() > td.memory_bytes * (1 + 1e-9)   # not everything fits on one
    with np.errstate(invalid="ignore"):
        gain_dst = t_dst + (slack if td.pays_comm else 0.0)
        gain_src = -cond.time[ts.name][x] + (slack if ts.pays_comm else 0.0)
    ok = np.isfinite(t_dst) & (gain_dst <= 0.0) & (gain_src <= 0.0)
    return ok & ~((cond.size_bytes[x] > 0) & risky)


def _dominated(cond: Condensed, u: np.ndarray, v: np.ndarray, can_pull: np.ndarray,
               can_push: np.ndarray, big_w: np.ndarray, w_uv: np.ndarray) -> np.ndarray:
    """The test of the module docstring for every edge ``u[i] → v[i]`` at once."""
    types = cond.problem.device_types
    out = np.ones(len(u), dtype=bool)
    for a, b in _type_pairs(cond):
        placed = np.isfinite(cond.time[types[a].name][u]) & np.isfinite(cond.time[types[b].name][v])
        pull = can_pull & _moves_ok(cond, v, a, b, big_w[v] - 2.0 * w_uv)
        push = can_push & _moves_ok(cond, u, b, a, big_w[u] - 2.0 * w_uv)
        out &= ~placed | pull | push      # a pair u, v cannot sit on never blocks the merge
    return out


def _pair_weights(cond: Condensed, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``w_uv``: the weight of the hyperedge that is exactly ``{u, v}`` (0 when none;
    equal hyperedges are merged, so there is at most one)."""
    two = np.flatnonzero(cond.hyper_size == 2)
    lo = cond.hyper_flat[cond.hyper_ptr[two]]
    hi = cond.hyper_flat[cond.hyper_ptr[two] + 1]
    nu = cond.num_units
    keys = lo * nu + hi                           # ascending: hyperedges are sorted
    want = np.minimum(u, v) * nu + np.maximum(u, v)
    at = np.searchsorted(keys, want)
    found = at < len(keys)
    found[found] = keys[at[found]] == want[found]
    out = np.zeros(len(u))
    out[found] = cond.hyper_w[two[at[found]]]
    return out


def _one_pass(cond: Condensed, contiguous: bool, check: Callable[[], None]) -> np.ndarray | None:
    """Merge map (unit -> new unit) for a matching of dominated chain edges, None if none.

    The dominance test runs on every edge at once; the matching is then taken
    greedily in the order of ``cond.prec``."""
    nu = cond.num_units
    if nu < 2 or len(cond.prec) == 0:
        return None
    big_w = np.bincount(cond.hyper_flat, weights=np.repeat(cond.hyper_w, cond.hyper_size),
                        minlength=nu)
    indeg = np.bincount(cond.prec[:, 1], minlength=nu)
    outdeg = np.bincount(cond.prec[:, 0], minlength=nu)
    u, v = cond.prec[:, 0], cond.prec[:, 1]
    can_pull = np.ones(len(u), dtype=bool) if not contiguous else indeg[v] == 1
    can_push = np.ones(len(u), dtype=bool) if not contiguous else outdeg[u] == 1
    cand = np.flatnonzero(can_pull | can_push)
    cand = cand[_dominated(cond, u[cand], v[cand], can_pull[cand], can_push[cand], big_w,
                           _pair_weights(cond, u[cand], v[cand]))]
    check()
    taken = bytearray(nu)
    parent = np.arange(nu)
    merged = 0
    for i, (a, b) in enumerate(zip(u[cand].tolist(), v[cand].tolist())):
        if taken[a] or taken[b]:
            continue
        parent[b] = a
        taken[a] = taken[b] = 1
        merged += 1
        if not i & 0xFFFF:
            check()
    return parent if merged else None


def coarsen_chains(cond: Condensed, *, contiguous: bool,
                   check: Callable[[], bool] | None = None) -> tuple[Condensed, CoarsenReport]:
    """Contract dominated chain edges until none is left (max-load only; module docstring).

    Returns the coarser :class:`Condensed` (its ``unit_of`` still maps every original
    node, so :meth:`Condensed.expand` gives a placement of the original problem) and
    a report of what was merged. ``check`` is a deadline check that raises; when it
    does, the passes done so far are kept (each one is exact) and the report says
    the coarsening stopped early.
    """
    from autopar_opt.core.deadline import PhaseDeadline

    before = cond.num_units
    passes = 0
    stopped = False
    checker = check or (lambda: None)
    try:
        while passes < MAX_PASSES:
            parent = _one_pass(cond, contiguous, checker)
            if parent is None:
                break
            cond = merge_units(cond, parent, checker)
            passes += 1
    except PhaseDeadline:
        stopped = True
    return cond, CoarsenReport(units_before=before, units_after=cond.num_units,
                               contracted=before - cond.num_units, passes=passes,
                               stopped_early=stopped)
