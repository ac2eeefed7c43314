"""Searchers next to the exact search: run one on a spec, report it against the certificate.

``autopar solve SPEC --searcher NAME --budget-s S`` runs the searcher first,
then the exact search warm-started from the searcher's plan (the answer
carries the better of the two plans and the exact side's proven bound), and
adds ``searcher: {name, value, wall_time_s, trace, ...}`` to the JSON: the
searcher's value priced by :func:`autopar_opt.evaluate.evaluate`, the proven
lower bound of the space and the searcher's gap to it, and its ratio to the
exact optimum when the exact side proved one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.console import Console

from autopar_opt.core.result import relative_gap
from autopar_opt.learn.base import SearcherResult, SearcherUnavailable, SearcherUnknown, run_searcher
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
    return data


def _fmt(x: Any) -> str:
    return "-" if x is None else (x if isinstance(x, str) else f"{x:.6g}")


@dataclass
class SearcherHook:
    """What ``autopar solve --searcher`` hands to the search command."""

    name: str
    budget_s: float
    seed: int = 0

    def run(self, spec: Any, err: Console) -> SearcherResult | None:
        """Run the searcher; None (and the reason on stderr) when it cannot run."""
        try:
            return search_spec(spec, self.name, self.budget_s, self.seed)
        except (SearcherUnavailable, SearcherUnknown) as exc:
            err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
            return None

    def run_placement(self, problem: Any, contiguous: bool, err: Console) -> SearcherResult | None:
        """Run the searcher on a placement problem (max-load); None when it cannot run."""
        from autopar_opt.learn.placement_space import PlacementSpace

        try:
            return run_searcher(self.name, PlacementSpace(problem, contiguous), self.budget_s,
                                seed=self.seed)
        except (SearcherUnavailable, SearcherUnknown, ValueError) as exc:
            err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
            return None

    def block(self, result: SearcherResult, lower_bound: float | None,
              optimum: float | None) -> dict:
        return searcher_block(result, lower_bound, optimum)

    def summary(self, block: dict, console: Console) -> None:
        """One line: the searcher's plan and value against the bound and the optimum."""
        text = (f"  searcher {block['name']} (seed {block['seed']}, {block['wall_time_s']:.1f} s, "
                f"{block['samples']} samples): ")
        if block["value"] is None:
            console.print(text + "no feasible plan found")
            return
        gap, plan = block["gap"], block["plan"]
        where = (f"pp={plan['pp']} c={plan['microbatches']}" if "pp" in plan
                 else f"{len(set(plan['assignment']))} devices used")
        text += (f"{block['value']:.6g} (evaluator), {where}; "
                 f"proven lower bound {_fmt(block['lower_bound'])}, gap "
                 + (f"{100 * gap:.3f}%" if isinstance(gap, float) else str(gap)))
        if block["ratio_to_optimum"] is not None:
            text += f"; {block['ratio_to_optimum']:.4f} x the proven optimum {_fmt(block['optimum'])}"
        console.print(text)
