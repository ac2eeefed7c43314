"""Build the joint formulation for one outer configuration and read it back.

``build_formulation(tables, form)`` returns a :class:`Formulation`: the Pyomo
model, its problem class, :meth:`Formulation.invert` (solved values -> :class:`Assignment`),
:meth:`Formulation.set_warm_start` (Assignment or Plan -> variable values),
:meth:`Formulation.export` (MPS/LP file + sha256) and, for the MILP,
:meth:`Formulation.matrix` (a solver-neutral :class:`MatrixForm`, compiled
once and cached, that the HiGHS backend passes to highspy as numpy arrays).
:mod:`autopar_opt.formulations.direct` builds the same MILP matrix without
Pyomo (the search's HiGHS path).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

import numpy as np
from autopar_opt.formulations.lazy_pyomo import pyo
from autopar_opt.formulations.lazy_pyomo import pyomo_opt

from autopar_opt.cost.tables import CostTables
from autopar_opt.formulations import families
from autopar_opt.formulations.milp import add_milp_families, layout_groups
from autopar_opt.formulations.miqp import add_miqp_families
from autopar_opt.core.assignment import Assignment
from autopar_opt.plan import Plan
from autopar_opt.core.matrix import MatrixForm, compile_matrix, load_values
from autopar_opt.core.result import ProblemClass, SolveResult

FORMS: dict[str, ProblemClass] = {"milp": ProblemClass.milp, "miqp": ProblemClass.miqp}


class FormulationError(ValueError):
    """A formulation cannot be built or read back (the message says why)."""


@dataclass
class Formulation:
    """A built sub-model for one ``(pp, c, schedule)``; see module docstring."""

    tables: CostTables
    form: str
    model: pyo.ConcreteModel
    problem_class: ProblemClass
    build_s: float = 0.0
    symmetry: bool = True
    _matrix: MatrixForm | None = field(default=None, repr=False)

    @property
    def objective_constant(self) -> float:
        """Constant included in the objective (``params.iteration_overhead_s``)."""
        return float(self.model.objective_constant)

    def invert(self, result: SolveResult) -> Assignment | None:
        """The backend's answer as the typed :class:`Assignment` (the values it
        loaded into :attr:`model`); ``None`` without a solution."""
        return self.assignment() if result.has_solution else None

    def assignment(self) -> Assignment:
        """The stage and strategy of every layer held by the solved model."""
        return Assignment(self.stage_assignment(), self.strategy_choice())

    def stage_assignment(self) -> list[int]:
        """Stage index of every layer from the solved ``a`` values."""
        m, pp = self.model, self.tables.pp
        out = []
        for u in range(self.tables.num_layers):
            vals = [m.a[u, i].value for i in range(pp)]
            if any(v is None for v in vals):
                raise FormulationError("the model holds no solution to decode (solve it first)")
            out.append(next(i for i in range(pp) if vals[i] > 0.5))
        return out

    def strategy_choice(self) -> list[int]:
        """Strategy index of every layer from the solved ``s`` values."""
        m, out = self.model, []
        for u, strats in enumerate(self.tables.strategies):
            vals = [m.s[u, k].value for k in range(len(strats))]
            if any(v is None for v in vals):
                raise FormulationError("the model holds no solution to decode (solve it first)")
            out.append(int(np.argmax(vals)))
        return out

    def decode(self) -> Plan:
        """The solved plan (:meth:`CostTables.plan_of` of :meth:`assignment`)."""
        return self.tables.plan_of(self.assignment())

    def set_warm_start(self, start: Plan | Assignment) -> None:
        """Set every variable from a plan or an assignment (e.g. the DP's), consistently."""
        asg = start_assignment(self.tables, start)
        stage, ks = asg.stage, asg.choice
        if self.symmetry:
            ks = families.sort_symmetric_runs(self.tables, stage, ks)
        set_assignment_values(self.model, self.tables, self.form, stage, ks)

    def export(self, path: str, fmt: str = "mps") -> str:
        """Write the sub-model as MPS or LP; return the sha256 of the file."""
        if fmt not in ("mps", "lp"):
            raise FormulationError(f"export format must be 'mps' or 'lp', got {fmt!r}")
        writer = {"mps": pyomo_opt.ProblemFormat.mps, "lp": pyomo_opt.ProblemFormat.cpxlp}[fmt]
        self.model.write(path, format=writer, io_options={"symbolic_solver_labels": True})
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()

    def matrix(self) -> MatrixForm:
        """The MILP as numpy/scipy arrays (compiled once, then cached)."""
        if self.problem_class is not ProblemClass.milp:
            raise FormulationError("matrix() needs the linear form: build_formulation(tables, 'milp')")
        if self._matrix is None:
            self._matrix = compile_matrix(self.model)
        return self._matrix

    def decode_values(self, x: np.ndarray) -> Plan:
        """Decode a raw solution vector of :meth:`matrix` (no model load)."""
        load_values(self.matrix(), x)
        return self.decode()


@dataclass
class TablesProblem:
    """The DP's side of the formulation interface: the backend solves the cost
    tables themselves and already answers with an :class:`Assignment`."""

    tables: CostTables
    problem_class: ProblemClass = ProblemClass.tables
    build_s: float = 0.0

    @property
    def model(self) -> CostTables:
        return self.tables

    def set_warm_start(self, start: Plan | Assignment) -> None:
        raise FormulationError("the table DP takes no warm start")

    def invert(self, result: SolveResult) -> Assignment | None:
        return result.solution if result.has_solution else None


def build_formulation(tables: CostTables, form: str = "milp", symmetry: bool = True) -> Formulation:
    """Build the MILP (exact linearisation) or the MIQP for ``tables``.

    ``symmetry`` adds the exact symmetry-breaking cuts between identical
    neighbouring layers (:func:`families.add_symmetry_constraints`).

    Raises
    ------
    FormulationError
        Unknown ``form``, fewer layers than stages, or a layer with no strategy.
    """
    if form not in FORMS:
        raise FormulationError(f"form must be one of {sorted(FORMS)}, got {form!r}")
    check_tables(tables)
    start = time.perf_counter()
    m = pyo.ConcreteModel(name=f"autopar_{form}_pp{tables.pp}_c{tables.microbatches}")
    families.add_index_sets(m, tables)
    families.add_stage_assignment_constraints(m, tables)
    families.add_strategy_choice_constraints(m, tables)
    families.add_same_stage_constraints(m, tables)
    families.add_stage_device_constraints(m, tables)
    if symmetry:
        families.add_symmetry_constraints(m, tables)
    (add_milp_families if form == "milp" else add_miqp_families)(m, tables)
    families.add_objective(m, tables)
    return Formulation(tables, form, m, FORMS[form], build_s=time.perf_counter() - start,
                       symmetry=symmetry)


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


def set_assignment_values(m: pyo.ConcreteModel, tables: CostTables, form: str,
                          stage: list[int], ks: list[int]) -> None:
    """Set all variables of ``m`` from a stage/strategy assignment."""
    pp, edges = tables.pp, tables.edges
    for u in range(tables.num_layers):
        for i in range(pp - 1):
            m.a[u, i].set_value(1 if stage[u] <= i else 0)
        for k in range(len(tables.strategies[u])):
            m.s[u, k].set_value(1 if k == ks[u] else 0)
    p, o, g, rin, rx = price_assignment(tables, stage, ks)
    for e, (u, v) in enumerate(edges):
        for i in range(pp):
            m.y[e, i].set_value(1 if stage[u] == stage[v] == i else 0)
    for i in range(pp):
        m.p[i].set_value(p[i])
        m.g[i].set_value(g[i])
    for b in range(pp - 1):
        m.o[b].set_value(o[b])
    m.bottleneck.set_value(max(p + o))
    m.sync_max.set_value(max(g))
    if form == "milp":
        _set_milp_values(m, tables, stage, ks, rin, rx)
    else:
        for e in range(len(edges)):
            m.rho[e].set_value(rin[e])
            for t in m.T:
                m.rho_x[e, t].set_value(rx[e][t])


def _set_milp_values(m, tables: CostTables, stage, ks, rin, rx) -> None:
    for (u, k) in m.UK:
        for i in range(tables.pp):
            m.w[u, i, k].set_value(1 if (k == ks[u] and i == stage[u]) else 0)
    groups = [layout_groups(tables, u)[1] for u in range(tables.num_layers)]
    for e, (u, v) in enumerate(tables.edges):
        la = next(a for a, gr in enumerate(groups[u]) if ks[u] in gr)
        lb = next(b for b, gr in enumerate(groups[v]) if ks[v] in gr)
        for a in range(len(groups[u])):
            for b in range(len(groups[v])):
                m.el[e, a, b].set_value(1 if (a, b) == (la, lb) else 0)
        for i in range(tables.pp):
            m.r[e, i].set_value(rin[e] if stage[u] == stage[v] == i else 0.0)
        for b in range(tables.pp - 1):
            tier = "intra" if tables.boundary_intra[b] else "inter"
            m.q[e, b].set_value(rx[e][tier] if stage[u] <= b < stage[v] else 0.0)


def price_assignment(tables: CostTables, stage: list[int], ks: list[int]):
    """Stage times ``p``, transfers ``o``, syncs ``g`` of an assignment from the
    tables (the semantics of ``evaluate``), plus each edge's in-stage cost and
    per-tier cross cost (for warm starts)."""
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
