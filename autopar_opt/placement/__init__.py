"""Operator-graph device placement (the GDP problem) with proven bounds.

Public API (stable; used by the learned searchers too):

- :class:`PlacementProblem`, :class:`DeviceType` — the instance type
  (:mod:`autopar_opt.placement.problem`).
- :func:`evaluate_placement(problem, assignment, objective=..., contiguous=...)`
  -> :class:`PlacementMetrics` (``value``, ``max_load``, ``latency``, per-device
  ``loads``/``memory_bytes``, ``violations``; ``feasible``) — independent of
  every solver. ``assignment[v]`` is the device index of node ``v`` in the order
  of :meth:`PlacementProblem.devices`.
- :func:`solve_placement(problem, objective=..., contiguous=..., solver=...,
  time_limit_s=...)` -> :class:`PlacementResult` (value, lower bound, gap,
  status, assignment).
- :func:`load_public` — the public JSON format; :mod:`autopar_opt.model_zoo.op_graphs`
  — generated operator graphs.
"""

from autopar_opt.placement.evaluate import PlacementMetrics, evaluate_placement
from autopar_opt.placement.problem import DeviceType, PlacementProblem
from autopar_opt.placement.importers.public_json import load_expert_split, load_public
from autopar_opt.placement.solve import PlacementResult, solve_placement

__all__ = ["DeviceType", "PlacementMetrics", "PlacementProblem", "PlacementResult",
           "evaluate_placement", "load_expert_split", "load_public", "solve_placement"]
