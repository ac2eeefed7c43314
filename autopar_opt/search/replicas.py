"""Exact search over data-parallel replica classes (issue 34; docs/DESIGN.md §11, shape D).

A configuration is a partition of some of the fleet's groups into ``K >= 2``
classes and a split of the global batch over them (:class:`SplitConfig`). Its
optimum is ``max_t OPT_t(B_t) + S`` (:mod:`autopar_opt.cost.replicas`): the
classes' plans are independent once the split is fixed, and ``S`` does not
depend on them. Each ``OPT_t(B_t)`` is a pipeline search on the class's groups
(:class:`~autopar_opt.search.fleet.FleetSearch`) with its own certificate
``λ_t ≤ OPT_t(B_t) ≤ P_t``, so ``max_t λ_t + S`` is a proven bound of the split
and ``max_t P_t + S`` the value of a plan.

The splits searched (the stated space): every batch share a positive multiple
of ``q``, the largest divisor of the global batch ``B`` not above ``B/P``
(``P`` = :data:`DEFAULT_SPLIT_PARTS`, 16; no spec key sets it). Every split gets a bound before any is
solved: per class and share, the least analytic bound over the class's
configurations (:func:`~autopar_opt.search.bounds.analytic_lower_bound` on tables
without edge matrices). Splits are then solved in bound order; a split whose
bound reaches the incumbent is pruned, one within the target gap of it is left
with its bound, and a split stops as soon as one class's proven bound alone
reaches the incumbent. Every split is one record of the certificate.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from itertools import combinations

from autopar_opt.core.bounds import Status, reaches
from autopar_opt.cost.evaluate import PlanMetrics
from autopar_opt.cost.fleet_tables import FleetTableCache, build_fleet_tables
from autopar_opt.cost.params import CostParams
from autopar_opt.cost.replicas import class_training, cross_class_sync, evaluate_replicas
from autopar_opt.ir.fleet import Fleet
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.replicas import ReplicaClass, ReplicaPlan
from autopar_opt.ir.strategies import divisors
from autopar_opt.ir.training import SearchSpace, Training
from autopar_opt.search.bounds import analytic_lower_bound
from autopar_opt.search.certificate import WITHIN_GAP, ConfigRecord
from autopar_opt.search.engine import SearchOptions
from autopar_opt.search.fleet import FleetSearch, fleet_outer_configs

#: Parts the global batch is split in (a constant: the spec has no key for it).
DEFAULT_SPLIT_PARTS = 16


@dataclass(frozen=True)
class SplitConfig:
    """One shape-D configuration: the groups of every class and its batch share."""

    classes: tuple[tuple[int, ...], ...]
    batches: tuple[int, ...]

    def label(self) -> str:
        parts = ["+".join(map(str, c)) for c in self.classes]
        return f"classes={'|'.join(parts)} batch={'+'.join(map(str, self.batches))}"

    def to_dict(self) -> dict:
        return {"classes": [list(c) for c in self.classes], "batches": list(self.batches)}

    def __lt__(self, other: "SplitConfig") -> bool:
        return (self.classes, self.batches) < (other.classes, other.batches)


def replica_partitions(fleet: Fleet) -> list[tuple[tuple[int, ...], ...]]:
    """Partitions of non-empty subsets of the groups into at least two classes
    (classes sorted by their first group); groups of different classes must be
    linked (the cross-class all-reduce needs a path)."""
    n = len(fleet.groups)
    out: list[tuple[tuple[int, ...], ...]] = []

    def blocks(items: list[int]) -> list[list[list[int]]]:
        if not items:
            return [[]]
        first, rest = items[0], items[1:]
        res = []
        for part in blocks(rest):
            res.append([[first]] + part)
            for i in range(len(part)):
                res.append(part[:i] + [[first] + part[i]] + part[i + 1:])
        return res

    for k in range(2, n + 1):
        for subset in combinations(range(n), k):
            for part in blocks(list(subset)):
                if len(part) < 2:
                    continue
                classes = tuple(sorted(tuple(sorted(b)) for b in part))
                if all(fleet.link(g, h) is not None for a, b in combinations(classes, 2)
                       for g in a for h in b):
                    out.append(classes)
    return sorted(set(out))


def batch_quantum(batch: int, parts: int) -> int:
    """The largest divisor of ``batch`` not above ``batch / parts`` (at least 1)."""
    return max(d for d in divisors(batch) if d * parts <= batch) if batch >= parts else 1


def batch_splits(batch: int, quantum: int, k: int) -> list[tuple[int, ...]]:
    """Every split of ``batch`` into ``k`` positive multiples of ``quantum``."""
    units = batch // quantum
    out = []
    for cuts in combinations(range(1, units), k - 1):
        bounds = (0, *cuts, units)
        out.append(tuple((bounds[i + 1] - bounds[i]) * quantum for i in range(k)))
    return out


@dataclass
class ClassOutcome:
    """A class's certified pipeline search at one batch share."""

    primal: float | None
    lower: float
    plan: Plan | None
    metrics: PlanMetrics | None
    time_s: float
    status: str


@dataclass
class ReplicaBest:
    """The best replica plan found, its metrics and configuration."""

    plan: ReplicaPlan
    metrics: object
    config: SplitConfig


def bound_words(bound: float) -> str:
    """What a split left unsolved keeps: its analytic bound, or none when the time limit
    came before the bound was computed (its lower bound is -inf, and the certificate's)."""
    if math.isfinite(bound):
        return "its bound is recorded"
    return "the time limit came before its bound was computed (lower bound -inf)"


class ReplicaSearch:
    """The split search of one fleet (module doc)."""

    def __init__(self, graph: LayerGraph, fleet: Fleet, training: Training, space: SearchSpace,
                 params: CostParams, options: SearchOptions, parts: int = DEFAULT_SPLIT_PARTS,
                 cache: FleetTableCache | None = None) -> None:
        self.graph, self.fleet, self.training, self.space, self.params = graph, fleet, training, space, params
        self.options, self.parts = options, parts
        self.cache = cache if cache is not None else FleetTableCache()
        self.bounds: dict[tuple, float] = {}
        #: (class, batch) whose space has no outer configuration at all (class_bound)
        self.no_configuration: dict[tuple, bool] = {}
        self.outcomes: dict[tuple, ClassOutcome] = {}
        #: the signal that stopped the search (``options.should_stop``), None while running
        self.interrupted_by: int | None = None

    def stopped(self) -> bool:
        """True (and the signal recorded) once ``options.should_stop`` says so."""
        stop = self.options.should_stop
        if self.interrupted_by is None and stop is not None and stop():
            signum = self.options.stop_signal() if self.options.stop_signal else None
            self.interrupted_by = signum or 2
        return self.interrupted_by is not None

    def class_bound(self, cls: tuple[int, ...], batch: int) -> float:
        """Least analytic bound over the class's configurations at ``batch`` (+inf:
        every configuration proven infeasible)."""
        key = (cls, batch)
        if key not in self.bounds:
            tr = class_training(self.training, batch)
            best, configs = math.inf, 0
            for cfg in fleet_outer_configs(self.graph, self.fleet, tr, self.space, cls,
                                           cover=True):
                configs += 1
                tables = build_fleet_tables(self.graph, self.fleet, tr, self.space, self.params,
                                            cfg.microbatches, cfg.schedule, cfg.stage_groups,
                                            cfg.stage_devices, cache=self.cache, with_edges=False)
                best = min(best, analytic_lower_bound(tables).value)
            self.bounds[key] = best
            self.no_configuration[key] = configs == 0
        return self.bounds[key]

    def infeasible_class_reason(self, cfg: SplitConfig) -> str:
        """Why a split has no plan: the first class whose batch share no configuration of
        the search space can take (no allowed micro-batch count splits it over the class's
        data-parallel ranks), else a class with no plan that fits in memory at its share."""
        for cls, batch in zip(cfg.classes, cfg.batches):
            if self.no_configuration.get((cls, batch)):
                return (f"no configuration of the search space takes a batch share of {batch} on "
                        f"{'+'.join(self.fleet.groups[i].name for i in cls)} (no allowed micro-batch count splits "
                        "it over the class's data-parallel ranks: search.microbatches)")
        return "a class has no plan that fits in memory at its batch share"

    def class_solve(self, cls: tuple[int, ...], batch: int, time_limit_s: float,
                    again: bool = False) -> ClassOutcome:
        """The class's pipeline search at ``batch`` (cached; ``again``: search once more with
        this time when the cached one did not close, keeping the better plan and the larger
        bound of the two)."""
        key = (cls, batch)
        old = self.outcomes.get(key)
        if old is not None and not (again and old.status != "optimal"):
            return old
        opts = replace(self.options, time_limit_s=max(time_limit_s, 0.1), export_dir=None)
        tr = class_training(self.training, batch)
        # a class's plan runs on every group of the class (evaluate_replicas): a shape on
        # fewer is another partition's (QA round 6: 31 of 45 two-group classes of a 3-group
        # fleet answered on one group, and pricing the split raised "invalid plan")
        res = FleetSearch(self.graph, self.fleet, tr, self.space, self.params, opts,
                          groups=cls, cache=self.cache, cover=True).run()
        cert = res.certificate
        new = ClassOutcome(cert.primal if res.plan is not None else None,
                           max(cert.lower_bound, self.class_bound(cls, batch)), res.plan, res.metrics,
                           res.wall_time_s, str(res.status(self.options.rel_gap)))
        if old is not None:
            if old.primal is not None and (new.primal is None or old.primal < new.primal):
                new.primal, new.plan, new.metrics = old.primal, old.plan, old.metrics
            new.lower = max(new.lower, old.lower)
            new.time_s += old.time_s
            closed = new.primal is not None and new.primal - new.lower <= self.options.rel_gap * new.primal
            new.status = "optimal" if closed else new.status
        self.outcomes[key] = new
        return new

    def run(self, incumbent: float | None, deadline: float) -> tuple[list[ConfigRecord], ReplicaBest | None]:
        """Every split of every partition: one record each, and the best replica plan
        found (None when none beats ``incumbent``)."""
        batch = self.training.global_batch_size
        q = batch_quantum(batch, self.parts)
        items: list[tuple[float, SplitConfig, float]] = []
        for classes in replica_partitions(self.fleet):
            if len(classes) * q > batch:
                continue
            sync = cross_class_sync(self.graph, self.fleet, self.training, self.params, classes).time_s
            for split in batch_splits(batch, q, len(classes)):
                if time.perf_counter() > deadline or self.stopped():
                    items.append((-math.inf, SplitConfig(classes, split), sync))
                    continue
                bound = max(self.class_bound(c, b) for c, b in zip(classes, split)) + sync
                items.append((bound, SplitConfig(classes, split), sync))
        items.sort(key=lambda it: (it[0], it[1]))
        records: list[ConfigRecord] = []
        best: ReplicaBest | None = None
        for n, (bound, cfg, sync) in enumerate(items):
            if self.stopped():
                records.append(ConfigRecord(cfg, Status.not_solved, None, bound, 0.0,
                                            message=f"the search was interrupted (signal "
                                                    f"{self.interrupted_by}) before this split; "
                                                    + bound_words(bound)))
                continue
            inc = incumbent if best is None else min(incumbent or math.inf, best.metrics.iteration_time_s)
            inc = None if inc is None or math.isinf(inc) else inc
            still = sum(1 for b, _, _ in items[n:] if inc is None or b < inc * (1 - self.options.rel_gap))
            record, found = self._decide(cfg, bound, sync, inc, deadline, max(still, 1))
            records.append(record)
            if found is not None and (inc is None or found.metrics.iteration_time_s < inc):
                best = found
        self.items = {cfg: (bound, sync) for bound, cfg, sync in items}
        return records, best

    def second_pass(self, records: list[ConfigRecord], incumbent: float | None,
                    deadline: float) -> ReplicaBest | None:
        """Spend the time left on the splits not closed (a class search that ran out of
        its share: status feasible, bound below the incumbent by more than the target
        gap), lowest bound first; a record is replaced in place when the new search
        proves more or finds a better plan. Returns a better replica plan, if found."""
        best = None
        for _ in range(2):
            inc = incumbent if best is None else min(incumbent or math.inf, best.metrics.iteration_time_s)
            todo = sorted((k for k, r in enumerate(records)
                           if r.status in (Status.feasible, Status.not_solved) and r.lower_bound > -math.inf
                           and (inc is None or r.lower_bound < inc * (1 - self.options.rel_gap))),
                          key=lambda k: records[k].lower_bound)
            if not todo:
                return best
            for n, k in enumerate(todo):
                left = deadline - time.perf_counter()
                if left < 1.0 or self.stopped():
                    return best
                cfg = records[k].config
                bound, sync = self.items[cfg]
                record, found = self._decide(cfg, max(bound, records[k].lower_bound), sync, inc,
                                             deadline, len(todo) - n, again=True)
                if record.lower_bound > records[k].lower_bound or record.primal is not None:
                    record.time_s += records[k].time_s
                    records[k] = record
                if found is not None and (best is None or found.metrics.iteration_time_s
                                          < best.metrics.iteration_time_s):
                    best = found
        return best

    def _decide(self, cfg: SplitConfig, bound: float, sync: float, incumbent: float | None,
                deadline: float, left: int, again: bool = False) -> tuple[ConfigRecord, ReplicaBest | None]:
        """One split: infeasible, pruned, out of time, within the gap, or solved."""
        if math.isinf(bound) and bound > 0:
            return ConfigRecord(cfg, Status.infeasible, None, math.inf, 0.0, exhaustive=True,
                                message=self.infeasible_class_reason(cfg)), None
        if reaches(bound, incumbent):
            return ConfigRecord(cfg, Status.pruned, None, bound, 0.0,
                                pruned_by=f"lower bound {bound:.6g} s >= incumbent {incumbent:.6g} s"), None
        if incumbent is not None and bound >= incumbent * (1 - self.options.rel_gap):
            return ConfigRecord(cfg, Status.not_solved, None, bound, 0.0,
                                message="its bound is within the target gap of the incumbent",
                                unsolved_because=WITHIN_GAP), None
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return ConfigRecord(cfg, Status.not_solved, None, bound, 0.0,
                                message="search time limit reached before this split; "
                                        + bound_words(bound)), None
        began = time.perf_counter()
        order = sorted(range(len(cfg.classes)),
                       key=lambda t: -self.class_bound(cfg.classes[t], cfg.batches[t]))
        share = remaining / max(left, 1) / len(order)
        outcomes: dict[int, ClassOutcome] = {}
        lower = bound
        for t in order:
            out = self.class_solve(cfg.classes[t], cfg.batches[t], max(share, min(1.0, remaining)),
                                   again=again)
            outcomes[t] = out
            lower = max(lower, out.lower + sync)
            if reaches(lower, incumbent) or out.plan is None:
                break
        spent = time.perf_counter() - began
        if len(outcomes) < len(order) or any(o.plan is None for o in outcomes.values()):
            if math.isinf(lower) and lower > 0:
                return ConfigRecord(cfg, Status.infeasible, None, math.inf, spent, exhaustive=True,
                                    message=self.infeasible_class_reason(cfg)), None
            status = Status.pruned if reaches(lower, incumbent) else Status.not_solved
            return ConfigRecord(cfg, status, None, lower, spent,
                                pruned_by=(f"a class's proven bound gives {lower:.6g} s >= incumbent "
                                           f"{incumbent:.6g} s" if status is Status.pruned else None),
                                message="" if status is Status.pruned else
                                "a class found no plan within its time"), None
        plan = ReplicaPlan([ReplicaClass(cfg.classes[t], cfg.batches[t], outcomes[t].plan)
                            for t in range(len(cfg.classes))])
        metrics = evaluate_replicas(plan, self.graph, self.fleet, self.training, self.params)
        primal = metrics.iteration_time_s
        if primal < lower <= primal * (1 + 1e-9):     # round-off of one number (clamp_to_primal)
            lower = primal
        gap_ok = primal - lower <= self.options.rel_gap * primal + 1e-12 * primal
        status = Status.optimal if gap_ok else Status.feasible
        msg = "; ".join(f"class {'+'.join(map(str, cfg.classes[t]))}: {outcomes[t].status}"
                        for t in range(len(cfg.classes)))
        return (ConfigRecord(cfg, status, primal, lower, spent, message=msg, exhaustive=gap_ok),
                ReplicaBest(plan, metrics, cfg))
