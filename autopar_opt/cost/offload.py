"""CPU activation offload: activations saved for backward wait in host memory.

Transformer Engine's ``get_cpu_offload_context`` (``transformer_engine/
pytorch/cpu_offload.py``; Megatron-Core ``--cpu-offloading`` with
``--cpu-offloading-num-layers N``) copies the tensors a transformer layer
saves for backward to host memory on a side stream during the forward pass
and reloads them, prefetched one layer ahead, during the backward pass. The
device then holds only the part that is not offloaded; the copies cost time
only where they outlast the compute that runs beside them.

The setting is :attr:`autopar_opt.ir.training.Training.activation_offload`, a
fraction ``f`` of every transformer layer's saved activations (``N`` of the
``L`` equal layers of a pipeline rank is ``f = N / L``): a per-layer number,
so the cost tables, the MILP/MIQP and the DPs price it unchanged and
``evaluate(plan)`` equals their objective.
"""

from __future__ import annotations

from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import DeviceType, host_link_gb_per_s
from autopar_opt.ir.training import Training

#: Layer kinds inside the offload context (the transformer layers);
#: embedding, norms and the output layer keep their activations on the device.
OFFLOAD_KINDS = frozenset({LayerKind.transformer_block, LayerKind.moe_block,
                           LayerKind.attention, LayerKind.mlp})


def offloaded_fraction(layer: Layer, training: Training) -> float:
    """Fraction of ``layer``'s saved activations kept in host memory:
    ``training.activation_offload`` for :data:`OFFLOAD_KINDS`, else 0."""
    return training.activation_offload if layer.kind in OFFLOAD_KINDS else 0.0


def transfer_time(moved_bytes: float, device: DeviceType, fwd_s: float, bwd_s: float
                  ) -> tuple[float, float]:
    """(transfer time, exposed part) of offloading ``moved_bytes`` for one micro-batch.

    The bytes cross the host link once each way at its rate ``B``
    (:func:`autopar_opt.ir.hardware.host_link_gb_per_s`): ``t = m / B`` to the
    host in the forward pass, ``t`` back in the backward pass. The copy to
    the host runs while the next layer's forward runs, the reload while the
    following layer's backward runs (asynchronous and double buffered in
    Transformer Engine, ``cpu_offload.py``); the neighbour is priced as this
    layer (a stack of equal layers, as for FSDP prefetch), so
    ``exposed = max(0, t - fwd_s) + max(0, t - bwd_s)``.
    """
    if moved_bytes <= 0.0:
        return 0.0, 0.0
    t = moved_bytes / (host_link_gb_per_s(device) * 1e9)
    return 2.0 * t, max(0.0, t - fwd_s) + max(0.0, t - bwd_s)


__all__ = ["OFFLOAD_KINDS", "offloaded_fraction", "transfer_time"]
