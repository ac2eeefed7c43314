"""A plan's recomputation over its transformer layers, in Megatron-LM's terms and in words.

The cost model prices recomputation per layer (:class:`~autopar_opt.ir.training.Recompute`);
Megatron-LM takes one setting for the model (Megatron-Core 0.17.1 ``TransformerConfig``:
``recompute_granularity``, ``recompute_method``, ``recompute_num_layers``;
``megatron/core/transformer/transformer_block.py`` ``_checkpointed_forward``):

* ``selective``: the attention core of every layer;
* ``full`` + ``uniform`` + ``N``: the layers of every model chunk in groups of ``N``, each
  group checkpointed at its input; with ``N = 1`` every layer keeps its input and recomputes
  itself, the per-layer ``full`` of the cost model. With ``N > 1`` a group keeps one input
  for ``N`` layers and holds all ``N`` layers' activations while it recomputes: no per-layer
  price (the import refuses it, :mod:`autopar_opt.export.megatron_import`);
* ``full`` + ``block`` + ``N``: the first ``N`` layers of every model chunk recompute fully,
  the others not at all: per layer, ``full`` or ``none``, exactly what the cost model prices.

:func:`block_layers` finds the ``N`` of a plan that recomputes the first ``n`` transformer
layers of every stage and none of the others (``n = v·N`` with ``v`` virtual stages, the
exporter's rule); :func:`recompute_text` says a plan's recomputation in words, for the
summaries, the report and plan.json (QA round 13: a block plan was shown as two strategies
per stage, "dp2·tp2 | dp2·tp2·rc-full", and no output said what Megatron runs).
"""

from __future__ import annotations

from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.target import BLOCK_KINDS
from autopar_opt.ir.training import Recompute

#: What each per-layer mode recomputes, in words.
MODE_WORDS = {Recompute.full: "full recomputation",
              Recompute.selective: "selective recomputation (the attention core)",
              Recompute.op: "op-level selective checkpointing"}


def stage_blocks(plan, graph: LayerGraph) -> list[list[Recompute]]:
    """Per stage, the recomputation of each of its transformer layers, in order (a stage
    names its layers)."""
    kind = {layer.name: layer.kind for layer in graph.layers}
    return [[s.recompute for name, s in zip(st.layers, st.strategies) if kind[name] in BLOCK_KINDS]
            for st in plan.stages]


def block_layers(per_stage: list[list[Recompute]], chunks: int = 1) -> int | None:
    """Megatron's ``--recompute-num-layers N`` of the block method for a plan whose stages
    recompute fully their first transformer layers and none of the others, as Megatron's
    one flag does: ``_checkpointed_forward`` checkpoints the layers ``layer_idx < N`` of
    every model chunk (``chunks`` per rank with virtual stages), so a stage of ``k`` layers
    recomputes its first ``chunks·min(N, k / chunks)`` (all of them when it has fewer than
    ``N`` per chunk: Megatron sets no upper limit on ``N``). None when the plan has no such
    form (a stage recomputing other blocks or another count, another mode, a count the
    chunks do not divide), and when it recomputes none or every block (a uniform setting)."""
    modes = {m for stage in per_stage for m in stage}
    if modes != {Recompute.full, Recompute.none}:
        return None
    counts = []
    for stage in per_stage:
        n = sum(1 for m in stage if m is Recompute.full)
        if stage[:n] != [Recompute.full] * n:
            return None
        counts.append(n)
    most = max(counts)
    if most % chunks or any(len(stage) % chunks for stage in per_stage):
        return None
    n = most // chunks
    if any(c != chunks * min(n, len(stage) // chunks) for c, stage in zip(counts, per_stage)):
        return None
    return n


def recompute_text(plan, graph: LayerGraph) -> str:
    """The plan's recomputation in words: ``none``, one mode on every transformer layer,
    ``full recomputation of the first 3 of 12 transformer layers per stage (Megatron block
    method, --recompute-num-layers 3)``, or the per-layer counts of a mix no Megatron
    setting states."""
    per_stage = stage_blocks(plan, graph)
    blocks = [m for stage in per_stage for m in stage]
    if not blocks:
        return "none (no transformer layers)"
    modes = set(blocks)
    if modes == {Recompute.none}:
        return "none"
    if len(modes) == 1:
        return f"{MODE_WORDS[blocks[0]]} of every transformer layer"
    chunks = plan.vp_chunks if plan.vp_chunks > 1 and plan.schedule.value == "interleaved" else 1
    n = block_layers(per_stage, chunks)
    if n is not None:
        sizes = sorted({len(stage) for stage in per_stage})
        of = "/".join(map(str, sizes))
        per = (f"the first {n} of each of its {chunks} virtual stages, {n * chunks} of "
               if chunks > 1 else f"the first {n} of ")
        fewer = (" (every layer of a stage with fewer)"
                 if any(len(stage) < n * chunks for stage in per_stage) else "")
        return (f"full recomputation of {per}{of} transformer layers per stage{fewer}, none of "
                f"the others (Megatron block method: --recompute-granularity full "
                f"--recompute-method block --recompute-num-layers {n})")
    counts = ", ".join(f"{mode.value} on {blocks.count(mode)}" for mode in
                       (Recompute.full, Recompute.selective, Recompute.op, Recompute.none)
                       if mode in modes)
    return (f"per-layer: {counts} of {len(blocks)} transformer layers (no one Megatron-LM "
            "setting: its block method recomputes the first N layers of every stage)")


__all__ = ["MODE_WORDS", "block_layers", "recompute_text", "stage_blocks"]
