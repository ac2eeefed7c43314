"""The case's assumptions the outputs state (issue 28, point 1): the attention
kernel, its efficiency and every fallback, the device variant and power cap,
the NICs, the overlap mechanism, the context-parallel variant, the FSDP rule."""

from __future__ import annotations

from dataclasses import replace

from autopar_opt.cost import attention
from autopar_opt.cost.assumptions import cost_assumptions
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import DEVICE_CATALOG, make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.training import Training
from autopar_opt.model_zoo.registry import build_model

GRAPH = build_model("llama3-8b", overrides={"num_layers": 2})


def _text(device="H100-SXM-80GB", nodes=2, runtime="megatron-core", graph=GRAPH, **cluster):
    cl = make_cluster("c", nodes, 8, device, **cluster)
    tr = Training(64, 8192, runtime=runtime_named(runtime))
    return "\n".join(cost_assumptions(graph, cl, tr))


def test_attention_kernel_and_its_measured_efficiency_are_stated():
    text = _text()
    look = attention.lookup("cudnn", "hopper", True, 128, 8192)
    assert f"attention core: cudnn on hopper (causal, head dim 128, 8192 tokens" in text
    assert f"{look.fwd:.0%} forward, {look.bwd:.0%} backward" in text
    # Blackwell has no rows: the Hopper rows, said so
    assert "no attention-kernel measurements on blackwell" in _text("B200")
    # a layer graph without head dim or mask: the defaults, said so
    bare = LayerGraph.chain("g", [replace(layer, head_dim=0, attn_causal=None)
                                  for layer in GRAPH.layers])
    text = _text(graph=bare)
    assert "head dim not known: 128 taken" in text and "mask not known: causal taken" in text


def test_power_cap_nics_and_framework_rules_are_stated():
    capped = replace(DEVICE_CATALOG["H100-SXM-80GB"], power_limit_w=350.0)
    text = _text(capped)
    assert "power cap 350 W of 700 W rated" in text and "x0.794" in text
    assert "one NIC per GPU (8 per node; not stated)" in _text()
    assert "4 NICs per node (stated)" in _text(nics_per_node=4)
    assert "Transformer Engine userbuffers" in _text()
    assert "Megatron-Core buckets" in _text()
    titan = _text(runtime="torchtitan")
    assert "not overlapped" in titan and "kept under pipelining" in titan
    assert "context parallelism (if used): all_gather" in titan


def test_fabric_is_stated():
    assert "one non-blocking fabric (not stated)" in _text()
    assert "2 nodes per leaf, 2:1 above" in _text(nodes=4, nodes_per_leaf=2, oversubscription=2.0)
