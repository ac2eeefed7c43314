"""The operator space as a search problem for the searchers (random, annealing, Auto-MAP's DQN).

A candidate fixes one *outer* choice — Auto-MAP's replica and pipeline tasks: the logical
mesh a stage's devices form (the data-parallel replicas along one axis, the partitioned
model along the other) and, when pipelining is allowed, the stage count, micro-batches
and the split at layer boundaries — and one configuration per operator (Auto-MAP's
partition task). Every outer choice's tables are the exact solver's
(:func:`~autopar_opt.opspace.pipeline.pipeline_tables`, built on first use); one stage
with one micro-batch is the single-stage objective exactly. Candidates are priced from
the tables (:func:`~autopar_opt.opspace.pipeline.pipeline_objective`); the value a
searcher reports is the independent evaluator's
(:func:`~autopar_opt.cost.operators.evaluate.evaluate_plan` for one stage,
:func:`~autopar_opt.opspace.pipeline.evaluate_pipeline` for pipelines).

Pruning of the partition task (Wang et al. 2020, Auto-MAP, Sec. 4 "task-specific
pruning"): per operator, of the configurations with the same layouts on every edge
(output and every operand) only those not dominated in (time, sync, memory) are kept
(:func:`kept_configs`: a dominated one is never needed by an optimum); the DQN further
restricts operators without parameters to configurations that propagate their inputs'
layouts consistently (:mod:`autopar_opt.learn.op_env`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from autopar_opt.cost.context import StageContext
from autopar_opt.cost.operators.evaluate import OpPlan, evaluate_plan
from autopar_opt.ir.mesh import logical_meshes
from autopar_opt.ir.operators import OperatorGraph
from autopar_opt.ir.training import Schedule
from autopar_opt.learn.space import Priced
from autopar_opt.opspace.pipeline import (PipelineTables, StageSplit, layer_splits, pipeline_objective,
                                          pipeline_tables)


@dataclass(frozen=True)
class Outer:
    """One outer choice: stages, micro-batches, the split and the stage mesh shape."""

    pp: int
    microbatches: int
    stage: tuple[int, ...]
    shape: tuple[int, int]
    replicas: int = 1

    def label(self) -> str:
        mesh = f"{self.shape[0]}x{self.shape[1]}"
        return f"pp={self.pp} c={self.microbatches} mesh=" + (mesh if self.replicas == 1 else
                                                               f"{self.replicas}x({mesh})")


@dataclass
class OpCandidate:
    """An outer choice (index) and a configuration index per operator."""

    config: int
    choice: np.ndarray

    def copy(self) -> "OpCandidate":
        return OpCandidate(self.config, self.choice.copy())

    def key(self) -> tuple:
        return (self.config, self.choice.tobytes())


def kept_configs(t: PipelineTables) -> list[np.ndarray]:
    """Per operator, the configurations not dominated by one with the same layouts on
    every edge (ties: the first kept): Auto-MAP's pruning of equivalent strategies."""
    sig: list[list[list]] = [[[] for _ in range(len(c))] for c in t.configs]
    for (u, v), m in zip(t.edges, t.mats):
        _, rows = np.unique(m, axis=0, return_inverse=True)
        _, cols = np.unique(m, axis=1, return_inverse=True)
        for k, r in enumerate(rows.ravel()):
            sig[u][k].append(("o", v, int(r)))
        for k, c in enumerate(cols.ravel()):
            sig[v][k].append(("i", u, int(c)))
    out = []
    for v, cs in enumerate(t.configs):
        vec = np.stack([t.step[v], t.sync[v], t.weight[v], t.act[v]], axis=1)
        groups: dict[tuple, list[int]] = {}
        for k in range(len(cs)):
            groups.setdefault(tuple(sig[v][k]), []).append(k)
        keep = []
        for members in groups.values():
            for k in members:
                dominated = any(j != k and np.all(vec[j] <= vec[k]) and (np.any(vec[j] < vec[k]) or j < k)
                                for j in members)
                if not dominated:
                    keep.append(k)
        out.append(np.array(sorted(keep), dtype=np.int64))
    return out


class OpSearchSpace:
    """Outer choices of an operator graph and their tables, for the searchers."""

    kind = "operator"

    def __init__(self, graph_for, ctx: StageContext, rule: str = "alpa", reduce_scatter: bool = True,
                 pp_degrees: tuple[int, ...] = (1,), microbatches: tuple[int, ...] = (1,),
                 schedule: Schedule = Schedule.one_f_one_b) -> None:
        self.graph_for, self.ctx, self.rule, self.rs = graph_for, ctx, rule, reduce_scatter
        self.schedule = schedule
        n, batch = ctx.cluster.num_devices, ctx.training.global_batch_size
        self.outers: list[Outer] = []
        self.graphs: dict[int, OperatorGraph] = {}
        for pp in pp_degrees:
            if n % pp:
                continue
            for c in microbatches:
                if batch % c:
                    continue
                g = self._graph(batch // c)
                splits = [tuple([0] * len(g.ops))] if pp == 1 else layer_splits(g, pp)
                for st in splits:
                    for mesh in logical_meshes(n // pp, ctx.cluster.gpus_per_node, one_d_only=rule == "pase",
                                               submeshes=pp == 1):
                        self.outers.append(Outer(pp, c, st, mesh.shape, mesh.replicas))
        self._tables: dict[int, PipelineTables] = {}
        self._kept: dict[int, list[np.ndarray]] = {}
        self.num_ops = len(self._graph(batch).ops)

    def _graph(self, mb: int) -> OperatorGraph:
        if mb not in self.graphs:
            self.graphs[mb] = self.graph_for(mb)
        return self.graphs[mb]

    def __len__(self) -> int:
        return len(self.outers)

    def tables(self, i: int) -> PipelineTables:
        """The tables of outer choice ``i`` (built on first use)."""
        if i not in self._tables:
            o = self.outers[i]
            g = self._graph(self.ctx.training.global_batch_size // o.microbatches)
            self._tables[i] = pipeline_tables(g, self.ctx, StageSplit(o.stage, o.pp, o.microbatches, self.schedule),
                                              o.shape, self.rule, self.rs, o.replicas)
        return self._tables[i]

    def max_actions(self) -> int:
        """The most choices one decision can offer (configurations are enumerated, not priced)."""
        from autopar_opt.ir.mesh import Mesh, enumerate_configs

        most = len(self)
        for o in self.outers:
            mesh = Mesh(o.shape, self.ctx.cluster.gpus_per_node, 0, o.replicas)
            g = self._graph(self.ctx.training.global_batch_size // o.microbatches)
            seen = set()
            for op in g.ops:
                key = (op.dims, op.out_axes, op.fixed, op.reduction)
                if key not in seen:
                    seen.add(key)
                    most = max(most, len(enumerate_configs(op, mesh, self.rule, self.rs)))
        return most

    def kept(self, i: int) -> list[np.ndarray]:
        if i not in self._kept:
            self._kept[i] = kept_configs(self.tables(i))
        return self._kept[i]

    # ---------------------------------------------------------------- pricing
    def price(self, cand: OpCandidate) -> Priced:
        t = self.tables(cand.config)
        value, mem = pipeline_objective(t, [int(k) for k in cand.choice])
        ratio = max(mem) / t.capacity_bytes if t.capacity_bytes > 0 else math.inf
        return Priced(value, ratio, ratio <= 1.0 + 1e-9)

    def plan_value(self, cand: OpCandidate) -> tuple[dict, float, bool, dict]:
        """The plan of the best candidate, priced by the evaluator (one stage) or the tables."""
        t = self.tables(cand.config)
        o = self.outers[cand.config]
        cfgs = [t.configs[v][int(k)] for v, k in enumerate(cand.choice)]
        plan = {"outer": o.label(), "mesh": list(o.shape), "pp": o.pp, "microbatches": o.microbatches,
                "operators": [c.label(op) for op, c in zip(t.graph.ops, cfgs)]}
        if o.pp == 1 and o.microbatches == 1:
            from autopar_opt.ir.mesh import Mesh
            m = evaluate_plan(t.graph, self.ctx, OpPlan(Mesh(o.shape, self.ctx.cluster.gpus_per_node, 0,
                                                             o.replicas), cfgs))
            return plan, m.time_s, m.fits, m.to_dict()
        from autopar_opt.opspace.pipeline import evaluate_pipeline
        value, mem = evaluate_pipeline(t.graph, self.ctx, t.split, o.shape, cfgs)
        fits = max(mem) <= t.capacity_bytes * (1 + 1e-9)
        return plan, value, fits, {"time_s": value, "stage_memory_bytes": mem, "fits_memory": fits}

    # ---------------------------------------------------------------- moves
    def random_candidate(self, rng: np.random.Generator, config: int | None = None) -> OpCandidate:
        i = int(rng.integers(len(self))) if config is None else config
        kept = self.kept(i)
        return OpCandidate(i, np.array([int(rng.choice(k)) for k in kept], dtype=np.int64))

    def neighbour(self, cand: OpCandidate, rng: np.random.Generator) -> OpCandidate:
        """Change one operator's configuration (or, rarely, the outer choice)."""
        if len(self) > 1 and rng.random() < 0.02:
            return self.random_candidate(rng)
        out = cand.copy()
        kept = self.kept(cand.config)
        v = int(rng.integers(len(kept)))
        out.choice[v] = int(rng.choice(kept[v]))
        return out
