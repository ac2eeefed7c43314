"""Cost tables: every number a formulation needs for one outer configuration.

An outer configuration fixes the pipeline degree ``pp`` (so ``d = N/pp``
devices per stage), the micro-batch count ``c`` (so ``b = B/c`` samples per
micro-batch) and the schedule. Formulations read only these arrays
(docs/DESIGN.md §1): ``time`` = A, ``sync`` = G, ``weight_bytes`` = W,
``act_bytes`` = H, ``reshard`` = R, ``cross`` = R' of docs/DESIGN.md §3, and
``working_bytes`` = X, the transient working set of a layer in flight
(:func:`~autopar_opt.cost.memory.working_set_bytes`): stage ``i``'s memory
is ``Σ_u (W + inflight_i·H) + max_u X`` over its layers (:func:`stage_memory`).

Stages are congruent (``d`` divides the GPUs per node or is a multiple of
it), so one stage context prices every stage; only the tier of each stage
boundary differs. ``pp`` also decides whether tied parameters (an output layer
tied to the input embedding, first and last layer) are copied on the last
stage and their gradients all-reduced: with ``pp > 1`` always, with one stage
never, so the copy's bytes and the all-reduce are plain table entries of the
two layers (:func:`autopar_opt.cost.comm.tie_sync_time`). With free
stage sizes (``search.stage_devices: free``) an outer configuration also
fixes every stage's device count ``d_i``: a layer's strategies are then the
union of its strategies on each distinct ``d_i`` (each priced on its own
device count), and :meth:`CostTables.allowed_in_stage` says which of them stage ``i`` may use (those with ``dp·tp·cp = d_i``).

The interleaved schedule with ``v`` virtual stages per rank (Megatron's
virtual pipeline) is the 1F1B objective over ``v·c`` chunk micro-batches of
``1/v`` of every stage's compute: a chunk holds ``1/v`` of the stage's layers
(``A`` and the in-stage resharding ``R`` divided by ``v``) but still sends the
whole activation at its boundary (``R'`` undivided: communication grows
``v``-fold, Narayanan et al. 2021, Sec. 2.2.2), each transfer its own pipeline
stage as Megatron overlaps them with the chunks' compute (``overlap_p2p_comm``,
on by default with interleaving: Megatron-LM ``arguments.py``). evaluate()'s
``Σp/v + Σo + (v·c - 1)·max(max p/v, max o) + G``
(:func:`~autopar_opt.cost.evaluate.pipeline_latency`) is then the 1F1B latency
of these tables with :attr:`CostTables.rounds` ``= v·c`` (:meth:`CostTables.latency`); its in-flight
activations are :func:`~autopar_opt.ir.pipeline.interleaved_inflight`'s (a
fraction of whole-stage micro-batches; the output layer's logits by the last
chunk's count, folded into that layer's ``H``, as the output layer is always
on the last stage of Megatron's even split, which an interleaved configuration
fixes: :attr:`CostTables.fixed_stage`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING

import numpy as np

from autopar_opt.core.assignment import Assignment
from autopar_opt.cost.context import LayerCost, StageContext, even_stage_params
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import CostParams
from autopar_opt.cost.reshard import cross_stage_time, reshard_time
from autopar_opt.ir.graph import LayerGraph, LayerKind
from autopar_opt.ir.hardware import GIB, MEM_EPS, Cluster
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.pipeline import (boundaries_intra, boundary_is_intra, inflight_microbatches,
                                  interleaved_inflight, microbatch_rule_broken, pipeline_rule_broken,
                                  stage_devices_problem, tie_tier)
from autopar_opt.ir.strategies import Strategy, enumerate_strategies
from autopar_opt.ir.target import (BLOCK_KINDS, RECOMPUTE_DIM, UNIFORM_DIMS, interleaved_split,
                                   recompute_code, uniform_key, vp_problem)
from autopar_opt.ir.recompute_pattern import block_layers
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training

if TYPE_CHECKING:
    from autopar_opt.ir.fleet import Fleet

#: What a strategy is judged on when another of the same layout may replace
#: it, as (:class:`~autopar_opt.cost.context.LayerCost` field,
#: :class:`CostTables` array): time ``A`` and sync ``G`` enter the objective,
#: weight bytes ``W``, activation bytes ``H`` and the working set ``X`` the
#: memory rows (stage memory ``Σ (W + inflight·H) + max X``,
#: :func:`stage_memory`), each non-decreasing. Everything else a strategy
#: contributes (resharding ``R``/``R'``, its device count) is fixed by its
#: layout. So a strategy of the same layout no worse in these five is no
#: slower and needs no more memory in every plan: pruning the other one
#: (:func:`prune_layer_strategies`) keeps every optimum, and a plan using a pruned one maps to
#: a kept one (:meth:`CostTables.dominating_kept`). A new per-strategy term
#: must be one of these five or be added here.
DOMINANCE_FIELDS: tuple[tuple[str, str], ...] = (
    ("time_s", "time"), ("sync_s", "sync"), ("weight_bytes", "weight_bytes"),
    ("act_bytes", "act_bytes"), ("working_bytes", "working_bytes"))
_cost_fields = attrgetter(*(f for f, _ in DOMINANCE_FIELDS))


def dominance_vectors(costs: list[LayerCost]) -> np.ndarray:
    """``[len(costs), 5]`` array of each cost's :data:`DOMINANCE_FIELDS`."""
    rows = [_cost_fields(c) for c in costs]
    return np.array(rows, dtype=float).reshape(len(rows), len(DOMINANCE_FIELDS))


#: Relative allowance of :meth:`CostTables.dominating_kept`: a chain of
#: dominations, each within :func:`prune_layer_strategies`'s 1e-12, through at most a few
#: thousand strategies of one layout stays below it.
DOMINANCE_CHAIN_TOL = 1e-9


@dataclass
class CostTables:
    """Arrays for one outer configuration; index ``u`` follows the graph order."""

    graph: LayerGraph
    cluster: Cluster
    training: Training
    params: CostParams
    pp: int
    microbatches: int
    schedule: Schedule
    devices_per_stage: int
    microbatch_samples: int
    strategies: list[list[Strategy]]
    time: list[np.ndarray]
    sync: list[np.ndarray]
    weight_bytes: list[np.ndarray]
    act_bytes: list[np.ndarray]
    edges: list[tuple[int, int]]
    reshard: list[np.ndarray]
    cross_intra: list[np.ndarray]
    cross_inter: list[np.ndarray]
    boundary_intra: list[bool]
    #: activations a stage holds at its peak, in whole-stage micro-batches (a fraction
    #: under the interleaved schedule)
    inflight: list[float]
    capacity_bytes: float
    layer_class: list[int] = field(default_factory=list)
    #: X: per layer and strategy, the transient working set (bytes) of the layer in flight
    working_bytes: list[np.ndarray] = field(default_factory=list)
    space: SearchSpace | None = None
    #: per-stage device counts of a free-size configuration (None: congruent, N/pp each)
    stage_devices: tuple[int, ...] | None = None
    #: under a target (:mod:`autopar_opt.ir.target`): per layer, the ``[K_u, D]`` uniform
    #: keys of its strategies (:func:`~autopar_opt.ir.target.uniform_key`; -1 = any value);
    #: a plan is runnable iff one value per column matches every layer (None: free space)
    uniform_keys: list[np.ndarray] | None = None
    #: the stage of every layer when the target fixes the split (DeepSpeed's uniform
    #: partition), else None
    fixed_stage: list[int] | None = None
    #: per-stage fleet group of a configuration on a mixed fleet (None: one group;
    #: :func:`autopar_opt.cost.fleet_tables.build_fleet_tables`); ``cluster`` is then
    #: the reference group whose capacity ``capacity_bytes`` is
    stage_groups: tuple[int, ...] | None = None
    #: the fleet of a mixed configuration (None: ``cluster`` alone)
    fleet: "Fleet | None" = None
    #: per fleet group, the factor ``C_ref / C_g`` its strategies' W, H and X are
    #: stored in (docs/DESIGN.md §3, mixed fleets); empty: 1
    memory_scale: tuple[float, ...] = ()
    #: virtual stages per rank of the interleaved schedule (1 otherwise); the time
    #: tables then hold ``1/vp_chunks`` of each layer's time and in-stage resharding, the
    #: stage-boundary sends whole (module docstring)
    vp_chunks: int = 1

    @property
    def rounds(self) -> int:
        """Micro-batch passes through the bottleneck stage: ``c``, or ``v·c`` chunk
        micro-batches under the interleaved schedule; the objective is
        ``Σp + Σo + (rounds - 1)·max(p, o) + max g`` on the stored times."""
        return self.microbatches * self.vp_chunks

    def latency(self, p: list[float], o: list[float], g: list[float]) -> float:
        """The pipeline latency of stage times ``p``, transfers ``o`` and syncs ``g``
        read from these tables (equal to evaluate()'s pipeline_latency of the plan)."""
        bottleneck = max(max(p), max(o, default=0.0))
        return sum(p) + sum(o) + (self.rounds - 1) * bottleneck + max(g, default=0.0)

    def __post_init__(self) -> None:
        if not self.working_bytes:   # hand-built tables (tests): no working set
            self.working_bytes = [np.zeros(len(s)) for s in self.strategies]

    def runnable(self, asg: Assignment) -> bool:
        """Whether an assignment satisfies the target's rules: one value per uniform
        dimension across every layer (:attr:`uniform_keys`) and the fixed split."""
        if self.fixed_stage is not None and list(asg.stage) != self.fixed_stage:
            return False
        if self.uniform_keys is None:
            return True
        rows = np.array([self.uniform_keys[u][k] for u, k in enumerate(asg.choice)])
        mixed = [d for d, col in enumerate(rows.T) if len(set(col[col >= 0].tolist())) > 1]
        return not mixed or (mixed == [RECOMPUTE_DIM]
                              and self._block_plan(asg, rows[:, RECOMPUTE_DIM]))

    def block_stages(self) -> list[int] | None:
        """The stage of every layer where the target's space holds Megatron's block
        recomputation in this configuration (``--recompute-method block
        --recompute-num-layers N``: full recomputation of the first ``N`` transformer
        layers of every model chunk; :meth:`~autopar_opt.ir.target.Target.searches_blocks`)
        and the stage of every layer is known: one stage, or the fixed split of the
        interleaved schedule; None elsewhere (a pipeline whose split is free holds it too:
        :meth:`free_block_split`)."""
        if not self._holds_blocks() or (self.pp > 1 and self.fixed_stage is None):
            return None
        return list(self.fixed_stage) if self.fixed_stage is not None else [0] * self.num_layers

    def free_block_split(self) -> bool:
        """Whether the target's space holds Megatron's block recomputation in this
        configuration and its stage split is free (1F1B with ``pp > 1``): which layers are
        a stage's first ``N`` then depends on the split (the DP's labels carry it,
        :mod:`~autopar_opt.solvers.dp.stage_prefix`)."""
        return self._holds_blocks() and self.pp > 1 and self.fixed_stage is None

    def _holds_blocks(self) -> bool:
        target = self.space.runs_on if self.space is not None else None
        return target is not None and self.uniform_keys is not None \
            and target.searches_blocks(self.space.recompute)

    def _block_plan(self, asg: Assignment, codes: np.ndarray) -> bool:
        """Whether an assignment whose transformer layers mix recomputation codes
        ``codes`` is a block-recomputation plan the space holds (:meth:`block_stages`,
        the pattern of :func:`~autopar_opt.ir.recompute_pattern.block_layers`; the fixed
        split, if any, is checked by :meth:`runnable`)."""
        if not self._holds_blocks():
            return False
        stage = list(asg.stage)
        modes = {recompute_code(m.value): m for m in (Recompute.none, Recompute.full)}
        per_stage: list[list] = [[] for _ in range(self.pp)]
        for u, i in enumerate(stage):
            if self.graph.layers[u].kind in BLOCK_KINDS:
                if int(codes[u]) not in modes:
                    return False
                per_stage[i].append(modes[int(codes[u])])
        return block_layers(per_stage, max(self.vp_chunks, 1)) is not None

    def allowed_in_stage(self, stage: int) -> list[np.ndarray] | None:
        """Per layer, the strategies stage ``stage`` may use (boolean masks): those
        of its device count and, on a mixed fleet, of its group; None when every
        strategy fits every stage (congruent stages on one group)."""
        if self.stage_devices is None or len({self.stage_key(i) for i in range(self.pp)}) == 1:
            return None
        key = self.stage_key(stage)
        cache = self.__dict__.setdefault("_allowed", {})   # per (group, devices): read-only masks
        if key not in cache:
            g, d = key
            per_list: dict[int, np.ndarray] = {}            # layers of one class share their list
            for strats in self.strategies:
                if id(strats) not in per_list:
                    per_list[id(strats)] = np.array([s.devices == d and s.group == g for s in strats],
                                                    dtype=bool)
            cache[key] = [per_list[id(strats)] for strats in self.strategies]
        return cache[key]

    def stage_key(self, stage: int) -> tuple[int, int]:
        """``(group, devices)`` of a stage: two stages with equal keys (and equal
        in-flight counts) have the same strategies and memory rows."""
        d = self.devices_per_stage if self.stage_devices is None else self.stage_devices[stage]
        return (0 if self.stage_groups is None else self.stage_groups[stage], d)

    @property
    def num_layers(self) -> int:
        return len(self.strategies)

    def cross(self, edge: int, boundary: int) -> np.ndarray:
        """R' of ``edge`` at stage boundary ``boundary``."""
        return self.cross_intra[edge] if self.boundary_intra[boundary] else self.cross_inter[edge]

    def plan_of(self, asg: Assignment) -> Plan:
        """The plan of an assignment (the one decode path of every backend):
        stage ``i`` runs on ranks ``[i*d, (i+1)*d)``, strategies from :attr:`strategies`."""
        stages = [StagePlan([], []) for _ in range(self.pp)]
        for u, (i, k) in enumerate(zip(asg.stage, asg.choice)):
            stages[i].layers.append(self.graph.layers[u].name)
            stages[i].strategies.append(self.strategies[u][k])
        sizes = None if self.stage_devices is None else list(self.stage_devices)
        groups = None if self.stage_groups is None else list(self.stage_groups)
        return Plan(stages, self.microbatches, self.schedule, self.vp_chunks, stage_devices=sizes,
                    stage_groups=groups)

    def assignment_of(self, plan: Plan) -> Assignment:
        """Inverse of :meth:`plan_of` (warm starts). A strategy pruned as dominated
        (:func:`prune_layer_strategies`) maps to a kept strategy of its layout that dominates it
        (:meth:`dominating_kept`), so the start is no slower and needs no more memory
        than the plan; a strategy of a layout in the space that no kept strategy
        dominates (outside the search space's options) maps to the fastest kept
        strategy of its layout. Raises ValueError when the plan does not belong to
        this configuration or space."""
        if plan.pp != self.pp or plan.microbatches != self.microbatches \
                or (plan.vp_chunks if plan.schedule is Schedule.interleaved else 1) != self.vp_chunks:
            raise ValueError(f"warm start has pp={plan.pp}, c={plan.microbatches}, "
                             f"vp={plan.vp_chunks}; the model has pp={self.pp}, "
                             f"c={self.microbatches}, vp={self.vp_chunks}")
        mine = None if self.stage_devices is None else list(self.stage_devices)
        if plan.stage_devices != mine:
            raise ValueError(f"warm start has stage devices {plan.stage_devices}; the model has {mine}")
        groups = None if self.stage_groups is None else list(self.stage_groups)
        if plan.stage_groups != groups:
            raise ValueError(f"warm start has stage groups {plan.stage_groups}; the model has {groups}")
        stage_of, strat_of = plan.stage_of(), plan.strategy_of()
        stage, ks = [], []
        for u, layer in enumerate(self.graph.layers):
            if layer.name not in stage_of:
                raise ValueError(f"warm start does not place layer {layer.name!r}")
            stage.append(stage_of[layer.name])
            s = strat_of[layer.name]
            try:
                ks.append(self.strategies[u].index(s))
            except ValueError:
                same = [k for k, t in enumerate(self.strategies[u]) if t.layout == s.layout]
                if not same:
                    raise ValueError(f"warm start strategy {s.label()} of {layer.name!r} is not "
                                     "in the search space") from None
                better = self.dominating_kept(u, s)
                ks.append(better if better is not None else min(same, key=lambda k: self.time[u][k]))
        return Assignment(stage, ks)

    def dominating_kept(self, u: int, strategy: Strategy) -> int | None:
        """Index of the fastest kept strategy of layer ``u`` that dominates
        ``strategy`` in the sense of :func:`prune_layer_strategies` (same layout, no worse in time,
        sync, weight bytes, activation bytes and working set), or None when none does.

        ``strategy`` is priced as the table build prices it (``layer_cost`` on a
        stage of ``strategy.devices`` devices). The comparison allows
        :data:`DOMINANCE_CHAIN_TOL` relative: a pruned strategy may be dominated
        only through a chain of pruned ones, each step within :func:`prune_layer_strategies`'s
        1e-12, and every link is a kept strategy's dominance too (transitivity)."""
        cluster = self.cluster if self.fleet is None else self.fleet.groups[strategy.group]
        ctx = StageContext(cluster, self.training, self.params, strategy.devices,
                           self.microbatch_samples, tie_tier=self.tie_tier,
                           stage_params=self.stage_params)
        mine = dominance_vectors([layer_cost(self.graph.layers[u], strategy, ctx)])[0]
        if self.memory_scale:                           # W, H, X in reference bytes
            mine[2:] *= self.memory_scale[strategy.group]
        limit = mine * (1 + DOMINANCE_CHAIN_TOL) + 1e-18
        theirs = self.dominance_vectors(u)
        best = None
        for k, t in enumerate(self.strategies[u]):
            if t.layout != strategy.layout:
                continue
            if np.all(theirs[k] <= limit) and (best is None or self.time[u][k] < self.time[u][best]):
                best = k
        return best

    def dominance_vectors(self, u: int) -> np.ndarray:
        """``[strategies, 5]`` array of layer ``u``'s :data:`DOMINANCE_FIELDS`
        as stored in the tables (the rows :func:`dominance_vectors` gives for
        its costs)."""
        return np.column_stack([np.asarray(getattr(self, name)[u], dtype=float)
                                for _, name in DOMINANCE_FIELDS])

    @property
    def stage_params(self) -> float:
        """The :attr:`~autopar_opt.cost.context.StageContext.stage_params` the build gave
        its stage contexts (the even split of the model's parameters)."""
        return even_stage_params(self.graph.total_params(), self.pp)

    @property
    def tie_tier(self):
        """The first-to-last-stage link tied parameters are reduced over (None
        with one stage): the build's :func:`~autopar_opt.ir.pipeline.tie_tier`."""
        sizes = self.stage_devices or (self.devices_per_stage,) * self.pp
        if self.fleet is not None and self.stage_groups is not None:
            from autopar_opt.ir.fleet_pipeline import fleet_tie_tier

            return fleet_tie_tier(self.fleet, self.stage_groups, sizes)
        return tie_tier(self.cluster, sizes)

    def stage_context(self) -> StageContext:
        return StageContext(self.cluster, self.training, self.params,
                            self.devices_per_stage, self.microbatch_samples,
                            tie_tier=self.tie_tier,
                            stage_params=self.stage_params)

    def peak_gib(self, modelled_bytes: float) -> float:
        """``modelled_bytes`` of one device on the scale of a plan's peak memory (with the
        runtime reserve and the allocator's overhead, as ``evaluate`` reports a peak), so
        that a message holds it against :attr:`usable_gib` as a plan's peak is held
        (QA round 12: the per-configuration reasons said "capacity is 0.774 GiB" beside
        the summary's "1.60 GiB usable" of the same device)."""
        return StageContext(self.cluster, self.training, self.params, 1, 1).peak_gib(modelled_bytes)

    @property
    def usable_gib(self) -> float:
        """What a plan's peak memory is held against: :attr:`capacity_bytes` on that scale
        (HBM less ``training.memory_reserve_gib`` on tables built from a cluster)."""
        return self.peak_gib(self.capacity_bytes)


def build_cost_tables(graph: LayerGraph, cluster: Cluster, training: Training,
                      space: SearchSpace, params: CostParams, pp: int,
                      microbatches: int, schedule: Schedule,
                      prune_dominated: bool = True,
                      stage_devices: tuple[int, ...] | None = None, vp: int = 1) -> CostTables:
    """Enumerate strategies and price them for one outer configuration.

    With ``prune_dominated`` a strategy is dropped when another of the same
    layout is no worse in time, sync, weights, activations and working set: resharding
    depends on layouts only, so this never changes the optimum.
    ``stage_devices`` gives every stage its own device count (free stage
    sizes; None: congruent stages of ``N/pp`` devices). ``vp`` is the virtual stages
    per rank of the interleaved schedule (module docstring; 1 otherwise).

    Raises ValueError when the configuration is not well formed (pp does not
    divide the devices, c does not divide the batch, stages not congruent,
    or stage devices breaking :func:`~autopar_opt.ir.pipeline.stage_devices_problem`).
    """
    n = cluster.num_devices
    broken = microbatch_rule_broken(microbatches, training.global_batch_size)
    if broken:
        raise ValueError(str(broken))
    if stage_devices is not None:
        why = (f"{len(stage_devices)} stage device counts for pp={pp}" if len(stage_devices) != pp
               else stage_devices_problem(stage_devices, cluster.gpus_per_node, n))
        if why:
            raise ValueError(f"stage devices {list(stage_devices)}: {why}")
        sizes = tuple(stage_devices)
    else:
        broken = pipeline_rule_broken(pp, n, cluster.gpus_per_node)
        if broken:
            raise ValueError(str(broken))
        sizes = (n // pp,) * pp
    vp = vp if schedule is Schedule.interleaved else 1
    split = None
    if vp > 1:
        why = vp_problem(graph.layers, pp, vp, microbatches)
        if why or stage_devices is not None:
            raise ValueError(f"interleaving with {vp} virtual stages: "
                             f"{why or 'the stages must be congruent'}")
        split = interleaved_split(graph.layers, pp)
    b = training.global_batch_size // microbatches
    runs_on = space.runs_on
    tie = tie_tier(cluster, sizes)
    even = even_stage_params(graph.total_params(), pp)
    ctxs = {d: StageContext(cluster, training, params, d, b, tie_tier=tie, stage_params=even)
            for d in sorted(set(sizes))}
    strategies, time, sync, wbytes, abytes, xbytes, classes = [], [], [], [], [], [], []
    ukeys: list[np.ndarray | None] = []
    cache: dict[int, tuple] = {}
    for layer, key in zip(graph.layers, graph.cost_classes):   # classes computed once per graph
        if key not in cache:
            strats, costs = [], []
            for d, ctx in ctxs.items():
                got = enumerate_strategies(layer, d, b, space, cluster.gpus_per_node, training.seq_len,
                                           training.autocast, training.runtime.cp_splits_heads)
                if runs_on is not None:     # what the framework cannot run is not in the space
                    got = runs_on.admitted(layer, got, pp, training.seq_len)
                strats += got
                costs += [layer_cost(layer, s, ctx) for s in got]
            keys = None if runs_on is None else np.array(
                [uniform_key(layer, s) for s in strats], dtype=np.int64).reshape(
                    len(strats), len(UNIFORM_DIMS))
            if prune_dominated and keys is None:
                strats, costs = prune_layer_strategies(strats, costs)
            elif prune_dominated:
                strats, costs, keys = prune_layer_strategies(strats, costs, keys)
            arrays = _arrays(costs)
            if vp > 1:          # the stored time is one chunk micro-batch's (module docstring)
                arrays = (arrays[0] / vp,) + tuple(arrays[1:])
            cache[key] = (len(cache), strats, arrays, keys)
        cls, strats, arrays, keys = cache[key]
        classes.append(cls)
        strategies.append(strats)
        ukeys.append(keys)
        for target, arr in zip((time, sync, wbytes, abytes, xbytes), arrays):   # DOMINANCE_FIELDS order
            target.append(arr)
    edges = graph.edge_indices()
    # one chunk micro-batch's in-stage resharding under interleaving (module docstring);
    # its stage-boundary sends stay whole
    reshard, cross_intra, cross_inter = _edge_tables(graph, strategies, edges, ctxs, 1.0 / vp)
    inflight: list[float] = [inflight_microbatches(schedule, pp, microbatches, i) for i in range(pp)]
    if vp > 1:
        held = [interleaved_inflight(pp, microbatches, vp, i) for i in range(pp)]
        inflight = [h for h, _ in held]
        for u, layer in enumerate(graph.layers):
            if layer.kind is LayerKind.lm_head:         # on the last stage (the even split)
                abytes[u] = abytes[u] * (held[-1][1] / inflight[-1])
    congruent = stage_devices is None
    first = ctxs[sizes[0]]
    return CostTables(
        graph=graph, cluster=cluster, training=training, params=params, pp=pp,
        microbatches=microbatches, schedule=schedule, devices_per_stage=max(sizes),
        microbatch_samples=b, strategies=strategies, time=time, sync=sync,
        weight_bytes=wbytes, act_bytes=abytes, edges=edges, reshard=reshard,
        cross_intra=cross_intra, cross_inter=cross_inter,
        boundary_intra=(boundaries_intra(sizes, cluster.gpus_per_node) if not congruent else
                        [boundary_is_intra(i, sizes[0], cluster.gpus_per_node) for i in range(pp - 1)]),
        inflight=inflight,
        capacity_bytes=first.capacity_bytes, layer_class=classes, working_bytes=xbytes, space=space,
        stage_devices=None if congruent else sizes,
        uniform_keys=None if runs_on is None else ukeys,
        fixed_stage=split if split is not None else _fixed_stage(len(graph.layers), pp)
        if runs_on is not None and runs_on.fixed_split() else None, vp_chunks=vp)


def _fixed_stage(n: int, pp: int) -> list[int]:
    """Stage of every layer under DeepSpeed's ``partition_method="uniform"``
    (``ds_utils.partition_uniform``: the first ``n mod pp`` stages one layer more)."""
    base, extra = divmod(n, pp)
    out: list[int] = []
    for i in range(pp):
        out += [i] * (base + (1 if i < extra else 0))
    return out


def stage_memory(tables: CostTables, stage: list[int], choice: list[int]) -> list[float]:
    """Per-stage memory (bytes) of an assignment: stored ``Σ (W + inflight_i·H)``
    plus the largest working set ``max X`` of the stage's layers (one layer is in
    flight at a time; :func:`~autopar_opt.cost.memory.working_set_bytes`).
    The one definition every solver's feasibility test and memory row follows."""
    pp = tables.pp
    w, h, x = [0.0] * pp, [0.0] * pp, [0.0] * pp
    for u, (i, k) in enumerate(zip(stage, choice)):
        w[i] += float(tables.weight_bytes[u][k])
        h[i] += float(tables.act_bytes[u][k])
        x[i] = max(x[i], float(tables.working_bytes[u][k]))
    return [w[i] + tables.inflight[i] * h[i] + x[i] for i in range(pp)]


def fits(tables: CostTables, a: Assignment) -> bool:
    """Every stage's memory (:func:`stage_memory`) within ``capacity_bytes`` plus the
    allowance ``MEM_EPS`` GiB: the one feasibility test of the solvers."""
    lim = tables.capacity_bytes + MEM_EPS * GIB
    return all(m <= lim for m in stage_memory(tables, a.stage, a.choice))


def identical_layers(tables: CostTables, u: int, v: int) -> bool:
    """Same class, same strategy list and identical per-layer cost arrays."""
    if not tables.layer_class or tables.layer_class[u] != tables.layer_class[v]:
        return False
    if tables.strategies[u] is not tables.strategies[v] and tables.strategies[u] != tables.strategies[v]:
        return False
    return all(arr[u] is arr[v] or np.array_equal(arr[u], arr[v])
               for arr in (tables.time, tables.sync, tables.weight_bytes, tables.act_bytes,
                           tables.working_bytes))


def symmetric_edges(tables: CostTables) -> list[int]:
    """Edges ``e = (u, u+1)`` joining interchangeable layers: same
    ``layer_class``, same strategy list, identical time/sync/weight/activation/
    working-set arrays. The MIP's symmetry cuts
    (:func:`~autopar_opt.formulations.families.symmetry_order`) and
    the chain DP's ordering rule (:func:`autopar_opt.solvers.dp.chain._sorted_pairs`)
    both act on exactly these edges."""
    return [e for e, (u, v) in enumerate(tables.edges)
            if v == u + 1 and identical_layers(tables, u, v)]


def _arrays(costs: list[LayerCost]) -> tuple[np.ndarray, ...]:
    """The tables' per-strategy arrays of one layer, in :data:`DOMINANCE_FIELDS` order."""
    return tuple(np.array(col) for col in dominance_vectors(costs).T)


def prune_layer_strategies(strats: list[Strategy], costs: list[LayerCost],
                           keys: np.ndarray | None = None):
    """Drop every strategy that another of the same layout dominates: no worse
    (to 1e-12 relative) in each of :data:`DOMINANCE_FIELDS` (time, sync,
    weights, activations, working set; why those five: there), and strictly
    better in one of them or earlier in the list (of two equal ones the first
    stays). All pairs at once as numpy comparisons: the pairwise Python loop
    was half of table building on the 1,024-GPU instances (issue 18 profile).

    With ``keys`` (a target's uniform keys, one row per strategy) a strategy
    competes only with those of the same key: one of another key may be the only
    one a runnable plan can use here. Returns ``(strategies, costs)``, and the
    kept keys as a third item when ``keys`` is given."""
    n = len(strats)
    if n < 2:
        return (list(strats), list(costs)) if keys is None else (list(strats), list(costs), keys)
    vec = dominance_vectors(costs)
    seen: dict = {}
    group = [s.layout for s in strats] if keys is None else \
        [(s.layout, tuple(k)) for s, k in zip(strats, keys.tolist())]
    layout = np.array([seen.setdefault(g, len(seen)) for g in group])
    no_worse = (vec[:, None, :] <= (vec * (1 + 1e-12) + 1e-18)[None, :, :]).all(axis=2)  # [j, i]
    better = (vec[:, None, :] < (vec * (1 - 1e-12) - 1e-18)[None, :, :]).any(axis=2)
    idx = np.arange(n)
    rival = (layout[:, None] == layout[None, :]) & (idx[:, None] != idx[None, :])
    dominated = (rival & no_worse & (better | (idx[:, None] < idx[None, :]))).any(axis=0)
    keep = np.flatnonzero(~dominated).tolist()
    if keys is not None:
        return [strats[i] for i in keep], [costs[i] for i in keep], keys[keep]
    return [strats[i] for i in keep], [costs[i] for i in keep]


def _edge_tables(graph: LayerGraph, strategies: list[list[Strategy]],
                 edges: list[tuple[int, int]], ctxs: dict[int, StageContext],
                 scale: float = 1.0):
    """R, R'(intra), R'(inter) per edge; R times ``scale`` (``1/v`` under the
    interleaved schedule: a chunk holds ``1/v`` of the stage's edges), R' whole
    (a chunk sends the whole activation at its boundary). R (resharding inside a stage) is priced
    on the stage's own tier; a pair of strategies on different device counts is
    never in one stage (free stage sizes), so its R entry is 0 and unused.
    All three depend on the two layers' layouts only (a layout fixes its device
    count), so each is priced once per pair of distinct layouts and expanded to
    the strategy pairs by indexing; edges between layers of the same classes and
    output size share their arrays (strategy lists are shared per class)."""
    ctx = next(iter(ctxs.values()))
    cl = ctx.cluster
    eff_intra = ctx.link_efficiency(cl.intra_node)
    eff_inter = ctx.link_efficiency(cl.inter_node)
    reshard, cross_intra, cross_inter = [], [], []
    memo: dict[tuple, tuple] = {}
    layouts: dict[int, tuple[list, np.ndarray]] = {}

    def distinct(strats: list[Strategy]) -> tuple[list, np.ndarray]:
        if id(strats) not in layouts:
            seen: dict = {}
            idx = np.array([seen.setdefault(s.layout, len(seen)) for s in strats], dtype=int)
            layouts[id(strats)] = (list(seen), idx)
        return layouts[id(strats)]

    def in_stage(a, b, nbytes: float) -> float:
        devices = a.dp * a.tp * a.cp
        if devices != b.dp * b.tp * b.cp:
            return 0.0
        c = ctxs[devices]
        return reshard_time(a, b, nbytes, c.stage_tier, c.link_efficiency(c.stage_tier))

    for u, v in edges:
        nbytes = graph.layers[u].output_bytes * ctx.microbatch_samples
        key = (nbytes, id(strategies[u]), id(strategies[v]))
        if key not in memo:
            (lu, iu), (lv, iv) = distinct(strategies[u]), distinct(strategies[v])
            small = (
                [[in_stage(a, b, nbytes) for b in lv] for a in lu],
                [[cross_stage_time(a, b, nbytes, cl.intra_pair, cl.intra_node, eff_intra, eff_intra)
                  for b in lv] for a in lu],
                [[cross_stage_time(a, b, nbytes, cl.inter_node_per_gpu, cl.intra_node, eff_inter,
                                  eff_intra)
                  for b in lv] for a in lu])
            # R scaled once per memo entry, so edges that share an array still do
            memo[key] = tuple((np.array(m, dtype=float) * f).reshape(len(lu), len(lv))
                              [np.ix_(iu, iv)] for m, f in zip(small, (scale, 1.0, 1.0)))
        r, ci, ce = memo[key]
        reshard.append(r)
        cross_intra.append(ci)
        cross_inter.append(ce)
    return reshard, cross_intra, cross_inter
