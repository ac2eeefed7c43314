"""Seeded tiny instances of the hybrid-parallel problem, small enough for brute force.

``make_instance(seed)`` draws a 2-6 layer chain or DAG, a 1-3 stage pipeline on a
small cluster and a memory capacity set from the least memory of its cost tables
(so some instances are tight, some infeasible); ``seeded_case(seed)`` adds the cost
tables and the brute-force optimum. Shared by the DP differential tests.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import pytest

from autopar_opt.cost.context import user_reserve_for
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import GIB, Cluster
from autopar_opt.ir.strategies import enumerate_strategies
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training
from autopar_opt.model_zoo.synthetic import random_chain, random_dag, small_cluster
from autopar_opt.solvers.dp.common import least_memory
from support.bruteforce import brute_force

SPACE = SearchSpace(zero_levels=(0, 3), sequence_parallel=(False, True),
                    recompute=(Recompute.none, Recompute.full))
CLUSTERS = {1: [(1, 2), (1, 4), (2, 2)], 2: [(1, 2), (1, 4), (2, 2)], 3: [(1, 3), (1, 6)]}
NUM_SEEDS = 320
MAX_PLANS = 100_000


@dataclass
class Instance:
    graph: LayerGraph
    cluster: Cluster
    training: Training
    pp: int
    c: int
    schedule: Schedule


def make_instance(seed: int) -> Instance | None:
    """Seeded instance; the capacity is set from the least memory of its tables."""
    rng = random.Random(seed)
    n = rng.randint(2, 6)
    pp = rng.choice([1, 2, 3])
    if pp > n:
        pp = 1
    nodes, gpn = rng.choice(CLUSTERS[pp])
    is_chain = rng.random() < 0.6
    cluster = small_cluster(nodes, gpn, inter_gb_per_s=rng.choice([5.0, 25.0]))
    c = rng.choice([1, 2, 4])
    schedule = rng.choice([Schedule.gpipe, Schedule.one_f_one_b])
    training = Training(global_batch_size=8 * c, seq_len=1024)
    while True:   # keep the brute force small: shrink the model until it is cheap
        graph = random_chain(seed, n) if is_chain else random_dag(seed, n, 0.4)
        d = cluster.num_devices // pp
        combos = math.prod(len(enumerate_strategies(layer, d, 8, SPACE, gpn, 1024)) for layer in graph.layers)
        if combos <= MAX_PLANS or n <= max(pp, 2):
            break
        n -= 1
    tables = build_cost_tables(graph, cluster, training, SPACE, default_params(), pp, c, schedule)
    if any(len(s) == 0 for s in tables.strategies):
        return Instance(graph, cluster, training, pp, c, schedule)
    need = least_memory(tables)
    cap_gib = need / GIB * rng.choice([0.9, 1.0001, 1.2, 1.6, 50.0])
    reserve = user_reserve_for(cap_gib, cluster.device.hbm_gib, default_params())
    training = Training(global_batch_size=8 * c, seq_len=1024, memory_reserve_gib=reserve)
    return Instance(graph, cluster, training, pp, c, schedule)


def seeded_case(seed: int):
    """Cost tables of seeded tiny chain ``seed`` and its brute-force optimum (skips when
    some layer has no strategy on the cluster)."""
    inst = make_instance(seed)
    tables = build_cost_tables(inst.graph, inst.cluster, inst.training, SPACE, default_params(),
                               inst.pp, inst.c, inst.schedule)
    if any(len(s) == 0 for s in tables.strategies):
        pytest.skip("no strategy for some layer on this cluster")
    ref = brute_force(inst.graph, inst.cluster, inst.training, SPACE, inst.pp, inst.c, inst.schedule)
    return tables, ref
