"""Brute-force acceptance predicates: which plans a framework's exporter can write.

The brute force of tests/support/bruteforce.py takes an ``accept(plan)`` predicate;
the runnable and interleaved tests compare the search's runnable optimum with the best
plan these predicates accept."""

from __future__ import annotations

from autopar_opt.export import ExportError, export_plan
from autopar_opt.ir.target import BLOCK_KINDS


def one_recompute_mode(plan, graph) -> bool:
    """Whether the plan's transformer blocks share one recomputation mode (a framework
    target searches one mode for the model: autopar_opt.ir.target)."""
    kind = {layer.name: layer.kind for layer in graph.layers}
    modes = {s.recompute for st in plan.stages for n, s in zip(st.layers, st.strategies)
             if kind[n] in BLOCK_KINDS}
    return len(modes) == 1


def megatron_accepts(graph, cluster, training):
    """``accept(plan)``: Megatron's exporter writes the plan and its blocks share one
    recomputation mode."""
    def accept(plan) -> bool:
        try:
            export_plan(plan, graph, cluster, training, "megatron")
        except ExportError:
            return False
        return one_recompute_mode(plan, graph)
    return accept
