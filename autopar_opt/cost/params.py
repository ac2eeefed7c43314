"""Physical parameters of the cost model (v3), fitted by ``autopar calibrate --fit``.

What a microbenchmark can measure is measured or cited, not fitted (issue 28,
point 1): the attention kernels' efficiencies are published benchmark rows
(:mod:`autopar_opt.cost.attention`), the collectives' bus-bandwidth
efficiencies nccl-tests figures (``comm_efficiency``, ``inter_comm_efficiency``
below, fixed) and their latencies NCCL's own model (:mod:`autopar_opt.cost.nccl`).
Every parameter is a physical quantity with a documented plausible range
(:data:`RANGES`); the fit keeps it inside, and a fitted value that ends on a
bound is reported (it means physics is missing, not that the bound is
right). There is no per-framework throughput factor and no overlap
fraction: what a software stack overlaps is a spec setting
(:mod:`autopar_opt.ir.runtime`), and what overlap hides is computed from named
compute windows (:mod:`autopar_opt.cost.layer_cost`).

The shipped values live in ``calibrated.yaml`` next to this file (written by
``benchmarks/calibration/run.py``); a spec's ``cost_model:`` may name another
file written by ``autopar calibrate --fit --output FILE``.

Measured ranges (H100 SXM, ``benchmarks/kernels/RESULTS.md``): large bf16
GEMMs 0.57-0.78 of the 989 TFLOP/s dense peak (median 0.71); FP8 e4m3
``_scaled_mm`` 0.51-0.70 of 1,979 (median 0.61); causal SDPA (cuDNN)
attention forward+backward 0.40-0.57 of the bf16 peak (rows of
``data/attention_kernels.yaml``); efficiency halves at ~22 µs of work at peak (bf16), ~16 µs (FP8);
fused Adam streams ~2.55 TB/s (0.76 of the 3.35 TB/s datasheet).
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from autopar_opt.ir.training import optimizer_step_ratio

#: Bounds a value must satisfy to be a valid parameter at all (a spec is refused
#: outside them): a fraction of a peak or a bandwidth lies in (0, 1].
FRACTION = {"gt": 0, "le": 1}
NON_NEGATIVE = {"ge": 0}
#: Range of the per-device GEMM efficiencies (bf16/fp16 and FP8).
EFFICIENCY_RANGE = (0.35, 0.85)


def _param(default: Any = MISSING, *, valid: dict[str, float],
           plausible: tuple[float, float, str] | None = None, factory: Any = MISSING) -> Any:
    """A :class:`CostParams` field with its metadata: ``valid`` are the hard bounds
    (pydantic ``gt``/``ge``/``le``) the spec's ``cost_model`` section enforces;
    ``plausible`` the physical range ``(lo, hi, reason)`` the fit stays inside
    (:data:`RANGES`). The spec section is derived from these fields
    (:mod:`autopar_opt.spec.schema`), so a new parameter is one edit here."""
    meta = {"valid": valid, "plausible": plausible}
    if factory is not MISSING:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class CostParams:
    """The calibratable physical quantities of the analytical model.

    gemm_efficiency : device name -> achieved fraction of the dense 16-bit
        peak of large GEMMs during training (Narayanan et al. 2021 report
        44-52% of peak end to end on A100; isolated H100 GEMMs reach 0.57-0.78).
    fp8_efficiency : device name -> the same for FP8 GEMMs against the FP8
        dense peak (H100 ``_scaled_mm``: 0.51-0.70).
    efficiency_default, fp8_efficiency_default : devices missing from the dicts.
    efficiency_half_us : a GEMM kernel whose time at peak is ``t`` µs runs at
        ``eff · t / (t + half)`` (roofline saturation, Williams et al. 2009).
    comm_efficiency, inter_comm_efficiency : NCCL bus bandwidth as a fraction
        of the NVLink / network datasheet bandwidth, pinned by published
        nccl-tests figures (not fitted: issue 28, point 2).
    comm_interference : compute slowdown per second of hidden (overlapped)
        NCCL communication (NCCL kernels hold SMs and HBM bandwidth): 0.189,
        the average measured by Lee et al. 2025 (arXiv 2507.03114), not fitted.
    elementwise_passes : memory-bound element-wise traffic, in passes over a
        layer's stored activation bytes, at the device's HBM bandwidth.
    layer_overhead_us : launch overhead per layer and micro-batch.
    iteration_overhead_s : host work per iteration.
    optimizer_bytes_per_param : HBM traffic of one optimizer step per local
        parameter at datasheet bandwidth: fused Adam alone moves 28 bytes
        (read fp32 master, m, v and the 16-bit gradient; write master, m, v
        and the 16-bit weight), 36 at the measured 0.76 of datasheet
        bandwidth; gradient copies, unscaling and clipping add more.
    unfused_optimizer_factor : unfused (per-op) Adam over fused, measured 2.2
        on H100 (``benchmarks/kernels``; not fitted).
    memory_reserve_gib : per-device memory outside the model's tensors (CUDA
        context, cuBLAS/cuDNN workspaces; the shipped, measured figure holds no
        NCCL buffer).
    memory_fragmentation : caching-allocator overhead, fraction of the
        modelled bytes.
    """

    gemm_efficiency: dict[str, float] = _param(valid=FRACTION, factory=lambda: {
        "V100-32GB": 0.60, "A100-40GB": 0.60, "A100-80GB": 0.60,
        "H100-SXM-80GB": 0.60, "H200-141GB": 0.60, "B200": 0.60, "GB200": 0.60})
    fp8_efficiency: dict[str, float] = _param(valid=FRACTION, factory=lambda: {
        "H100-SXM-80GB": 0.50, "H200-141GB": 0.50, "B200": 0.50, "GB200": 0.50})
    efficiency_default: float = _param(0.6, valid=FRACTION)
    fp8_efficiency_default: float = _param(0.5, valid=FRACTION)
    efficiency_half_us: float = _param(22.5, valid=NON_NEGATIVE, plausible=(
        1.0, 60.0, "GEMM work (µs at peak) at which one GEMM kernel's efficiency halves (a layer runs "
        "GEMM_KERNELS of them per pass: compute.gemm_kernels); isolated H100 GEMMs "
        "timed one by one: 22.5 µs bf16 / 16.5 µs FP8, an upper value (each includes ~5-10 µs "
        "of launch and event latency that back-to-back training kernels overlap)"))
    comm_efficiency: float = _param(0.80, valid=FRACTION, plausible=(
        0.5, 0.95, "NCCL ring bus bandwidth / per-direction intra-node datasheet bandwidth, "
        "pinned by nccl-tests all_reduce_perf, not fitted: NVLink2 122/150, NVLink3 232/300, "
        "NVLink4 370/450, NVLink5 700/900 (NVIDIA GTC 2024 S62129 and GTC 2025 S72583, 'NCCL "
        "Tests Allreduce Bus Bandwidth'), 0.77-0.82; tests/data/microbench/nccl_tests.yaml"))
    inter_comm_efficiency: float = _param(0.95, valid=FRACTION, plausible=(
        0.5, 0.97, "NCCL bus bandwidth / NIC line rate across nodes, pinned by nccl-tests, not "
        "fitted: 24/25 (200 Gb/s), 48/50 (400 Gb/s), DGX A100 192/200, DGX H100 380/400 and "
        "370/400 GB/s (NVIDIA GTC 2024 S62129, GTC 2025 S72583): 0.925-0.96"))
    comm_interference: float = _param(0.189, valid={"ge": 0, "le": 1}, plausible=(
        0.0, 0.3, "compute slowdown per second of hidden NCCL communication, pinned by a "
        "published measurement, not fitted: overlapping compute with NCCL collectives slows "
        "the compute by 18.9% on average (max 40.0%) against the same compute alone, GPT and "
        "Llama training steps on 4 A100/H100 (Lee, Oh, Kim, Go, Park, Mahajan 2025, "
        "'Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep "
        "Learning', arXiv 2507.03114, abstract); SM share of NCCL's channels, 16-32 of 132 "
        "SMs on H100: 0.1-0.25"))
    elementwise_passes: float = _param(3.0, valid=NON_NEGATIVE, plausible=(
        1.0, 8.0, "HBM passes over the stored activations by the memory-bound element-wise "
        "kernels (norms, GeLU/SwiGLU, dropout, residual, unfused softmax) in forward + backward"))
    layer_overhead_us: float = _param(0.0, valid=NON_NEGATIVE, plausible=(
        0.0, 300.0, "host/launch time per layer and micro-batch not hidden by asynchronous "
        "kernel queuing (~30-60 kernels x 2-5 µs); fixed at 0, not fitted: back-to-back eager "
        "calls on one H200 reach a floor of 15-17 µs per call (benchmarks/kernels/h200_results.json, "
        "the smallest expert GEMMs), so the host keeps ahead of any kernel longer than that, as a "
        "training layer's are"))
    iteration_overhead_s: float = _param(0.0, valid=NON_NEGATIVE, plausible=(
        0.0, 0.05, "per-iteration host work: data loader, logging, gradient-norm and loss "
        "reductions"))
    optimizer_bytes_per_param: float = _param(36.0, valid=NON_NEGATIVE, plausible=(
        28.0, 80.0, "HBM bytes per local parameter of one optimizer step at datasheet "
        "bandwidth: fused Adam 28 B (36 at the measured 0.76 of datasheet); mixed-precision "
        "steps add the 16-to-32-bit gradient copy, unscaling, norm clipping and the weight "
        "copy back (Micikevicius et al. 2018; Megatron-LM optimizer)"))
    unfused_optimizer_factor: float = _param(2.2, valid={"ge": 1})   # unfused is never faster
    memory_reserve_gib: float = _param(2.0, valid=NON_NEGATIVE, plausible=(
        0.5, 8.0, "CUDA context, cuBLAS/cuDNN workspaces and NCCL buffers per device; pinned by "
        "measurement, not fitted: 0.763 GiB outside PyTorch's allocator on one H200 after a "
        "training step (MEASURED_RESERVE_GIB; NCCL's buffers not included)"))
    memory_fragmentation: float = _param(0.05, valid={"ge": 0, "le": 1}, plausible=(
        0.0, 0.5, "PyTorch caching-allocator overhead as a fraction of the modelled bytes: "
        "reserved vs allocated; Llama-2-70B FSDP on 16 A100-80GB: 63 GB reserved for 42 GB "
        "allocated, +50% (meta-llama/llama-cookbook issue #120)"))

    def efficiency_for(self, device_name: str, fp8: bool = False) -> float:
        """Large-GEMM efficiency of ``device_name`` (FP8 or 16-bit)."""
        if fp8:
            return self.fp8_efficiency.get(device_name, self.fp8_efficiency_default)
        return self.gemm_efficiency.get(device_name, self.efficiency_default)

    def to_dict(self) -> dict:
        return asdict(self)

    def optimizer_step_bytes(self, optimizer: str) -> float:
        """HBM bytes per local parameter one step of ``optimizer`` is priced at:
        ``optimizer_bytes_per_param`` (fused mixed-precision Adam's measured figure) scaled
        by the update's traffic (:func:`~autopar_opt.ir.training.optimizer_step_ratio`)."""
        return self.optimizer_bytes_per_param * optimizer_step_ratio(optimizer)

    def updated(self, changes: dict) -> "CostParams":
        """These parameters with ``changes`` applied: per-device dicts are merged
        (a key names only the devices it changes), every other key replaces."""
        changes = dict(changes)
        for key in ("gemm_efficiency", "fp8_efficiency"):
            if key in changes:
                merged = dict(getattr(self, key))
                merged.update({str(k): float(v) for k, v in (changes[key] or {}).items()})
                changes[key] = merged
        return replace(self, **changes)

    def updated_known(self, data: dict) -> "CostParams":
        """These parameters with the known keys of ``data`` applied (:meth:`updated`);
        other keys (a fit file's bookkeeping) are left out."""
        names = {f.name for f in fields(self)}
        return self.updated({k: v for k, v in data.items() if k in names})

    @classmethod
    def from_dict(cls, data: dict) -> "CostParams":
        """Known keys of ``data`` over the defaults (per-device dicts merged)."""
        return cls().updated_known(data)


#: Device memory outside PyTorch's caching allocator (GiB), measured on one H200 after a bf16
#: training step (torch 2.11, CUDA 13.0, cuDNN 9.19): the CUDA context 0.514 GiB after
#: initialisation, 0.700 once cuBLAS and cuDNN had run, 0.763 after the step
#: (``benchmarks/kernels/h200_results.json`` ``memory``; ``H200.md``). The calibration pins
#: ``memory_reserve_gib`` to it (``calibration/fit.py``): what one GPU can measure of the
#: reserve. NCCL's buffers come on top and are not in it (one GPU runs no NCCL ring).
MEASURED_RESERVE_GIB = 0.763

#: Plausible physical range of every scalar parameter, with its reason (from the
#: fields' metadata; the fit keeps each parameter inside).
RANGES: dict[str, tuple[float, float, str]] = {
    f.name: f.metadata["plausible"] for f in fields(CostParams) if f.metadata.get("plausible")}


def implausible(params: CostParams) -> list[str]:
    """A sentence per parameter outside its plausible physical range (:data:`RANGES`)
    where the shipped calibration is not (a spec's or a fit file's value): priced as
    given, and said (QA round 10: ``comm_efficiency: 0.05`` made a run 5x slower with no
    word, the documented range being 0.5-0.95)."""
    shipped = default_params()
    out = []
    for name, (lo, hi, _why) in RANGES.items():
        value, base = getattr(params, name), getattr(shipped, name)
        if not isinstance(value, (int, float)) or value == base:
            continue
        if not lo <= value <= hi:
            out.append(f"cost_model.{name} = {value:g} is outside its plausible range "
                       f"{lo:g}-{hi:g} (autopar schema describes it): priced as given")
    return out


def params_from_file(path: str | Path) -> CostParams:
    """Parameters from a file written by ``autopar calibrate --fit --output``
    (a mapping with a ``params`` section, or the bare parameters).

    Raises OSError / yaml.YAMLError / ValueError; callers turn them into a
    spec error naming the file.
    """
    return CostParams.from_dict(params_mapping(path))


def params_mapping(path: str | Path) -> dict:
    """The raw parameter mapping of a parameters file (its ``params`` section, or
    the whole file); raises OSError / yaml.YAMLError / ValueError. An empty file
    is an error: it would silently stand for the uncalibrated priors."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except RecursionError:          # the YAML composer recurses once per nesting level
        raise ValueError("nested too deeply to be a parameters file") from None
    return params_body(data)


def params_body(data: object) -> dict:
    """The parameter mapping of a parsed parameters file (its ``params`` section, or the
    whole file); ValueError when it is empty or not a mapping."""
    if data is None:
        raise ValueError("the file is empty")
    if not isinstance(data, dict):
        raise ValueError("expected a mapping of cost-model parameters")
    body = data.get("params", data)
    if not isinstance(body, dict) or not body:
        raise ValueError("'params' must be a non-empty mapping of cost-model parameters")
    return body


def _shipped_document() -> dict:
    """The shipped ``calibrated.yaml`` parsed (empty where the package lacks it)."""
    try:
        text = resources.files("autopar_opt.cost").joinpath("calibrated.yaml").read_text()
    except (FileNotFoundError, ModuleNotFoundError):
        return {}
    return yaml.safe_load(text) or {}


def default_params() -> CostParams:
    """The calibrated parameters shipped with the package (or the priors)."""
    data = _shipped_document()
    if not data:
        return CostParams()
    return CostParams.from_dict(data.get("params", data))


def shipped_fit() -> tuple[frozenset[str], str]:
    """(the parameters the shipped calibration fitted, e.g. ``eff:H100`` or
    ``efficiency_half_us``; the date it was fitted on): the provenance the
    cost model's assumptions state (:mod:`autopar_opt.cost.assumptions`)."""
    data = _shipped_document()
    return frozenset(data.get("free_parameters") or ()), str(data.get("fitted_on", "unknown"))


def calibration_provenance(params: "CostParams") -> dict[str, str | None]:
    """Where ``params`` come from, as a plan.json states it: the shipped calibration (its fit
    date, ``autopar_opt/cost/calibrated.yaml`` ``fitted_on``) or parameters given otherwise
    (no date), and the date of the residuals the 80% intervals come from
    (:func:`autopar_opt.cost.interval.residuals_generated_on`)."""
    from autopar_opt.cost.interval import residuals_generated_on

    shipped = params == default_params()
    return {"parameters": "shipped (autopar_opt/cost/calibrated.yaml)" if shipped
            else "given (not the shipped calibration)",
            "fitted_on": shipped_fit()[1] if shipped else None,
            "intervals_generated_on": residuals_generated_on()}
