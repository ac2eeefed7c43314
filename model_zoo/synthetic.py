"""Seeded random small instances for differential tests and benchmarks.

Layers get random but physically plausible per-sample costs so that memory
limits, resharding and pipeline bubbles all matter on tiny instances whose
optimum brute force can still enumerate.
"""

from __future__ import annotations

import random

from autopar_opt.ir.graph import Layer, LayerGraph, LayerKind
from autopar_opt.ir.hardware import Cluster, LinkTier, make_cluster


def random_layer(rng: random.Random, name: str) -> Layer:
    """A transformer-like layer with costs drawn around a GPT-1B block."""
    scale = rng.choice([0.25, 0.5, 1.0, 2.0, 4.0])
    fwd = scale * rng.uniform(0.5, 2.0) * 1e11
    act = scale * rng.uniform(0.5, 2.0) * 4e7
    return Layer(
        name=name, kind=LayerKind.transformer_block,
        flops_fwd=fwd, flops_bwd=2 * fwd,
        params=int(scale * rng.uniform(0.5, 2.0) * 5e7),
        act_bytes=act, act_replicated_bytes=act * rng.uniform(0.1, 0.4),
        act_attn_bytes=act * rng.uniform(0.0, 0.3),
        flops_recompute_selective=fwd * rng.uniform(0.05, 0.2),
        input_bytes=act * rng.uniform(0.03, 0.1), output_bytes=act * rng.uniform(0.03, 0.1),
        tp_comm_bytes=act * rng.uniform(0.05, 0.2), cp_comm_bytes=act * 0.05,
        max_tp=rng.choice([1, 2, 4, 8]), supports_sp=rng.random() < 0.5, supports_cp=False)


def random_chain(seed: int, num_layers: int) -> LayerGraph:
    """A chain of ``num_layers`` random layers."""
    rng = random.Random(seed)
    layers = [random_layer(rng, f"l{i}") for i in range(num_layers)]
    return LayerGraph.chain(f"chain{seed}", layers, seq_len=1024, source="synthetic")


def random_dag(seed: int, num_layers: int, extra_edge_prob: float = 0.3) -> LayerGraph:
    """A connected DAG: a chain backbone plus random forward skip edges."""
    rng = random.Random(seed)
    layers = [random_layer(rng, f"n{i}") for i in range(num_layers)]
    edges = {(f"n{i}", f"n{i + 1}") for i in range(num_layers - 1)}
    for i in range(num_layers):
        for j in range(i + 2, num_layers):
            if rng.random() < extra_edge_prob:
                edges.add((f"n{i}", f"n{j}"))
    return LayerGraph(f"dag{seed}", layers, sorted(edges, key=lambda e: (int(e[0][1:]), int(e[1][1:]))),
                      seq_len=1024, source="synthetic")


def small_cluster(nodes: int = 1, gpus_per_node: int = 4, device: str = "A100-40GB",
                  inter_gb_per_s: float = 25.0, nvlink_mesh: bool = False) -> Cluster:
    """A small cluster of the catalog device, with a chosen inter-node bandwidth. Its
    nodes are NVSwitch-connected unless ``nvlink_mesh`` (the tests' hand-derived
    prices assume a switched node; a real 4-GPU HGX board is a point-to-point mesh:
    :func:`~autopar_opt.ir.hardware.default_nvlink_mesh`)."""
    return make_cluster(f"{nodes}x{gpus_per_node}-{device}", nodes, gpus_per_node, device,
                        inter_node=LinkTier("inter", inter_gb_per_s, 10.0), nvlink_mesh=nvlink_mesh)


def random_moe_layer(rng: random.Random, name: str) -> Layer:
    """A Mixture-of-Experts layer: a random dense layer whose routed experts hold
    most parameters, part of the FLOPs and activations, with an all-to-all volume
    and a load factor drawn around small Mixtral-like blocks."""
    from dataclasses import replace

    base = random_layer(rng, name)
    experts = rng.choice([2, 4, 8])
    return replace(
        base, kind=LayerKind.moe_block, num_experts=experts, top_k=rng.choice([1, 2]),
        params=base.params * 4, expert_params=int(base.params * 4 * rng.uniform(0.6, 0.9)),
        expert_flops_fwd=base.flops_fwd * rng.uniform(0.3, 0.6),
        expert_act_bytes=base.act_bytes * rng.uniform(0.2, 0.5),
        a2a_bytes=base.output_bytes * rng.uniform(1.0, 4.0),
        expert_load=rng.choice([1.0, 1.25, 1.5]))


def random_moe_chain(seed: int, num_layers: int) -> LayerGraph:
    """A chain mixing dense and MoE layers (at least one MoE layer)."""
    rng = random.Random(seed)
    layers = [random_moe_layer(rng, f"l{i}") if i == 0 or rng.random() < 0.6
              else random_layer(rng, f"l{i}") for i in range(num_layers)]
    return LayerGraph.chain(f"moe{seed}", layers, seq_len=1024, source="synthetic")
