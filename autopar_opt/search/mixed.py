"""The whole search on a mixed fleet: pipeline shapes and replica classes, one certificate.

:func:`run_fleet_search` runs the pipeline search over every shape of the fleet
(:mod:`autopar_opt.search.fleet`: one pipeline, each stage on one group, any
subset of the groups) and then the replica-class search
(:mod:`autopar_opt.search.replicas`: the batch split over data-parallel classes
on disjoint groups), the second starting from the first's incumbent. The
certificate holds every record of both; its global bound is the least bound of
all, so it bounds the whole space (docs/DESIGN.md §4).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from autopar_opt.cost.evaluate import PlanMetrics
from autopar_opt.cost.fleet_tables import FleetTableCache
from autopar_opt.cost.params import CostParams
from autopar_opt.cost.replicas import ReplicaMetrics
from autopar_opt.core.bounds import SearchStatus, Status, search_status
from autopar_opt.ir.fleet import Fleet
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.replicas import ReplicaPlan
from autopar_opt.ir.training import SearchSpace, Training
from autopar_opt.search.certificate import Certificate
from autopar_opt.search.engine import SECOND_PASS_MIN_S, ProgressFn, SearchOptions, SearchResult
from autopar_opt.search.fleet import FleetSearch
from autopar_opt.search.replicas import DEFAULT_SPLIT_PARTS, ReplicaSearch, replica_partitions

#: Shares of the time left that the single-group pipelines and then the replica
#: classes may use (the pipelines over several groups get the rest).
SINGLE_SHARE = 0.3
REPLICA_SHARE = 0.6


@dataclass
class FleetResult:
    """Best plan on a fleet (a pipeline :class:`Plan` or a :class:`ReplicaPlan`),
    its metrics, the certificate of both searches and the pipeline search's own
    result (its tables, baselines and timings)."""

    plan: Plan | ReplicaPlan | None
    metrics: PlanMetrics | ReplicaMetrics | None
    certificate: Certificate
    best_label: str | None
    pipeline: SearchResult
    wall_time_s: float
    replica_records: int = 0
    notes: list[str] = field(default_factory=list)
    #: the signal that stopped any phase of the search (None: it ran to its end)
    interrupted_by: int | None = None

    def status(self, rel_gap: float) -> SearchStatus:
        """The one status rule (:func:`~autopar_opt.core.bounds.search_status`)."""
        if self.interrupted_by is not None:
            return SearchStatus.interrupted
        cert = self.certificate
        return search_status(self.plan is not None, cert.primal, cert.lower_bound, cert.exact,
                             cert.infeasible, rel_gap)


def run_fleet_search(graph: LayerGraph, fleet: Fleet, training: Training, space: SearchSpace,
                     params: CostParams, options: SearchOptions, progress: ProgressFn | None = None,
                     split_parts: int = DEFAULT_SPLIT_PARTS) -> FleetResult:
    """Certified best plan on ``fleet`` over both shapes, in phases that share one
    incumbent: pipelines on one group (today's homogeneous searches, cheap, good
    incumbents), replica classes (:class:`ReplicaSearch`, then its second pass on
    splits not closed), pipelines over several groups pruned by everything found
    before, then, while time is left, another pass on what each phase left open."""
    start = time.perf_counter()
    deadline = start + options.time_limit_s
    cache = FleetTableCache()
    partitions = replica_partitions(fleet)
    best: list = []                       # [value, plan, metrics, label] of the incumbent

    def left(share: float) -> SearchOptions:
        return replace(options, time_limit_s=max((deadline - time.perf_counter()) * share, 0.0))

    def offer(value: float | None, plan, metrics, label: str) -> None:
        if value is not None and (not best or value < best[0]):
            best[:] = [value, plan, metrics, label]

    def take(res) -> None:
        if res.plan is not None:
            offer(res.metrics.iteration_time_s, res.plan, res.metrics, res.best_config.label())

    single_search = FleetSearch(graph, fleet, training, space, params, left(SINGLE_SHARE), progress,
                                cache=cache, mixed=False)
    single = single_search.run()
    take(single)
    rep_records: list = []
    search: ReplicaSearch | None = None
    stopped = single.interrupted_by is not None
    if partitions and not stopped:
        search = ReplicaSearch(graph, fleet, training, space, params, options, split_parts, cache)
        cut = deadline - (deadline - time.perf_counter()) * (1 - REPLICA_SHARE)
        rep_records, found = search.run(best[0] if best else None, cut)
        if found is not None:
            offer(found.metrics.iteration_time_s, found.plan, found.metrics, found.config.label())
        found = search.second_pass(rep_records, best[0] if best else None,
                                   deadline - (deadline - time.perf_counter()) * (1 - REPLICA_SHARE))
        if found is not None:
            offer(found.metrics.iteration_time_s, found.plan, found.metrics, found.config.label())
        stopped = search.stopped()
    mixed_search: FleetSearch | None = None
    pipe = single
    if len(fleet.groups) > 1 and not stopped:
        open_splits = any(r.status in (Status.feasible, Status.not_solved) for r in rep_records)
        mixed_search = FleetSearch(graph, fleet, training, space, params,
                                   left(0.6 if open_splits else 1.0), progress, cache=cache, mixed=True,
                                   cutoff=best[0] if best else None,
                                   cutoff_source=f"the plan of {best[3]}" if best else "")
        pipe = mixed_search.run()
        take(pipe)
        stopped = pipe.interrupted_by is not None
    if search is not None and time.perf_counter() < deadline - 1.0 and not stopped:
        found = search.second_pass(rep_records, best[0] if best else None, deadline)
        if found is not None:
            offer(found.metrics.iteration_time_s, found.plan, found.metrics, found.config.label())
    results = {id(single_search): single}
    if mixed_search is not None:
        results[id(mixed_search)] = pipe
    for phase in (mixed_search, single_search):    # the time left: what each phase left open
        if phase is None or stopped or deadline - time.perf_counter() < SECOND_PASS_MIN_S:
            continue
        phase.cutoff = best[0] if best else phase.cutoff
        phase.cutoff_source = f"the plan of {best[3]}" if best else phase.cutoff_source
        phase.options = replace(phase.options, time_limit_s=deadline - phase.start)
        phase.second_pass()
        results[id(phase)] = phase.result()
        take(results[id(phase)])
        stopped = results[id(phase)].interrupted_by is not None
    single = results[id(single_search)]
    if mixed_search is not None:
        pipe = results[id(mixed_search)]
    records = list(single.certificate.configurations) + rep_records
    if pipe is not single:
        records += pipe.certificate.configurations
    plan, metrics, label = (best[1], best[2], best[3]) if best else (None, None, None)
    signal = next((x for x in (single.interrupted_by, search and search.interrupted_by,
                               pipe.interrupted_by) if x is not None), None)
    return FleetResult(plan, metrics, Certificate(records), label, pipe,
                       time.perf_counter() - start, len(rep_records), interrupted_by=signal)
