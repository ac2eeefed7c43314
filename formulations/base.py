"""What every formulation module shares: its error, the input check, pricing an assignment, the matrix-backed interface."""

from __future__ import annotations

from autopar_opt.core.assignment import Assignment
from autopar_opt.core.matrix import MatrixForm
from autopar_opt.cost.tables import CostTables
from autopar_opt.ir.plan import Plan


class MatrixBacked:
    """The formulation interface of a model that is one :class:`MatrixForm`
    (``self.matrix``): what the backend solves, and the seconds it took to build."""

    @property
    def model(self) -> MatrixForm:
        """What the backend solves (the formulation interface)."""
        return self.matrix

    @property
    def build_s(self) -> float:
        """Seconds to produce :attr:`matrix` (structure step included when built)."""
        return self.matrix.compile_s


class FormulationError(ValueError):
    """A formulation cannot be built or read back (the message says why)."""


def check_tables(tables: CostTables) -> None:
    """Raise :class:`FormulationError` when no model can be built from ``tables``."""
    if tables.pp > tables.num_layers:
        raise FormulationError(f"pp={tables.pp} stages need at least {tables.pp} layers "
                               f"(the model has {tables.num_layers})")
    empty = [tables.graph.layers[u].name for u, s in enumerate(tables.strategies) if not s]
    if empty:
        raise FormulationError(f"no valid strategy for layers {empty[:5]} on "
                               f"{tables.devices_per_stage} devices per stage: widen the search space")


def start_assignment(tables: CostTables, start: Plan | Assignment) -> Assignment:
    """A warm start as an :class:`Assignment` (FormulationError when it does not fit)."""
    if isinstance(start, Assignment):
        return start
    try:
        return tables.assignment_of(start)
    except ValueError as exc:
        raise FormulationError(str(exc)) from None


def price_assignment(tables: CostTables, stage: list[int], ks: list[int]):
    """Stage times ``p``, transfers ``o``, syncs ``g`` of an assignment from the
    tables (the semantics of ``evaluate``), plus each edge's in-stage cost and
    per-tier cross cost (the values of the warm-start writer)."""
    pp = tables.pp
    p, g, o = [0.0] * pp, [0.0] * pp, [0.0] * (pp - 1)
    for u, (i, k) in enumerate(zip(stage, ks)):
        p[i] += float(tables.time[u][k])
        g[i] += float(tables.sync[u][k])
    rin, rx = [], []
    for e, (u, v) in enumerate(tables.edges):
        rin.append(float(tables.reshard[e][ks[u], ks[v]]))
        rx.append({"intra": float(tables.cross_intra[e][ks[u], ks[v]]),
                   "inter": float(tables.cross_inter[e][ks[u], ks[v]])})
        if stage[u] == stage[v]:
            p[stage[u]] += rin[-1]
        for b in range(stage[u], stage[v]):
            o[b] += float(tables.cross(e, b)[ks[u], ks[v]])
    return p, o, g, rin, rx
