"""Baseline plans the optimum is compared against (all inside the search space).

* pure data parallelism: one stage, ``dp = N`` for every layer;
* best uniform Megatron-style plan: the same (tp, sp, ZeRO, recompute) for
  every layer, layers split evenly over ``pp`` stages (Narayanan et al. 2021),
  best over every (pp, c, schedule) of the space;
* the user's own plan from the spec, if any.

The first two are derived from the cost tables the search already built
(:func:`table_baselines`, issue 18: everything ``autopar solve`` prints runs
inside the time budget on tables the search paid for): every candidate is
priced from the tables (the objective of docs/DESIGN.md §3, equal to
evaluate()), and only the winner of each is re-priced by
:func:`autopar_opt.cost.evaluate.evaluate` for its metrics. The evaluate()-based
enumeration (:func:`pure_data_parallel`, :func:`best_uniform`) is kept for
searches that build no tables (DeepSpeed's exhaustive enumeration). One that
does not fit in memory is kept with a note, never dropped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from autopar_opt.cost.evaluate import PlanError, PlanMetrics, evaluate
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import GIB, Cluster
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.target import keeps_uniform_rule
from autopar_opt.search.configs import outer_configs
from autopar_opt.ir.strategies import Layout, Strategy, divisors, enumerate_strategies
from autopar_opt.ir.training import Recompute, SearchSpace, Training


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
        options = enumerate_strategies(layer, d, b, space, cluster.gpus_per_node, training.seq_len,
                                       training.autocast, training.runtime.cp_splits_heads)
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
    return ClosestIndex(options)(base)


class ClosestIndex:
    """:func:`_closest` for many ``base`` strategies on one option list: the
    first index of each strategy, of each (layout, sharding, recompute), of each
    (layout, sharding), of each (layout, recompute) and of each layout, found in
    one pass (the baselines ask it for every grid strategy on every strategy list;
    a scan per question made them the slowest part of ``autopar solve`` after the
    search, issue 18). The sharding (ZeRO level and replicas) is matched before
    the recomputation: a layer that offers no recomputation (an embedding) keeps
    the plan's ZeRO level, as a framework that runs one level for the model does
    (falling back to the layout's first option gave Qwen3-4B's embedding and head
    ZeRO-0 beside ZeRO-1 blocks, a "uniform" plan Megatron-LM cannot run)."""

    def __init__(self, options: list[Strategy]) -> None:
        self.exact: dict[Strategy, int] = {}
        self.close: dict[tuple, int] = {}
        self.sharded: dict[tuple, int] = {}
        self.recomputed: dict[tuple[Layout, Recompute], int] = {}
        self.same: dict[Layout, int] = {}
        for k, s in enumerate(options):
            layout, shard = s.layout, (s.zero, s.replicas)
            self.exact.setdefault(s, k)
            self.close.setdefault((layout, shard, s.recompute), k)
            self.sharded.setdefault((layout, shard), k)
            self.recomputed.setdefault((layout, s.recompute), k)
            self.same.setdefault(layout, k)

    def __call__(self, base: Strategy) -> int | None:
        k = self.exact.get(base)
        if k is not None:
            return k
        layout, shard = base.layout, (base.zero, base.replicas)
        for table, key in ((self.close, (layout, shard, base.recompute)),
                           (self.sharded, (layout, shard)),
                           (self.recomputed, (layout, base.recompute))):
            k = table.get(key)
            if k is not None:
                return k
        return self.same.get(layout)


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
    """The uniform (tp, cp, sp, ZeRO, recompute) choices of ``space`` on ``d``
    devices: tp and cp from the space's lists (every divisor of ``d`` where a
    list is open), tp = cp = 1 for pure data parallelism."""
    out = []
    if dp_only:
        tps, cps = [1], [1]
    else:
        tps = [t for t in divisors(d) if space.tp_degrees is None or t in space.tp_degrees]
        cps = sorted(set(space.cp_degrees))
    for tp in tps:
        for cp in cps:
            if d % (tp * cp):
                continue
            for sp in ((False,) if tp == 1 else tuple(sorted(set(space.sequence_parallel)))):
                for zero in sorted(set(space.zero_levels)):
                    for rc in space.recompute:
                        out.append(Strategy(d // (tp * cp), tp, cp, sp, zero, Recompute(rc)))
    return out


def _uniform_candidates(graph, cluster, training, space, pp: int, c: int, schedule,
                        dp_only: bool = False):
    """Every uniform plan of one outer configuration (None where a layer cannot take it)."""
    for s in _grid(space, cluster.num_devices // pp, dp_only):
        yield _uniform(graph, cluster, training, space, pp, c, schedule, s)


def _even_stages(n: int, pp: int) -> list[int]:
    """Stage of each of ``n`` layers split evenly over ``pp`` stages (the first
    ``n mod pp`` stages take one layer more), as Megatron-LM splits them."""
    base, extra = divmod(n, pp)
    return [i for i in range(pp) for _ in range(base + (1 if i < extra else 0))]


def _uniform_choices(tables, dp_only: bool) -> list[tuple[int, ...]]:
    """The distinct strategy-index vectors of the uniform candidates of one
    configuration: one grid strategy on every layer (:func:`_closest`; the
    tables may have pruned it as dominated), grid strategies a layer cannot
    take skipped. Layers of one class share their strategy list, so each list
    is searched once per grid strategy."""
    out: dict[tuple[int, ...], None] = {}
    lists: dict[int, ClosestIndex] = {}
    for strats in tables.strategies:
        if id(strats) not in lists:
            lists[id(strats)] = ClosestIndex(strats)
    for s in _grid(tables.space, tables.devices_per_stage, dp_only):
        picks = {key: closest(s) for key, closest in lists.items()}
        if any(k is None for k in picks.values()):
            continue
        out.setdefault(tuple(picks[id(strats)] for strats in tables.strategies), None)
    return list(out)


def runnable_choice(tables, choice: tuple[int, ...]) -> bool:
    """Whether one strategy per layer keeps a target's uniformity rule
    (``tables.uniform_keys``: one value per dimension over the model, ``ANY`` where
    the setting changes nothing on a layer; :func:`autopar_opt.ir.target.uniform_key`).
    True in the free space. A uniform candidate is the solver's first incumbent and a
    baseline: in a target's space it must be a plan the target runs."""
    keys = tables.uniform_keys
    return keys is None or keeps_uniform_rule(keys[u][k] for u, k in enumerate(choice))


def _price(tables, stage: list[int], choice: tuple[int, ...]) -> float | None:
    """Iteration time of one assignment from the tables (docs/DESIGN.md §3, the
    DP's pricing, equal to evaluate()); None when a stage exceeds its memory."""
    from autopar_opt.core.assignment import Assignment
    from autopar_opt.solvers.dp.common import MEM_EPS, stage_terms

    p, o, g, mem = stage_terms(tables, Assignment(stage, list(choice)))
    if any(m > tables.capacity_bytes + MEM_EPS * GIB for m in mem):
        return None
    return tables.latency(p, o, g) + tables.params.iteration_overhead_s


def best_uniform_assignment(tables, dp_only: bool = False):
    """Best feasible uniform plan of one outer configuration as ``(Assignment,
    value)``, or None (a MIP warm start, and the baselines of
    :func:`table_baselines`).

    Priced from the configuration's cost tables (the objective of docs/DESIGN.md §3,
    which equals evaluate() on every plan: tests/unit/cost/test_evaluate.py), not by
    evaluate(): on a 3072-GPU model evaluate() of every candidate took seconds.
    Candidates: one grid strategy on every layer (:func:`_uniform_choices`),
    layers split evenly; ``dp_only`` keeps tp = cp = 1 (pure data parallelism).
    """
    return _best_uniform(tables, dp_only)[0]



def _best_uniform(tables, dp_only: bool):
    """:func:`best_uniform_assignment` and how many candidates there were.
    Free stage sizes (``tables.stage_devices``) have none: stages of different
    sizes cannot share one strategy."""
    from autopar_opt.core.assignment import Assignment

    if tables.space is None or tables.stage_devices is not None or (dp_only and tables.pp != 1):
        return None, 0
    stage = (list(tables.fixed_stage) if tables.fixed_stage is not None
             else _even_stages(tables.num_layers, tables.pp))
    best = None
    choices = _uniform_choices(tables, dp_only)
    for choice in choices:
        if not runnable_choice(tables, choice):
            continue
        val = _price(tables, stage, choice)
        if val is not None and (best is None or val < best[1]):
            best = (Assignment(stage, list(choice)), val)
    return best, len(choices)


def best_uniform_for_config(tables) -> Plan | None:
    """:func:`best_uniform_assignment` as a :class:`Plan` (None when none fits)."""
    best = best_uniform_assignment(tables)
    return None if best is None else tables.plan_of(best[0])


def _best_over_tables(tables_list, dp_only: bool, deadline: float | None):
    """``(plan, configurations priced, candidates)`` of the best uniform plan
    over the configurations' tables; stops at ``deadline``."""
    best, priced, candidates = None, 0, 0
    for tables in tables_list:
        if deadline is not None and time.perf_counter() > deadline:
            break
        priced += 1
        found, n = _best_uniform(tables, dp_only)
        candidates += n
        if found is not None and (best is None or found[1] < best[2]):
            best = (tables, found[0], found[1])
    return (best[0].plan_of(best[1]) if best else None), priced, candidates


def _table_baseline(name: str, tables_list, dp_only: bool, graph, cluster, training, params,
                    deadline: float | None) -> Baseline:
    """One baseline from the tables: the winner re-priced by evaluate()."""
    plan, priced, candidates = _best_over_tables(tables_list, dp_only, deadline)
    cut = _cut_short(deadline) if priced < len(tables_list) else ""
    what = ("pure data-parallel plan" if dp_only else "uniform plan")
    if plan is None:
        if cut:
            return Baseline(name, None, None, "not found: the time limit was reached before a "
                            f"{what} that fits was priced")
        if dp_only and not tables_list:
            return Baseline(name, None, None, "pp=1 is outside the search space")
        if not candidates:
            return Baseline(name, None, None, f"no {what} is in the search space for this "
                            "batch/model")
        return Baseline(name, None, None, f"no {what} of the space fits in memory")
    metrics = evaluate(plan, graph, cluster, training, params)
    scope = ("best over ZeRO level, recomputation and micro-batches" if dp_only else
             f"best of {candidates} uniform plans (tp, cp, sp, ZeRO, recompute; even layer "
             f"split) over {priced} configurations")
    return Baseline(name, plan, metrics, scope + cut)


def table_baselines(tables_list, graph, cluster, training, params, plan: Plan | None,
                    deadline: float | None = None) -> list[Baseline]:
    """Pure data parallelism, best uniform and the user's plan, derived from the
    cost tables the search built (``tables_list``, one per configuration it
    prepared); candidates stop at ``deadline`` (``time.perf_counter()``)."""
    pp1 = [t for t in tables_list if t.pp == 1]
    out = [_table_baseline("pure data parallelism", pp1, True, graph, cluster, training, params,
                           deadline),
           _table_baseline("best uniform Megatron-style", tables_list, False, graph, cluster,
                           training, params, deadline)]
    user = user_plan(plan, graph, cluster, training, params)
    if user:
        out.append(user)
    return out


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
