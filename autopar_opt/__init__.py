"""autopar-opt: optimal hybrid-parallel training plans with optimality certificates."""

from autopar_opt.cost import CostParams, CostTables, build_cost_tables, default_params
from autopar_opt.evaluate import PlanMetrics, evaluate
from autopar_opt.graph import Layer, LayerGraph, LayerKind
from autopar_opt.hardware import Cluster, DeviceType, LinkTier, make_cluster
from autopar_opt.plan import Plan, StagePlan, uniform_plan
from autopar_opt.strategies import Strategy
from autopar_opt.training import Recompute, Schedule, SearchSpace, Training

__version__ = "0.1.0"

__all__ = [
    "Cluster", "CostParams", "CostTables", "DeviceType", "Layer", "LayerGraph", "LayerKind",
    "LinkTier", "Plan", "PlanMetrics", "Recompute", "Schedule", "SearchSpace", "StagePlan",
    "Strategy", "Training", "build_cost_tables", "default_params", "evaluate", "make_cluster",
    "uniform_plan",
]
