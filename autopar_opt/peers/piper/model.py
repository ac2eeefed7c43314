"""Piper's model for the solvers: stage cost with an exact per-node TMPC choice.

Cost of one stage ``S`` on ``t·d`` devices keeping ``y`` micro-batches of
activations (peers' README, "Objective", transcribing ``Graph::getTPSForResult``
of Piper's ``algo.cpp``)::

    TPS = (X/d + R)/B + P/d,   Mem = Σ_v a(τ_v)·y + b(τ_v) ≤ M

with ``P = Σ p``, ``X = Σ 2(c + sync)`` over the edges that leave ``S``
(each end charged with its own TMPC's sync bytes) and
``R = Σ 4(d-1)·w/(d·N)``. Per node this is
``cost_v(τ) = (p + X_v(τ)/B + 4(d-1)·w/(N·B)) / d``, so choosing the TMPCs is
a multiple-choice knapsack (min Σ cost s.t. Σ mem ≤ M) solved **exactly** by
:func:`solve_mckp` (Piper solves it greedily). Nodes that are irrelevant to
every cost (all numbers zero, incident edges free) are removed before the
search by :func:`reduce_instance`; they are put back into the plan by
:func:`restore_plan` without changing any stage's cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from autopar_opt.peers.piper.format import PiperInstance

#: Relative slack on the memory limit (``Mem == M`` is allowed, as in Piper).
MEM_RTOL = 1e-12


@dataclass
class PiperStage:
    """One stage of a plan: node indices, data/tensor degrees and a TMPC index per node."""

    nodes: list[int]
    d: int
    t: int
    tmpc: list[int]


@dataclass
class PiperPlan:
    """Stages in pipeline order (``stages[0]`` receives nothing)."""

    stages: list[PiperStage] = field(default_factory=list)


@dataclass
class NodeOptions:
    """Per degree ``t``: the node's TMPC data as arrays over its TMPCs."""

    p: np.ndarray
    w: np.ndarray
    a: np.ndarray
    b: np.ndarray
    fw: np.ndarray      # (n_tmpc, n_in)  sync bytes of the incoming edges, in ``ins`` order
    bw: np.ndarray      # (n_tmpc, n_out) sync bytes of the outgoing edges, in ``outs`` order


@dataclass
class Prepared:
    """An instance in array form for the solvers (after :func:`reduce_instance`)."""

    inst: PiperInstance
    keep: list[int]                      # reduced node -> original node index
    edges: list[tuple[int, int, float]]  # reduced edges (precedence-only ones cost 0)
    ins: list[list[int]]                 # incoming edge ids per reduced node
    outs: list[list[int]]
    opts: dict[int, list[NodeOptions | None]]

    @property
    def n(self) -> int:
        return len(self.keep)


def _irrelevant(inst: PiperInstance, v: int, edges: list[tuple[int, int, float]]) -> bool:
    """Node ``v`` costs nothing anywhere: zero p, w, a, b and sync at every degree, free edges."""
    for t in inst.degrees:
        lst = inst.tmpcs[t][v]
        if not lst:
            return False
        for c in lst:
            if c.p or c.w or c.a or c.b or any(c.fw.values()) or any(c.bw.values()):
                return False
    for u, x, cost in edges:
        if v not in (u, x):
            continue
        if cost:
            return False
        other, key = (x, "fw") if u == v else (u, "bw")
        for t in inst.degrees:
            if any(getattr(c, key).get(v, 0.0) for c in inst.tmpcs[t][other]):
                return False
    return True


def reduce_instance(inst: PiperInstance) -> Prepared:
    """Remove irrelevant nodes (keeping precedence through them) and build the arrays."""
    edges = [(u, v, c) for u, v, c in inst.edges]
    alive = list(range(inst.n))
    for v in range(inst.n):
        if not _irrelevant(inst, v, edges):
            continue
        preds = [u for u, x, _ in edges if x == v]
        succs = [x for u, x, _ in edges if u == v]
        edges = [e for e in edges if v not in e[:2]]
        have = {(u, x) for u, x, _ in edges}
        edges += [(u, x, 0.0) for u in preds for x in succs if (u, x) not in have]
        alive.remove(v)
    pos = {v: i for i, v in enumerate(alive)}
    red = [(pos[u], pos[v], c) for u, v, c in edges]
    ins = [[] for _ in alive]
    outs = [[] for _ in alive]
    for e, (u, v, _) in enumerate(red):
        outs[u].append(e)
        ins[v].append(e)
    opts: dict[int, list[NodeOptions | None]] = {}
    for t in inst.degrees:
        row: list[NodeOptions | None] = []
        for i, v in enumerate(alive):
            lst = inst.tmpcs[t][v]
            if not lst:
                row.append(None)
                continue
            fw = np.array([[c.fw.get(alive[red[e][0]], 0.0) for e in ins[i]] for c in lst]).reshape(len(lst), -1)
            bw = np.array([[c.bw.get(alive[red[e][1]], 0.0) for e in outs[i]] for c in lst]).reshape(len(lst), -1)
            row.append(NodeOptions(np.array([c.p for c in lst]), np.array([c.w for c in lst]),
                                   np.array([c.a for c in lst]), np.array([c.b for c in lst]), fw, bw))
        opts[t] = row
    return Prepared(inst, alive, red, ins, outs, opts)


def node_costs(prep: Prepared, member: np.ndarray, t: int) -> list[np.ndarray] | None:
    """``base_v(τ) = p + X_v(τ)/B`` for every node of the stage ``member`` (None if a node lacks ``t``)."""
    inst, out = prep.inst, []
    for v in np.flatnonzero(member):
        o = prep.opts[t][v]
        if o is None:
            return None
        x = np.zeros(len(o.p))
        for j, e in enumerate(prep.ins[v]):
            u, _, c = prep.edges[e]
            if not member[u]:
                x += 2.0 * (c + o.fw[:, j])
        for j, e in enumerate(prep.outs[v]):
            _, w, c = prep.edges[e]
            if not member[w]:
                x += 2.0 * (c + o.bw[:, j])
        out.append(o.p + x / inst.bandwidth)
    return out


def _items(costs: list[np.ndarray], mems: list[np.ndarray]):
    """Per node: the light option, and the upgrade (saving, extra memory, node, cheap option) if any."""
    n = len(costs)
    if all(len(c) == 2 for c in costs):
        c, m = np.array(costs), np.array(mems)
    else:
        c = np.array([[x[0], x[-1]] for x in costs])
        m = np.array([[x[0], x[-1]] for x in mems])
    one = (m[:, 1] < m[:, 0]) | ((m[:, 1] == m[:, 0]) & (c[:, 1] < c[:, 0]))
    light = one.astype(np.int64)
    cheap = ((c[:, 1] < c[:, 0]) | ((c[:, 1] == c[:, 0]) & (m[:, 1] < m[:, 0]))).astype(np.int64)
    rows = np.arange(n)
    sv = c[rows, light] - c[rows, cheap]
    w = m[rows, cheap] - m[rows, light]
    up = (cheap != light) & (sv > 0) & (w > 0)
    ups = [(float(sv[v]), float(w[v]), int(v), int(cheap[v])) for v in np.flatnonzero(up)]
    if not all(len(x) == 2 for x in costs):       # a lone TMPC: index 0 only
        light = np.where([len(x) == 2 for x in costs], light, 0)
    return [int(x) for x in light], ups


def solve_mckp(costs: list[np.ndarray], mems: list[np.ndarray], cap: float) -> tuple[float, list[int]] | None:
    """Exact knapsack for at most two options per node: min Σ cost s.t. Σ mem ≤ cap.

    Every node starts at its least-memory option; upgrading node ``v`` to its
    cheaper option saves ``s_v`` and needs ``w_v`` more bytes, so the choice
    is a 0/1 knapsack ``max Σ s_v x_v, Σ w_v x_v ≤ cap − Σ light memory``.
    Equal items are grouped (a bounded knapsack over the groups) and solved
    by depth-first branch and bound with the LP bound of Dantzig (1957),
    evaluated in ``O(log G)`` from prefix sums over the groups sorted by
    ``s/w`` (Horowitz & Sahni 1974). Returns None when even the least-memory
    choice exceeds ``cap``.
    """
    light, ups = _items(costs, mems)
    base_m = math.fsum(float(m[k]) for m, k in zip(mems, light))
    if base_m > cap:
        return None
    room = cap - base_m
    choice = list(light)
    if ups and math.fsum(u[1] for u in ups) > room:
        taken = _bounded_knapsack(ups, room)
    else:
        taken = list(range(len(ups)))
    for i in taken:
        choice[ups[i][2]] = ups[i][3]
    return math.fsum(float(c[k]) for c, k in zip(costs, choice)), choice


def _bounded_knapsack(ups: list[tuple[float, float, int, int]], room: float) -> list[int]:
    """Indices of ``ups`` to take (max saving within ``room``), exact.

    Items of equal weight form a class; in a class the best ``x`` items are
    its ``x`` largest savings, so the search chooses a count per class
    (depth-first, largest count first). The bound at class ``g`` is the LP
    relaxation of every item in classes ``g..`` (Dantzig 1957), read in
    ``O(log n)`` from prefix sums of those items sorted by saving per byte.
    Profiled models repeat layer shapes, so the classes are few (a ResNet-50
    stage: 80 items, 5 classes).
    """
    classes: dict[float, list[int]] = {}
    for i, (_, w, _, _) in enumerate(ups):
        classes.setdefault(w, []).append(i)
    keys = sorted(classes, key=lambda w: -max(ups[i][0] for i in classes[w]) / w)
    members = [sorted(classes[w], key=lambda i: -ups[i][0]) for w in keys]
    prefix = [np.concatenate([[0.0], np.cumsum([ups[i][0] for i in m])]) for m in members]
    G = len(keys)
    suffix = []                       # LP data of the items in classes g..G-1
    for g in range(G):
        items = sorted((i for m in members[g:] for i in m), key=lambda i: -ups[i][0] / ups[i][1])
        w = np.array([ups[i][1] for i in items])
        sv = np.array([ups[i][0] for i in items])
        suffix.append((np.concatenate([[0.0], np.cumsum(w)]), np.concatenate([[0.0], np.cumsum(sv)]), sv / w))
    best = [-1.0, [0] * G]
    take = [0] * G

    def bound(g: int, left: float) -> float:
        cw, cs, ratio = suffix[g]
        p = int(np.searchsorted(cw, left, side="right")) - 1
        if p >= len(ratio):
            return float(cs[-1])
        return float(cs[p] + (left - cw[p]) * ratio[p])

    def dfs(g: int, left: float, save: float) -> None:
        if save > best[0]:
            best[0], best[1] = save, list(take)
        if g == G or save + bound(g, left) <= best[0] * (1 + 1e-13):
            return
        most = min(len(members[g]), int(left // keys[g]))
        for x in range(most, -1, -1):
            take[g] = x
            dfs(g + 1, left - x * keys[g], save + float(prefix[g][x]))
        take[g] = 0

    dfs(0, room, 0.0)
    out: list[int] = []
    for g in range(G):
        out += members[g][: best[1][g]]
    return out
