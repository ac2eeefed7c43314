"""Cost tables of operator-level sharding on one mesh: what the DP and the MILP read.

For every operator its configurations (:func:`~autopar_opt.ir.mesh.enumerate_configs`)
with their costs (:class:`~autopar_opt.cost.operators.pricing.OpPricer`), and for every edge
``(u, v)`` the redistribution matrix ``R[k_u, k_v]``: forward (producer layout →
consumer layout) plus backward (the complete gradient back), summed over the operands
``v`` reads from ``u`` (:mod:`autopar_opt.cost.operators.redistribution`). The objective of a
plan ``k`` (one configuration per operator) for one training iteration is

    ``T(k) = Σ_v A_v[k_v] + Σ_(u,v) R_uv[k_u, k_v]``,   ``A = step + sync``,

and its memory per device ``M(k) = Σ_v W_v[k_v]`` (parameters with their gradients and
optimizer state, and the activations kept for the backward pass: with one stage every
operator's activations are alive at the end of the forward pass).

Identical operators (same kind, dimensions, operand structure: the layers of a
transformer) are priced once; layouts are grouped before pricing an edge, so a matrix
costs one redistribution per pair of distinct layouts, shared by every edge between
operators of the same structure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from autopar_opt.cost.context import StageContext
from autopar_opt.cost.operators.pricing import ConfigCost, OpPricer
from autopar_opt.cost.operators.redistribution import Exchange, exchange, links_of
from autopar_opt.ir.operators import Operand, Operator, OperatorGraph
from autopar_opt.ir.training import DTYPE_BYTES
from autopar_opt.ir.mesh import Config, Mesh, enumerate_configs, output_blocks, tensor_blocks


def op_signature(op: Operator) -> tuple:
    """Everything that decides an operator's costs and layouts (not its name or place)."""
    ins = tuple((x.shape, x.axes, x.param, x.source is not None) for x in op.inputs)
    return (op.kind, op.dims, ins, op.out_shape, op.out_axes, op.flops, tuple(sorted(op.fixed)),
            op.stats)


@dataclass
class LayoutSet:
    """Distinct layouts of one tensor over an operator's configurations."""

    ids: np.ndarray            # [K] layout id of each configuration
    blocks: np.ndarray         # [G, N, A]
    facs: np.ndarray           # [G, A]
    key: tuple                 # hashable identity of the set

    def __len__(self) -> int:
        return len(self.blocks)


@dataclass
class OpTables:
    """Arrays of one (graph, mesh, rule): see the module docstring."""

    graph: OperatorGraph
    mesh: Mesh
    rule: str
    configs: list[list[Config]]
    costs: list[list[ConfigCost]]
    time: list[np.ndarray]                 # A_v: step + sync per configuration
    memory: list[np.ndarray]               # W_v: bytes per device
    edges: list[tuple[int, int]]           # distinct (producer, consumer) pairs
    operands: list[tuple[int, ...]]        # operand indices of the consumer per edge
    redistribution: list[np.ndarray]       # R_uv [K_u, K_v]
    capacity_bytes: float
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def sizes(self) -> list[int]:
        return [len(c) for c in self.configs]

    def objective(self, choice: list[int]) -> float:
        """``T(k)`` from the tables (the DP/MILP objective; the evaluator recomputes it)."""
        t = math.fsum(float(a[k]) for a, k in zip(self.time, choice))
        return t + math.fsum(float(r[choice[u], choice[v]])
                             for (u, v), r in zip(self.edges, self.redistribution))

    def memory_of(self, choice: list[int]) -> float:
        return math.fsum(float(m[k]) for m, k in zip(self.memory, choice))

    def index_of(self, v: int, cfg: Config) -> int:
        return self.configs[v].index(cfg)

    def subset(self, keep: list[np.ndarray]) -> "OpTables":
        """The tables restricted to the configurations ``keep[v]`` of every operator
        (indices into this table; the caller maps choices back)."""
        return OpTables(self.graph, self.mesh, self.rule, [[c[k] for k in ks] for c, ks in zip(self.configs, keep)],
                        [[c[k] for k in ks] for c, ks in zip(self.costs, keep)],
                        [a[ks] for a, ks in zip(self.time, keep)], [m[ks] for m, ks in zip(self.memory, keep)],
                        list(self.edges), list(self.operands),
                        [r[np.ix_(keep[u], keep[v])] for (u, v), r in zip(self.edges, self.redistribution)],
                        self.capacity_bytes, dict(self.timings))


class TableBuilder:
    """Builds :class:`OpTables`; caches costs and layouts by operator signature."""

    def __init__(self, ctx: StageContext, mesh: Mesh, rule: str = "alpa",
                 reduce_scatter: bool = True) -> None:
        self.ctx, self.mesh, self.rule, self.rs = ctx, mesh, rule, reduce_scatter
        self.pricer = OpPricer(ctx, mesh)
        self.links = links_of(ctx, mesh)
        self.dtype = DTYPE_BYTES.get(ctx.training.dtype, 2)
        self._configs: dict[tuple, list[Config]] = {}
        self._costs: dict[tuple, list[ConfigCost]] = {}
        self._layouts: dict[tuple, LayoutSet] = {}
        self._exchanges: dict[tuple, tuple[Exchange, Exchange]] = {}
        self._mats: dict[tuple, np.ndarray] = {}

    def configs(self, op: Operator) -> list[Config]:
        sig = op_signature(op)
        if sig not in self._configs:
            self._configs[sig] = enumerate_configs(op, self.mesh, self.rule, self.rs)
        return self._configs[sig]

    def costs(self, op: Operator) -> list[ConfigCost]:
        sig = op_signature(op)
        if sig not in self._costs:
            self._costs[sig] = [self.pricer.cost(op, c) for c in self.configs(op)]
        return self._costs[sig]

    def layouts(self, op: Operator, operand: int | None, take: tuple[int, int] | None = None) -> LayoutSet:
        """Layouts of ``op``'s output (``operand`` None; ``take``: of one slice of it, the
        sliced axis dropped) or of one of its operands."""
        key = (op_signature(op), operand, take)
        if key not in self._layouts:
            axes = op.out_axes if operand is None else op.inputs[operand].axes
            seen: dict[tuple, int] = {}
            ids, reps = [], []
            for cfg in self.configs(op):
                blocks, facs = output_blocks(op, cfg, self.mesh, take) if operand is None else \
                    tensor_blocks(op, cfg, self.mesh, axes)
                k = (blocks.tobytes(), facs)
                if k not in seen:
                    seen[k] = len(reps)
                    reps.append((blocks, facs))
                ids.append(seen[k])
            n, a = self.mesh.devices, len(axes) - (take is not None)
            self._layouts[key] = LayoutSet(
                np.array(ids, dtype=np.int64),
                np.stack([b for b, _ in reps]) if reps else np.zeros((0, n, a), np.int64),
                np.array([f for _, f in reps], dtype=np.int64).reshape(len(reps), a),
                tuple(seen))
        return self._layouts[key]

    def edge_matrix(self, prod: Operator, cons: Operator, operand: int) -> np.ndarray:
        """R for one operand: forward + backward redistribution, ``[K_u, K_v]``."""
        x: Operand = cons.inputs[operand]
        nbytes = float(x.elements * self.dtype)
        P, C = self.layouts(prod, None, x.take), self.layouts(cons, operand)
        pair = (P.key, C.key)
        key = (pair, nbytes)
        if key not in self._mats:
            if pair not in self._exchanges:
                self._exchanges[pair] = (exchange(P.blocks, P.facs, C.blocks, C.facs, self.links),
                                         exchange(C.blocks, C.facs, P.blocks, P.facs, self.links))
            fwd, bwd = self._exchanges[pair]
            self._mats[key] = fwd.times(nbytes, self.links) + bwd.times(nbytes, self.links).T
        return self._mats[key][np.ix_(P.ids, C.ids)]

    def build(self, graph: OperatorGraph, edges: bool = True) -> OpTables:
        """The tables; ``edges`` False leaves the redistribution matrices out (a cheap
        first look: the unary part alone gives a lower bound, :func:`unary_bound`)."""
        import time

        t0 = time.perf_counter()
        configs = [self.configs(op) for op in graph.ops]
        costs = [self.costs(op) for op in graph.ops]
        t1 = time.perf_counter()
        merged: dict[tuple[int, int], tuple[list[int], np.ndarray]] = {}
        for u, v, i in (graph.edges() if edges else []):
            mat = self.edge_matrix(graph.ops[u], graph.ops[v], i)
            if (u, v) in merged:
                ops, acc = merged[(u, v)]
                merged[(u, v)] = (ops + [i], acc + mat)
            else:
                merged[(u, v)] = ([i], mat)
        t2 = time.perf_counter()
        return OpTables(
            graph=graph, mesh=self.mesh, rule=self.rule, configs=configs, costs=costs,
            time=[np.array([c.step_s + c.sync_s for c in cs]) for cs in costs],
            memory=[np.array([c.memory_bytes for c in cs]) for cs in costs],
            edges=list(merged), operands=[tuple(o) for o, _ in merged.values()],
            redistribution=[m for _, m in merged.values()],
            capacity_bytes=self.ctx.capacity_bytes,
            timings={"configs_costs_s": t1 - t0, "edges_s": t2 - t1})


def unary_bound(tables: OpTables) -> float:
    """``Σ_v min_k A_v[k]``: a lower bound on ``T`` (redistribution is never negative)."""
    return math.fsum(float(a.min()) for a in tables.time if len(a))


def bound_fixing(tables: OpTables, incumbent: float) -> list[np.ndarray]:
    """Per operator, the configurations that can appear in a plan better than ``incumbent``.

    A plan with ``v`` in configuration ``k`` costs at least ``Σ_w min A_w − min A_v +
    A_v[k]`` (every other term at its least, redistribution never negative); when that
    exceeds the incumbent, ``k`` is in no better plan and is dropped (reduced-cost fixing
    with the unary bound; ties are kept)."""
    slack = incumbent - unary_bound(tables)
    return [np.flatnonzero(a - a.min() <= slack + 1e-12 * max(abs(incumbent), 1e-30)) for a in tables.time]


def build_tables(graph: OperatorGraph, ctx: StageContext, mesh: Mesh, rule: str = "alpa",
                 reduce_scatter: bool = True) -> OpTables:
    """The tables of ``graph`` on ``mesh`` (module docstring)."""
    return TableBuilder(ctx, mesh, rule, reduce_scatter).build(graph)
