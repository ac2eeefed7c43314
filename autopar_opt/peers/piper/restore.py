"""Put the nodes removed by :func:`~autopar_opt.peers.piper.model.reduce_instance` back.

A removed node costs nothing wherever it goes (zero time, weights, memory and
sync, free edges), so it joins the latest stage among its predecessors (the
first stage when it has none). That stage is never after any successor's: the
reduction kept every path through removed nodes as an edge. Its TMPC is the
first one at the stage's ``t`` (all its TMPCs are zero).
"""

from __future__ import annotations

from autopar_opt.peers.piper.model import PiperPlan, PiperStage, Prepared


def _topological(n: int, edges: list[tuple[int, int, float]]) -> list[int]:
    indeg = [0] * n
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, v, _ in edges:
        succ[u].append(v)
        indeg[v] += 1
    order, stack = [], [v for v in range(n) if indeg[v] == 0][::-1]
    while stack:
        u = stack.pop()
        order.append(u)
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                stack.append(v)
    return order


def restore_plan(prep: Prepared, reduced: PiperPlan) -> PiperPlan:
    """``reduced`` (reduced node indices) as a plan over every node of ``prep.inst``."""
    inst = prep.inst
    stage_of = [-1] * inst.n
    stages = [PiperStage([], st.d, st.t, []) for st in reduced.stages]
    for i, st in enumerate(reduced.stages):
        for v, k in zip(st.nodes, st.tmpc):
            orig = prep.keep[v]
            stage_of[orig] = i
            stages[i].nodes.append(orig)
            stages[i].tmpc.append(k)
    preds: list[list[int]] = [[] for _ in range(inst.n)]
    for u, v, _ in inst.edges:
        preds[v].append(u)
    for v in _topological(inst.n, inst.edges):
        if stage_of[v] != -1:
            continue
        i = max((stage_of[u] for u in preds[v]), default=0)
        stage_of[v] = i
        stages[i].nodes.append(v)
        stages[i].tmpc.append(0)
    for st in stages:
        pairs = sorted(zip(st.nodes, st.tmpc))
        st.nodes, st.tmpc = [p[0] for p in pairs], [p[1] for p in pairs]
    return PiperPlan(stages)
