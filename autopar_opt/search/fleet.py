"""The outer search on a mixed fleet, pipeline shape (issue 34; docs/DESIGN.md §11, shape P).

A configuration fixes every stage's group and device count (the device-type
index per stage: :attr:`OuterConfig.stage_groups <autopar_opt.search.configs.OuterConfig>`),
the micro-batch count and the schedule. :class:`FleetSearch` is the
:class:`~autopar_opt.search.engine.Search` of today with the configurations of
:func:`fleet_outer_configs` and the tables of
:func:`~autopar_opt.cost.fleet_tables.build_fleet_tables`; every inner solve,
bound, pruning rule, evaluate check and certificate is the engine's own.
"""

from __future__ import annotations

import math
from dataclasses import replace

from autopar_opt.core.bounds import Status, reaches
from autopar_opt.core.interrupts import SearchInterrupted
from autopar_opt.cost.fleet_tables import FleetTableCache, build_fleet_tables
from autopar_opt.cost.tables import CostTables
from autopar_opt.cost.params import CostParams
from autopar_opt.ir.fleet import Fleet
from autopar_opt.ir.fleet_pipeline import fleet_shapes
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.training import Schedule, SearchSpace, Training
from autopar_opt.search.bounds import ConfigBound, analytic_lower_bound
from autopar_opt.search.fleet_bounds import load_balance_bound
from autopar_opt.search.certificate import ConfigRecord
from autopar_opt.search.configs import OuterConfig, microbatch_counts
from autopar_opt.search.engine import ProgressFn, Search, SearchOptions


def fleet_outer_configs(graph: LayerGraph, fleet: Fleet, training: Training, space: SearchSpace,
                        groups: tuple[int, ...] | None = None,
                        mixed: bool | None = None, cover: bool = False) -> list[OuterConfig]:
    """Every configuration of the fleet search: each shape of
    :func:`~autopar_opt.ir.fleet_pipeline.fleet_shapes` (on ``groups``, default
    all; ``mixed`` True: only shapes on two groups or more, False: only shapes on
    one group; ``cover``: only shapes on every one of ``groups``, as a replica class's
    plan is, :func:`~autopar_opt.cost.replicas.evaluate_replicas`) × micro-batch counts ×
    schedules (one schedule for ``pp = 1``)."""
    schedules = [Schedule(s) for s in space.schedules]
    out = []
    for gs, ds in fleet_shapes(fleet, len(graph.layers), space.pp_degrees, groups):
        if mixed is not None and (len(set(gs)) > 1) != mixed:
            continue
        if cover and groups is not None and set(gs) != set(groups):
            continue
        pp = len(gs)
        scheds = schedules
        if pp == 1:
            scheds = [Schedule.one_f_one_b] if Schedule.one_f_one_b in schedules else schedules[:1]
        for c in microbatch_counts(training, space):
            out += [OuterConfig(pp, c, sched, ds, gs) for sched in scheds]
    return out


def fleet_config_bound(tables: CostTables) -> ConfigBound:
    """The analytic bound of a fleet configuration, raised to the load-balancing LP
    bound (:func:`~autopar_opt.search.fleet_bounds.load_balance_bound`) when its
    stages run on more than one group (both are valid; the larger is kept)."""
    bound = analytic_lower_bound(tables)
    if math.isinf(bound.value) or len(set(tables.stage_groups or ())) < 2:
        return bound
    return replace(bound, value=max(bound.value, load_balance_bound(tables)))


class FleetSearch(Search):
    """:class:`Search` over the configurations of a fleet (module doc).

    ``groups`` restricts the shapes to some groups (a data-parallel class of
    :mod:`autopar_opt.search.replicas`), ``mixed`` to shapes on several groups
    (True) or on one (False); ``cache`` shares priced strategies with other
    searches on the same fleet and graph. ``cutoff`` is the value of a plan
    another search of the same problem found (``cutoff_source`` says which):
    configurations whose bound reaches it are pruned, as by an incumbent.
    """

    def __init__(self, graph: LayerGraph, fleet: Fleet, training: Training, space: SearchSpace,
                 params: CostParams, options: SearchOptions, progress: ProgressFn | None = None,
                 groups: tuple[int, ...] | None = None, cache: FleetTableCache | None = None,
                 mixed: bool | None = None, cutoff: float | None = None,
                 cutoff_source: str = "", cover: bool = False) -> None:
        self.fleet, self.groups, self.mixed, self.cover = fleet, groups, mixed, cover
        self.cutoff, self.cutoff_source = cutoff, cutoff_source
        self.cache = cache if cache is not None else FleetTableCache()
        super().__init__(graph, fleet, training, space, params, options, progress, None)

    @property
    def incumbent(self) -> float | None:
        """The better of this search's best plan and the cutoff."""
        own = super().incumbent
        if self.cutoff is None or (own is not None and own <= self.cutoff):
            return own
        return self.cutoff

    def solve(self, k: int, share: float) -> ConfigRecord:
        """The engine's decision, after pruning by the cutoff (class doc). Before a
        configuration is decided its bound is raised to the stage-knapsack LP bound
        (:func:`~autopar_opt.search.stage_lp.knapsack_lp_bound`). A configuration
        whose bound is already within the target gap of the incumbent is not solved: it
        cannot move the certificate's gap above the target, and its bound is recorded."""
        self._raise(k)
        cfg, tables, bound = self.prepared[k]
        own = super().incumbent
        if self.cutoff is not None and (own is None or self.cutoff < own) \
                and not math.isinf(bound.value) and reaches(bound.value, self.cutoff):
            why = f"lower bound {bound.value:.6g} s >= {self.cutoff:.6g} s ({self.cutoff_source})"
            return ConfigRecord(cfg, Status.pruned, None, bound.value, 0.0, pruned_by=why)
        skipped = self.within_gap(k)
        if skipped is not None:
            return skipped
        if not math.isinf(bound.value) and not reaches(bound.value, own) and \
                len(tables.reshard) != len(tables.edges):      # it will be solved: its edge matrices
            tables = self._full_tables(cfg)
            self.prepared[k] = (cfg, tables, bound)
        return super().solve(k, share)

    def wants_lp(self) -> bool:
        """Always on a fleet: the analytic bound ignores which group each stage runs on,
        and the LP is what keeps it (benchmarks/heterogeneous)."""
        return True

    def solve_below(self) -> float | None:
        """A configuration whose bound is within the target gap of the incumbent is not
        solved (:meth:`solve`): the share counts only those below that."""
        inc = self.incumbent
        return None if inc is None else inc * (1 - self.options.rel_gap)

    def _full_tables(self, cfg: OuterConfig) -> CostTables:
        return build_fleet_tables(self.graph, self.fleet, self.training, self.space, self.params,
                                  cfg.microbatches, cfg.schedule, cfg.stage_groups, cfg.stage_devices,
                                  cache=self.cache)

    def _prepare(self, space: SearchSpace) -> None:
        """Tables (without edge matrices: a configuration gets them only when it is
        solved, :meth:`solve`) and bound of every fleet configuration, within the time limit."""
        configs = fleet_outer_configs(self.graph, self.fleet, self.training, space, self.groups,
                                      self.mixed, self.cover)
        try:
            for cfg in configs:
                if self.remaining_s() <= 0:
                    self.late.append(cfg)
                    continue
                tables = build_fleet_tables(self.graph, self.fleet, self.training, space, self.params,
                                            cfg.microbatches, cfg.schedule, cfg.stage_groups,
                                            cfg.stage_devices, cache=self.cache, with_edges=False)
                self.prepared.append((cfg, tables, fleet_config_bound(tables)))
        except SearchInterrupted as exc:
            self.interrupted_by = exc.signum
            self.late = configs[len(self.prepared):]

    def _seed(self, plan):          # no warm-start plans on fleets (yet)
        return None
