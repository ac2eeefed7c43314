"""Exact domain reduction for the min-sum problem of :mod:`.elimination` (PaSE's problem).

Problem: one choice ``c_v`` per variable, minimise ``T(c) = Σ_v U_v[c_v] + Σ_e C_e[c_u, c_v]``
with every ``C_e ≥ 0``, optionally subject to ``Σ_v W_v[c_v] ≤ cap``. Elimination costs the
product of the domain sizes of a bucket, so every configuration removed before it runs saves
time; the removals below never remove every optimal plan.

**Tree min-marginals** (:func:`tree_min_marginals`). Drop every edge outside a spanning forest
``F``; ``T_F(c) = Σ_v U_v + Σ_(e∈F) C_e ≤ T(c)`` because the dropped ``C_e`` are ``≥ 0``. The
min-marginal ``μ_F(v, k) = min{T_F(c) : c_v = k}`` is computed exactly on a forest by two
message passes (belief propagation in the min-sum semiring is exact on trees: Pearl 1988;
Wainwright & Jordan 2008, Sec. 2.5). So every plan with ``c_v = k`` costs at least
``μ_F(v, k)``.

**Fixing** (:func:`reduce_domains`). Given an incumbent value ``Ū`` (the cost of a plan that
satisfies every constraint), configuration ``k`` of ``v`` with ``μ_F(v, k) > Ū`` lies in no
plan of cost ``≤ Ū``, so in no optimal plan: the optimum is ``≤ Ū``, and every plan through
``k`` costs ``≥ μ_F(v, k) > Ū``. Memory is ignored by the relaxation (a lower bound of the
constrained problem too). Marginals over the *current* domains bound every plan inside them,
and the optimal plans inside them are the global ones (invariant below), so fixing can be
repeated with several forests (each removes what its edges prove).

**Dominance.** ``k'`` dominates ``k`` at ``v`` (``k' ≠ k``, both in the current domain) when

    ``U_v[k] − U_v[k'] ≥ Σ_(e ∋ v) max_(j ∈ D_w) (C_e[k', j] − C_e[k, j])``  and, if the memory
    row can bind, ``W_v[k'] ≤ W_v[k]``

(``w`` the other end of ``e``, ``D_w`` its current domain). Proof: in any plan with
``c_v = k`` and every neighbour in its domain, replacing ``k`` by ``k'`` changes ``T`` by
``U_v[k'] − U_v[k] + Σ_e (C_e[k', c_w] − C_e[k, c_w]) ≤ 0`` and does not raise the memory;
so if an optimal plan exists inside the domains, one exists without ``k``. The test stays true
when neighbour domains shrink later (a maximum over fewer ``j``), so all variables may be
filtered from one snapshot. Within one variable, ``k`` is dropped only for a dominator still
present when ``k`` is examined; the dominators' chain then follows strictly later removals and
ends at a kept configuration, and composing the swaps keeps the plan optimal.

**Invariant.** After every step an optimal plan lies inside the current domains (induction on
the steps above), so the exact optimum over the reduced tables is the optimum of the original
problem. The caller checks the elimination's value against ``Ū`` (it cannot exceed it).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

#: Largest ``Σ_e K_v² · K_w`` the dominance test of one variable may cost; a variable above it
#: is left whole (skipping a variable is always safe, a partial sum of the edges is not).
DOMINANCE_MAX_WORK = 30_000_000
#: Relative tolerance of fixing (a configuration is removed only when its bound exceeds the
#: incumbent by more than this: round-off of sums never removes an optimal one).
FIX_RTOL = 1e-9


@dataclass
class Reduction:
    """Kept configuration indices per variable, the incumbent plan and what each step removed."""

    keep: list[np.ndarray]
    incumbent: list[int]
    incumbent_value: float
    lower_bound: float
    log: list[dict] = field(default_factory=list)


def plan_value(unary: list[np.ndarray], pairs: list[tuple[int, int]], tables: list[np.ndarray],
               choice: list[int]) -> float:
    """``T(choice)``."""
    return math.fsum([float(u[k]) for u, k in zip(unary, choice)] +
                     [float(t[choice[a], choice[b]]) for (a, b), t in zip(pairs, tables)])


def spanning_forest(n: int, pairs: list[tuple[int, int]], weight: np.ndarray) -> list[int]:
    """Indices of the edges of a maximum-weight spanning forest (Kruskal)."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    chosen = []
    for e in sorted(range(len(pairs)), key=lambda i: (-weight[i], i)):
        a, b = find(pairs[e][0]), find(pairs[e][1])
        if a != b:
            parent[a] = b
            chosen.append(e)
    return chosen


def tree_min_marginals(unary: list[np.ndarray], pairs: list[tuple[int, int]], tables: list[np.ndarray],
                       forest: list[int]) -> list[np.ndarray]:
    """``μ_F(v, ·)`` for every variable (module docstring): exact min-marginals of the
    relaxation that keeps only the edges ``forest`` (which must form a forest)."""
    n = len(unary)
    nbrs: list[list[tuple[int, int]]] = [[] for _ in range(n)]   # (neighbour, edge index)
    for e in forest:
        a, b = pairs[e]
        nbrs[a].append((b, e))
        nbrs[b].append((a, e))

    def mat(e: int, frm: int) -> np.ndarray:
        """Edge table indexed [config of frm, config of the other end]."""
        return tables[e] if pairs[e][0] == frm else tables[e].T

    seen = [False] * n
    up: dict[int, np.ndarray] = {}        # message from v to its parent, over the parent's domain
    down: dict[int, np.ndarray] = {}      # message from the parent to v, over v's domain
    marg: list[np.ndarray] = [np.asarray(u, dtype=float) for u in unary]
    comp_min: list[float] = []
    comp_of = [0] * n
    for root in range(n):
        if seen[root]:
            continue
        order, par = [], {root: (-1, -1)}
        seen[root] = True
        queue = deque([root])
        while queue:
            v = queue.popleft()
            order.append(v)
            comp_of[v] = len(comp_min)
            for w, e in nbrs[v]:
                if not seen[w]:
                    seen[w] = True
                    par[w] = (v, e)
                    queue.append(w)
        below = {v: np.asarray(unary[v], dtype=float).copy() for v in order}   # U_v + Σ children's up
        for v in reversed(order):
            p, e = par[v]
            if p >= 0:
                up[v] = (below[v][:, None] + mat(e, v)).min(axis=0)
                below[p] += up[v]
        comp_min.append(float(below[root].min()))
        for v in order:
            p, e = par[v]
            total = below[v] + (down[v] if p >= 0 else 0.0)
            marg[v] = total
            for w, f in nbrs[v]:
                if w != p:
                    down[w] = ((total - up[w])[:, None] + mat(f, v)).min(axis=0)
    rest = math.fsum(comp_min)
    return [m + (rest - comp_min[comp_of[v]]) for v, m in enumerate(marg)]


def local_search(unary: list[np.ndarray], pairs: list[tuple[int, int]], tables: list[np.ndarray],
                 choice: list[int], fits=None, sweeps: int = 20) -> list[int]:
    """Iterated conditional modes: each variable in turn takes its best configuration given
    its neighbours' (a heuristic incumbent; ``fits(v, k, choice)`` may veto a move)."""
    n = len(unary)
    inc: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for e, (a, b) in enumerate(pairs):
        inc[a].append((e, 0))
        inc[b].append((e, 1))
    choice = list(choice)
    for _ in range(sweeps):
        moved = False
        for v in range(n):
            score = np.asarray(unary[v], dtype=float).copy()
            for e, side in inc[v]:
                a, b = pairs[e]
                score += tables[e][:, choice[b]] if side == 0 else tables[e][choice[a], :]
            k = int(np.argmin(score))
            if score[k] < score[choice[v]] * (1 - 1e-12) and (fits is None or fits(v, k, choice)):
                choice[v] = k
                moved = True
        if not moved:
            break
    return choice


def dominated(unary: np.ndarray, incident: list[np.ndarray], memory: np.ndarray | None) -> np.ndarray:
    """Mask of the configurations of one variable that a kept one dominates (module
    docstring). ``incident``: the variable's edge tables oriented ``[its configs, neighbour's]``
    over the current domains."""
    k = len(unary)
    s = np.zeros((k, k))                  # s[a, b] = Σ_e max_j (C_e[b, j] − C_e[a, j])
    for x in incident:
        rows, inv = np.unique(x, axis=0, return_inverse=True)
        rows = np.unique(rows, axis=1)
        m = np.empty((len(rows), len(rows)))
        for i in range(len(rows)):        # one row at a time: memory O(rows · cols)
            m[i] = (rows - rows[i]).max(axis=1)
        s += m[np.ix_(inv.ravel(), inv.ravel())]
    d = (unary[:, None] - unary[None, :]) - s >= 0      # d[a, b]: b dominates a
    if memory is not None:
        d &= memory[None, :] <= memory[:, None]
    np.fill_diagonal(d, False)
    alive = np.ones(k, dtype=bool)
    for a in np.argsort(-unary, kind="stable"):
        if (d[a] & alive).any():
            alive[a] = False
    return ~alive


def reduce_domains(unary: list[np.ndarray], pairs: list[tuple[int, int]], tables: list[np.ndarray],
                   memory: list[np.ndarray] | None = None, capacity: float = math.inf,
                   incumbent: list[int] | None = None, forests: int = 4, rounds: int = 6,
                   dominance: bool = True) -> Reduction:
    """Fix and prune configurations (module docstring) until a round removes nothing.

    ``incumbent``: a plan that fits (otherwise one is found from the forest's marginals by
    :func:`local_search`; where memory may bind and that plan does not fit, nothing is fixed
    and only dominance prunes). ``memory``/``capacity``: the knapsack row; dominance then also
    compares memory, unless no plan at all can exceed the capacity."""
    n = len(unary)
    keep = [np.arange(len(u)) for u in unary]
    may_bind = memory is not None and math.fsum(float(m.max()) for m in memory if len(m)) > capacity

    def fits_plan(choice: list[int]) -> bool:
        return not may_bind or math.fsum(float(m[k]) for m, k in zip(memory, choice)) <= capacity * (1 + 1e-9)

    red = Reduction(keep, list(incumbent) if incumbent is not None else [], math.inf, -math.inf)
    if incumbent is not None and fits_plan(incumbent):
        red.incumbent_value = plan_value(unary, pairs, tables, incumbent)
    used = np.zeros(len(pairs))
    for rnd in range(rounds):
        before = sum(map(len, keep))
        u_sub = [u[k] for u, k in zip(unary, keep)]
        t_sub = [t[np.ix_(keep[a], keep[b])] for (a, b), t in zip(pairs, tables)]
        for _ in range(forests if rnd == 0 else 1):
            weight = np.array([float(t.mean()) if t.size else 0.0 for t in t_sub]) / (1.0 + used)
            forest = spanning_forest(n, pairs, weight)
            used[forest] += 1
            marg = tree_min_marginals(u_sub, pairs, t_sub, forest)
            red.lower_bound = max(red.lower_bound, float(marg[0].min()) if n else 0.0)
            guess = local_search(u_sub, pairs, t_sub, [int(np.argmin(m)) for m in marg])
            if fits_plan([int(k[c]) for k, c in zip(keep, guess)]):
                value = plan_value(u_sub, pairs, t_sub, guess)
                if value < red.incumbent_value:
                    red.incumbent_value, red.incumbent = value, [int(k[c]) for k, c in zip(keep, guess)]
            if math.isfinite(red.incumbent_value):
                limit = red.incumbent_value * (1 + FIX_RTOL)
                mask = [m <= limit for m in marg]
                if all(x.any() for x in mask):
                    keep = [k[x] for k, x in zip(keep, mask)]
                    u_sub = [u[x] for u, x in zip(u_sub, mask)]
                    t_sub = [t[np.ix_(mask[a], mask[b])] for (a, b), t in zip(pairs, t_sub)]
        fixed = before - sum(map(len, keep))
        pruned = 0
        if dominance:
            inc: list[list[tuple[int, int]]] = [[] for _ in range(n)]
            for e, (a, b) in enumerate(pairs):
                inc[a].append((e, 0))
                inc[b].append((e, 1))
            drops = []
            for v in range(n):
                xs = [t_sub[e] if side == 0 else t_sub[e].T for e, side in inc[v]]
                if 1 < len(keep[v]) and sum(x.shape[0] ** 2 * x.shape[1] for x in xs) <= DOMINANCE_MAX_WORK:
                    drops.append(dominated(u_sub[v], xs, memory[v][keep[v]] if may_bind else None))
                else:
                    drops.append(np.zeros(len(keep[v]), dtype=bool))
            pruned = int(sum(d.sum() for d in drops))
            keep = [k[~d] for k, d in zip(keep, drops)]
        red.log.append({"round": rnd, "fixed": fixed, "dominated": pruned, "kept": sum(map(len, keep)),
                        "incumbent": red.incumbent_value, "bound": red.lower_bound})
        if fixed + pruned == 0:
            break
    red.keep = keep
    return red
