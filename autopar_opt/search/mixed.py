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
from autopar_opt.search.engine import ProgressFn, SearchOptions, SearchResult
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
    before, and a last pass on the splits still open with the time left."""
    start = time.perf_counter()
    deadline = start + options.time_limit_s
    cache = FleetTableCache()
    partitions = replica_partitions(fleet)

    def left(share: float) -> SearchOptions:
        return replace(options, time_limit_s=max((deadline - time.perf_counter()) * share, 0.0))

    single = FleetSearch(graph, fleet, training, space, params, left(SINGLE_SHARE), progress,
                         cache=cache, mixed=False).run()
    records = list(single.certificate.configurations)
    best: tuple[float, Plan | ReplicaPlan, object, str] | None = None
    if single.plan is not None:
        best = (single.metrics.iteration_time_s, single.plan, single.metrics, single.best_config.label())
    n_rep = 0
    rep_records: list = []
    search: ReplicaSearch | None = None
    stopped = single.interrupted_by is not None
    if partitions and not stopped:
        search = ReplicaSearch(graph, fleet, training, space, params, options, split_parts, cache)
        cut = deadline - (deadline - time.perf_counter()) * (1 - REPLICA_SHARE)
        rep_records, found = search.run(best[0] if best else None, cut)
        n_rep = len(rep_records)
        if found is not None and (best is None or found.metrics.iteration_time_s < best[0]):
            best = (found.metrics.iteration_time_s, found.plan, found.metrics, found.config.label())
        found = search.second_pass(rep_records, best[0] if best else None,
                                   deadline - (deadline - time.perf_counter()) * (1 - REPLICA_SHARE))
        if found is not None and found.metrics.iteration_time_s < best[0]:
            best = (found.metrics.iteration_time_s, found.plan, found.metrics, found.config.label())
    stopped = stopped or (search is not None and search.stopped())
    pipe = single
    if len(fleet.groups) > 1 and not stopped:
        open_splits = any(r.status in (Status.feasible, Status.not_solved) for r in rep_records)
        pipe = FleetSearch(graph, fleet, training, space, params, left(0.6 if open_splits else 1.0),
                           progress, cache=cache,
                           mixed=True, cutoff=best[0] if best else None,
                           cutoff_source=f"the plan of {best[3]}" if best else "").run()
        if pipe.plan is not None and (best is None or pipe.metrics.iteration_time_s < best[0]):
            best = (pipe.metrics.iteration_time_s, pipe.plan, pipe.metrics, pipe.best_config.label())
    stopped = stopped or pipe.interrupted_by is not None
    if search is not None and time.perf_counter() < deadline - 1.0 and not stopped:
        found = search.second_pass(rep_records, best[0] if best else None, deadline)
        if found is not None and (best is None or found.metrics.iteration_time_s < best[0]):
            best = (found.metrics.iteration_time_s, found.plan, found.metrics, found.config.label())
    records += rep_records
    if pipe is not single:
        records += pipe.certificate.configurations
    plan, metrics, label = (best[1], best[2], best[3]) if best else (None, None, None)
    signal = next((x for x in (single.interrupted_by, search and search.interrupted_by,
                               pipe.interrupted_by) if x is not None), None)
    return FleetResult(plan, metrics, Certificate(records), label, pipe,
                       time.perf_counter() - start, n_rep, interrupted_by=signal)
