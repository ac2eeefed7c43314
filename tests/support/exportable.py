"""Brute-force acceptance predicates: which plans a framework's exporter can write.

The brute force of tests/support/bruteforce.py takes an ``accept(plan)`` predicate;
the runnable and interleaved tests compare the search's runnable optimum with the best
plan these predicates accept."""

from __future__ import annotations

from autopar_opt.export import ExportError, export_plan
from autopar_opt.ir.recompute_pattern import block_layers, stage_blocks
from autopar_opt.ir.target import BLOCK_KINDS


def one_recompute_mode(plan, graph) -> bool:
    """Whether the plan's transformer blocks share one recomputation mode (a framework
    target searches one mode for the model: autopar_opt.ir.target)."""
    kind = {layer.name: layer.kind for layer in graph.layers}
    modes = {s.recompute for st in plan.stages for n, s in zip(st.layers, st.strategies)
             if kind[n] in BLOCK_KINDS}
    return len(modes) == 1


def megatron_searched(plan, graph) -> bool:
    """Whether the megatron target's space holds the plan's recomputation: one mode for
    the model, or Megatron's block method (full recomputation of the first N blocks of
    every model chunk, none of the others) in any configuration (one stage, the
    interleaved schedule's fixed split, a 1F1B pipeline's free split): every plan
    Megatron's exporter writes."""
    if one_recompute_mode(plan, graph):
        return True
    chunks = plan.vp_chunks if plan.schedule.value == "interleaved" and plan.vp_chunks > 1 else 1
    return block_layers(stage_blocks(plan, graph), chunks) is not None


def megatron_accepts(graph, cluster, training, blocks: bool = True):
    """``accept(plan)``: Megatron's exporter writes the plan and the target's space holds
    its recomputation (:func:`megatron_searched`; ``blocks`` False: one mode for the
    model only)."""
    def accept(plan) -> bool:
        try:
            export_plan(plan, graph, cluster, training, "megatron")
        except ExportError:
            return False
        return megatron_searched(plan, graph) if blocks else one_recompute_mode(plan, graph)
    return accept
