"""Independent evaluation of a Piper plan, written from the peers' README formula.

Source: ``tests/data/peers/piper`` README, "Objective (exactly as
``Graph::getTPSForResult`` computes it)" — Tarnawski et al., NeurIPS 2021,
§3, and ``algo.cpp``. For stage ``i`` with ``σ_i = d_i + … + d_m`` and
``y_i = ceil(σ_i / d_i)``::

    P_i   = Σ_{v∈S_i} p(τ_v)
    X_i   = Σ_{v∈S_i} [ Σ_{(u,v), u∉S_i} 2(c(u,v) + syncTimeFw(τ_v)[u])
                      + Σ_{(v,w), w∉S_i} 2(c(v,w) + syncTimeBw(τ_v)[w]) ]
    R_i   = Σ_{v∈S_i} 4(d_i − 1)·w(τ_v) / d_i / N
    Mem_i = Σ_{v∈S_i} a(τ_v)·y_i + b(τ_v)
    TPS_i = (X_i/d_i + R_i)/B + P_i/d_i,       TPS = max_i TPS_i

This module reads the instance as loaded (every node, no reduction) and
shares no code with the solvers, so ``evaluate(plan) == solver objective`` is
a real check.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar_opt.peers.piper.format import PiperInstance
from autopar_opt.peers.piper.model import PiperPlan


class PiperPlanError(ValueError):
    """The plan breaks a rule of Piper's plan space (message says which)."""


@dataclass
class PiperStageMetrics:
    tps: float
    memory_bytes: float
    y: int
    compute: float
    comm: float
    dp_sync: float


@dataclass
class PiperMetrics:
    tps: float
    feasible: bool
    devices: int
    stages: list[PiperStageMetrics]


def check_plan(inst: PiperInstance, plan: PiperPlan) -> list[int]:
    """Validate the plan's structure; returns the stage of every node."""
    stage_of = [-1] * inst.n
    if not plan.stages:
        raise PiperPlanError("a plan needs at least one stage")
    for i, st in enumerate(plan.stages):
        if not st.nodes:
            raise PiperPlanError(f"stage {i} is empty")
        if st.d < 1 or inst.microbatches % st.d:
            raise PiperPlanError(f"stage {i}: d = {st.d} must be >= 1 and divide N = {inst.microbatches}")
        if st.t not in inst.tmpcs:
            raise PiperPlanError(f"stage {i}: no node has TMPCs for t = {st.t}")
        if len(st.tmpc) != len(st.nodes):
            raise PiperPlanError(f"stage {i}: one TMPC per node is needed")
        for v, k in zip(st.nodes, st.tmpc):
            if not 0 <= v < inst.n or stage_of[v] != -1:
                raise PiperPlanError(f"stage {i}: node index {v} is unknown or in two stages")
            stage_of[v] = i
            if not 0 <= k < len(inst.tmpcs[st.t][v]):
                raise PiperPlanError(f"stage {i}: node id {inst.ids[v]} has no TMPC {k} for t = {st.t}")
    if -1 in stage_of:
        raise PiperPlanError(f"node id {inst.ids[stage_of.index(-1)]} is in no stage")
    for u, v, _ in inst.edges:
        if stage_of[u] > stage_of[v]:
            raise PiperPlanError(f"edge {inst.ids[u]} -> {inst.ids[v]} goes backwards "
                                 f"(stage {stage_of[u]} -> {stage_of[v]})")
    if sum(st.t * st.d for st in plan.stages) > inst.devices:
        raise PiperPlanError(f"the plan uses {sum(st.t * st.d for st in plan.stages)} devices, "
                             f"more than k = {inst.devices}")
    if sum(st.d for st in plan.stages) > inst.microbatches:
        raise PiperPlanError(f"sum of d exceeds N = {inst.microbatches}")
    return stage_of


def evaluate_piper(inst: PiperInstance, plan: PiperPlan) -> PiperMetrics:
    """Price ``plan`` with the README's formula (raises PiperPlanError on a malformed plan)."""
    stage_of = check_plan(inst, plan)
    B, N, out = inst.bandwidth, inst.microbatches, []
    sigma = 0
    sigmas = []
    for st in reversed(plan.stages):
        sigma += st.d
        sigmas.append(sigma)
    sigmas.reverse()
    for i, st in enumerate(plan.stages):
        d = st.d
        y = -(-sigmas[i] // d)
        P = X = R = mem = 0.0
        for v, k in zip(st.nodes, st.tmpc):
            tm = inst.tmpcs[st.t][v][k]
            P += tm.p
            R += 4 * (d - 1) * tm.w / d / N
            mem += tm.a * y + tm.b
        for u, w, c in inst.edges:
            if stage_of[w] == i and stage_of[u] != i:
                X += 2 * (c + inst.tmpcs[st.t][w][st.tmpc[st.nodes.index(w)]].fw[u])
            if stage_of[u] == i and stage_of[w] != i:
                X += 2 * (c + inst.tmpcs[st.t][u][st.tmpc[st.nodes.index(u)]].bw[w])
        tps = (X / d + R) / B + P / d
        out.append(PiperStageMetrics(tps, mem, y, P / d, X / d / B, R / B))
    feasible = all(s.memory_bytes <= inst.memory_bytes * (1 + 1e-12) for s in out)
    return PiperMetrics(max(s.tps for s in out), feasible,
                        sum(st.t * st.d for st in plan.stages), out)
