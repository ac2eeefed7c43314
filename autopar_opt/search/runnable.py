"""Runnable plans: the target's space and the price of runnability (issue 29).

The space a framework can run is not searched here by enumerating its uniform
settings: a target (:class:`~autopar_opt.ir.target.Target`) restricts the
one formulation (strategies it cannot run are not enumerated; its uniformity
rule is rows of the MILP/MIQP, ``formulations/families.py::uniform_choice``,
and a label rule of the DP, ``solvers/dp/uniform.py``), so
:func:`~autopar_opt.search.engine.run_search` on a target's space is the
runnable search, with the engine's time shares, second pass and certificate.

This module names the frameworks of ``solve --runnable-by``, builds the
target's space, and prices runnability: the certified runnable optimum
against the certified bound of the free per-layer space (``target: none``),
``price = runnable / free - 1`` as an interval from the two certificates.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

from autopar_opt.core.bounds import SearchStatus
from autopar_opt.core.errors import SpecProblem
from autopar_opt.core.files import COMMAND_LINE
from autopar_opt.cost.params import CostParams
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import Cluster
from autopar_opt.ir.target import Target, framework_model_problem, model_problem
from autopar_opt.ir.training import Schedule, SearchSpace, Training
from autopar_opt.search.certificate import json_float
from autopar_opt.search.engine import SearchOptions, SearchResult, run_search

#: The frameworks ``solve --runnable-by`` names.
FRAMEWORKS = ("megatron", "torchtitan", "deepspeed")

#: Share of the search time the target's own search may take before the free
#: search for the price of runnability starts (it hands back what it does not use).
TARGET_SHARE = 0.7
#: The free space's search only prices the runnable answer (a side figure): it gets at
#: most ``FREE_FACTOR`` times the runnable search's own time and at least ``FREE_MIN_S``
#: seconds, within what the limit leaves, so a runnable optimum proven in seconds is not
#: held back by a free space that is harder to prove (DeepSeek-V3 on 2,048 H800: the
#: runnable search proved its optimum in 2.2 s, the uncapped free search then ran to
#: the 120 s limit).
FREE_MIN_S, FREE_FACTOR = 5.0, 1.0


def runnable_space(space: SearchSpace, framework: str, version: str = "",
                   source: str = "--runnable-by") -> SearchSpace:
    """``space`` restricted to what ``framework`` can run (``none``: the free space of
    the same schedules; ``torchtitan-0.2``: torchtitan's previous version). Schedules
    the spec does not state become the named framework's default
    (:meth:`~autopar_opt.ir.target.Target.default_schedules`)."""
    if framework == "torchtitan-0.2":
        framework, version = "torchtitan", "0.2"
    if framework not in FRAMEWORKS + ("none",):
        raise ValueError(f"unknown framework {framework!r}; use one of {', '.join(FRAMEWORKS)}")
    version = version or ("0.3" if framework == "torchtitan" else "")
    target = Target(framework, version, source)
    if framework == "none":
        # the free space of the spec's own schedules: a bound on its target's space,
        # as the price of runnability's free search (price_of_runnability)
        return replace(space, target=target)
    if space.schedules_source != "search.schedules":
        # the spec states no schedules: the default is the named target's, as it
        # would be had the spec named it (spec/build_run.py::schedule_names)
        return replace(space, target=target, schedules=tuple(
            Schedule(x) for x in target.default_schedules()),
            schedules_source=f"default of target {framework} (from {source})")
    return replace(space, target=target, schedules=_schedules(space, target))


def _schedules(space: SearchSpace, target: Target) -> tuple:
    """The space's stated schedules less Megatron's interleaved one where the target
    does not run it and another listed schedule remains (a spec that lists interleaved
    asks for Megatron's virtual pipeline where it exists; the command's notices
    say it was left out); any other schedule the target does not run stays, and
    :func:`runnable_problems` refuses it."""
    allowed = target.schedules()
    kept = tuple(x for x in space.schedules if allowed is None or x.value != "interleaved"
                 or "interleaved" in allowed)
    return kept or space.schedules


def runnable_problems(space: SearchSpace, graph: LayerGraph, option: str = "--runnable-by",
                      value: str | None = None) -> list[SpecProblem]:
    """Why the target ``option`` named cannot run this spec (empty: it can): the
    rules the spec's stated ``target:`` is held to (``spec/build_run.py::build_target``),
    for a target named on the command line. A model the framework cannot build, free
    stage sizes, or a listed schedule it does not run would otherwise be searched
    and the answer called runnable."""
    target = space.runs_on
    if target is None:
        return []
    fw, shown = target.label(), value if value is not None else target.framework
    drop = f"drop {option} (the spec's own space is searched)"
    why = model_problem(graph.layers, graph.is_chain()) \
        or framework_model_problem(target.framework, graph, graph.attention_windows())
    if why:
        return [SpecProblem(COMMAND_LINE, option, shown, f"{fw} cannot run this model: {why}",
                            drop)]
    out = []
    if space.stage_devices == "free":
        out.append(SpecProblem(COMMAND_LINE, option, shown, f"{fw} gives every pipeline stage "
                               "the same devices, and the spec has search.stage_devices: free",
                               f"set search.stage_devices: congruent, or {drop}"))
    allowed = target.schedules()
    dropped = [x.value for x in space.schedules if allowed is not None and x.value not in allowed]
    if dropped:
        runs = " / ".join(a for a in allowed if a != "interleaved")
        out.append(SpecProblem(COMMAND_LINE, option, shown, f"{fw} does not run the "
                               f"{', '.join(dropped)} schedule the spec's search.schedules lists",
                               f"list only {runs} in search.schedules, or {drop}"))
    return out


@dataclass
class Runnability:
    """The runnable optimum against the free space's certified bound."""

    target: Target
    runnable_primal: float | None
    runnable_lower: float
    free_primal: float | None
    free_lower: float
    free_status: str
    free_time_s: float
    note: str = ""
    #: what the framework runs that the target's space leaves out (Target.unsearched)
    unsearched: str = ""

    @property
    def price(self) -> tuple[float, float]:
        """``(low, high)`` of ``runnable optimum / free optimum - 1``: the runnable
        bound against the free plan, and the runnable plan against the free bound
        (``nan`` where a side is unknown)."""
        lo = _ratio(self.runnable_lower, self.free_primal)
        hi = _ratio(self.runnable_primal, self.free_lower)
        return (max(lo, 0.0) if not math.isnan(lo) else lo, hi)

    def to_dict(self) -> dict:
        lo, hi = self.price
        return {"target": self.target.to_dict(),
                "runnable_primal": json_float(self.runnable_primal),
                "runnable_lower_bound": json_float(self.runnable_lower),
                "free_primal": json_float(self.free_primal),
                "free_lower_bound": json_float(self.free_lower),
                "free_status": self.free_status, "free_time_s": round(self.free_time_s, 3),
                "price_low": json_float(lo), "price_high": json_float(hi), "note": self.note,
                "unsearched": self.unsearched}


def _ratio(a: float | None, b: float | None) -> float:
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b) or b <= 0:
        return math.nan
    return a / b - 1.0


def price_of_runnability(result: SearchResult, graph: LayerGraph, cluster: Cluster,
                         training: Training, space: SearchSpace, params: CostParams,
                         options: SearchOptions, time_left_s: float,
                         target_time_s: float | None = None) -> Runnability | None:
    """Search the free per-layer space (``target: none``) within ``time_left_s`` seconds
    (and, given the runnable search's own time ``target_time_s``, within
    ``max(FREE_MIN_S, FREE_FACTOR * target_time_s)``) and set its certificate beside
    the runnable one; None without a target."""
    target = space.runs_on
    if target is None:
        return None
    cert = result.certificate
    base = Runnability(target, cert.primal, cert.lower_bound, None, -math.inf, "not_solved", 0.0,
                       unsearched=target.unsearched())
    if time_left_s <= 0.05:
        base.note = "no time was left for the free space's search; a longer --time-limit prices it"
        return base
    budget = time_left_s if target_time_s is None else min(
        time_left_s, max(FREE_MIN_S, FREE_FACTOR * target_time_s))
    began = time.perf_counter()
    free = run_search(graph, cluster, training, replace(space, target=None), params,
                      replace(options, time_limit_s=budget, export_dir=None))
    fc = free.certificate
    status = free.status(options.rel_gap)
    base.free_primal, base.free_lower = fc.primal, fc.lower_bound
    base.free_status = status.value if isinstance(status, SearchStatus) else str(status)
    base.free_time_s = time.perf_counter() - began
    runnable_none = cert.primal is None and cert.lower_bound == math.inf
    if free.interrupted_by is not None:
        base.note = "the free space's search was interrupted"
    elif runnable_none and base.free_status == "infeasible":
        base.note = "the free per-layer space is proven infeasible too"
    elif runnable_none and fc.primal is not None:
        base.note = (f"the free per-layer space has plans (its best {fc.primal:.6g} s): what "
                     f"{target.framework} can run makes the spec infeasible")
    elif budget < time_left_s and base.free_status not in ("optimal", "infeasible"):
        base.note = (f"the free space's search was given {budget:.3g} s (a side figure: at most "
                     f"the runnable search's time, at least {FREE_MIN_S:g} s); solve with "
                     "target: none to certify the free space itself")
    if cert.primal is not None and (fc.primal is None or cert.primal < fc.primal):
        # the runnable plan is a plan of the free space (a target only restricts it): a free
        # search cut short with a worse plan, or none, does not make the free space's best
        # worse than it (QA round 12: "its plan 14.101 s" beside a runnable 13.313 s)
        base.free_primal = cert.primal
        if base.free_status == "no_plan":
            base.free_status = "feasible"
        found = "none" if fc.primal is None else f"{fc.primal:.6g} s"
        base.note = "; ".join(n for n in (base.note, f"the free search's own best plan ({found}) "
                                          "was not better than the runnable plan, which is a plan "
                                          "of the free space: its plan is the runnable one") if n)
    return base


__all__ = ["FREE_FACTOR", "FREE_MIN_S", "FRAMEWORKS", "TARGET_SHARE", "Runnability", "price_of_runnability",
           "runnable_problems", "runnable_space"]
