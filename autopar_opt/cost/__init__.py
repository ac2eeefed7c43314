"""Analytical, calibratable cost model (pure functions, no solver, no I/O).

The names below are exported on first use (PEP 562): pricing one plan
(``autopar estimate``: :mod:`layer_cost`, :mod:`params`, :mod:`reshard`) is
pure Python, and only the cost tables of a search need numpy, so importing
``autopar_opt.cost.params`` does not load :mod:`autopar_opt.cost.tables` and
numpy with it (start-up, issue 18).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autopar_opt.core.lazy import lazy_exports

_LAZY = {"LayerCost": "autopar_opt.cost.context", "StageContext": "autopar_opt.cost.context",
         "layer_cost": "autopar_opt.cost.layer_cost", "CostParams": "autopar_opt.cost.params",
         "default_params": "autopar_opt.cost.params", "CostTables": "autopar_opt.cost.tables",
         "build_cost_tables": "autopar_opt.cost.tables"}

__all__ = ["CostParams", "CostTables", "LayerCost", "StageContext", "build_cost_tables",
           "default_params", "layer_cost"]

if TYPE_CHECKING:  # pragma: no cover
    from autopar_opt.cost.context import LayerCost, StageContext
    from autopar_opt.cost.layer_cost import layer_cost# noqa: F401
    from autopar_opt.cost.params import CostParams, default_params  # noqa: F401
    from autopar_opt.cost.tables import CostTables, build_cost_tables  # noqa: F401

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
