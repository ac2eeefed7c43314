"""Pipeline stages whose intra-stage choice is the operator space, for a fixed split.

A :class:`StageSplit` puts every operator of a graph built at the micro-batch size on a
stage (contiguous in the graph's order), ``pp`` stages of ``N/pp`` consecutive devices,
``c`` micro-batches, a schedule. :func:`pipeline_tables` prices every operator on its
stage's logical mesh (:class:`~autopar_opt.cost.operators.tables.TableBuilder` with the
stage's first rank), every edge inside a stage with the redistribution matrix, and every
edge across stages with :func:`~autopar_opt.cost.operators.redistribution.transfer_matrix`
on the link between the two stages (NVLink when both stages sit in one node, else the
network), charged to the boundary just before the consumer's stage (an edge that skips
stages is sent directly, once). :func:`solve_split` solves the MILP of
:mod:`autopar_opt.formulations.opspace_pipeline` (exact, with its bound);
:func:`pipeline_objective` prices a choice from the tables with the same formula
(docs/DESIGN.md §3: ``Σp + Σo + (c−1)·max(p, o) + max g``; per-stage memory with the
schedule's in-flight micro-batches, :func:`~autopar_opt.ir.pipeline.inflight_microbatches`);
:func:`evaluate_pipeline` prices a plan again without the tables (the independent check).

What is not here: the DP for ``pp > 1`` (the max terms break the min-sum; only the MILP
is exact), and the choice of the split itself beyond enumerating candidate splits
(:func:`solve_splits`: every split at the given boundaries, each solved exactly, pruned by
a lower bound) — a stage-assignment MILP over operator graphs is not built.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from autopar_opt.core.interrupts import SearchInterrupted
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.operators.redistribution import transfer_matrix
from autopar_opt.cost.operators.tables import TableBuilder
from autopar_opt.ir.mesh import Config, Mesh
from autopar_opt.ir.operators import OperatorGraph
from autopar_opt.ir.pipeline import inflight_microbatches
from autopar_opt.ir.training import DTYPE_BYTES, Schedule


@dataclass(frozen=True)
class StageSplit:
    """Stage of every operator, stage count, micro-batches, schedule."""

    stage: tuple[int, ...]
    pp: int
    microbatches: int
    schedule: Schedule = Schedule.one_f_one_b

    def problem(self, n_ops: int) -> str | None:
        """Why the split is invalid (None: valid)."""
        if len(self.stage) != n_ops:
            return f"{len(self.stage)} stage indices for {n_ops} operators"
        if any(b < a for a, b in zip(self.stage, self.stage[1:])) or set(self.stage) != set(range(self.pp)):
            return "stages must be contiguous in operator order and every stage non-empty"
        return None


@dataclass
class PipelineTables:
    """Per-micro-batch and per-iteration arrays of a split on one logical mesh shape."""

    graph: OperatorGraph
    split: StageSplit
    shape: tuple[int, int]
    configs: list[list[Config]]
    step: list[np.ndarray]
    sync: list[np.ndarray]
    weight: list[np.ndarray]
    act: list[np.ndarray]
    edges: list[tuple[int, int]]
    mats: list[np.ndarray]
    boundary: list[int | None]
    inflight: list[int]
    capacity_bytes: float
    timings: dict = field(default_factory=dict)
    replicas: int = 1


def stage_link(ctx: StageContext, a: int, b: int, d: int) -> tuple[float, float]:
    """(bytes/s, latency) between stages ``a`` < ``b`` of ``d`` devices each."""
    cl = ctx.cluster
    first, last = a * d, (b + 1) * d - 1
    tier = cl.intra_node if first // cl.gpus_per_node == last // cl.gpus_per_node else cl.inter_node
    return tier.bytes_per_s * ctx.link_efficiency(tier), tier.latency_s


def pipeline_tables(graph: OperatorGraph, ctx: StageContext, split: StageSplit, shape: tuple[int, int],
                    rule: str = "alpa", reduce_scatter: bool = True, replicas: int = 1) -> PipelineTables:
    """Price ``split`` with every stage on a logical mesh of ``shape`` (module docstring);
    ``replicas`` (one stage only): the mesh uses ``N / replicas`` devices, replicated."""
    start = time.perf_counter()
    if replicas > 1 and split.pp > 1:
        raise ValueError("replicated sub-meshes are for one stage")
    d = ctx.cluster.num_devices // split.pp // replicas
    if shape[0] * shape[1] != d:
        raise ValueError(f"mesh {shape} does not have the {d} devices of a stage")
    gpn = ctx.cluster.gpus_per_node
    builders = []
    for i in range(split.pp):
        sctx = replace(ctx, devices=d, first_rank=i * d)
        builders.append(TableBuilder(sctx, Mesh(shape, gpn, i * d, replicas), rule, reduce_scatter))
    ops = graph.ops
    configs = [builders[split.stage[v]].configs(op) for v, op in enumerate(ops)]
    costs = [builders[split.stage[v]].costs(op) for v, op in enumerate(ops)]
    dtype = DTYPE_BYTES.get(ctx.training.dtype, 2)
    merged: dict[tuple[int, int], np.ndarray] = {}
    for u, v, i in graph.edges():
        su, sv = split.stage[u], split.stage[v]
        if su == sv:
            mat = builders[su].edge_matrix(ops[u], ops[v], i)
        else:
            x = ops[v].inputs[i]
            P = builders[su].layouts(ops[u], None, x.take)
            C = builders[sv].layouts(ops[v], i)
            bps, lat = stage_link(ctx, su, sv, d)
            mat = transfer_matrix(P.blocks, P.facs, C.blocks, C.facs, float(x.elements * dtype), bps, lat)
            mat = mat[np.ix_(P.ids, C.ids)]
        merged[(u, v)] = merged.get((u, v), 0) + mat
    edges = list(merged)
    boundary = [None if split.stage[u] == split.stage[v] else split.stage[v] - 1 for u, v in edges]
    inflight = [inflight_microbatches(split.schedule, split.pp, split.microbatches, i) for i in range(split.pp)]
    return PipelineTables(graph, split, shape, configs,
                          [np.array([c.step_s for c in cs]) for cs in costs],
                          [np.array([c.sync_s for c in cs]) for cs in costs],
                          [np.array([c.param_bytes for c in cs]) for cs in costs],
                          [np.array([c.act_bytes for c in cs]) for cs in costs],
                          edges, [merged[e] for e in edges], boundary, inflight, ctx.capacity_bytes,
                          {"tables_s": time.perf_counter() - start}, replicas)


def pipeline_objective(t: PipelineTables, choice: list[int]) -> tuple[float, list[float]]:
    """Iteration time of ``choice`` and each stage's memory (module docstring)."""
    pp, st = t.split.pp, t.split.stage
    p, g, mem = [0.0] * pp, [0.0] * pp, [0.0] * pp
    o = [0.0] * max(pp - 1, 0)
    for v, k in enumerate(choice):
        p[st[v]] += float(t.step[v][k])
        g[st[v]] += float(t.sync[v][k])
        mem[st[v]] += float(t.weight[v][k]) + t.inflight[st[v]] * float(t.act[v][k])
    for (u, v), m, b in zip(t.edges, t.mats, t.boundary):
        x = float(m[choice[u], choice[v]])
        if b is None:
            p[st[u]] += x
        else:
            o[b] += x
    bott = max(p + o)
    return math.fsum(p) + math.fsum(o) + (t.split.microbatches - 1) * bott + max(g), mem


@dataclass
class SplitOutcome:
    """One (split, mesh shape): status, value, bound, choice."""

    tables: PipelineTables
    status: str
    value: float | None
    lower_bound: float
    choice: list[int] | None
    wall_time_s: float
    message: str = ""


def solve_split(t: PipelineTables, solver: str = "auto", time_limit_s: float | None = None,
                rel_gap: float = 1e-9, memory_budget=None) -> SplitOutcome:
    """The MILP of the split (exact); value re-priced by :func:`pipeline_objective`. The
    MILP is counted first (:func:`pipeline_matrix_size`) and not built past
    ``memory_budget`` (default half the RAM): the split keeps ``bound`` and no plan."""
    from autopar_opt.core.memory_budget import MemoryBudget
    from autopar_opt.formulations.opspace import decode
    from autopar_opt.formulations.opspace_pipeline import build_pipeline_matrix, pipeline_matrix_size
    from autopar_opt.solvers.matrix import matrix_backend, solve_matrix

    start = time.monotonic()
    size = pipeline_matrix_size([len(a) for a in t.step], list(t.split.stage), t.edges, t.mats,
                                t.boundary, t.split.pp, t.capacity_bytes)
    budget = memory_budget if memory_budget is not None else MemoryBudget.default()
    refusal = budget.refuses(size, "the MILP")
    if refusal:
        return SplitOutcome(t, "no_plan", None, split_lower_bound(t), None, time.monotonic() - start,
                            refusal)
    form, offs, _, scale = build_pipeline_matrix(
        t.step, t.sync, t.weight, t.act, list(t.split.stage), t.edges, t.mats, t.boundary, t.split.pp,
        t.split.microbatches, t.inflight, t.capacity_bytes)
    res, x = solve_matrix(form, matrix_backend(solver), time_limit_s=time_limit_s,
                          rel_gap=rel_gap)
    bound = res.lower_bound * scale if math.isfinite(res.lower_bound) else res.lower_bound
    if res.termination.value == "infeasible":
        return SplitOutcome(t, "infeasible", None, math.inf, None, time.monotonic() - start, res.message)
    if x is None:
        return SplitOutcome(t, "no_plan", None, bound, None, time.monotonic() - start, res.message)
    choice = decode(x, offs)
    value, _ = pipeline_objective(t, choice)
    status = "optimal" if res.termination.value == "optimal" else "feasible"
    return SplitOutcome(t, status, value, min(bound, value), choice, time.monotonic() - start, res.message)


def split_lower_bound(t: PipelineTables) -> float:
    """``Σ q_i + (c−1)·max q_i + max_i Σ min G`` with ``q_i = Σ_{v∈i} min A_v``: redistribution
    and transfers are never negative."""
    pp, st = t.split.pp, t.split.stage
    q, g = [0.0] * pp, [0.0] * pp
    for v in range(len(t.step)):
        q[st[v]] += float(t.step[v].min())
        g[st[v]] += float(t.sync[v].min())
    return math.fsum(q) + (t.split.microbatches - 1) * max(q) + max(g)


def layer_starts(graph: OperatorGraph) -> list[int]:
    """Index of the first operator of every run of consecutive operators of one layer: the
    places a stage may start (:func:`layer_splits`; operators before the first named layer
    start none); ``len`` of it is the most stages a split at layer boundaries can have."""
    starts, prev = [], None
    for v, op in enumerate(graph.ops):
        if op.layer != prev:
            starts.append(v)
            prev = op.layer
    return starts


def layer_splits(graph: OperatorGraph, pp: int) -> list[tuple[int, ...]]:
    """Every split of the operators into ``pp`` contiguous stages at layer boundaries (none
    when ``pp`` exceeds ``len(layer_starts(graph))``)."""
    starts = layer_starts(graph)
    out = []
    for cut in itertools.combinations(range(1, len(starts)), pp - 1):
        bounds = [starts[c] for c in cut]
        out.append(tuple(sum(v >= b for b in bounds) for v in range(len(graph.ops))))
    return out


@dataclass
class PipelineSearch:
    """Every (pp, micro-batches, split, mesh shape) tried: its outcome or the bound that pruned it."""

    outcomes: list[SplitOutcome]
    pruned: list[tuple[StageSplit, tuple[int, int], float]]   # (split, mesh shape, bound)
    best: SplitOutcome | None
    wall_time_s: float
    #: the stop signal that ended the search early (None: it ran to the end or the time limit)
    interrupted: int | None = None

    @property
    def lower_bound(self) -> float:
        bounds = [o.lower_bound for o in self.outcomes] + [b for _, _, b in self.pruned]
        return min(bounds, default=math.inf)


def solve_pipeline(graph_for, ctx: StageContext, pp_degrees: list[int], microbatches: list[int],
                   schedule: Schedule = Schedule.one_f_one_b, rule: str = "alpa",
                   reduce_scatter: bool = True, solver: str = "auto",
                   time_limit_s: float | None = None, memory_budget=None) -> PipelineSearch:
    """Joint inter/intra search over stage splits at layer boundaries (module docstring).

    ``graph_for(microbatch_samples)`` builds the graph at a micro-batch size; every
    ``pp`` dividing the devices, ``c`` dividing the global batch, split at layer
    boundaries and logical mesh shape of a stage is a configuration: solved exactly by
    :func:`solve_split` unless :func:`split_lower_bound` proves it cannot beat the
    incumbent. The best plan and the least bound over all configurations certify the
    answer for this space."""
    from autopar_opt.ir.mesh import logical_meshes

    start = time.monotonic()
    n, batch = ctx.cluster.num_devices, ctx.training.global_batch_size
    candidates = []
    for pp in pp_degrees:
        if n % pp:
            continue
        d = n // pp
        for c in microbatches:
            if batch % c:
                continue
            g = graph_for(batch // c)
            splits = [tuple([0] * len(g.ops))] if pp == 1 else layer_splits(g, pp)
            for st in splits:
                for mesh in logical_meshes(d, ctx.cluster.gpus_per_node, one_d_only=rule == "pase",
                                           submeshes=pp == 1):
                    t = pipeline_tables(g, ctx, StageSplit(st, pp, c, schedule), mesh.shape, rule,
                                        reduce_scatter, mesh.replicas)
                    candidates.append((split_lower_bound(t), len(candidates), t))
    candidates.sort(key=lambda x: (x[0], x[1]))
    outcomes, pruned, best = [], [], None
    stopped: str | None = None
    interrupted: int | None = None
    tried = False
    for lb, _, t in candidates:
        if best is not None and lb >= best.value * (1 - 1e-12):
            pruned.append((t.split, t.shape, lb))
            continue
        out_of_time = time_limit_s is not None and (best is not None or tried or time_limit_s <= 0) \
            and time.monotonic() - start >= time_limit_s
        if stopped is None and out_of_time:
            stopped = "not solved: the time limit was spent"
        if stopped is not None:            # its bound keeps the certificate valid
            outcomes.append(SplitOutcome(t, "no_plan", None, lb, None, 0.0, stopped))
            continue
        left = None if time_limit_s is None else max(0.1, time_limit_s - (time.monotonic() - start))
        try:
            out = solve_split(t, solver, left, memory_budget=memory_budget)
        except SearchInterrupted as exc:   # a stop signal: keep what is proven, answer now
            interrupted, stopped = exc.signum, f"not solved: stopped by signal {exc.signum}"
            outcomes.append(SplitOutcome(t, "no_plan", None, lb, None, 0.0, stopped))
            continue
        outcomes.append(out)
        tried = True
        if out.value is not None and (best is None or out.value < best.value):
            best = out
    return PipelineSearch(outcomes, pruned, best, time.monotonic() - start, interrupted)


@dataclass
class PipelineMetrics:
    """A pipeline plan's iteration time (the tables' formula) and each stage's memory."""

    time_s: float
    stage_memory_bytes: list[float]
    capacity_bytes: float

    @property
    def fits(self) -> bool:
        return max(self.stage_memory_bytes) <= self.capacity_bytes * (1 + 1e-9)

    def to_dict(self) -> dict:
        return {"time_s": self.time_s, "stage_memory_bytes": self.stage_memory_bytes,
                "memory_bytes": max(self.stage_memory_bytes), "capacity_bytes": self.capacity_bytes,
                "fits_memory": self.fits}


def pipeline_document(search: PipelineSearch, rel_gap: float, ctx: StageContext
                      ) -> tuple[dict, PipelineMetrics | None]:
    """The plan, certificate rows, bound and status of a pipeline search for plan.json; the
    plan re-priced by :func:`evaluate_pipeline`."""
    rows = [{"pp": o.tables.split.pp, "microbatches": o.tables.split.microbatches,
             "schedule": o.tables.split.schedule.value, "mesh": list(o.tables.shape),
             "replicas": o.tables.replicas,
             "stages": _stage_sizes(o.tables.split), "status": o.status, "value": o.value,
             "lower_bound": o.lower_bound, "wall_time_s": round(o.wall_time_s, 4)} for o in search.outcomes]
    rows += [{"pp": s.pp, "microbatches": s.microbatches, "schedule": s.schedule.value, "mesh": list(shape),
              "stages": _stage_sizes(s), "status": "pruned", "value": None, "lower_bound": lb,
              "wall_time_s": 0.0} for s, shape, lb in search.pruned]
    best = search.best
    bound = search.lower_bound
    if best is None:
        status = "infeasible" if math.isinf(bound) and bound > 0 else "no_plan"
        return {"plan": None, "lower_bound": bound, "status": status, "configurations": rows}, None
    t = best.tables
    value, mem = evaluate_pipeline(t.graph, ctx, t.split, t.shape,
                                   [t.configs[v][k] for v, k in enumerate(best.choice)])
    gap = (value - bound) / value if value else 0.0
    status = "optimal" if gap <= rel_gap + 1e-12 else "feasible"
    stages = []
    for i in range(t.split.pp):
        stages.append({"stage": i, "operators": [
                {"name": op.name, "layer": op.layer, "role": op.role,
                 **t.configs[v][best.choice[v]].to_dict(op)}
                for v, op in enumerate(t.graph.ops) if t.split.stage[v] == i]})
    plan = {"pp": t.split.pp, "microbatches": t.split.microbatches, "schedule": t.split.schedule.value,
            "mesh": list(t.shape), "replicas": t.replicas, "stages": stages}
    return ({"plan": plan, "lower_bound": bound, "status": status, "configurations": rows},
            PipelineMetrics(value, mem, t.capacity_bytes))


def _stage_sizes(split: StageSplit) -> list[int]:
    return [sum(1 for s in split.stage if s == i) for i in range(split.pp)]


def evaluate_pipeline(graph: OperatorGraph, ctx: StageContext, split: StageSplit, shape: tuple[int, int],
                      configs: list[Config]) -> tuple[float, list[float]]:
    """Price a pipeline plan from scratch (no tables): every operator with a fresh
    :class:`~autopar_opt.cost.operators.pricing.OpPricer` on its stage's mesh, every edge
    inside a stage with the device-by-device redistribution and every edge across stages
    with the device-by-device transfer, then docs/DESIGN.md §3's latency; returns the
    iteration time and each stage's memory (the independent check of
    :func:`pipeline_objective`)."""
    from autopar_opt.cost.operators.pricing import OpPricer
    from autopar_opt.cost.operators.redistribution import links_of, redistribution_time, transfer_time
    from autopar_opt.ir.mesh import output_blocks, tensor_blocks

    pp, st, c = split.pp, split.stage, split.microbatches
    d = ctx.cluster.num_devices // pp
    gpn = ctx.cluster.gpus_per_node
    meshes = [Mesh(shape, gpn, i * d) for i in range(pp)]
    pricers = [OpPricer(replace(ctx, devices=d, first_rank=i * d), meshes[i]) for i in range(pp)]
    inflight = [inflight_microbatches(split.schedule, pp, c, i) for i in range(pp)]
    dtype = DTYPE_BYTES.get(ctx.training.dtype, 2)
    p, g, mem = [0.0] * pp, [0.0] * pp, [0.0] * pp
    o = [0.0] * max(pp - 1, 0)
    for v, (op, cfg) in enumerate(zip(graph.ops, configs)):
        cost = pricers[st[v]].cost(op, cfg)
        p[st[v]] += cost.step_s
        g[st[v]] += cost.sync_s
        mem[st[v]] += cost.param_bytes + inflight[st[v]] * cost.act_bytes
    for u, v, i in graph.edges():
        x = graph.ops[v].inputs[i]
        P, Pf = output_blocks(graph.ops[u], configs[u], meshes[st[u]], x.take)
        C, Cf = tensor_blocks(graph.ops[v], configs[v], meshes[st[v]], x.axes)
        nbytes = float(x.elements * dtype)
        if st[u] == st[v]:
            links = links_of(ctx, meshes[st[u]])
            p[st[u]] += redistribution_time(P, Pf, C, Cf, nbytes, links) + \
                redistribution_time(C, Cf, P, Pf, nbytes, links)
        else:
            bps, lat = stage_link(ctx, st[u], st[v], d)
            o[st[v] - 1] += transfer_time(P, Pf, C, Cf, nbytes, bps, lat)
    return math.fsum(p) + math.fsum(o) + (c - 1) * max(p + o) + max(g), mem
