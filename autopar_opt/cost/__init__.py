"""Analytical, calibratable cost model (pure functions, no solver, no I/O)."""

from autopar_opt.cost.layer_cost import LayerCost, StageContext, layer_cost
from autopar_opt.cost.params import CostParams, default_params
from autopar_opt.cost.tables import CostTables, build_cost_tables

__all__ = ["CostParams", "CostTables", "LayerCost", "StageContext", "build_cost_tables",
           "default_params", "layer_cost"]
