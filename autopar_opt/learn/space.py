"""The layer-strategy space of a spec as a search problem for the searchers.

A candidate fixes one outer configuration (pp, c, schedule), a contiguous
split of the topologically ordered layers into ``pp`` non-empty stages and one
strategy per layer (an index into that configuration's cost tables). This is
exactly the space the exact search covers (docs/DESIGN.md §2-3), so a searcher's
plan and the certificate's lower bound speak about the same set of plans.

Two prices, one semantics:

* :meth:`LayerSpace.price` prices a candidate from the cost tables with numpy
  (the objective of docs/DESIGN.md §3, the same terms as
  :func:`autopar_opt.solvers.dp.common.stage_terms`); searchers use it as their
  simulator because it is ~100x faster than building a Plan;
* :meth:`LayerSpace.finish` turns the best candidate into a
  :class:`~autopar_opt.ir.plan.Plan` and prices it with
  :func:`autopar_opt.cost.evaluate.evaluate`. The value a searcher reports is that
  one, never its own estimate (tests check the two agree).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from autopar_opt.cost.params import CostParams
from autopar_opt.cost.tables import CostTables, build_cost_tables
from autopar_opt.core.assignment import Assignment
from autopar_opt.solvers.dp.common import MEM_EPS
from autopar_opt.cost.evaluate import PlanMetrics, evaluate
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import GIB, Cluster
from autopar_opt.ir.plan import Plan
from autopar_opt.search.bounds import analytic_lower_bound
from autopar_opt.search.configs import OuterConfig, outer_configs
from autopar_opt.ir.training import SearchSpace, Training

#: Multiplier of the relative memory overflow in the penalised value of an
#: infeasible candidate (searchers compare candidates by it; it is never reported).
OVERFLOW_PENALTY = 4.0


@dataclass
class Candidate:
    """One point of the space: configuration index, stage and strategy per layer."""

    config: int
    stage: np.ndarray
    choice: np.ndarray

    def copy(self) -> "Candidate":
        return Candidate(self.config, self.stage.copy(), self.choice.copy())

    def key(self) -> tuple:
        return (self.config, self.stage.tobytes(), self.choice.tobytes())


@dataclass
class ConfigArrays:
    """One configuration's cost tables as padded numpy arrays (pad = +inf time)."""

    tables: CostTables
    bound: float
    num_choices: np.ndarray          # [n] strategies per layer
    time: np.ndarray                 # [n, K]
    sync: np.ndarray
    weight: np.ndarray
    act: np.ndarray
    work: np.ndarray                 # [n, K] working set of the layer in flight
    src: np.ndarray                  # [E]
    dst: np.ndarray
    reshard: np.ndarray              # [E, K, K]
    cross_intra: np.ndarray
    cross_inter: np.ndarray
    inflight: np.ndarray             # [pp]
    boundary_intra: np.ndarray       # [pp-1]


def _pad(rows: list[np.ndarray], k: int, fill: float) -> np.ndarray:
    out = np.full((len(rows), k), fill)
    for u, r in enumerate(rows):
        out[u, :len(r)] = r
    return out


def _pad_edges(mats: list[np.ndarray], k: int) -> np.ndarray:
    out = np.zeros((len(mats), k, k))
    for e, m in enumerate(mats):
        out[e, :m.shape[0], :m.shape[1]] = m
    return out


def config_arrays(tables: CostTables, bound: float) -> ConfigArrays:
    """Pad one configuration's tables for vectorised pricing."""
    k = max(len(s) for s in tables.strategies)
    edges = np.array(tables.edges, dtype=int).reshape(-1, 2)
    return ConfigArrays(
        tables=tables, bound=bound,
        num_choices=np.array([len(s) for s in tables.strategies]),
        time=_pad(tables.time, k, math.inf), sync=_pad(tables.sync, k, 0.0),
        weight=_pad(tables.weight_bytes, k, 0.0), act=_pad(tables.act_bytes, k, 0.0),
        work=_pad(tables.working_bytes, k, 0.0),
        src=edges[:, 0], dst=edges[:, 1], reshard=_pad_edges(tables.reshard, k),
        cross_intra=_pad_edges(tables.cross_intra, k), cross_inter=_pad_edges(tables.cross_inter, k),
        inflight=np.array(tables.inflight, dtype=float),
        boundary_intra=np.array(tables.boundary_intra, dtype=bool))


@dataclass
class Priced:
    """Table price of a candidate: iteration time, peak memory / capacity, feasibility."""

    time_s: float
    memory_ratio: float
    feasible: bool

    @property
    def penalised(self) -> float:
        """What searchers minimise: the time, inflated by any memory overflow."""
        return self.time_s * (1.0 + OVERFLOW_PENALTY * max(0.0, self.memory_ratio - 1.0))


class LayerSpace:
    """Every feasible-looking outer configuration of a spec, with its tables.

    Configurations with a proven-infeasible analytic bound are left out (no
    plan of theirs can fit), so searchers never waste samples there; so are the
    free stage-size configurations (``search.stage_devices: free``): the
    searchers' moves assume one device count for every stage.
    """

    kind = "layer"

    def __init__(self, graph: LayerGraph, cluster: Cluster, training: Training,
                 space: SearchSpace, params: CostParams) -> None:
        self.graph, self.cluster, self.training = graph, cluster, training
        self.space, self.params = space, params
        self.configs: list[OuterConfig] = []
        self.arrays: list[ConfigArrays] = []
        for cfg in outer_configs(graph, cluster, training, space):
            if cfg.stage_devices is not None:
                continue          # searchers move over congruent stages only
            tables = build_cost_tables(graph, cluster, training, space, params, cfg.pp,
                                       cfg.microbatches, cfg.schedule)
            bound = analytic_lower_bound(tables)
            if math.isinf(bound.value):
                continue
            self.configs.append(cfg)
            self.arrays.append(config_arrays(tables, bound.value))
        self.num_layers = len(graph.layers)
        #: the smallest analytic lower bound: a scale for rewards and features
        self.reference_s = min((a.bound for a in self.arrays), default=1.0)

    def __len__(self) -> int:
        return len(self.configs)

    # ----------------------------------------------------------------- pricing
    def price(self, cand: Candidate) -> Priced:
        """Objective of docs/DESIGN.md §3 (+ overhead) and memory, from the tables."""
        a = self.arrays[cand.config]
        t = a.tables
        pp, u = t.pp, np.arange(self.num_layers)
        st, ch = cand.stage, cand.choice
        p = np.bincount(st, weights=a.time[u, ch], minlength=pp)
        g = np.bincount(st, weights=a.sync[u, ch], minlength=pp)
        mem = (np.bincount(st, weights=a.weight[u, ch], minlength=pp)
               + a.inflight * np.bincount(st, weights=a.act[u, ch], minlength=pp))
        top = np.zeros(pp)                    # + the largest working set of each stage
        np.maximum.at(top, st, a.work[u, ch])
        mem = mem + top
        o = np.zeros(max(pp - 1, 0))
        if len(a.src):
            su, sv = st[a.src], st[a.dst]
            ku, kv = ch[a.src], ch[a.dst]
            same = su == sv
            p += np.bincount(su[same], weights=a.reshard[np.flatnonzero(same), ku[same], kv[same]],
                             minlength=pp)
            for e in np.flatnonzero(~same):
                for b in range(su[e], sv[e]):
                    mat = a.cross_intra if a.boundary_intra[b] else a.cross_inter
                    o[b] += mat[e, ku[e], kv[e]]
        bott = max(p.max(), o.max() if len(o) else 0.0)
        latency = p.sum() + o.sum() + (t.microbatches - 1) * bott + g.max()
        ratio = float(mem.max()) / t.capacity_bytes
        feasible = bool(mem.max() <= t.capacity_bytes + MEM_EPS * GIB)
        return Priced(float(latency) + t.params.iteration_overhead_s, ratio, feasible)

    # ------------------------------------------------------------------ moves
    def random_split(self, pp: int, rng: np.random.Generator) -> np.ndarray:
        """A uniformly random contiguous split of the layers into ``pp`` stages."""
        n = self.num_layers
        cuts = np.sort(rng.choice(np.arange(1, n), size=pp - 1, replace=False)) if pp > 1 else []
        stage = np.zeros(n, dtype=int)
        for c in cuts:
            stage[c:] += 1
        return stage

    def random_candidate(self, rng: np.random.Generator, config: int | None = None) -> Candidate:
        """Uniform configuration, uniform split, uniform strategy per layer."""
        ci = int(rng.integers(len(self.configs))) if config is None else config
        a = self.arrays[ci]
        choice = (rng.random(self.num_layers) * a.num_choices).astype(int)
        return Candidate(ci, self.random_split(a.tables.pp, rng), choice)

    def neighbour(self, cand: Candidate, rng: np.random.Generator) -> Candidate:
        """One local move (the moves annealing and local search share):

        * change one layer's strategy (60%);
        * give a run of consecutive layers the strategy of its first layer (15%);
        * move one stage boundary by one layer, keeping stages non-empty (15%);
        * jump to another configuration, keeping each layer's strategy where the
          new tables have a strategy of the same label, else a random one, with
          an even split (10%).
        """
        new = cand.copy()
        a = self.arrays[new.config]
        n, r = self.num_layers, rng.random()
        if r < 0.6 or (r < 0.9 and a.tables.pp == 1 and r >= 0.75):
            u = int(rng.integers(n))
            new.choice[u] = int(rng.integers(a.num_choices[u]))
        elif r < 0.75:
            u, v = sorted(int(x) for x in rng.integers(n, size=2))
            label = a.tables.strategies[u][new.choice[u]]
            for w in range(u + 1, v + 1):
                if label in a.tables.strategies[w]:
                    new.choice[w] = a.tables.strategies[w].index(label)
        elif r < 0.9:
            b = int(rng.integers(1, a.tables.pp))          # boundary between stage b-1 and b
            first = int(np.argmax(new.stage == b))
            last = n - 1 - int(np.argmax(new.stage[::-1] == b - 1))
            if rng.random() < 0.5 and np.sum(new.stage == b - 1) > 1:
                new.stage[last] = b                     # stage b grows to the left
            elif np.sum(new.stage == b) > 1:
                new.stage[first] = b - 1                # stage b-1 grows to the right
        elif len(self.configs) > 1:
            new = self.reconfigure(cand, int(rng.integers(len(self.configs))), rng)
        return new

    def reconfigure(self, cand: Candidate, config: int, rng: np.random.Generator) -> Candidate:
        """``cand``'s strategies carried to configuration ``config`` by label, even split."""
        old, new = self.arrays[cand.config].tables, self.arrays[config].tables
        choice = np.empty(self.num_layers, dtype=int)
        for u in range(self.num_layers):
            label = old.strategies[u][cand.choice[u]]
            options = new.strategies[u]
            choice[u] = options.index(label) if label in options else int(rng.integers(len(options)))
        n, pp = self.num_layers, new.pp
        stage = np.repeat(np.arange(pp), [n // pp + (1 if i < n % pp else 0) for i in range(pp)])
        return Candidate(config, stage, choice)

    # ----------------------------------------------------------------- output
    def to_plan(self, cand: Candidate) -> Plan:
        tables = self.arrays[cand.config].tables
        return tables.plan_of(Assignment([int(s) for s in cand.stage], [int(k) for k in cand.choice]))

    def finish(self, cand: Candidate) -> tuple[Plan, PlanMetrics]:
        """The candidate as a Plan, priced by :func:`evaluate` (the reported value)."""
        plan = self.to_plan(cand)
        return plan, evaluate(plan, self.graph, self.cluster, self.training, self.params)

    def plan_value(self, cand: Candidate) -> tuple[Plan, float, bool, dict]:
        """(plan, evaluate()'s iteration time, feasible, metrics dict) for reporting."""
        plan, metrics = self.finish(cand)
        return plan, metrics.iteration_time_s, metrics.feasible, metrics.to_dict()
