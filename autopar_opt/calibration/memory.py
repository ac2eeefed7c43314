"""Published per-GPU memory against the model, on the measure each record states.

Frameworks report different quantities, and the model's peak per GPU,
``modelled·(1 + f) + R`` (:func:`autopar_opt.cost.evaluate._stage_metrics`:
``f`` = ``memory_fragmentation``, ``R`` = ``memory_reserve_gib``), maps onto
each as follows (``measured.memory_measure`` of a record):

* ``device`` (default; nvidia-smi "memory used"): everything on the device,
  ``modelled·(1 + f) + R``.
* ``reserved`` (``torch.cuda.max_memory_reserved``): the caching allocator's
  segments. They hold the tensors and the allocator's fragmentation but not
  the CUDA context or NCCL's own buffers (NCCL allocates with ``cudaMalloc``
  outside the PyTorch allocator), which is what ``R`` stands for:
  ``modelled·(1 + f)``. (PyTorch "CUDA semantics / memory management": "the
  unused memory managed by the allocator will still show as if used in
  nvidia-smi"; ``memory_reserved`` "total GPU memory managed by the caching
  allocator".)
* ``allocated`` (``torch.cuda.max_memory_allocated``, Megatron's
  ``mem-max-allocated-bytes``): live tensors only, ``modelled``. Such a record
  tests the tensor accounting (weights, gradients, optimizer state,
  activations, logits) and cannot inform ``f`` or ``R``.

``measured.memory_rank`` says which GPU: ``max`` (default; the busiest, as
nvidia-smi tables report) or ``last`` (Megatron logs memory from the last
rank, ``training_log`` writes on ``rank == world_size - 1``: the last
pipeline stage) or ``first`` (a stack that logs from global rank 0 only, which
sits on the first pipeline stage: KempnerForge's ``metrics/logger.py``
``_RankFilter`` on its ``[pp, dp_shard, tp]`` mesh).
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar_opt.calibration.reading.measured import MEASURES, RANKS, memory_fields

__all__ = ["MEASURES", "RANKS", "MemoryComparison", "memory_fields", "modelled_gib", "on_measure"]


def modelled_gib(stages, rank: str) -> float:
    """Modelled tensor bytes (GiB, without reserve and fragmentation) of the
    GPU the record measured: the busiest stage, the last one or the first one."""
    if rank in ("last", "first"):
        st = stages[-1] if rank == "last" else stages[0]
    else:
        st = max(stages, key=lambda s: s.peak_memory_gib)
    return st.peak_memory_gib - st.reserve_gib


def on_measure(modelled: float, measure: str, reserve_gib: float, fragmentation: float) -> float:
    """The model's figure for ``measure``: ``modelled·(1 + a_f·f) + a_R·R``
    with ``(a_f, a_R)`` of :data:`MEASURES`."""
    a_f, a_r = MEASURES[measure]
    return modelled * (1.0 + a_f * fragmentation) + a_r * reserve_gib


@dataclass
class MemoryComparison:
    """A record that publishes memory but no usable throughput (memory only):
    it counts for the memory statistics and the memory fit, never for the
    throughput ones."""

    id: str
    family: str
    measure: str
    rank: str
    predicted_memory_gib: float
    measured_memory_gib: float
    assumptions: list[str]
    params_total: int = 0
    params_active: int = 0
    architecture_assumed: tuple[str, ...] = ()

    @property
    def memory_rel_error(self) -> float:
        return self.predicted_memory_gib / self.measured_memory_gib - 1.0

    def to_dict(self) -> dict:
        return {"id": self.id, "family": self.family, "kind": "memory_only",
                "memory_measure": self.measure, "memory_rank": self.rank,
                "predicted_memory_gib": self.predicted_memory_gib,
                "measured_memory_gib": self.measured_memory_gib,
                "memory_rel_error": self.memory_rel_error,
                "assumptions": list(self.assumptions), "params_total": self.params_total,
                "params_active": self.params_active,
                "architecture_assumed": list(self.architecture_assumed)}
