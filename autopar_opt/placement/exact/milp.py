"""MILP for max-load placement (contiguous and non-contiguous), as a MatrixForm.

Built from the condensed problem (:mod:`autopar_opt.placement.condense`);
solved by any MILP backend of the registry (HiGHS by default).

Variables (``u`` unit, ``j`` slot = device position, ``h`` hyperedge, ``τ`` type):

- ``x[u,j] ∈ {0,1}``: unit ``u`` on slot ``j``; ``Σ_j x[u,j] = 1``.
- contiguous only: cumulative ``a[u,j] = Σ_{i≤j} x[u,i]`` (binary,
  ``a[u,K-1] = 1``) with ``a[v,j] ≤ a[u,j]`` for every precedence ``u → v``:
  the parts form a chain of ideals (the DP's space, :mod:`autopar_opt.core.ideals`).
  Slot types are variables ``q[j,τ]`` (``Σ_τ q = 1``, ``Σ_j q[j,τ] = count_τ``)
  because the order of the types along the chain is free; with one type they
  are constants. Non-contiguous: slot ``j`` is device ``j`` (types fixed) and
  identical devices are symmetry-broken (unit ``i`` may only use the first
  ``i+1`` devices of a group: order devices by their smallest unit).
- ``z[h,j] ≤ x[b,j]`` (all of ``h`` on ``j``) and ``y[h,j] ≥ x[b,j] − z[h,j]``
  for ``b ∈ h``: ``y[h,j] = 1`` iff slot ``j`` cuts hyperedge ``h`` (exact at
  the optimum, since ``y`` is only charged).
- load: ``Σ_u t_τ(u)·x[u,j] + [τ pays comm]·Σ_h w_h·y[h,j] ≤ L + M_τ(1 − q[j,τ])``;
  memory ``Σ_u size_u·x[u,j] ≤ mem_τ + Mm(1 − q[j,τ])``; a unit that cannot run
  on ``τ``: ``x[u,j] + q[j,τ] ≤ 1``. Minimise ``L``.
- valid inequalities (each proved in its docstring; none cuts off an optimum,
  tested against brute force in ``tests/unit/placement/test_placement_milp_cuts.py``):
  ``L ≥`` :func:`load_floor` (the work LP, the largest unit, the pigeonhole
  bound, and the communication-aware pigeonhole bound over minimum cuts of
  :mod:`~autopar_opt.placement.bounds.cuts`) and, contiguous only, used slots
  first (:func:`_used_slots_first`).
  Measured on the ten shared instances (``benchmarks/placement``, 20 s each,
  heuristic MIP start): the work floor alone proves 4 of 10, with the slot
  symmetry 6 of 10, and 8 of 10 in 60 s (was 3 of 10). The two ResNet-50
  operator graphs kept the communication-blind work bound (53.8 and 113.3
  against optima of 124.3 and 255.2: the LP spreads every unit over all slots,
  where no per-slot row charges a cut) until the minimum-cut pigeonhole floor,
  which proves both optima to 6e-9 and 8e-9 (relative) before branching.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autopar_opt.placement.condense import Condensed
from autopar_opt.core.matrix_builder import MatrixBuilder
from autopar_opt.core.matrix import MatrixForm


@dataclass
class PlacementMILP:
    """The matrix and the column indices needed to decode a solution."""

    form: MatrixForm
    x: np.ndarray            # (U, K)
    q: np.ndarray | None     # (K, T) or None (types fixed per slot)
    slot_type: list[int] | None
    load: int
    a: np.ndarray | None = None      # (U, K) cumulative (contiguous only)
    y: np.ndarray | None = None      # (H, K) cut indicators
    z: np.ndarray | None = None      # (H, K) all-in indicators
    e: np.ndarray | None = None      # (K,) slot used (contiguous only)

    def decode(self, sol: np.ndarray, cond: Condensed) -> np.ndarray:
        """Device per unit from a solution vector."""
        slot = np.argmax(sol[self.x], axis=1)
        types = cond.problem.device_types
        if self.q is not None:
            slot_type = np.argmax(sol[self.q], axis=1)
        else:
            slot_type = np.asarray(self.slot_type)
        first = np.concatenate([[0], np.cumsum([t.count for t in types])[:-1]])
        used = [0] * len(types)
        device_of_slot = {}
        for j in sorted(set(slot.tolist())):
            t = int(slot_type[j])
            device_of_slot[j] = int(first[t] + used[t])
            used[t] += 1
        return np.array([device_of_slot[int(s)] for s in slot], dtype=np.int64)


def _hyper_rows(b: MatrixBuilder, cond: Condensed, x: np.ndarray, slots: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """y[h, j] for slots ``slots`` (cut indicators), with their defining rows."""
    nh = len(cond.hyper)
    y = b.add_vars("y", (nh, len(slots)), 0.0, 1.0)
    z = b.add_vars("z", (nh, len(slots)), 0.0, 1.0)
    hs = np.repeat(np.arange(nh), [h.size for h in cond.hyper])
    us = np.concatenate(cond.hyper) if nh else np.zeros(0, np.int64)
    for k, j in enumerate(slots):
        b.pairwise_le(z[hs, k], x[us, j])                          # z <= x_b
        r = np.arange(hs.size)                                     # x_b - z - y <= 0
        b.add_rows(np.concatenate([r, r, r]), np.concatenate([x[us, j], z[hs, k], y[hs, k]]),
                   np.concatenate([np.ones(r.size), -np.ones(r.size), -np.ones(r.size)]),
                   np.full(r.size, -np.inf), np.zeros(r.size))
    return y, z


def build_maxload_milp(cond: Condensed, *, contiguous: bool,
                       builder: MatrixBuilder | None = None) -> PlacementMILP:
    """The MILP of the module docstring. ``builder``: a
    :class:`~autopar_opt.core.matrix_builder.MatrixCounter` counts the model instead
    (its ``form`` is then None; :func:`autopar_opt.placement.exact.solve_milp.milp_size`)."""
    types = cond.problem.device_types
    nu, k = cond.num_units, sum(t.count for t in types)
    b = MatrixBuilder() if builder is None else builder
    x = b.add_vars("x", (nu, k), 0.0, 1.0, integer=True)
    r = np.repeat(np.arange(nu), k)
    b.add_rows(r, x.ravel(), np.ones(nu * k), np.ones(nu), np.ones(nu))     # Σ_j x = 1
    variable_types = contiguous and len(types) > 1
    a = None
    if contiguous:
        a = b.add_vars("a", (nu, k), 0.0, 1.0, integer=True)
        b.lo[-1].reshape(nu, k)[:, -1] = 1.0
        prev = np.concatenate([np.full((nu, 1), -1), a[:, :-1]], axis=1)
        rr = np.arange(nu * k)
        has_prev = prev.ravel() >= 0
        rows = np.concatenate([rr, rr, rr[has_prev]])
        cols = np.concatenate([a.ravel(), x.ravel(), prev.ravel()[has_prev]])
        vals = np.concatenate([np.ones(nu * k), -np.ones(nu * k), -np.ones(int(has_prev.sum()))])
        b.add_rows(rows, cols, vals, np.zeros(nu * k), np.zeros(nu * k))    # a_j - a_{j-1} = x_j
        for u, v in cond.prec:
            b.pairwise_le(a[v, :-1], a[u, :-1])
    load = b.add_vars("L", (), 0.0, np.inf)
    if not b.counting:          # a bound, not a row: the count skips its min-cut work
        b.lo[-1][:] = load_floor(cond, contiguous=contiguous)
    b.set_cost(int(load), 1.0)
    slot_type = None
    q = None
    if variable_types:
        q = b.add_vars("q", (k, len(types)), 0.0, 1.0, integer=True)
        b.add_rows(np.repeat(np.arange(k), len(types)), q.ravel(), np.ones(q.size),
                   np.ones(k), np.ones(k))
        b.add_rows(np.repeat(np.arange(len(types)), k),
                   q.T.ravel(), np.ones(q.size), [t.count for t in types], [t.count for t in types])
    else:
        slot_type = [ti for ti, t in enumerate(types) for _ in range(t.count)]
    pays = any(t.pays_comm for t in types) and len(cond.hyper) > 0
    slots = np.arange(k)
    y, z = _hyper_rows(b, cond, x, slots) if pays else (None, None)
    _load_rows(b, cond, x, y, q, slot_type, load)
    e = _used_slots_first(b, x) if contiguous else None
    if not contiguous:
        _symmetry(b, x, types, nu)
    return PlacementMILP(form=b.build(), x=x, q=q, slot_type=slot_type, load=int(load), a=a,
                         y=y, z=z, e=e)


def load_floor(cond: Condensed, *, contiguous: bool = False) -> float:
    """A valid lower bound on ``L`` (0 when none is finite).

    Validity: :func:`~autopar_opt.placement.heuristics.compute_lower_bound` is
    the maximum of three relaxations of any placement's max-load: the largest
    fastest-type unit time (a unit sits whole on one device), the pigeonhole
    bound ``t_(k) + t_(k+1)`` (two of the ``k+1`` largest units share a device)
    and the per-type work LP ``Σ_u t_τ(u) f[u,τ] ≤ count_τ·L`` (work divisible,
    communication dropped; it implies ``L ≥ Σ_u min_τ t_τ(u) / K``).
    Communication and memory only add load, so each holds for the MILP's ``L``.
    Raised to the communication-aware pigeonhole bound
    :func:`~autopar_opt.placement.bounds.cuts.conflict_bound` (``K + 1`` units
    pairwise so far apart that a device holding two of them pays a minimum
    cut; proved there), which uses the convex hull of a pair only when
    ``contiguous``.
    """
    from autopar_opt.placement.bounds.cuts import conflict_bound
    from autopar_opt.placement.heuristics import compute_lower_bound
    lb = compute_lower_bound(cond) if cond.num_units else 0.0
    lb = float(lb) if np.isfinite(lb) else 0.0
    cb = conflict_bound(cond, contiguous=contiguous, floor=lb)
    return cb if np.isfinite(cb) else lb      # ∞ (no two of K+1 units fit anywhere): left to the MILP


def start_vector(milp: PlacementMILP, cond: Condensed, unit_device: np.ndarray) -> np.ndarray:
    """A feasible column vector for a placement given as a device per unit.

    Contiguous models order the parts topologically (slot ``j`` = ``j``-th part,
    unused devices last); non-contiguous ones renumber identical devices by
    their smallest unit (the symmetry-breaking order).
    """
    import networkx as nx
    types = cond.problem.device_types
    devs = [ti for ti, t in enumerate(types) for _ in range(t.count)]
    nu, k = milp.x.shape
    if milp.a is not None:
        g = nx.DiGraph()
        g.add_nodes_from(sorted(set(unit_device.tolist())))
        g.add_edges_from((int(unit_device[u]), int(unit_device[v])) for u, v in cond.prec
                         if unit_device[u] != unit_device[v])
        order = list(nx.lexicographical_topological_sort(g))
        order += [d for d in range(k) if d not in set(order)]
    else:
        order = []
        first = 0
        for t in types:
            group = list(range(first, first + t.count))
            mins = {d: (np.flatnonzero(unit_device == d).min() if np.any(unit_device == d)
                        else nu + d) for d in group}
            order += sorted(group, key=lambda d: mins[d])
            first += t.count
    slot_of = {d: j for j, d in enumerate(order)}
    sol = np.zeros(milp.form.num_cols)
    slot = np.array([slot_of[int(d)] for d in unit_device])
    sol[milp.x[np.arange(nu), slot]] = 1.0
    if milp.a is not None:
        xs = np.zeros((nu, k))
        xs[np.arange(nu), slot] = 1.0
        sol[milp.a] = np.cumsum(xs, axis=1)
        if milp.e is not None:
            sol[milp.e] = xs.max(axis=0)
    if milp.q is not None:
        sol[milp.q[np.arange(k), [devs[d] for d in order]]] = 1.0
    slot_types = [devs[d] for d in order] if milp.q is not None else milp.slot_type
    loads = np.zeros(k)
    for j in range(k):
        t = types[slot_types[j]]
        loads[j] = float(cond.time[t.name][slot == j].sum())
    if milp.y is not None:
        for h, (members, w) in enumerate(zip(cond.hyper, cond.hyper_w)):
            js = set(slot[members].tolist())
            for j in js:
                if len(js) == 1:
                    sol[milp.z[h, j]] = 1.0
                else:
                    sol[milp.y[h, j]] = 1.0
                    if types[slot_types[j]].pays_comm:
                        loads[j] += w
    sol[milp.load] = max(float(loads.max()), milp.form.col_lo[milp.load])
    return sol


def _load_rows(b: MatrixBuilder, cond: Condensed, x: np.ndarray, y: np.ndarray | None,
               q: np.ndarray | None, slot_type: list[int] | None, load: np.ndarray) -> None:
    types = cond.problem.device_types
    nu, k = x.shape
    w = cond.hyper_w
    total_w = float(w.sum()) if y is not None else 0.0
    total_size = float(cond.size_bytes.sum())
    for j in range(k):
        for ti, t in enumerate(types):
            if q is None and slot_type[j] != ti:
                continue
            tt = cond.time[t.name]
            ok = np.isfinite(tt)
            big = float(tt[ok].sum()) + (total_w if t.pays_comm else 0.0)
            cols = [x[ok, j]]
            vals = [tt[ok]]
            if t.pays_comm and y is not None:
                cols.append(y[:, j])
                vals.append(w)
            cols.append(np.atleast_1d(load))
            vals.append([-1.0])
            rhs = 0.0
            if q is not None:
                cols.append([q[j, ti]])
                vals.append([big])
                rhs = big
            c = np.concatenate(cols)
            b.add_rows(np.zeros(c.size, np.int64), c, np.concatenate(vals), [-np.inf], [rhs])
            bad = np.flatnonzero(~ok)
            if bad.size:
                if q is None:
                    b.hi[0].reshape(nu, k)[bad, j] = 0.0
                else:                                  # x[u,j] + q[j,τ] <= 1
                    rows = np.repeat(np.arange(bad.size), 2)
                    cols = np.column_stack([x[bad, j], np.full(bad.size, q[j, ti])]).ravel()
                    b.add_rows(rows, cols, np.ones(2 * bad.size), np.full(bad.size, -np.inf),
                               np.ones(bad.size))
            if np.isfinite(t.memory_bytes) and total_size > t.memory_bytes:
                cols = [x[:, j]]
                vals = [cond.size_bytes]
                rhs = t.memory_bytes
                if q is not None:
                    cols.append([q[j, ti]])
                    vals.append([total_size])
                    rhs += total_size
                c = np.concatenate(cols)
                b.add_rows(np.zeros(c.size, np.int64), c, np.concatenate(vals), [-np.inf], [rhs])


def _symmetry(b: MatrixBuilder, x: np.ndarray, types, nu: int) -> None:
    """Identical devices: unit ``i`` only on the first ``i+1`` devices of its group."""
    start = 0
    hi = b.hi[0].reshape(x.shape)
    for t in types:
        for rank in range(1, t.count):
            hi[:min(rank, nu), start + rank] = 0.0
        start += t.count


def _used_slots_first(b: MatrixBuilder, x: np.ndarray) -> np.ndarray | None:
    """Contiguous: a slot holds units only if the slot before it does.

    ``e_j ∈ [0,1]`` with ``Σ_u x[u,j] ≤ U·e_j``, ``e_j ≤ Σ_u x[u,j]``,
    ``e_{j+1} ≤ e_j``. Validity: moving the empty slots (with their types) to
    the end of the chain keeps every part an ideal difference, every load and
    every type count, so some optimum satisfies the rows (symmetry breaking,
    the order :func:`start_vector` already uses).
    """
    nu, k = x.shape
    if k < 2 or nu == 0:
        return None
    e = b.add_vars("e", (k,), 0.0, 1.0)
    for j in range(k):
        c = np.concatenate([x[:, j], [e[j]]])
        b.add_rows(np.zeros(c.size, np.int64), c, np.concatenate([np.ones(nu), [-float(nu)]]),
                   [-np.inf], [0.0])                                   # Σ_u x ≤ U·e
        b.add_rows(np.zeros(c.size, np.int64), c, np.concatenate([-np.ones(nu), [1.0]]),
                   [-np.inf], [0.0])                                   # e ≤ Σ_u x
    b.pairwise_le(e[1:], e[:-1])
    return e

