"""``solve --runnable-by FRAMEWORK``: search only plans that framework can run.

Megatron-LM, torchtitan and DeepSpeed take one tp/cp/ep/sp/ZeRO/recompute
setting for the whole model (:mod:`autopar_opt.export`). The runnable space is
therefore the union, over every *uniform choice* the framework accepts, of
the spec's space restricted to that choice (one strategy per layer: the
solver still chooses ``pp``, the micro-batches and, for Megatron-LM and
torchtitan, the stage split, which both can express for any contiguous
split). DeepSpeed's ``partition_method="uniform"`` fixes the split too, so
its space is finite and small: every plan is evaluated (an exhaustive
search, exact by construction). Every sub-search's records form one
certificate, so the proven bound and gap hold for runnable plans only.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, replace

from autopar_opt.core.bounds import Status
from autopar_opt.cost.params import CostParams
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.export import rules_for
from autopar_opt.export.deepspeed import uniform_partition
from autopar_opt.export.view import plan_view
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import Cluster
from autopar_opt.core.interrupts import SearchInterrupted
from autopar_opt.ir.plan import uniform_plan
from autopar_opt.search.certificate import Certificate, ConfigRecord
from autopar_opt.search.configs import outer_configs
from autopar_opt.search.engine import SearchOptions, SearchResult, run_search
from autopar_opt.ir.strategies import Strategy, divisors
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training

FRAMEWORKS = ("megatron", "torchtitan", "deepspeed")


@dataclass(frozen=True)
class UniformChoice:
    """One whole-model setting: the same tp, cp, sp, ZeRO, recompute and ep everywhere."""

    tp: int
    cp: int
    sp: bool
    zero: int
    recompute: Recompute
    ep: int

    def label(self) -> str:
        return (f"tp{self.tp} cp{self.cp}{' sp' if self.sp else ''} z{self.zero} "
                f"rc-{self.recompute.value} ep{self.ep}")

    def restrict(self, space: SearchSpace) -> SearchSpace:
        """``space`` with every intra-layer dimension pinned to this choice."""
        return replace(space, tp_degrees=(self.tp,), cp_degrees=(self.cp,),
                       sequence_parallel=(self.sp,), zero_levels=(self.zero,),
                       recompute=(self.recompute,), ep_degrees=(self.ep,))


def _framework_ok(framework: str, c: UniformChoice, has_moe: bool, seq_len: int | None) -> bool:
    """Choices a framework refuses whatever the pipeline (the rules of autopar_opt.export)."""
    if framework == "megatron":
        cp_ok = c.cp == 1 or not seq_len or seq_len % (2 * c.cp) == 0
        return not (has_moe and c.tp > 1 and not c.sp) and cp_ok and c.recompute is not Recompute.op
    if framework == "torchtitan":
        ep_ok = c.ep == 1 or c.zero >= 2 or c.cp % c.ep == 0   # ep | dp_shard*cp
        return c.zero != 1 and (c.tp == 1 or c.sp) and c.recompute is not Recompute.selective \
            and ep_ok
    return c.cp == 1 and not c.sp and c.recompute not in (Recompute.selective, Recompute.op)


def uniform_choices(framework: str, graph: LayerGraph, space: SearchSpace,
                    seq_len: int | None = None) -> list[UniformChoice]:
    """Every uniform choice of ``space`` that ``framework`` accepts."""
    has_moe = any(layer.is_moe for layer in graph.layers)
    tps = space.tp_degrees or divisors(1024)
    eps = (space.ep_degrees or divisors(max((l.num_experts for l in graph.layers), default=1))) \
        if has_moe else (1,)
    out = []
    for tp, cp, sp, zero, rc, ep in itertools.product(
            tps, space.cp_degrees, sorted(set(space.sequence_parallel)),
            sorted(set(space.zero_levels)), space.recompute, eps):
        c = UniformChoice(tp, cp, bool(sp and tp > 1), zero, Recompute(rc), ep)
        if (sp and tp == 1) or not _framework_ok(framework, c, has_moe, seq_len):
            continue
        out.append(c)
    return list(dict.fromkeys(out))


def _valid_for(choice: UniformChoice, d: int, b: int, graph: LayerGraph) -> bool:
    """Whether the choice is a strategy of every layer with ``d`` devices per stage."""
    if d % (choice.tp * choice.cp):
        return False
    dp = d // (choice.tp * choice.cp)
    if b % dp:
        return False
    for layer in graph.layers:
        if layer.max_tp % choice.tp and not layer.measured:
            return False
        if layer.is_moe and ((dp * choice.cp) % choice.ep or layer.num_experts % choice.ep):
            return False
    return choice.ep == 1 or any(layer.is_moe for layer in graph.layers)


def run_runnable_search(framework: str, graph: LayerGraph, cluster: Cluster, training: Training,
                        space: SearchSpace, params: CostParams, options: SearchOptions,
                        progress=None) -> SearchResult:
    """The certified best plan among those ``framework`` can run (see module docstring)."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}; use one of {', '.join(FRAMEWORKS)}")
    start = time.perf_counter()
    if framework == "megatron":
        space = replace(space, schedules=tuple(s for s in space.schedules
                                               if s is not Schedule.gpipe) or space.schedules)
    choices = uniform_choices(framework, graph, space, training.seq_len)
    if framework == "deepspeed":
        return _exhaustive(choices, graph, cluster, training, space, params, options, start)
    records, best, last, tables, stopped = [], None, None, [], None
    for k, choice in enumerate(choices):
        remaining = options.time_limit_s - (time.perf_counter() - start)
        # no time left, or a stop signal: the sub-search only records its configurations,
        # unsolved and without a bound (a floor here let every choice build tables, issue 15)
        share = 0.0 if stopped is not None else max(remaining / (len(choices) - k), 0.0)
        result = run_search(graph, cluster, training, choice.restrict(space), params,
                            replace(options, time_limit_s=share))
        stopped = stopped or result.interrupted_by
        last = result
        tables += result.tables
        for r in result.certificate.configurations:
            r.message = "; ".join(m for m in (f"[{framework}: {choice.label()}]", r.message) if m)
        records += result.certificate.configurations
        if result.plan is not None and rules_for(framework, plan_view(
                result.plan, graph, cluster, training), graph.is_chain()):
            raise AssertionError(f"runnable search produced a plan {framework} refuses")
        if result.metrics is not None and (best is None or result.metrics.iteration_time_s
                                           < best.metrics.iteration_time_s):
            best = result
    base = best or last
    if base is None:
        raise ValueError(f"no uniform choice of the search space can run on {framework}")
    return replace(base, certificate=Certificate(records), tables=tables, interrupted_by=stopped,
                   wall_time_s=time.perf_counter() - start,
                   infeasible_reasons=sorted({r.message for r in records
                                              if r.status == "infeasible" and r.message}))


def _exhaustive(choices, graph, cluster, training, space, params, options, start) -> SearchResult:
    """DeepSpeed: price every (pp, c, choice) plan with the uniform partition, one
    configuration at a time while ``options.time_limit_s`` lasts (issue 15: the time
    limit covers the whole command); a configuration the limit leaves out is
    recorded unsolved, without a bound; so is every configuration after a stop
    signal (:class:`~autopar_opt.core.interrupts.SearchInterrupted` or ``options.should_stop``),
    and the result keeps the best plan priced before it."""
    records, best, stopped = [], None, None
    configs = [cfg for cfg in outer_configs(graph, cluster, training, space)
               if cfg.schedule is Schedule.one_f_one_b and cfg.stage_devices is None]
    names = [layer.name for layer in graph.layers]
    for cfg in configs:
        if stopped is None and options.should_stop is not None and options.should_stop():
            stopped = (options.stop_signal() if options.stop_signal else None) or 2
        if stopped is not None or time.perf_counter() - start >= options.time_limit_s:
            why = (f"interrupted (signal {stopped})" if stopped is not None
                   else "time limit reached")
            records.append(ConfigRecord(cfg, Status.not_solved, None, -math.inf, 0.0,
                                        message=f"[deepspeed] {why} before this configuration; "
                                                "no bound"))
            continue
        try:
            priced = _price_config(cfg, choices, names, graph, cluster, training, params)
        except SearchInterrupted as exc:
            stopped = exc.signum
            records.append(ConfigRecord(cfg, Status.not_solved, None, -math.inf, 0.0,
                                        message=f"[deepspeed] interrupted (signal {stopped}) "
                                                "before this configuration finished; no bound"))
            continue
        records.append(priced[0])
        if priced[1] and (best is None or priced[1][1].iteration_time_s < best[1].iteration_time_s):
            best = (priced[1][0], priced[1][1], cfg)
    return SearchResult(plan=best[0] if best else None, metrics=best[1] if best else None,
                        certificate=Certificate(records), best_config=best[2] if best else None,
                        solver_name="enumeration", solver_version="", form="exhaustive",
                        wall_time_s=time.perf_counter() - start, interrupted_by=stopped)


def _price_config(cfg, choices, names, graph, cluster, training, params):
    """One configuration of :func:`_exhaustive`: its record and its best ``(plan, metrics)``
    (None when no uniform plan fits)."""
    d = cluster.num_devices // cfg.pp
    b = training.global_batch_size // cfg.microbatches
    t0, value, plan_best = time.perf_counter(), math.inf, None
    for choice in choices:
        if not _valid_for(choice, d, b, graph) or (cfg.pp > 1 and choice.zero >= 2):
            continue
        plan = _deepspeed_plan(names, graph, cfg, choice, d)
        m = evaluate(plan, graph, cluster, training, params)
        if m.feasible and m.iteration_time_s < value:
            value, plan_best = m.iteration_time_s, (plan, m)
    status = "optimal" if plan_best else "infeasible"
    return ConfigRecord(cfg, status, value if plan_best else None, value,
                        time.perf_counter() - t0, exhaustive=True,
                        message="[deepspeed] every uniform plan evaluated "
                                "(partition_method='uniform')"), plan_best


def _deepspeed_plan(names, graph, cfg, choice: UniformChoice, d: int):
    dp = d // (choice.tp * choice.cp)
    base = Strategy(dp, choice.tp, choice.cp, choice.sp, choice.zero if dp > 1 else 0)
    plan = uniform_plan(names, cfg.pp, base, cfg.microbatches, Schedule.one_f_one_b,
                        stage_sizes=uniform_partition(len(names), cfg.pp))
    layers = {layer.name: layer for layer in graph.layers}
    for st in plan.stages:
        st.strategies = [replace(s, recompute=choice.recompute if layers[n].kind.value.endswith(
            "block") else Recompute.none, ep=choice.ep if layers[n].is_moe else 1)
                         for n, s in zip(st.layers, st.strategies)]
    return plan
