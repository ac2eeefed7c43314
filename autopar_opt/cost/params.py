"""Free parameters of the cost model, fitted by ``autopar calibrate --fit``.

The fitted values live in ``calibrated.yaml`` next to this file, written by the
calibration and read here; :func:`default_params` returns them (or the
documented priors below when the file is absent).
"""

from __future__ import annotations

from dataclasses import dataclass, field, asdict, replace
from importlib import resources

import yaml


@dataclass(frozen=True)
class CostParams:
    """Calibratable knobs of the analytical model.

    gemm_efficiency : device name -> largest achieved fraction of dense peak
        for large GEMM-dominated layers (Narayanan et al. 2021 report 44-52% of
        peak end to end on A100).
    gemm_efficiency_default : used for devices missing from the dict.
    efficiency_half_us : a layer whose forward takes ``t`` µs at peak runs at
        ``eff * t / (t + half)``: small kernels are latency bound (roofline
        saturation, Williams et al. 2009).
    comm_efficiency : achieved fraction of link bandwidth for collectives
        (NCCL bus bandwidth vs. link peak).
    dp_overlap : fraction of the data-parallel gradient reduction hidden behind
        the backward pass (PyTorch DDP bucketing, Li et al. 2020 Sec. 3.2.3).
    zero3_overlap : fraction of ZeRO-3/FSDP parameter gathers hidden behind
        compute (FSDP prefetching, Zhao et al. 2023 Sec. 3.3).
    optimizer_bytes_per_param : HBM traffic of one Adam step per local
        parameter (read/write of fp32 master, m, v, and 16-bit copies).
    attention_efficiency : efficiency of the attention core (scores,
        softmax, ·V: ``Layer.flops_recompute_selective``) relative to the GEMM
        efficiency. Batched attention kernels reach less of peak than large
        GEMMs: FlashAttention-2 reaches 50-73% of A100 peak forward and less
        backward (Dao 2023, Sec. 4.1) and only ~35% on H100 (Shah et al. 2024,
        FlashAttention-3, Sec. 1); it dominates at long sequences.
    layer_overhead_us : fixed time per layer per micro-batch (kernel launches,
        memory-bound element-wise ops not in the FLOP count).
    iteration_overhead_s : fixed time per iteration (data loading, logging).
    """

    gemm_efficiency: dict[str, float] = field(default_factory=lambda: {
        "V100-32GB": 0.55, "A100-40GB": 0.55, "A100-80GB": 0.55,
        "H100-SXM-80GB": 0.50, "H200-141GB": 0.50, "B200": 0.50})
    gemm_efficiency_default: float = 0.5
    efficiency_half_us: float = 20.0
    comm_efficiency: float = 0.8
    dp_overlap: float = 0.0
    zero3_overlap: float = 1.0
    optimizer_bytes_per_param: float = 32.0
    attention_efficiency: float = 1.0
    layer_overhead_us: float = 0.0
    iteration_overhead_s: float = 0.0

    def efficiency_for(self, device_name: str) -> float:
        return self.gemm_efficiency.get(device_name, self.gemm_efficiency_default)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "CostParams":
        base = cls()
        known = {k: v for k, v in data.items() if k in base.to_dict()}
        if "gemm_efficiency" in known:
            merged = dict(base.gemm_efficiency)
            merged.update({str(k): float(v) for k, v in known["gemm_efficiency"].items()})
            known["gemm_efficiency"] = merged
        return replace(base, **known)


def default_params() -> CostParams:
    """The calibrated parameters shipped with the package (or the priors)."""
    try:
        text = resources.files("autopar_opt.cost").joinpath("calibrated.yaml").read_text()
    except (FileNotFoundError, ModuleNotFoundError):
        return CostParams()
    data = yaml.safe_load(text) or {}
    return CostParams.from_dict(data.get("params", data))
