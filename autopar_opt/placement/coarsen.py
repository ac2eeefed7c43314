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

import numpy as np

from autopar_opt.core.ideals import unique_ints
from autopar_opt.placement.condense import Condensed, from_units

#: Contraction passes at most (each pass contracts a matching of chain edges).
MAX_PASSES = 64


@dataclass
class CoarsenReport:
    """What :func:`coarsen_chains` did (for ``details`` and reports)."""

    units_before: int
    units_after: int
    contracted: int
    passes: int


def _type_pairs(cond: Condensed) -> list[tuple[int, int]]:
    """Ordered pairs of device-type indices that can hold two different devices."""
    types = cond.problem.device_types
    return [(a, b) for a, ta in enumerate(types) for b, tb in enumerate(types)
            if ta.count > 0 and tb.count > 0 and (a != b or ta.count >= 2)]


def _move_ok(cond: Condensed, x: int, dst: int, src: int, slack: float) -> bool:
    """Moving unit ``x`` from a device of type ``src`` to one of type ``dst`` never
    raises a load and cannot break memory (``slack`` = ``W(x) − 2·w_uv``)."""
    types = cond.problem.device_types
    td, ts = types[dst], types[src]
    t_dst = float(cond.time[td.name][x])
    if not np.isfinite(t_dst):
        return False
    if cond.size_bytes[x] > 0 and cond.size_bytes.sum() > td.memory_bytes * (1 + 1e-9):
        return False                               # could overflow (everything fits: no risk)
    gain_dst = t_dst + (slack if td.pays_comm else 0.0)
    gain_src = -float(cond.time[ts.name][x]) + (slack if ts.pays_comm else 0.0)
    return gain_dst <= 0.0 and gain_src <= 0.0


def _dominated(cond: Condensed, u: int, v: int, pairs: list[tuple[int, int]], can_pull: bool,
               can_push: bool, big_w: np.ndarray, w_uv: float) -> bool:
    """The test of the module docstring for the edge ``u → v``."""
    types = cond.problem.device_types
    for a, b in pairs:
        if not (np.isfinite(cond.time[types[a].name][u]) and np.isfinite(cond.time[types[b].name][v])):
            continue                               # u cannot sit on type a, or v on type b
        pull = can_pull and _move_ok(cond, v, a, b, big_w[v] - 2.0 * w_uv)
        push = can_push and _move_ok(cond, u, b, a, big_w[u] - 2.0 * w_uv)
        if not (pull or push):
            return False
    return True


def _one_pass(cond: Condensed, contiguous: bool) -> np.ndarray | None:
    """Merge map (unit -> new unit) for a matching of dominated chain edges, None if none."""
    nu = cond.num_units
    if nu < 2 or len(cond.prec) == 0:
        return None
    big_w = np.zeros(nu)
    w_pair: dict[tuple[int, int], float] = {}
    for h, w in zip(cond.hyper, cond.hyper_w):
        big_w[h] += w
        if h.size == 2:
            key = (int(h[0]), int(h[1]))
            w_pair[key] = w_pair.get(key, 0.0) + float(w)
    indeg = np.bincount(cond.prec[:, 1], minlength=nu)
    outdeg = np.bincount(cond.prec[:, 0], minlength=nu)
    pairs = _type_pairs(cond)
    taken = np.zeros(nu, dtype=bool)
    parent = np.arange(nu)
    merged = 0
    for u, v in cond.prec.tolist():
        if taken[u] or taken[v]:
            continue
        can_pull = (not contiguous) or indeg[v] == 1
        can_push = (not contiguous) or outdeg[u] == 1
        if not (can_pull or can_push):
            continue
        w_uv = w_pair.get((min(u, v), max(u, v)), 0.0)
        if _dominated(cond, u, v, pairs, can_pull, can_push, big_w, w_uv):
            parent[v] = u
            taken[u] = taken[v] = True
            merged += 1
    return parent if merged else None


def coarsen_chains(cond: Condensed, *, contiguous: bool) -> tuple[Condensed, CoarsenReport]:
    """Contract dominated chain edges until none is left (max-load only; module docstring).

    Returns the coarser :class:`Condensed` (its ``unit_of`` still maps every original
    node, so :meth:`Condensed.expand` gives a placement of the original problem) and
    a report of what was merged.
    """
    before = cond.num_units
    passes = 0
    while passes < MAX_PASSES:
        parent = _one_pass(cond, contiguous)
        if parent is None:
            break
        passes += 1
        dense = np.searchsorted(unique_ints(parent), parent)
        unit = dense[cond.unit_of]
        prec = {(int(dense[a]), int(dense[b])) for a, b in cond.prec.tolist() if dense[a] != dense[b]}
        cond = from_units(cond.problem, unit, np.array(sorted(prec), dtype=np.int64).reshape(-1, 2))
    return cond, CoarsenReport(units_before=before, units_after=cond.num_units,
                               contracted=before - cond.num_units, passes=passes)
