"""Proven lower bounds on the cost of completing a partial chain plan.

Used by the label DP (:mod:`autopar_opt.solvers.dp.chain`) to drop labels that cannot
lead to a plan below a threshold. A label at state ``(u, i, k)`` (layer ``u``
processed, in stage ``i`` with strategy ``k``, current stage memory ``mem``)
still has to place layers ``u+1 .. n-1`` into stages ``i .. P-1`` (each stage
non-empty, ending in stage ``P-1``).


Working sets. The stage memory also holds the largest working set ``X`` of
its layers (:func:`~autopar_opt.cost.tables.stage_memory`); this module
leaves it out (the chain DP passes a label's stored memory plus its working
set so far as ``mem``). Every plan's stage memory is at least what is
modelled here, so the constraint is relaxed and the bounds stay valid; the
chain DP itself enforces the working set exactly.

Backward shortest path (exact for the additive part, memory relaxed). With
multipliers ``λ_j ≥ 0`` per stage and stage-dependent layer memory ``m_j[v,k]``:

    H_λ[u,i,k] = min over completions of  Σ_v (A[v,k_v] + λ_{stage(v)}·m_{stage(v)}[v,k_v])
                                          + Σ in-stage reshard R + Σ boundary transfer R'

computed by the recursion ``H[u,i,k] = min_k' (A'[u+1,k'] + R[k,k'] + H[u+1,i,k'],
A'[u+1,k'] + R'_i[k,k'] + H[u+1,i+1,k'])`` in O(n·P·K²). Every stage's memory is at most the
capacity ``C`` (the memory constraint of docs/DESIGN.md §3), so the λ-terms of the
remaining layers sum to at most ``λ_i·(C − mem) + C·Σ_{j>i} λ_j``; hence for
every feasible completion

    remaining Σ(p + o)  ≥  H_λ[u,i,k] − λ_i·(C − mem) − C·Σ_{j>i} λ_j

(Lagrangian relaxation of the memory constraints; valid for any ``λ ≥ 0``, the
bound takes the best of a few vectors, :func:`_multipliers`). ``Hp`` is the same without transfers (bounds
the remaining Σp alone), used for the bottleneck term: the stages ``i..P-1``
share ``pc + remaining Σp``, so ``max p ≥ (pc + remaining Σp)/(P − i)``;
likewise ``max g ≥ (gc + Σ_{v>u} min_k G[v,k])/(P − i)`` (``rest_sync``).

Stage-weighted bound (the trade-off between time and sync that the separate
minima miss). For any probability vector ``w`` over the stages ``i..P-1``,
``max p ≥ Σ_j w_j·p_j`` and ``max g ≥ Σ_j w_j·g_j`` for every completion, so

    T ≥ S + (c−1)·w_i·pc + w_i·gc + min over completions of
        (R + Σ_v [(c−1)·w_{stage(v)}·(A + R) + w_{stage(v)}·G])

whose last term is a backward pass with per-stage weights (and the same
Lagrangian memory terms); ``w`` is uniform over ``i..P-1``. The DP uses the
larger of the two bounds. (Weights that skip a memory-bound first stage were
tried and are useless: the relaxed completion then fills that stage with
recomputed layers for free. What the bound misses is the imbalance that a
memory-bound stage forces on the others; see benchmarks/dp/RESULTS.md.)
"""

from __future__ import annotations

import numpy as np

from autopar_opt.cost.tables import CostTables
from autopar_opt.solvers.dp.common import DPTimeout, past


class CompletionBounds:
    """``H_λ`` and ``Hp_λ`` tables for a few multipliers (module docstring).

    Built within ``deadline`` (``time.monotonic()``; None: no limit): :class:`DPTimeout`
    when it passes before ``H`` and ``Hp`` are built; the stage-weighted tables are
    optional (a stage without one gets the unweighted bound only, as above
    :data:`WEIGHTED_MAX_PP`), so the ones the deadline leaves unbuilt stay None
    (issue 15: on a 16-stage model they took 2-3 s, more than a short time limit)."""

    def __init__(self, tables: CostTables, mem: list[list[np.ndarray]], cap: float,
                 edge_of: dict[tuple[int, int], int], allowed: list[np.ndarray],
                 deadline: float | None = None, weighted: bool = True) -> None:
        self.n, self.pp, self.cap = tables.num_layers, tables.pp, cap
        self.lambdas = _multipliers(tables, mem, cap, allowed)
        lam = np.array(self.lambdas)                      # (J, P): λ_j per stage

        def stacked(wp, wo: float, wg):
            return _backward(tables, mem, lam, edge_of, allowed, wp, wo, wg, deadline)
        # H[u][i]: (λ, k) array of H_λ[u,i,k]; Hp likewise
        self.H = stacked(1.0, 1.0, 0.0)
        self.Hp = stacked(1.0, 0.0, 0.0)
        # Hw[u][i]: the stage-weighted completion of a label in stage i (w uniform over i..P-1)
        self.Hw = [[None] * self.pp for _ in range(self.n)]
        self.c1 = float(tables.rounds - 1)
        if weighted and self.pp <= WEIGHTED_MAX_PP:
            for i in range(self.pp):
                w = np.zeros(self.pp)
                w[i:] = 1.0 / (self.pp - i)
                try:
                    part = stacked(1.0 + self.c1 * w, 1.0, w)
                except DPTimeout:
                    break
                for u in range(self.n):
                    self.Hw[u][i] = part[u][i]
        # penalty of a label in stage i: λ_i·(C − mem) + C·Σ_{j>i} λ_j
        self._lam_i = [lam[:, i:i + 1] for i in range(self.pp)]
        self._lam_tail = [cap * lam[:, i + 1:].sum(axis=1)[:, None] for i in range(self.pp)]
        #: per stage i: the distinct values of λ_i (a column) and each vector's group among them
        self._groups = [np.unique(lam[:, i], return_inverse=True) for i in range(self.pp)]
        self._groups = [(s, g.ravel()) for s, g in self._groups]
        self._slope = [s[:, None] for s, _ in self._groups]
        self._cache: dict[tuple[int, int, int], np.ndarray] = {}
        #: relative rounding margin subtracted from every line (:func:`rounding_margin`)
        self.rho = rounding_margin(self.n, self.pp)
        mins = [float(tables.sync[v][allowed[v]].min()) for v in range(self.n)]
        #: rest_sync[u] = Σ_{v>u} min_k G[v,k]: the stages i..P-1 share gc + this much sync
        self.rest_sync = np.r_[np.cumsum(mins[::-1])[::-1][1:], 0.0]

    def remaining(self, u: int, i: int, k: np.ndarray, mem: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower bounds on the remaining Σ(p+o) and Σp of labels at states
        ``(u, i, k[j])`` with current-stage memory ``mem[j]`` (vectors)."""
        slope = self._slope[i] * mem[None, :]
        hs = (self._lines(0, u, i)[:, k] + slope).max(axis=0)
        hp = (self._lines(1, u, i)[:, k] + slope).max(axis=0)
        return np.maximum(hs, 0.0), np.maximum(hp, 0.0)

    def _lines(self, which: int, u: int, i: int) -> np.ndarray:
        """``(G, K)`` intercepts of the bound as a function of a label's memory ``mem``:
        ``h_λ − λ_i·(C − mem) − C·Σ_{j>i} λ_j`` is the line ``(h_λ − λ_i·C − C·Σ_{j>i} λ_j)
        + λ_i·mem``, and of the lines with one slope ``λ_i`` only the largest intercept can
        give the maximum (the multiplier vectors share a few values of ``λ_i``: 19 vectors,
        at most 13 slopes). ``which``: 0 ``H``, 1 ``Hp``, 2 ``Hw`` (cached per state)."""
        key = (which, u, i)
        got = self._cache.get(key)
        if got is None:
            h = (self.H, self.Hp, self.Hw)[which][u][i]
            slopes, group = self._groups[i]
            # the intercept less its rounding margin (``rounding_margin``): h·(1−ρ) − pen·(1+ρ)
            a = h * (1.0 - self.rho) - (self.cap * self._lam_i[i] + self._lam_tail[i]) * (1.0 + self.rho)
            got = np.full((len(slopes), a.shape[1]), -np.inf)
            np.maximum.at(got, group, a)
            self._cache[key] = got
        return got

    def weighted(self, u: int, i: int, k: np.ndarray, mem: np.ndarray, pc: np.ndarray,
                 gc: np.ndarray) -> np.ndarray | None:
        """Lower bound on ``final value − S`` from the stage-weighted bound (module
        docstring, ``w_i = 1/(P − i)``), or None when not computed (``pp > WEIGHTED_MAX_PP``)."""
        if self.Hw[u][i] is None:
            return None
        rest = np.maximum((self._lines(2, u, i)[:, k] + self._slope[i] * mem[None, :]).max(axis=0), 0.0)
        return (self.c1 * pc + gc) / (self.pp - i) + rest


#: The weighted bound costs pp more backward passes (one per stage); above this pp it is skipped.
WEIGHTED_MAX_PP = 16

#: Unit round-off of IEEE double (round to nearest): every ``fl(x ∘ y) = (x ∘ y)(1 + δ)``, ``|δ| ≤ U``.
U = 2.0 ** -53


def rounding_margin(n: int, pp: int) -> float:
    """Relative margin ``ρ`` that makes the computed completion bound a proven one.

    Why (review finding F3). The bound of a label is ``h − pen + λ_i·mem`` with
    ``pen = λ_i·C + C·Σ_{j>i} λ_j`` (``_lines``). When the Lagrangian bound is tight (the
    relaxed completion fills every stage's memory exactly) ``h`` and ``pen`` are large and
    nearly equal (``λ_j·C`` is up to ``8·t``, ``t`` the model's least total time) and their
    difference is the small remaining time, so rounding can put the computed value a few
    ulps of ``pen`` *above* the true completion cost (tests/unit/solvers/test_dp_completion_rounding.py
    shows it on exactly-full chains). Error analysis (Higham, *Accuracy and Stability of
    Numerical Algorithms*, 2nd ed., §3.1 and Lemma 3.1: ``Π(1+δ_k)^{±1} = 1 + θ_k``,
    ``|θ_k| ≤ γ_k = kU/(1−kU)``), all inputs ≥ 0 (times, syncs, transfers, weights,
    memories, multipliers):

    - ``h`` (:func:`_backward`): a new layer's term enters after at most 5 roundings
      (``wp·A``, ``+ wg·G``, ``λ·m``, ``+``, ``+ h[v]``) and every layer after it adds at
      most 2 (``+ h[v]``, ``+ wp·R``); a ``min`` of computed sums is exact. So the computed
      ``h`` is at most ``(1 + γ_{2n+5})`` times the exact cost of the exact minimiser's path:
      ``fl(h) ≤ h·(1 + γ_{2n+5})``.
    - ``pen``: ``Σ_{j>i} λ_j`` (at most ``pp`` terms), ``·C``, ``λ_i·C``, ``+``:
      ``fl(pen) ≥ pen·(1 − γ_{pp+2})``.
    - the fold ``fl(h)·(1−ρ) − fl(pen)·(1+ρ)``, ``+ fl(λ_i·mem)``: four more roundings, each
      at most ``U·(h + pen)`` (``|result| ≤ h + pen``, ``λ_i·mem ≤ λ_i·C ≤ pen``).

    Hence ``computed − exact ≤ (γ_{2n+5} + γ_{pp+2} + 4U)·(h + pen) − ρ·(1 − γ_{2n+7})·(h + pen)``,
    which is ``≤ 0`` for ``ρ = 2·(2n + pp + 16)·U`` (about twice the count, so that the
    ``γ``'s higher-order terms and the margin's own rounding stay inside). The label's own
    sums (``S``, ``pc``, ``gc``, the rounded stage weights ``w``) carry relative errors of at
    most ``(2n + pp)·U`` of the threshold, which the chain DP's pruning slack
    (``tau·(1 + 1e-9)``) covers up to millions of layers.

    Size: at 1,024 layers and 16 stages ``ρ ≈ 4.7e-13``; ``pen ≤ 8·pp·t`` (the multipliers
    of :func:`_multipliers` have ``λ_j·C ≤ 8·t``), so the bound drops by at most about
    ``1.2e-10`` of the optimum, far under the deepening steps (``5e-4`` and up)."""
    return 2.0 * (2 * n + pp + 16) * U


def _multipliers(tables: CostTables, mem, cap: float, allowed) -> list[np.ndarray]:
    """Multiplier vectors ``λ_j`` (one per stage): zero, then three profiles —
    uniform, the first stage only (1F1B keeps the most micro-batches in flight
    there), halving stage by stage — each at a geometric fan of magnitudes
    around the model's time/memory exchange rate."""
    pp = tables.pp
    zero = np.zeros(pp)
    t = sum(float(tables.time[u][allowed[u]].min()) for u in range(tables.num_layers))
    m = sum(_finite_min(mem[-1][u][allowed[u]]) for u in range(tables.num_layers))
    if t <= 0 or m <= 0 or cap <= 0:
        return [zero]
    base = t / max(m, cap)
    profiles = [np.ones(pp), np.eye(1, pp, 0)[0], 0.5 ** np.arange(pp)]
    out = [zero]
    for prof in profiles[:1] if pp == 1 else profiles:
        out += [base * f * prof for f in (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)]
    return out


def _finite_min(x: np.ndarray) -> float:
    """Least finite entry (0 when none): infinite memory marks a strategy a stage may not use."""
    fin = x[np.isfinite(x)]
    return float(fin.min()) if fin.size else 0.0


def _priced(lam: np.ndarray, mem: np.ndarray) -> np.ndarray:
    """``λ·mem`` with ``+inf`` where ``mem`` is infinite (a strategy the stage may not
    use, free stage sizes), never ``0·inf``."""
    fin = np.isfinite(mem)
    return lam * np.where(fin, mem, 0.0)[None, :] + np.where(fin, 0.0, np.inf)[None, :]


def _backward(tables: CostTables, mem, lam: np.ndarray, edge_of, allowed,
              wp, wo: float, wg, deadline: float | None = None) -> list[list[np.ndarray]]:
    """``h[u][i][J, k]`` = least ``Σ wp_j·(A + R) + wo·R' + wg_j·G + λ_J,j·m_j`` (``j`` the
    stage of each remaining layer; ``wp``, ``wg`` scalars or per-stage arrays; ``lam``
    a ``(J, P)`` batch of multiplier vectors) over the completions of state
    ``(u, i, k)`` (memory relaxed); ``inf`` where none exists. Raises
    :class:`DPTimeout` once ``deadline`` has passed (checked once per layer)."""
    n, pp = tables.num_layers, tables.pp
    wp = np.broadcast_to(np.asarray(wp, dtype=float), (pp,))
    wg = np.broadcast_to(np.asarray(wg, dtype=float), (pp,))
    nj = lam.shape[0]
    size = len(tables.time[n - 1])
    h = [[None] * pp for _ in range(n)]
    for i in range(pp):
        h[n - 1][i] = np.zeros((nj, size)) if i == pp - 1 else np.full((nj, size), np.inf)
    for u in range(n - 2, -1, -1):
        if past(deadline):
            raise DPTimeout
        v = u + 1
        e = edge_of.get((u, v))
        ku, kv = len(tables.time[u]), len(tables.time[v])
        if len(allowed[u]) < ku or len(allowed[v]) < kv:
            h_u = _backward_restricted(tables, mem, lam, u, e, allowed[u], allowed[v], h[v],
                                       wp, wo, wg)
            for i in range(pp):
                h[u][i] = h_u[i]
            continue
        mask = np.full(kv, np.inf)
        mask[allowed[v]] = 0.0
        own = [(wp[j] * tables.time[v] + wg[j] * tables.sync[v] + mask)[None, :]
               + _priced(lam[:, j:j + 1], mem[j][v]) for j in range(pp)]
        for i in range(pp):
            stay = own[i] + h[v][i]                                   # (J, kv)
            if e is not None:
                best = (wp[i] * tables.reshard[e][None, :, :] + stay[:, None, :]).min(axis=2)
            else:
                best = np.repeat(stay.min(axis=1, keepdims=True), ku, axis=1)
            if i + 1 < pp:
                nxt = own[i + 1] + h[v][i + 1]
                if e is not None and wo:
                    best = np.minimum(best, (wo * tables.cross(e, i)[None, :, :]
                                             + nxt[:, None, :]).min(axis=2))
                else:
                    best = np.minimum(best, nxt.min(axis=1, keepdims=True))
            h[u][i] = best
    return h


def _backward_restricted(tables: CostTables, mem, lam: np.ndarray, u: int, e: int | None,
                         au: np.ndarray, av: np.ndarray, h_v: list[np.ndarray], wp: np.ndarray,
                         wo: float, wg: np.ndarray) -> list[np.ndarray]:
    """One step ``u <- v = u+1`` of :func:`_backward` over the allowed strategies only (a
    restriction, e.g. a target's key family: :mod:`~autopar_opt.solvers.dp.uniform`): the
    same minima over ``|au|·|av|`` pairs instead of ``ku·kv``; the entries of
    strategies outside ``au`` are ``inf``, as the full step's mask makes them."""
    v, pp, nj = u + 1, tables.pp, lam.shape[0]
    ku = len(tables.time[u])
    own = [(wp[j] * tables.time[v][av] + wg[j] * tables.sync[v][av])[None, :]
           + _priced(lam[:, j:j + 1], mem[j][v][av]) for j in range(pp)]
    out = []
    for i in range(pp):
        stay = own[i] + h_v[i][:, av]                                   # (J, |av|)
        if e is not None:
            r = tables.reshard[e][np.ix_(au, av)]
            best = (wp[i] * r[None, :, :] + stay[:, None, :]).min(axis=2)
        else:
            best = np.repeat(stay.min(axis=1, keepdims=True), len(au), axis=1)
        if i + 1 < pp:
            nxt = own[i + 1] + h_v[i + 1][:, av]
            if e is not None and wo:
                x = tables.cross(e, i)[np.ix_(au, av)]
                best = np.minimum(best, (wo * x[None, :, :] + nxt[:, None, :]).min(axis=2))
            else:
                best = np.minimum(best, nxt.min(axis=1, keepdims=True))
        full = np.full((nj, ku), np.inf)
        full[:, au] = best
        out.append(full)
    return out
