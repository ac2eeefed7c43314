"""The outer search: enumerate configurations, solve each, keep the best, certify.

For every outer configuration (pp, c, schedule) allowed by the spec, the
search builds cost tables, computes a cheap valid lower bound, skips the
configuration when that bound already reaches the incumbent, and otherwise
solves the inner problem with the chosen backend (MILP/MIQP via
``autopar_opt.formulations`` or the DP on the tables). Every decoded plan is
re-priced by :func:`autopar_opt.cost.evaluate.evaluate`; a mismatch with the
solver's objective is reported as an error, never silently accepted.

Limits and interrupts (issue 15): ``options.time_limit_s`` bounds the whole
search, cost tables included (configurations whose tables were not built in
time are recorded without a bound); a stop signal
(:class:`~autopar_opt.core.interrupts.SearchInterrupted`, or ``options.should_stop``
turning true) ends the search with its incumbent and every bound proven so
far, and the result says which signal stopped it. A backend error on a
configuration (e.g. Gurobi's size-limited licence) is retried with the
default backend, and the fallback is recorded.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from autopar_opt.core.bounds import (Bounds, SearchStatus, Status, reaches, search_status,
                                      strictly_better)
from autopar_opt.cost.params import CostParams
from autopar_opt.cost.tables import CostTables, build_cost_tables
from autopar_opt.cost.evaluate import PlanMetrics, evaluate
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import Cluster
from autopar_opt.core.interrupts import SearchInterrupted
from autopar_opt.ir.plan import Plan
from autopar_opt.search.bounds import ConfigBound, analytic_lower_bound
from autopar_opt.search.stage_lp import knapsack_lp_bound
from autopar_opt.search.certificate import WITHIN_GAP, Certificate, ConfigRecord
from autopar_opt.search.configs import OuterConfig, outer_configs
from autopar_opt.search.inner import InnerSolver
from autopar_opt.ir.training import Schedule, SearchSpace, Training

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
    #: the memory the MIP models may take (a core.memory_budget.MemoryBudget); None: no check
    memory_budget: object | None = None
    #: exact symmetry-breaking cuts between identical layers; None: on exactly
    #: where the backend declares ``Feature.symmetry_cuts`` (measured to pay off)
    symmetry: bool | None = None
    export_dir: Path | None = None
    export_format: str = "mps"
    #: run the MIP as an independent check on configurations the exact DP warm
    #: start already proved optimal (off: the DP's proof closes them)
    dp_check: bool = False
    #: the matrix MILP of a chain of identical blocks is the aggregated block model
    #: (formulations/blocks.py, issue 18); off: always the per-layer direct matrix
    blocks: bool = True
    #: polled between configurations; True stops the search (a stop signal arrived)
    should_stop: Callable[[], bool] | None = None
    #: the signal number to report when ``should_stop`` stopped the search
    stop_signal: Callable[[], int | None] | None = None


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
    #: the signal that stopped the search (SIGINT/SIGTERM), None when it ran to its end
    interrupted_by: int | None = None
    #: one line per configuration a failed backend handed to the default backend
    fallbacks: list[str] = field(default_factory=list)
    #: the cost tables of every configuration the search prepared: what
    #: everything printed beside the search is derived from (the baselines,
    #: :func:`autopar_opt.search.baselines.table_baselines`), never rebuilt
    tables: list[CostTables] = field(default_factory=list, repr=False)

    def status(self, rel_gap: float) -> SearchStatus:
        """optimal | feasible | infeasible | no_plan (exit codes 0, 0, 3, 4), by
        :func:`~autopar_opt.core.bounds.search_status`, the one rule; interrupted
        (exit code 128 + signal) when a stop signal ended the search."""
        if self.interrupted_by is not None:
            return SearchStatus.interrupted
        cert = self.certificate
        return search_status(self.plan is not None, cert.primal, cert.lower_bound, cert.exact,
                             cert.infeasible, rel_gap)


#: Fewer seconds than this left: no second pass.
SECOND_PASS_MIN_S = 1.0

#: One prepared configuration: its cost tables and analytic bound.
Prepared = tuple[OuterConfig, CostTables, ConfigBound]


class Search:
    """One outer search: owns the prepared configurations, the incumbent and
    the records (:meth:`first_pass`, then :meth:`second_pass`).

    The incumbent is ``(metrics, plan, config)`` of the best evaluated plan.
    A warm-start plan (``incumbent``, e.g. a searcher's) starts as that
    incumbent: configurations whose bound reaches it are pruned, and when the
    exact side finds nothing better the answer carries it, its
    configuration's record holding its value and saying so.
    """

    def __init__(self, graph: LayerGraph, cluster: Cluster, training: Training,
                 space: SearchSpace, params: CostParams, options: SearchOptions,
                 progress: ProgressFn | None = None, incumbent: Plan | None = None) -> None:
        self.start = time.perf_counter()
        #: configurations whose bound :meth:`_raise` has computed (once each)
        self.tightened: set[OuterConfig] = set()
        self.graph, self.cluster, self.training, self.params = graph, cluster, training, params
        self.options, self.progress = options, progress
        self.space = space
        self.inner = InnerSolver(options)
        self.prepared: list[Prepared] = []
        #: configurations whose tables the time limit (or a signal) left unbuilt
        self.late: list[OuterConfig] = []
        self.interrupted_by: int | None = None
        self.fallbacks: list[str] = []
        self._prepare(space)
        self.prepare_s = time.perf_counter() - self.start
        self.prepared.sort(key=lambda item: (item[2].value, item[0]))
        self.records: list[ConfigRecord] = []
        self.seeded = self._seed(incumbent)
        #: where the warm-start incumbent comes from (said in its configuration's record)
        self.seed_source = "the warm-start plan (searcher)"
        if self.seeded is None and options.solver == "auto":
            self.seeded = self._uniform_seed()
            self.seed_source = "the best uniform plan of every configuration, priced first"
        self.best: tuple[PlanMetrics, Plan, OuterConfig] | None = self.seeded
        self.log_tail = ""

    def _prepare(self, space: SearchSpace) -> None:
        """Cost tables and analytic bound of every configuration, within the time limit."""
        configs = outer_configs(self.graph, self.cluster, self.training, space)
        try:
            for cfg in configs:
                if self.remaining_s() <= 0:
                    self.late.append(cfg)        # no time left to build its tables: no bound
                    continue
                tables = build_cost_tables(self.graph, self.cluster, self.training, space,
                                           self.params, cfg.pp, cfg.microbatches, cfg.schedule,
                                           stage_devices=cfg.stage_devices, vp=cfg.vp)
                self.prepared.append((cfg, tables, analytic_lower_bound(tables)))
        except SearchInterrupted as exc:
            self.interrupted_by = exc.signum
            self.late = configs[len(self.prepared):]

    def _stop_requested(self) -> bool:
        """True (and the signal recorded) once ``options.should_stop`` says so."""
        if self.interrupted_by is None and self.options.should_stop is not None \
                and self.options.should_stop():
            signum = self.options.stop_signal() if self.options.stop_signal else None
            self.interrupted_by = signum or 2
        return self.interrupted_by is not None

    def _seed(self, plan: Plan | None) -> tuple[PlanMetrics, Plan, OuterConfig] | None:
        """``(metrics, plan, config)`` of a warm-start plan priced by evaluate(), or
        None when there is none, it does not fit, or it lies outside the space."""
        if plan is None:
            return None
        sizes = None if plan.stage_devices is None else tuple(plan.stage_devices)
        vp = plan.vp_chunks if plan.schedule is Schedule.interleaved and plan.pp > 1 else 1
        cfg = OuterConfig(plan.pp, plan.microbatches, plan.schedule, sizes, vp=vp)
        if cfg not in {c for c, _, _ in self.prepared} | set(self.late):   # in the space
            return None
        if not runs_plan(self.space.runs_on, plan, self.graph, self.space.recompute):
            return None
        metrics = evaluate(plan, self.graph, self.cluster, self.training, self.params)
        return (metrics, plan, cfg) if metrics.feasible else None

    def _uniform_seed(self) -> tuple[PlanMetrics, Plan, OuterConfig] | None:
        """``auto``: the best uniform (Megatron-style) plan over every prepared
        configuration, priced from its tables and checked by evaluate(), as the
        first incumbent: the configurations solved before the best one is reached
        are pruned by their bound, or disproved by a solver cutoff, from the start."""
        from autopar_opt.search.baselines import best_uniform_assignment

        best = None
        for cfg, tables, bound in self.prepared:
            if math.isinf(bound.value) or (best is not None and reaches(bound.value, best[0])):
                continue
            found = best_uniform_assignment(tables)
            if found is not None and (best is None or found[1] < best[0]):
                best = (found[1], found[0], cfg, tables)
        if best is None:
            return None
        plan = best[3].plan_of(best[1])
        metrics = evaluate(plan, self.graph, self.cluster, self.training, self.params)
        return (metrics, plan, best[2]) if metrics.feasible else None

    def record_seed(self, records: list[ConfigRecord]) -> None:
        """The warm-start plan stayed the incumbent: its configuration's record
        (among ``records``, the unfinished ones included) holds its value
        (merged with what the record proves) and says so."""
        if self.seeded is None or self.best is not self.seeded:
            return
        metrics, _, cfg = self.seeded
        for rec in records:
            if rec.config != cfg or not strictly_better(metrics.iteration_time_s, rec.primal):
                continue
            merged = rec.bounds.merge(Bounds(metrics.iteration_time_s, -math.inf))
            rec.primal, rec.lower_bound = merged.primal, merged.lower
            if rec.status in (Status.pruned, Status.not_solved, Status.feasible, Status.optimal):
                rec.status = merged.status(self.options.rel_gap)
            rec.message = "; ".join(m for m in (rec.message, f"primal from {self.seed_source}, "
                                                "priced by evaluate()") if m)

    @property
    def incumbent(self) -> float | None:
        """The best evaluated iteration time so far."""
        return self.best[0].iteration_time_s if self.best else None

    def remaining_s(self) -> float:
        return self.options.time_limit_s - (time.perf_counter() - self.start)

    def run(self) -> SearchResult:
        """Both passes, then the certified result; a stop signal ends them early
        and the result keeps the incumbent and every bound proven so far."""
        try:
            if self.interrupted_by is None:
                self.first_pass()
            if not self._stop_requested():
                self.second_pass()
        except SearchInterrupted as exc:
            self.interrupted_by = exc.signum
        return self.result()

    def first_pass(self) -> None:
        """Every configuration in bound order, each with its share of the time left
        (:func:`_time_share`: counted over the configurations still to be solved, after
        :meth:`tighten` has raised their bounds), never more than the first configuration
        solved had (an equal share of the whole budget): the time the pruning frees
        goes to the second pass, where the configuration with the lowest bound gets it
        (:meth:`second_pass`), not to the configurations solved last, whose bounds are
        the highest (Qwen3-235B-A22B's free space with ``solver: highs``: pp = 16, c = 64
        had 3.5 s and pp = 8 configurations 16 s each, and the search ended at a 19% gap
        with pp = 16, c = 64's bound the certificate's)."""
        cap: float | None = None
        for k in range(len(self.prepared)):
            if k and self._stop_requested():
                return
            self.tighten(k)
            share = _time_share(self.remaining_s(), self.prepared[k:], self.solve_below())
            if cap is not None:
                share = min(share, cap)
            elif self.within_gap(k) is None and not reaches(self.prepared[k][2].value,
                                                            self.incumbent):
                cap = share                 # the first configuration that is solved
            self.records.append(self.solve(k, share))
            if self.progress:
                self.progress(k + 1, len(self.prepared), self.records[-1], self.incumbent,
                              Certificate(self.records).lower_bound)

    def second_pass(self) -> None:
        """Spend the time the first pass left over on the configurations it did not close
        (time-limited, bound below the incumbent by more than the target gap), best
        first with doubling: the open configuration with the lowest bound, the one the
        certificate's bound is and so the only one whose proof can raise it, is solved
        again with twice the time of its last attempt (at least an equal share of what
        is left among the open ones, at most all of it), until it closes, another one's
        bound is lowest, or the time runs out. Its solvers start afresh each time, so
        doubling spends at most about twice what the attempt that closes it needs
        (Qwen3-235B-A22B's free space with ``solver: highs``: equal shares gave pp = 16,
        c = 64 the same few seconds in every attempt and left it at a 9.6 s DP bound, a
        19% gap, where three seconds of its DP prove it). An attempt that stops before
        its time and proves nothing new is not repeated. A new result replaces the old
        record only if it proves more (a higher bound) or finds a better plan; the merged
        record keeps the better of each, and counts the time of every attempt."""
        last = {k: r.time_s for k, r in enumerate(self.records)}
        settled: set[int] = set()
        while not self._stop_requested():
            todo = [k for k in self._open() if k not in settled]
            remaining = self.remaining_s()
            if not todo or remaining < SECOND_PASS_MIN_S:
                return
            k = min(todo, key=lambda i: (self.records[i].lower_bound, i))
            share = min(remaining, max(2 * last[k], remaining / len(todo)))
            last[k] = share
            old = self.records[k]
            new = self.solve(k, share)
            better_bound = new.lower_bound > old.lower_bound
            better_plan = strictly_better(new.primal, old.primal) or (
                new.primal is not None and old.primal is None)
            if not (better_bound or better_plan):
                old.time_s += new.time_s
                if new.time_s < 0.9 * share:
                    settled.add(k)      # stopped early with nothing new: more time will not help
                continue
            new.time_s += old.time_s
            merged = new.bounds.merge(old.bounds)
            new.primal, new.lower_bound, new.exhaustive = merged.primal, merged.lower, merged.exhaustive
            if new.primal is not None and new.status in (Status.optimal, Status.feasible,
                                                          Status.not_solved):
                new.status = merged.status(self.options.rel_gap)
            new.message = "; ".join(m for m in (new.message, "solved again with the time the "
                                                "first pass left over") if m)
            self.records[k] = new

    def tighten(self, k: int) -> None:
        """Before the first pass decides configuration ``k``: once there is an incumbent
        (and a solver has left a configuration open, :meth:`wants_lp`), every
        configuration still to be decided whose bound is below it gets the
        stage-knapsack LP bound (:meth:`_raise`), and they are put back in bound order. So
        the time share (:func:`_time_share`) counts only the configurations the strong
        bound leaves open, and the most promising one is solved first (Qwen3-235B-A22B's
        free space on 256 H100: the analytic bound left pp = 8 and 16 configurations open
        at 6.4-6.6 s against a 6.79 s optimum; the LP closes them on sight). On a mixed
        fleet the analytic bound ignores which group each stage runs on, and the LP is
        what keeps it (benchmarks/heterogeneous: GPT-3 175B on 128 A100 + 256 H100 nodes,
        26 configurations open by the analytic bound against 6 by the LP)."""
        if self.incumbent is None or not self.wants_lp():
            return
        if any([self._raise(i) for i in range(k, len(self.prepared))]):
            self.prepared[k:] = sorted(self.prepared[k:], key=lambda item: (item[2].value, item[0]))

    def within_gap(self, k: int) -> ConfigRecord | None:
        """The record of configuration ``k`` left unsolved because its bound is within
        the target gap of the incumbent (and below it), or None when it is to be solved."""
        cfg, _, bound = self.prepared[k]
        inc = self.incumbent
        if inc is None or math.isinf(bound.value) or reaches(bound.value, inc) \
                or bound.value < inc * (1 - self.options.rel_gap):
            return None
        return ConfigRecord(cfg, Status.not_solved, None, bound.value, 0.0,
                            message=f"its bound {bound.value:.6g} s is within the target gap "
                                    f"({100 * self.options.rel_gap:.3g}%) of the incumbent "
                                    f"{inc:.6g} s; not solved", unsolved_because=WITHIN_GAP)

    def wants_lp(self) -> bool:
        """Whether the stage LP is worth its cost yet: once a solver has left a configuration
        open (its bound below the incumbent by more than the gap). A search the exact DP
        closes configuration by configuration never needs it, and so never loads the LP
        machinery (scipy; tests/cli/test_startup.py)."""
        return any(r.time_s > 0 and r.status in (Status.feasible, Status.not_solved)
                   for r in self.records)

    def _raise(self, k: int) -> bool:
        """Raise configuration ``k``'s bound to the stage-knapsack LP bound
        (:func:`~autopar_opt.search.stage_lp.knapsack_lp_bound`), once, and only if it may
        be solved (its bound below the incumbent): the LP costs 0.01-0.7 s (Qwen3-235B, 94
        layers over 8 stages: 0.7 s), the pruned majority never needs it. True if it rose."""
        cfg, tables, bound = self.prepared[k]
        if not self.wants_lp() or cfg in self.tightened or math.isinf(bound.value) \
                or reaches(bound.value, self.incumbent):
            return False
        if tables.pp == 1 and tables.stage_groups is None:
            return False       # one stage: the LP is the memory Lagrangian's relaxation (LP duality)
        self.tightened.add(cfg)
        strong = knapsack_lp_bound(tables)
        if strong <= bound.value:
            return False
        self.prepared[k] = (cfg, tables, replace(bound, value=strong))
        return True

    def solve_below(self) -> float | None:
        """A configuration whose bound is within the target gap of the incumbent is not
        solved (:meth:`solve`): the share counts only those below that (None: every
        finite one is)."""
        inc = self.incumbent
        return None if inc is None else inc * (1 - self.options.rel_gap)

    def _open(self) -> list[int]:
        inc = self.incumbent if self.incumbent is not None else math.inf
        return [k for k, r in enumerate(self.records)
                if r.status in (Status.not_solved, Status.feasible)
                and r.lower_bound < inc * (1 - self.options.rel_gap)]

    def solve(self, k: int, share: float) -> ConfigRecord:
        """Decide configuration ``k`` (:func:`_handle_config`); a plan it finds is
        evaluated (:func:`_checked_metrics`) and may become the incumbent. Its bound is
        first raised to the stage-knapsack LP bound (:meth:`_raise`); a configuration
        whose bound is then within the target gap of the incumbent is not solved: it
        cannot move the certificate's gap above the target, and its bound is recorded
        (Qwen3-235B-A22B's free space: pp = 8, c = 64 spent 47 s of a 60 s budget
        proving what its 6.78 s LP bound already said against the 6.79 s optimum)."""
        self._raise(k)
        skipped = self.within_gap(k)
        if skipped is not None:
            return skipped
        cfg, tables, bound = self.prepared[k]
        record, plan, log = _handle_config(cfg, tables, bound, self.best, share, self.inner,
                                           self.fallbacks)
        if plan is not None:
            metrics = _checked_metrics(plan, record, self.graph, self.cluster, self.training,
                                       self.params)
            if metrics is not None and (self.incumbent is None
                                        or metrics.iteration_time_s < self.incumbent):
                self.best = (metrics, plan, cfg)
        self.log_tail = log or self.log_tail
        return record

    def result(self) -> SearchResult:
        records = self.records + _unfinished(self.prepared[len(self.records):], self.late,
                                             self.interrupted_by)
        self.record_seed(records)
        best = self.best
        reasons = sorted({r.message for r in records if r.status is Status.infeasible and r.message})
        # the least over the configurations whose tables were built (inf: none of them
        # has a plan at any memory, every one lacks a strategy for some layer)
        least = min((b.least_memory_bytes for _, _, b in self.prepared), default=math.inf)
        if best is None and self.prepared and all(r.status is Status.infeasible for r in records):
            least = min((_least_memory(tables, b) for _, tables, b in self.prepared),
                        default=math.inf)
        return SearchResult(plan=best[1] if best else None, metrics=best[0] if best else None,
                            certificate=Certificate(records), best_config=best[2] if best else None,
                            solver_name=self.inner.name, solver_version=self.inner.version,
                            form=self.inner.form_name, log_tail=self.log_tail[-4000:],
                            least_memory_bytes=least, infeasible_reasons=reasons,
                            wall_time_s=time.perf_counter() - self.start, prepare_s=self.prepare_s,
                            interrupted_by=self.interrupted_by, fallbacks=list(self.fallbacks),
                            tables=[tables for _, tables, _ in self.prepared])


def _least_memory(tables: CostTables, bound: ConfigBound) -> float:
    """A lower bound on the least memory any plan of a configuration needs (modelled bytes
    per device): the larger of the analytic floor and the exact least over every contiguous
    partition of the free per-layer strategies (:func:`~autopar_opt.solvers.dp.common.
    least_memory`, O(n²·pp), a bound under a target's or a fixed split's rules too). Only
    for a proven-infeasible search: QA round 12, the floor alone said "needs at least 1.46
    GiB" where every plan needs 1.68 GiB of 1.60, so the reason fell back to the weaker
    wording. The floor stays on a fleet (its tables hold reference bytes per group)."""
    from autopar_opt.solvers.dp.common import least_memory

    if not math.isfinite(bound.least_memory_bytes) or tables.fleet is not None:
        return bound.least_memory_bytes
    return max(bound.least_memory_bytes, least_memory(tables))


def _unfinished(rest: list, late: list[OuterConfig], interrupted: int | None) -> list[ConfigRecord]:
    """Records of the configurations the search did not get to: the ones with
    tables keep their analytic bound, the ones without have no bound (-inf)."""
    why = (f"the search was interrupted (signal {interrupted}) before this configuration "
           "finished" if interrupted is not None else "search time limit reached before this "
           "configuration")
    out = [ConfigRecord(cfg, Status.not_solved, None, bound.value, 0.0,
                        message=f"{why}; its analytic lower bound is recorded")
           for cfg, _, bound in rest]
    out += [ConfigRecord(cfg, Status.not_solved, None, -math.inf, 0.0,
                         message=f"{why} (its cost tables were not built); no bound")
            for cfg in late]
    return out


def runs_plan(target, plan: Plan, graph: LayerGraph, recompute: tuple = ()) -> bool:
    """Whether ``target`` (a space's ``runs_on``; None: the free space) runs every
    layer's strategy of ``plan`` (:meth:`~autopar_opt.ir.target.Target.strategy_problem`)
    with one value per uniform dimension over the model
    (:func:`~autopar_opt.ir.target.uniform_key`), or, given the space's ``recompute``
    modes, as Megatron's block recomputation where the target's space holds it
    (:meth:`~autopar_opt.ir.target.Target.searches_blocks`, in every configuration; the
    exporter's :func:`~autopar_opt.ir.recompute_pattern.block_layers` rule). A warm-start
    plan that breaks them is not the incumbent of the target's search: its answer must
    be runnable."""
    if target is None:
        return True
    from autopar_opt.ir.recompute_pattern import block_layers, stage_blocks
    from autopar_opt.ir.target import ANY, RECOMPUTE_DIM as rc, keeps_uniform_rule, uniform_key

    by_name = {name: s for stage in plan.stages for name, s in zip(stage.layers, stage.strategies)}
    pairs = [(layer, by_name.get(layer.name)) for layer in graph.layers]
    if any(s is None or target.strategy_problem(layer, s, plan.pp) is not None
           for layer, s in pairs):
        return False
    keys = [uniform_key(layer, s) for layer, s in pairs]
    if keeps_uniform_rule(keys):
        return True
    chunks = plan.vp_chunks if plan.schedule is Schedule.interleaved and plan.vp_chunks > 1 else 1
    if not target.searches_blocks(recompute) or not keeps_uniform_rule(
            k[:rc] + (ANY,) + k[rc + 1:] for k in keys):
        return False
    return block_layers(stage_blocks(plan, graph), chunks) is not None


def run_search(graph: LayerGraph, cluster: Cluster, training: Training, space: SearchSpace,
               params: CostParams, options: SearchOptions,
               progress: ProgressFn | None = None, incumbent: Plan | None = None) -> SearchResult:
    """Search every outer configuration and return the certified best plan
    (``incumbent``: a warm-start plan, see :class:`Search`)."""
    return Search(graph, cluster, training, space, params, options, progress, incumbent).run()


def _time_share(remaining: float, rest: list, below: float | None) -> float:
    """Time for the next configuration: an equal share of what is left among the
    configurations that may still need solving (bound below ``below``, the value at
    which the search stops solving one: :meth:`Search.solve_below`), so one hard
    configuration cannot starve the others of their bounds."""
    if remaining <= 0:
        return remaining
    open_configs = sum(1 for _, _, b in rest
                       if not math.isinf(b.value) and (below is None or b.value < below))
    return max(remaining / max(open_configs, 1), min(1.0, remaining))


def _handle_config(cfg: OuterConfig, tables: CostTables, bound: ConfigBound, best,
                   remaining: float, inner: InnerSolver,
                   fallbacks: list[str] | None = None) -> tuple[ConfigRecord, Plan | None, str]:
    """Decide, for one configuration: proven infeasible, pruned, out of time, or solve.

    ``best`` is the incumbent ``(metrics, plan, config)`` or None."""
    incumbent = best[0].iteration_time_s if best else None
    if math.isinf(bound.value):
        return ConfigRecord(cfg, Status.infeasible, None, math.inf, 0.0, exhaustive=True,
                            message=bound.infeasible_reason), None, ""
    if reaches(bound.value, incumbent):
        why = (f"lower bound {bound.value:.6g} s >= incumbent {incumbent:.6g} s "
               f"({best[2].label()})")
        return ConfigRecord(cfg, Status.pruned, None, bound.value, 0.0, pruned_by=why), None, ""
    if remaining <= 0:
        return ConfigRecord(cfg, Status.not_solved, None, bound.value, 0.0,
                            message="search time limit reached before this configuration; "
                                    "its analytic lower bound is recorded"), None, ""
    outcome = _solve_or_fall_back(inner, tables, remaining, cfg, fallbacks, incumbent)
    result = outcome.result
    # both are valid bounds (an infeasibility proof keeps its +inf)
    bounds = outcome.bounds.merge(Bounds(None, bound.value, False, "analytic"))
    record = ConfigRecord(cfg, outcome.status, bounds.primal, bounds.lower, result.wall_time_s,
                          model_hash=outcome.model_hash, message=result.message,
                          timings=dict(result.timings), exhaustive=bounds.exhaustive,
                          method=outcome.method or result.solver)
    if incumbent is not None and record.status in (Status.not_solved, Status.feasible) \
            and record.lower_bound >= incumbent * (1 - inner.options.rel_gap):
        # the solver stopped at the incumbent (its cutoff): this configuration cannot
        # beat the incumbent by more than the requested gap
        record.status = Status.pruned
        record.pruned_by = (f"lower bound {record.lower_bound:.6g} s proven by the solver, within "
                            f"the gap of the incumbent {incumbent:.6g} s ({best[2].label()})")
    plan = tables.plan_of(outcome.assignment) if outcome.assignment is not None else None
    return record, plan, result.log


def _solve_or_fall_back(inner: InnerSolver, tables: CostTables, remaining: float, cfg: OuterConfig,
                        fallbacks: list[str] | None, incumbent: float | None = None):
    """``inner.solve``; when the backend errors (a size-limited licence, a solver
    crash), the default backend solves the configuration on the time left."""
    from autopar_opt.core.result import SolveResult, Termination
    from autopar_opt.search.inner import InnerOutcome

    began = time.perf_counter()
    try:
        outcome = inner.solve(tables, remaining, cfg, incumbent)
    except Exception as exc:     # noqa: BLE001 - a backend bug must not lose the search
        outcome = InnerOutcome(SolveResult(
            termination=Termination.error, primal=None, lower_bound=-math.inf,
            wall_time_s=time.perf_counter() - began, solver=inner.name,
            solver_version=inner.version, message=f"{type(exc).__name__}: {str(exc)[:300]}"),
            None).derive(inner.options.rel_gap)
    failed = outcome.result
    fallback = inner.fallback() if failed.termination is Termination.error else None
    if fallback is None:
        return outcome
    left = max(remaining - (time.perf_counter() - began), 0.1)
    second = fallback.solve(tables, left, cfg, incumbent)
    line = (f"{cfg.label()}: {inner.name} failed ({failed.message or 'solver error'}); "
            f"solved with {fallback.name} instead")
    if fallbacks is not None:
        fallbacks.append(line)
    second.result = second.result.with_(message="; ".join(
        m for m in (f"{inner.name} failed ({failed.message}); solved with {fallback.name}",
                    second.result.message) if m))
    return second


def _checked_metrics(plan: Plan, record: ConfigRecord, graph, cluster, training,
                     params) -> PlanMetrics | None:
    """evaluate(plan) must equal the solver objective; returns the plan's metrics."""
    metrics = evaluate(plan, graph, cluster, training, params)
    value = metrics.iteration_time_s
    if not metrics.feasible:
        record.status = Status.error
        record.message = "decoded plan violates the memory limit under evaluate(); discarded"
        record.primal = None
        return None
    if record.primal is not None and abs(value - record.primal) > CONSISTENCY_RTOL * max(1.0, value):
        record.message = (f"solver objective {record.primal:.9g} differs from evaluate() "
                          f"{value:.9g}; the evaluated value is used")
    record.primal = value
    return metrics
