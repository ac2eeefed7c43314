"""The typed answer of every backend: a stage and a strategy per layer.

Every solve path returns an :class:`Assignment` (the DP directly in
``SolveResult.solution``; a MIP through its formulation's ``invert``), and
the search turns it into a :class:`~autopar_opt.ir.plan.Plan` in one place,
:meth:`autopar_opt.cost.tables.CostTables.plan_of` (cvxpy's
``Reduction.apply`` / ``invert`` is the model: the formulation maps the
tables to a solver's model and the solver's answer back to this type).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Assignment:
    """``stage[u]``: stage index of layer ``u`` (graph order); ``choice[u]``: index
    of its strategy in ``tables.strategies[u]``."""

    stage: list[int]
    choice: list[int]
