"""autopar_opt.formulations: the joint MIQP and its exact MILP linearisation (docs/DESIGN.md §3).

Every constraint family is written once, as rows (:mod:`.rows`,
:mod:`.families`, :mod:`.milp`); :mod:`.direct` assembles them into the
matrix HiGHS solves, :mod:`.pyomo_model` into the Pyomo model for Gurobi,
SCIP and export (plus :mod:`.miqp`'s quadratic families).
"""

from autopar_opt.formulations.base import FormulationError
from autopar_opt.formulations.formulation import FORMS, Formulation, TablesProblem, build_formulation

__all__ = ["FORMS", "Formulation", "FormulationError", "TablesProblem", "build_formulation"]
