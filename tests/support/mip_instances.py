"""Tiny shared instances for the formulation/solver tests."""

from __future__ import annotations

import dataclasses
import random

from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import CostTables, build_cost_tables
from autopar_opt.ir.graph import Layer, LayerGraph, LayerKind
from autopar_opt.model_zoo.synthetic import random_chain, random_dag, random_layer, small_cluster
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training

#: Small space: keeps brute force at a few thousand plans per split.
SPACE = SearchSpace(zero_levels=(0, 3), recompute=(Recompute.none, Recompute.full))
TRAINING = Training(global_batch_size=16, seq_len=1024)


def random_instance(seed: int, num_layers: int, dag: bool, nodes: int = 1, gpus: int = 4,
                    training: Training = TRAINING):
    """(graph, cluster, training, space) for one seeded random instance."""
    graph = (random_dag if dag else random_chain)(seed, num_layers)
    return graph, small_cluster(nodes, gpus), training, SPACE


def tables_for(graph, cluster, training, space, pp: int, c: int,
               schedule: Schedule = Schedule.one_f_one_b) -> CostTables:
    return build_cost_tables(graph, cluster, training, space, default_params(), pp, c, schedule)


def plain_layer(name: str, flops: float = 1e12, params: int = 0) -> Layer:
    """A layer with compute only (and optional parameters): no tensor
    parallelism (max_tp=1), no activations, no output bytes, so the only
    strategy on d devices is dp=d (ZeRO collapses when params=0)."""
    return Layer(name=name, kind=LayerKind.generic, flops_fwd=flops, flops_bwd=2 * flops,
                 params=params, max_tp=1)


def two_identical_layers(params: int = 0) -> LayerGraph:
    return LayerGraph.chain("two", [plain_layer("l0", params=params), plain_layer("l1", params=params)])


def repeated_graph(seed: int, pattern: str, skip_edges: tuple[tuple[int, int], ...] = ()) -> LayerGraph:
    """A chain whose layers repeat: ``pattern[i]`` names the class of layer
    ``i`` (same letter = identical layer under another name), plus optional
    forward skip edges ``(i, j)`` (a DAG)."""
    rng = random.Random(seed)
    protos: dict[str, Layer] = {}
    layers = []
    for i, cls in enumerate(pattern):
        if cls not in protos:
            protos[cls] = random_layer(rng, f"proto_{cls}")
        layers.append(dataclasses.replace(protos[cls], name=f"l{i}"))
    if not skip_edges:
        return LayerGraph.chain(f"rep{seed}", layers, seq_len=1024, source="synthetic")
    edges = [(f"l{i}", f"l{i + 1}") for i in range(len(pattern) - 1)]
    edges += [(f"l{i}", f"l{j}") for i, j in skip_edges]
    return LayerGraph(f"repdag{seed}", layers, edges, seq_len=1024, source="synthetic")
