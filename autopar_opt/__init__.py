"""autopar-opt: optimal hybrid-parallel training plans with optimality certificates.

The public names below are loaded on first use (PEP 562 ``__getattr__``), so that
``import autopar_opt.<sub>`` (every CLI command, the placement capability) does not
pay for the cost model, networkx and friends it does not need: a command's
start-up is what its user waits for (issue 12/18).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autopar_opt.core.lazy import lazy_exports

__version__ = "0.1.0"

#: public name -> the submodule that defines it
_LAZY = {
    "CostParams": "autopar_opt.cost", "CostTables": "autopar_opt.cost",
    "build_cost_tables": "autopar_opt.cost", "default_params": "autopar_opt.cost",
    "PlanMetrics": "autopar_opt.cost.evaluate", "evaluate": "autopar_opt.cost.evaluate",
    "Layer": "autopar_opt.ir.graph", "LayerGraph": "autopar_opt.ir.graph", "LayerKind": "autopar_opt.ir.graph",
    "Cluster": "autopar_opt.ir.hardware", "DeviceType": "autopar_opt.ir.hardware",
    "LinkTier": "autopar_opt.ir.hardware", "make_cluster": "autopar_opt.ir.hardware",
    "Plan": "autopar_opt.ir.plan", "StagePlan": "autopar_opt.ir.plan", "uniform_plan": "autopar_opt.ir.plan",
    "Strategy": "autopar_opt.ir.strategies",
    "Recompute": "autopar_opt.ir.training", "Schedule": "autopar_opt.ir.training",
    "SearchSpace": "autopar_opt.ir.training", "Training": "autopar_opt.ir.training",
}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from autopar_opt.cost import CostParams, CostTables, build_cost_tables, default_params  # noqa: F401
    from autopar_opt.cost.evaluate import PlanMetrics, evaluate  # noqa: F401
    from autopar_opt.ir.graph import Layer, LayerGraph, LayerKind  # noqa: F401
    from autopar_opt.ir.hardware import Cluster, DeviceType, LinkTier, make_cluster  # noqa: F401
    from autopar_opt.ir.plan import Plan, StagePlan, uniform_plan  # noqa: F401
    from autopar_opt.ir.strategies import Strategy  # noqa: F401
    from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training  # noqa: F401


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
