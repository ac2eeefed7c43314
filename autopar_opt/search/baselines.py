"""Baseline plans the optimum is compared against (all inside the search space).

* pure data parallelism: one stage, ``dp = N`` for every layer;
* best uniform Megatron-style plan: the same (tp, sp, ZeRO, recompute) for
  every layer, layers split evenly over ``pp`` stages (Narayanan et al. 2021),
  best over every (pp, c, schedule) of the space;
* the user's own plan from the spec, if any.

Each is priced by :func:`autopar_opt.evaluate.evaluate`; one that does not fit
in memory is kept with a note, never dropped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from autopar_opt.evaluate import PlanError, PlanMetrics, evaluate
from autopar_opt.graph import LayerGraph
from autopar_opt.hardware import Cluster
from autopar_opt.plan import Plan, StagePlan
from autopar_opt.search.configs import outer_configs
from autopar_opt.strategies import Strategy, enumerate_strategies
from autopar_opt.training import Recompute, SearchSpace, Training


@dataclass
class Baseline:
    name: str
    plan: Plan | None
    metrics: PlanMetrics | None
    note: str = ""

    def to_dict(self) -> dict:
        return {"name": self.name, "plan": self.plan.to_dict() if self.plan else None,
                "metrics": self.metrics.to_dict() if self.metrics else None, "note": self.note}


def _uniform(graph: LayerGraph, cluster: Cluster, training: Training, space: SearchSpace,
             pp: int, c: int, schedule, base: Strategy) -> Plan | None:
    """``base`` on every layer (adapted where a level is meaningless for a layer),
    layers split evenly; None when some layer cannot take ``base``."""
    d = cluster.num_devices // pp
    b = training.global_batch_size // c
    strategies = []
    for layer in graph.layers:
        options = enumerate_strategies(layer, d, b, space, cluster.gpus_per_node, training.seq_len)
        k = _closest(options, base)
        if k is None:
            return None
        strategies.append(options[k])
    n = len(graph.layers)
    base_size, extra = divmod(n, pp)
    sizes = [base_size + (1 if i < extra else 0) for i in range(pp)]
    stages, start = [], 0
    for size in sizes:
        stages.append(StagePlan([l.name for l in graph.layers[start:start + size]],
                                strategies[start:start + size]))
        start += size
    return Plan(stages, c, schedule)


def _closest(options: list[Strategy], base: Strategy) -> int | None:
    """Index of ``base`` in ``options``; else of the first option with its layout
    and recomputation; else of the first with its layout; None if no layout matches."""
    same = [k for k, s in enumerate(options) if s.layout == base.layout]
    exact = [k for k in same if options[k] == base]
    close = [k for k in same if options[k].recompute == base.recompute]
    return (exact or close or same or [None])[0]


def _best_of(candidates, graph, cluster, training, params,
             deadline: float | None = None) -> tuple[Plan | None, PlanMetrics | None, int]:
    """The fastest feasible candidate, its metrics and how many were tried; stops
    at ``deadline`` (``time.perf_counter()``), part of the command's time limit."""
    best = (None, None)
    tried = 0
    for plan in candidates:
        if deadline is not None and time.perf_counter() > deadline:
            break
        if plan is None:
            continue
        tried += 1
        try:
            m = evaluate(plan, graph, cluster, training, params)
        except PlanError:
            continue
        if m.feasible and (best[1] is None or m.iteration_time_s < best[1].iteration_time_s):
            best = (plan, m)
    return best[0], best[1], tried


def _grid(space: SearchSpace, d: int, dp_only: bool) -> list[Strategy]:
    out = []
    tps = [1] if dp_only else [t for t in range(1, d + 1) if d % t == 0]
    for tp in tps:
        for sp in ((False,) if tp == 1 else tuple(sorted(set(space.sequence_parallel)))):
            for zero in sorted(set(space.zero_levels)):
                for rc in space.recompute:
                    out.append(Strategy(d // tp, tp, 1, sp, zero, Recompute(rc)))
    return out


def _uniform_candidates(graph, cluster, training, space, pp: int, c: int, schedule,
                        dp_only: bool = False):
    """Every uniform plan of one outer configuration (None where a layer cannot take it)."""
    for s in _grid(space, cluster.num_devices // pp, dp_only):
        yield _uniform(graph, cluster, training, space, pp, c, schedule, s)


def best_uniform_assignment(tables):
    """Best feasible uniform plan of one outer configuration as ``(Assignment,
    value)``, or None (a MIP warm start).

    Priced from the configuration's cost tables (the objective of docs/DESIGN.md §3,
    which equals evaluate() on every plan: tests/test_evaluate.py), not by
    evaluate(): this runs once per solved configuration, and on a 3072-GPU
    model evaluate() of every candidate took seconds. Same candidates as the
    baseline: one grid strategy on every layer (:func:`_closest`; the tables
    may have pruned it as dominated), layers split evenly.
    """
    from autopar_opt.core.assignment import Assignment
    from autopar_opt.solvers.dp.common import fits, iteration_time

    if tables.stage_devices is not None:
        return None          # stages of different sizes cannot share one strategy
    n, pp = tables.num_layers, tables.pp
    base, extra = divmod(n, pp)
    stage = [i for i in range(pp) for _ in range(base + (1 if i < extra else 0))]
    best = None
    for s in _grid(tables.space, tables.devices_per_stage, dp_only=False):
        picks: dict[int, int | None] = {}     # layers of one class share their strategy list
        choice = []
        for strats in tables.strategies:
            if id(strats) not in picks:
                picks[id(strats)] = _closest(strats, s)
            if picks[id(strats)] is None:
                break
            choice.append(picks[id(strats)])
        if len(choice) < n:
            continue
        asg = Assignment(stage, choice)
        if fits(tables, asg):
            val = iteration_time(tables, asg)
            if best is None or val < best[1]:
                best = (asg, val)
    return best


def best_uniform_for_config(tables) -> Plan | None:
    """:func:`best_uniform_assignment` as a :class:`Plan` (None when none fits)."""
    best = best_uniform_assignment(tables)
    return None if best is None else tables.plan_of(best[0])


def _cut_short(deadline: float | None) -> str:
    """The note of a baseline whose candidates were not all tried in time."""
    if deadline is not None and time.perf_counter() > deadline:
        return " (cut short by the time limit: not every candidate was priced)"
    return ""


def pure_data_parallel(graph, cluster, training, space, params,
                       deadline: float | None = None) -> Baseline:
    """Best pure data-parallel plan (pp=1, tp=1) over ZeRO/recompute/micro-batches."""
    name = "pure data parallelism"
    configs = [c for c in outer_configs(graph, cluster, training, space)
               if c.pp == 1 and c.stage_devices is None]
    if not configs:
        return Baseline(name, None, None, "pp=1 is outside the search space")
    cands = (plan for cfg in configs
             for plan in _uniform_candidates(graph, cluster, training, space, 1, cfg.microbatches,
                                             cfg.schedule, dp_only=True))
    plan, metrics, tried = _best_of(cands, graph, cluster, training, params, deadline)
    if plan is None:
        if _cut_short(deadline):
            return Baseline(name, None, None, "not found: the time limit was reached before a "
                            "candidate that fits was priced")
        note = "no pure data-parallel plan fits in memory" if tried else \
            "pure data parallelism is outside the search space for this batch/model"
        return Baseline(name, None, None, note)
    return Baseline(name, plan, metrics, "best over ZeRO level, recomputation and micro-batches"
                    + _cut_short(deadline))


def best_uniform(graph, cluster, training, space, params, deadline: float | None = None) -> Baseline:
    """Best Megatron-style uniform plan over every outer configuration."""
    name = "best uniform Megatron-style"
    cands = (plan for cfg in outer_configs(graph, cluster, training, space)
             if cfg.stage_devices is None
             for plan in _uniform_candidates(graph, cluster, training, space, cfg.pp,
                                             cfg.microbatches, cfg.schedule))
    plan, metrics, tried = _best_of(cands, graph, cluster, training, params, deadline)
    if plan is None:
        why = ("not found: the time limit was reached before a candidate that fits was priced"
               if _cut_short(deadline) else "no uniform plan of the space fits in memory")
        return Baseline(name, None, None, why)
    return Baseline(name, plan, metrics, f"best of {tried} uniform plans (even layer split)"
                    + _cut_short(deadline))


def user_plan(plan: Plan | None, graph, cluster, training, params) -> Baseline | None:
    """The plan written in the spec, priced as is."""
    if plan is None:
        return None
    try:
        m = evaluate(plan, graph, cluster, training, params)
    except PlanError as exc:
        return Baseline("user plan", plan, None, f"invalid: {exc}")
    note = "" if m.feasible else "does not fit in memory"
    return Baseline("user plan", plan, m, note)


def all_baselines(graph, cluster, training, space, params, plan: Plan | None,
                  deadline: float | None = None) -> list[Baseline]:
    """Pure DP, best uniform and the user's plan; candidates stop at ``deadline``."""
    out = [pure_data_parallel(graph, cluster, training, space, params, deadline),
           best_uniform(graph, cluster, training, space, params, deadline)]
    user = user_plan(plan, graph, cluster, training, params)
    if user:
        out.append(user)
    return out
