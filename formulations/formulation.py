"""Build the formulation of one outer configuration as a Pyomo model and read it back.

``build_formulation(tables, form)`` returns a :class:`Formulation`: the Pyomo
model (written from the families' rows by :mod:`.pyomo_model`, plus the
MIQP's quadratic families), its problem class, :meth:`Formulation.invert`
(solved values -> :class:`Assignment`), :meth:`Formulation.set_warm_start`
(the values of the one warm-start writer,
:meth:`~.direct.DirectFormulation.assignment_vector`),
:meth:`Formulation.export` (MPS/LP file + sha256) and, for the MILP,
:meth:`Formulation.matrix` (the very :class:`MatrixForm` the HiGHS search
solves, its ``var_refs`` pointing at this model). The HiGHS search uses
:class:`~.direct.DirectBuilder` without any Pyomo model.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import numpy as np

from autopar_opt.core.assignment import Assignment
from autopar_opt.core.matrix import MatrixForm
from autopar_opt.core.result import ProblemClass, SolveResult
from autopar_opt.cost.tables import CostTables
from autopar_opt.formulations.base import FormulationError, check_tables
from autopar_opt.formulations.direct import DirectFormulation, build_direct
from autopar_opt.formulations.lazy_pyomo import pyo, pyomo_opt
from autopar_opt.formulations.miqp import add_miqp_families
from autopar_opt.formulations.pyomo_model import pyomo_model
from autopar_opt.ir.plan import Plan

FORMS: dict[str, ProblemClass] = {"milp": ProblemClass.milp, "miqp": ProblemClass.miqp}


@dataclass
class Formulation:
    """A built Pyomo model for one ``(pp, c, schedule)``; see module docstring."""

    tables: CostTables
    form: str
    model: "pyo.ConcreteModel"
    problem_class: ProblemClass
    core: DirectFormulation
    build_s: float = 0.0

    @property
    def symmetry(self) -> bool:
        return self.core.symmetry

    @property
    def objective_constant(self) -> float:
        """Constant included in the objective (``params.iteration_overhead_s``)."""
        return float(self.model.objective_constant)

    def values(self) -> np.ndarray:
        """The model's variable values in column order (NaN where unset)."""
        return np.array([np.nan if v.value is None else float(v.value)
                         for v in self.core.matrix.var_refs])

    def invert(self, result: SolveResult) -> Assignment | None:
        """The backend's answer as the typed :class:`Assignment` (the values it
        loaded into :attr:`model`); ``None`` without a solution."""
        return self.assignment() if result.has_solution else None

    def assignment(self) -> Assignment:
        """The stage and strategy of every layer held by the solved model."""
        x, C = self.values(), self.core.structure.cols
        if np.isnan(x[C.block("a")]).any() or np.isnan(x[C.block("s")]).any():
            raise FormulationError("the model holds no solution to decode (solve it first)")
        return self.core.assignment(x)

    def stage_assignment(self) -> list[int]:
        """Stage index of every layer from the solved ``a`` values."""
        return self.assignment().stage

    def strategy_choice(self) -> list[int]:
        """Strategy index of every layer from the solved ``s`` values."""
        return self.assignment().choice

    def decode(self) -> Plan:
        """The solved plan (:meth:`CostTables.plan_of` of :meth:`assignment`)."""
        return self.tables.plan_of(self.assignment())

    def set_warm_start(self, start: Plan | Assignment) -> None:
        """Set every variable from a plan or an assignment (e.g. the DP's), consistently."""
        for var, val in zip(self.core.matrix.var_refs, self.core.start_vector(start)):
            var.set_value(float(val), skip_validation=True)

    def export(self, path: str, fmt: str = "mps") -> str:
        """Write the sub-model as MPS or LP; return the sha256 of the file."""
        if fmt not in ("mps", "lp"):
            raise FormulationError(f"export format must be 'mps' or 'lp', got {fmt!r}")
        writer = {"mps": pyomo_opt.ProblemFormat.mps, "lp": pyomo_opt.ProblemFormat.cpxlp}[fmt]
        self.model.write(path, format=writer, io_options={"symbolic_solver_labels": True})
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()

    def matrix(self) -> MatrixForm:
        """The MILP as numpy/scipy arrays (the matrix this model was written from)."""
        if self.problem_class is not ProblemClass.milp:
            raise FormulationError("matrix() needs the linear form: build_formulation(tables, 'milp')")
        return self.core.matrix

    def decode_values(self, x: np.ndarray) -> Plan:
        """Decode a raw solution vector of :meth:`matrix` (no model load)."""
        return self.core.decode_values(x)


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


def build_formulation(tables: CostTables, form: str = "milp", symmetry: bool = True,
                      budget=None) -> Formulation:
    """Build the MILP (exact linearisation) or the MIQP for ``tables`` as a Pyomo model.

    ``symmetry`` adds the exact symmetry-breaking cuts between identical
    neighbouring layers (:func:`~.families.symmetry_order`). ``budget`` (a
    :class:`~autopar_opt.core.memory_budget.MemoryBudget`): the matrix is counted first and
    :class:`~autopar_opt.core.memory_budget.OverBudget` raised past it; the Pyomo model
    built from it takes more than the matrix path's measured bytes, so on this path the
    check is a floor (the Pyomo overhead is not measured).

    Raises
    ------
    FormulationError
        Unknown ``form``, fewer layers than stages, or a layer with no strategy.
    """
    if form not in FORMS:
        raise FormulationError(f"form must be one of {sorted(FORMS)}, got {form!r}")
    check_tables(tables)
    start = time.perf_counter()
    core = build_direct(tables, symmetry=symmetry, form=form, budget=budget)
    m = pyomo_model(core, name=f"autopar_{form}_pp{tables.pp}_c{tables.microbatches}")
    if form == "miqp":
        add_miqp_families(m, tables)
    return Formulation(tables, form, m, FORMS[form], core, build_s=time.perf_counter() - start)
