"""Independent evaluator of an operator-sharding plan (never reads the solver's tables).

A plan is a mesh and one configuration per operator. :func:`evaluate_plan` prices it
from scratch: every operator with :class:`~autopar_opt.cost.operators.pricing.OpPricer` (a fresh
instance), every edge with the device-by-device reference
:func:`~autopar_opt.cost.operators.redistribution.redistribution_time` on the blocks
:func:`~autopar_opt.ir.mesh.tensor_blocks` gives (forward producer → consumer,
backward consumer → producer), summed over every operand in graph order. The DP and
the MILP read vectorised, grouped, cached tables; their objective for a decoded plan
must equal this value (tests check it to round-off).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from autopar_opt.cost.context import StageContext
from autopar_opt.cost.operators.pricing import ConfigCost, OpPricer
from autopar_opt.cost.operators.redistribution import links_of, redistribution_time
from autopar_opt.ir.operators import OperatorGraph
from autopar_opt.ir.training import DTYPE_BYTES
from autopar_opt.ir.mesh import Config, Mesh, output_blocks, tensor_blocks


@dataclass
class OpPlan:
    """A mesh and one configuration per operator (graph order)."""

    mesh: Mesh
    configs: list[Config]

    def to_dict(self, graph: OperatorGraph) -> dict:
        return {"mesh": list(self.mesh.shape), "replicas": self.mesh.replicas,
                "operators": [{"name": op.name, "layer": op.layer, "role": op.role, **c.to_dict(op)}
                              for op, c in zip(graph.ops, self.configs)]}


@dataclass
class PlanMetrics:
    """What a plan costs: iteration time and its parts, memory per device, per operator.

    ``sync_s`` is the once-per-iteration part, ``dp_s`` (exposed gradient all-reduce)
    plus ``optimizer_s`` (the optimizer step over the local parameters), both given."""

    time_s: float
    compute_s: float
    collective_s: float
    sync_s: float
    redistribution_s: float
    memory_bytes: float
    capacity_bytes: float
    per_op: list[ConfigCost] = field(default_factory=list)
    per_edge: list[tuple[int, int, float]] = field(default_factory=list)
    dp_s: float = 0.0
    optimizer_s: float = 0.0

    @property
    def fits(self) -> bool:
        return self.memory_bytes <= self.capacity_bytes * (1 + 1e-9)

    def to_dict(self) -> dict:
        return {"time_s": self.time_s, "compute_s": self.compute_s, "collective_s": self.collective_s,
                "sync_s": self.sync_s, "dp_s": self.dp_s, "optimizer_s": self.optimizer_s,
                "redistribution_s": self.redistribution_s,
                "memory_bytes": self.memory_bytes, "capacity_bytes": self.capacity_bytes,
                "fits_memory": self.fits}


def evaluate_plan(graph: OperatorGraph, ctx: StageContext, plan: OpPlan) -> PlanMetrics:
    """Price ``plan`` (module docstring)."""
    pricer = OpPricer(ctx, plan.mesh)
    links = links_of(ctx, plan.mesh)
    dtype = DTYPE_BYTES.get(ctx.training.dtype, 2)
    costs = [pricer.cost(op, c) for op, c in zip(graph.ops, plan.configs)]
    edges = []
    for u, v, i in graph.edges():
        prod, cons = graph.ops[u], graph.ops[v]
        P, Pf = output_blocks(prod, plan.configs[u], plan.mesh, cons.inputs[i].take)
        C, Cf = tensor_blocks(cons, plan.configs[v], plan.mesh, cons.inputs[i].axes)
        nbytes = float(cons.inputs[i].elements * dtype)
        t = redistribution_time(P, Pf, C, Cf, nbytes, links) + redistribution_time(C, Cf, P, Pf, nbytes, links)
        edges.append((u, v, t))
    comp = math.fsum(c.compute_s for c in costs)
    coll = math.fsum(c.collective_s for c in costs)
    dp = math.fsum(c.dp_s for c in costs)
    step = math.fsum(c.optimizer_s for c in costs)
    sync = math.fsum(c.sync_s for c in costs)     # as before: the same sum, bit for bit
    red = math.fsum(t for _, _, t in edges)
    return PlanMetrics(comp + coll + sync + red, comp, coll, sync, red,
                       math.fsum(c.memory_bytes for c in costs), ctx.capacity_bytes, costs, edges,
                       dp_s=dp, optimizer_s=step)
