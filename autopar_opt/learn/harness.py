"""Searchers next to the exact search: run one on a spec, price it against the certificate.

``autopar solve SPEC --searcher NAME --budget-s S`` runs the searcher first,
then the exact search warm-started from the searcher's plan (the answer
carries the better of the two plans and the exact side's proven bound), and
adds ``searcher: {name, value, wall_time_s, trace, ...}`` to the JSON: the
searcher's value priced by :func:`autopar_opt.cost.evaluate.evaluate`, the proven
lower bound of the space and the searcher's gap to it, and its ratio to the
exact optimum when the exact side proved one.
"""

from __future__ import annotations

from typing import Any

from autopar_opt.core.result import relative_gap
from autopar_opt.learn.base import SearcherResult, run_searcher
from autopar_opt.learn.space import LayerSpace
from autopar_opt.search.certificate import json_float


def search_spec(spec: Any, name: str, budget_s: float, seed: int = 0) -> SearcherResult:
    """Run searcher ``name`` on the layer-strategy space of a loaded spec."""
    space = LayerSpace(spec.graph, spec.cluster, spec.training, spec.space, spec.cost_params)
    if len(space) == 0:
        return SearcherResult(name, seed, None, None, False, 0.0, 0, [],
                              info={"note": "every configuration is proven infeasible"})
    return run_searcher(name, space, budget_s, seed=seed)


def searcher_block(result: SearcherResult, lower_bound: float | None, optimum: float | None) -> dict:
    """The ``searcher`` entry of plan.json: value vs the proven bound and the optimum.

    ``lower_bound`` is the certificate's global bound, ``optimum`` the exact
    side's primal when it was proven optimal (else None)."""
    data = result.to_dict()
    plan = result.plan
    data["plan"] = plan.to_dict() if hasattr(plan, "to_dict") else plan
    data["metrics"] = result.metrics
    value = result.value if result.feasible else None
    data["lower_bound"] = json_float(lower_bound)
    data["gap"] = json_float(relative_gap(value, lower_bound)) if value is not None and \
        lower_bound is not None else None
    data["optimum"] = json_float(optimum)
    data["ratio_to_optimum"] = (value / optimum) if value is not None and optimum else None
    # the best plan the searcher's space holds (GDP's decoders say theirs, see learn/base.py)
    ceiling = result.info.get("ceiling")
    if ceiling == "optimum":
        ceiling = optimum
    data["ceiling"] = json_float(ceiling) if isinstance(ceiling, (int, float)) else None
    data["ratio_to_ceiling"] = (value / ceiling) if value is not None and \
        isinstance(ceiling, (int, float)) and ceiling > 0 else None
    return data
