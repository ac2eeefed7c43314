"""The outer search: enumerate configurations, solve each, keep the best, certify.

For every outer configuration (pp, c, schedule) allowed by the spec, the
search builds cost tables, computes a cheap valid lower bound, skips the
configuration when that bound already reaches the incumbent, and otherwise
solves the inner problem with the chosen backend (MILP/MIQP via
``autopar_opt.formulations`` or the DP on the tables). Every decoded plan is
re-priced by :func:`autopar_opt.evaluate.evaluate`; a mismatch with the
solver's objective is reported as an error, never silently accepted.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from autopar_opt.cost.params import CostParams
from autopar_opt.cost.tables import CostTables, build_cost_tables
from autopar_opt.evaluate import PlanMetrics, evaluate
from autopar_opt.graph import LayerGraph
from autopar_opt.hardware import Cluster
from autopar_opt.plan import Plan
from autopar_opt.search.bounds import ConfigBound, analytic_lower_bound
from autopar_opt.search.certificate import Certificate, ConfigRecord
from autopar_opt.search.configs import OuterConfig, outer_configs
from autopar_opt.search.inner import InnerSolver
from autopar_opt.training import SearchSpace, Training

#: Relative tolerance when comparing a solver objective to evaluate().
CONSISTENCY_RTOL = 1e-6

ProgressFn = Callable[[int, int, ConfigRecord, float | None, float], None]


@dataclass
class SearchOptions:
    """How to search: backend, form, limits, exports."""

    solver: str = "highs"
    form: str = "auto"
    time_limit_s: float = 60.0
    rel_gap: float = 1e-3
    warm_start: bool = True
    #: exact symmetry-breaking cuts between identical layers; None: on, except
    #: for the backends of ``inner.SYMMETRY_OFF_BY_DEFAULT`` (measured slower)
    symmetry: bool | None = None
    export_dir: Path | None = None
    export_format: str = "mps"


@dataclass
class SearchResult:
    """Best plan, its metrics and the certificate of the whole search."""

    plan: Plan | None
    metrics: PlanMetrics | None
    certificate: Certificate
    best_config: OuterConfig | None
    solver_name: str
    solver_version: str
    form: str
    log_tail: str = ""
    least_memory_bytes: float = 0.0
    infeasible_reasons: list[str] = field(default_factory=list)
    wall_time_s: float = 0.0
    #: seconds spent building every configuration's cost tables and analytic bound
    prepare_s: float = 0.0

    def status(self, rel_gap: float) -> str:
        """optimal | feasible | infeasible | no_plan (exit codes 0, 0, 3, 4)."""
        if self.plan is not None:
            gap = self.certificate.gap
            return "optimal" if self.certificate.exact and gap <= rel_gap + 1e-12 else "feasible"
        return "infeasible" if self.certificate.infeasible else "no_plan"


def run_search(graph: LayerGraph, cluster: Cluster, training: Training, space: SearchSpace,
               params: CostParams, options: SearchOptions,
               progress: ProgressFn | None = None, incumbent: Plan | None = None) -> SearchResult:
    """Search every outer configuration and return the certified best plan.

    ``incumbent`` (e.g. a searcher's plan) starts the search as its best plan:
    configurations whose bound reaches it are pruned, and the answer carries
    it when the exact side finds nothing better (its configuration's record
    then holds its value and says so), next to the proven bound.
    """
    start = time.perf_counter()
    inner = InnerSolver(options)
    configs = outer_configs(graph, cluster, training, space)
    prepared = []
    for cfg in configs:
        tables = build_cost_tables(graph, cluster, training, space, params, cfg.pp,
                                   cfg.microbatches, cfg.schedule)
        prepared.append((cfg, tables, analytic_lower_bound(tables)))
    prepare_s = time.perf_counter() - start
    prepared.sort(key=lambda item: (item[2].value, item[0]))
    records: list[ConfigRecord] = []
    seeded = _seed_incumbent(incumbent, configs, graph, cluster, training, params)
    best: tuple[PlanMetrics, Plan, OuterConfig] | None = seeded
    log_tail = ""

    def solve(k: int, share: float) -> ConfigRecord:
        nonlocal best, log_tail
        cfg, tables, bound = prepared[k]
        incumbent = best[0].iteration_time_s if best else None
        record, plan, log = _handle_config(cfg, tables, bound, best, share, inner)
        if plan is not None:
            metrics = _checked_metrics(plan, record, graph, cluster, training, params)
            if metrics is not None and (incumbent is None or metrics.iteration_time_s < incumbent):
                best = (metrics, plan, cfg)
        log_tail = log or log_tail
        return record

    for k in range(len(prepared)):
        incumbent = best[0].iteration_time_s if best else None
        remaining = options.time_limit_s - (time.perf_counter() - start)
        records.append(solve(k, _time_share(remaining, prepared[k:], incumbent)))
        if progress:
            progress(k + 1, len(prepared), records[-1], best[0].iteration_time_s if best else None,
                     Certificate(records).lower_bound)
    _second_pass(records, solve, start, options, lambda: best)
    if seeded is not None and best is seeded:
        _record_incumbent(records, seeded, options.rel_gap)
    cert = Certificate(records)
    reasons = sorted({r.message for r in records if r.status == "infeasible" and r.message})
    least = min((b.least_memory_bytes for _, _, b in prepared), default=0.0)
    return SearchResult(plan=best[1] if best else None, metrics=best[0] if best else None,
                        certificate=cert,
                        best_config=best[2] if best else None, solver_name=inner.name,
                        solver_version=inner.version, form=inner.form_name,
                        log_tail=log_tail[-4000:], least_memory_bytes=least,
                        infeasible_reasons=reasons, wall_time_s=time.perf_counter() - start,
                        prepare_s=prepare_s)


def _seed_incumbent(plan: Plan | None, configs: list[OuterConfig], graph, cluster, training,
                    params) -> tuple[PlanMetrics, Plan, OuterConfig] | None:
    """``(metrics, plan, config)`` of a warm-start plan priced by evaluate(),
    or None when there is none or it does not fit (or lies outside the space)."""
    if plan is None:
        return None
    cfg = OuterConfig(plan.pp, plan.microbatches, plan.schedule)
    if cfg not in configs:
        return None
    metrics = evaluate(plan, graph, cluster, training, params)
    return (metrics, plan, cfg) if metrics.feasible else None


def _record_incumbent(records: list[ConfigRecord], seeded, rel_gap: float) -> None:
    """The warm-start plan stayed the best: its configuration's record holds its value."""
    metrics, _, cfg = seeded
    value = metrics.iteration_time_s
    for rec in records:
        if rec.config != cfg or (rec.primal is not None and rec.primal <= value):
            continue
        rec.primal = value
        if rec.status in ("pruned", "not_solved", "feasible", "optimal"):
            rec.status = "optimal" if rec.gap <= rel_gap + 1e-12 else "feasible"
        rec.message = "; ".join(m for m in (rec.message, "primal from the warm-start plan "
                                            "(searcher), priced by evaluate()") if m)


#: Fewer seconds than this left: no second pass.
SECOND_PASS_MIN_S = 1.0


def _second_pass(records: list[ConfigRecord], solve, start: float, options, incumbent_of) -> None:
    """Spend the time the first pass left over on the configurations it did not
    close (time-limited, bound below the incumbent by more than the target gap),
    most promising bound first, each with an equal share of what is left. A
    new result replaces the old record only if it proves more (a higher bound)
    or finds a better plan; the old bound is kept when it was higher."""
    def open_ones() -> list[int]:
        best = incumbent_of()
        inc = best[0].iteration_time_s if best else math.inf
        return [k for k, r in enumerate(records)
                if r.status in ("not_solved", "feasible")
                and r.lower_bound < inc * (1 - options.rel_gap)]
    todo = sorted(open_ones(), key=lambda k: records[k].lower_bound)
    for n_done, k in enumerate(todo):
        if k not in open_ones():
            continue
        remaining = options.time_limit_s - (time.perf_counter() - start)
        if remaining < SECOND_PASS_MIN_S:
            return
        old = records[k]
        new = solve(k, remaining / (len(todo) - n_done))
        new.time_s += old.time_s
        better_bound = new.lower_bound > old.lower_bound
        better_plan = new.primal is not None and (old.primal is None or new.primal < old.primal)
        if not (better_bound or better_plan):
            continue
        new.lower_bound = max(new.lower_bound, old.lower_bound)
        if old.primal is not None and (new.primal is None or old.primal < new.primal):
            new.primal = old.primal
        if new.primal is not None and new.status in ("optimal", "feasible", "not_solved"):
            new.status = "optimal" if new.gap <= options.rel_gap + 1e-12 else "feasible"
        new.message = "; ".join(m for m in (new.message, "solved again with the time the first pass "
                                            "left over") if m)
        records[k] = new


def _time_share(remaining: float, rest: list, incumbent: float | None) -> float:
    """Time for the next configuration: an equal share of what is left among the
    configurations that may still need solving (bound below the incumbent), so
    one hard configuration cannot starve the others of their bounds."""
    if remaining <= 0:
        return remaining
    open_configs = sum(1 for _, _, b in rest
                       if not math.isinf(b.value) and (incumbent is None or b.value < incumbent))
    return max(remaining / max(open_configs, 1), min(1.0, remaining))


def _handle_config(cfg: OuterConfig, tables: CostTables, bound: ConfigBound, best,
                   remaining: float, inner: InnerSolver) -> tuple[ConfigRecord, Plan | None, str]:
    """Decide, for one configuration: proven infeasible, pruned, out of time, or solve.

    ``best`` is the incumbent ``(metrics, plan, config)`` or None."""
    incumbent = best[0].iteration_time_s if best else None
    if math.isinf(bound.value):
        return ConfigRecord(cfg, "infeasible", None, math.inf, 0.0,
                            message=bound.infeasible_reason), None, ""
    if incumbent is not None and bound.value >= incumbent * (1 - 1e-12):
        why = (f"lower bound {bound.value:.6g} s >= incumbent {incumbent:.6g} s "
               f"({best[2].label()})")
        return ConfigRecord(cfg, "pruned", None, bound.value, 0.0, pruned_by=why), None, ""
    if remaining <= 0:
        return ConfigRecord(cfg, "not_solved", None, bound.value, 0.0,
                            message="search time limit reached before this configuration; "
                                    "its analytic lower bound is recorded"), None, ""
    outcome = inner.solve(tables, remaining, cfg)
    result = outcome.result
    lower = result.lower_bound
    if not math.isinf(lower) or lower < 0:
        lower = max(lower, bound.value)          # both are valid bounds
    status = _status_of(result.termination.value)
    record = ConfigRecord(cfg, status, result.primal, lower, result.wall_time_s,
                          model_hash=outcome.model_hash, message=result.message,
                          timings=dict(result.timings))
    return record, outcome.plan, result.log


def _status_of(termination: str) -> str:
    return {"optimal": "optimal", "feasible": "feasible", "infeasible": "infeasible",
            "time_limit_no_solution": "not_solved", "heuristic": "heuristic",
            "error": "error"}[termination]


def _checked_metrics(plan: Plan, record: ConfigRecord, graph, cluster, training,
                     params) -> PlanMetrics | None:
    """evaluate(plan) must equal the solver objective; returns the plan's metrics."""
    metrics = evaluate(plan, graph, cluster, training, params)
    value = metrics.iteration_time_s
    if not metrics.feasible:
        record.status = "error"
        record.message = "decoded plan violates the memory limit under evaluate(); discarded"
        record.primal = None
        return None
    if record.primal is not None and abs(value - record.primal) > CONSISTENCY_RTOL * max(1.0, value):
        record.message = (f"solver objective {record.primal:.9g} differs from evaluate() "
                          f"{value:.9g}; the evaluated value is used")
    record.primal = value
    return metrics
