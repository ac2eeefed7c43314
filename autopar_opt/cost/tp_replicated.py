"""Vocabulary layers a runtime leaves whole on every tensor-parallel rank.

Megatron and torchtitan split the input embedding and the output head over the
tensor-parallel group (vocabulary-parallel). Some stacks do not, and then every
tensor-parallel rank holds (its ZeRO/FSDP shard of) the whole table and computes the
whole layer on its micro-batch share, redundantly:

* the input embedding when the runtime's ``tp_embedding`` is off (KempnerForge:
  "Token embedding stays replicated", ``kempnerforge/distributed/tensor_parallel.py``
  ``apply_tensor_parallel``);
* the output head in a pipeline stage (``pp > 1``) when ``tp_head_in_pipeline`` is
  off (KempnerForge builds its pipeline stages without sequence parallelism,
  ``seq_parallel = not is_pp_stage and not tie``, and shards the output head only
  ``if seq_parallel``, same file and function).

Such a layer is priced as :func:`view` makes it: its parameters and FLOPs times
``tp`` (so the per-device figures the model divides by ``tp`` are the whole
layer's), and no tensor-parallel traffic of its own. Its activations and loss are
those the runtime's ``loss_parallel`` already sets (off on these stacks: the logits
whole on every rank, :func:`autopar_opt.cost.memory.logits_per_device`). The layer's
model FLOPs for MFU stay the declared ones (the redundant copies are hardware FLOPs
only: :func:`useful_share`).
"""

from __future__ import annotations

from dataclasses import replace

from autopar_opt.cost.context import StageContext
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.strategies import Strategy


def replicated_over_tp(layer: Layer, s: Strategy, ctx: StageContext) -> bool:
    """Whether ``layer`` runs whole on each of ``s.tp > 1`` ranks (module docstring)."""
    if s.tp <= 1:
        return False
    rt = ctx.training.runtime
    if layer.kind is LayerKind.embedding:
        return not rt.tp_embedding
    if layer.kind is LayerKind.lm_head:
        return ctx.pipelined and not rt.tp_head_in_pipeline
    return False


def view(layer: Layer, s: Strategy, ctx: StageContext) -> Layer:
    """``layer`` as the model prices it on one device: unchanged, or, where
    :func:`replicated_over_tp`, with ``tp`` times its parameters (the tied copy's
    too) and FLOPs and no tensor-parallel traffic."""
    if not replicated_over_tp(layer, s, ctx):
        return layer
    t = s.tp
    return replace(layer, params=layer.params * t, tied_params=layer.tied_params * t,
                   flops_fwd=layer.flops_fwd * t, flops_bwd=layer.flops_bwd * t,
                   tp_comm_bytes=0.0, measured=())


def useful_share(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """The share of a device's FLOPs on ``layer`` that are model FLOPs: ``1/tp`` for
    a layer every tensor-parallel rank computes whole, else 1."""
    return 1.0 / s.tp if replicated_over_tp(layer, s, ctx) else 1.0
