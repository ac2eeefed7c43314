"""autopar_opt.formulations: the joint MIQP and its exact MILP linearisation (docs/DESIGN.md §3)."""

from autopar_opt.formulations.formulation import (
    FORMS, Formulation, FormulationError, TablesProblem, build_formulation)

__all__ = ["FORMS", "Formulation", "FormulationError", "TablesProblem", "build_formulation"]
