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

from autopar_opt.peers.piper_format import PiperInstance

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


def solve_mckp(costs: list[np.ndarray], mems: list[np.ndarray], cap: float) -> tuple[float, list[int]] | None:
    """Exact multiple-choice knapsack: min Σ costs[v][k_v] s.t. Σ mems[v][k_v] ≤ cap.

    Branch and bound (Horowitz–Sahni style) on the upgrades from each node's
    least-memory option along its lower convex hull in (memory, cost), with
    the LP relaxation (greedy by savings per byte, Sinha & Zoltners 1979) as
    bound. Returns None when even the least-memory choice exceeds ``cap``.
    """
    n = len(costs)
    low = [int(np.lexsort((c, m))[0]) for c, m in zip(costs, mems)]
    base_m = math.fsum(float(mems[v][low[v]]) for v in range(n))
    if base_m > cap:
        return None
    fast = [int(np.lexsort((m, c))[0]) for c, m in zip(costs, mems)]
    if math.fsum(float(mems[v][fast[v]]) for v in range(n)) <= cap:
        return math.fsum(float(costs[v][fast[v]]) for v in range(n)), fast
    # upgrade steps per node along the hull: (saving, extra memory, node, target option)
    steps: list[tuple[float, float, int, int]] = []
    for v in range(n):
        cur = low[v]
        while True:
            best = None
            for k in range(len(costs[v])):
                dm = float(mems[v][k] - mems[v][cur])
                ds = float(costs[v][cur] - costs[v][k])
                if dm > 0 and ds > 0 and (best is None or ds / dm > best[0]):
                    best = (ds / dm, ds, dm, k)
            if best is None:
                break
            steps.append((best[1], best[2], v, best[3]))
            cur = best[3]
    order = sorted(range(len(steps)), key=lambda i: -steps[i][0] / steps[i][1])
    steps = [steps[i] for i in order]
    room = cap - base_m
    best_save, best_pick = 0.0, []

    def bound(i: int, left: float, taken: dict[int, int]) -> float:
        s = 0.0
        for sv, dm, v, k in steps[i:]:
            if taken.get(v, -1) == -2:          # node closed (an earlier step refused)
                continue
            if dm <= left:
                s += sv
                left -= dm
            else:
                return s + sv * left / dm
        return s

    def dfs(i: int, left: float, save: float, taken: dict[int, int], pick: list[int]) -> None:
        nonlocal best_save, best_pick
        if save > best_save:
            best_save, best_pick = save, list(pick)
        if i == len(steps) or save + bound(i, left, taken) <= best_save * (1 + 1e-15):
            return
        sv, dm, v, _k = steps[i]
        if taken.get(v, -1) == -2:
            dfs(i + 1, left, save, taken, pick)
            return
        if dm <= left:
            pick.append(i)
            dfs(i + 1, left - dm, save + sv, taken, pick)
            pick.pop()
        prev = taken.get(v)
        taken[v] = -2                            # refusing a step closes the node's later steps
        dfs(i + 1, left, save, taken, pick)
        if prev is None:
            del taken[v]
        else:
            taken[v] = prev

    dfs(0, room, 0.0, {}, [])
    choice = list(low)
    for i in best_pick:
        choice[steps[i][2]] = steps[i][3]
    return math.fsum(float(costs[v][choice[v]]) for v in range(n)), choice
