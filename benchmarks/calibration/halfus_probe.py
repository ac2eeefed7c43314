"""Probe: why ``efficiency_half_us`` fitted at its upper bound (diagnosis only).

Historical: it diagnoses the model before ``compute.GEMM_KERNELS`` (GEMMs
priced once per layer and pass), which its section 3 led to; on a model with
GEMM_KERNELS its per-kernel patch would count the kernels twice, so it refuses
to run there. ``HALFUS.md`` is its output on the model before that change.

Usage: ``python benchmarks/calibration/halfus_probe.py [RUNS.yaml] > HALFUS.md``
(default: ``tests/data/published_runs.yaml``); prints Markdown, changes nothing
shipped (every variation is patched in for one fit and restored). BOUNDS.md's
"Reading" summarises it.

1. Per record, at the shipped fit (``autopar_opt/cost/calibrated.yaml``): the
   log error with ``efficiency_half_us`` at 60 and at 22.5 µs (the isolated
   H100 GEMM of ``benchmarks/kernels``), everything else unchanged, with the
   per-device forward GEMM work of one transformer block at peak (µs).
2. Refits leaving out each family (BOUNDS.md section 2 style).
3. The GEMM-count hypothesis: :func:`autopar_opt.cost.compute.kernel_time`
   is ``(τ + τ_half)/eff``, a fixed ``τ_half/eff`` per call, and it is called
   once per layer and pass on the block's summed GEMM work; a block runs 4
   GEMM kernels forward (QKV, projection, MLP up, MLP down: Shoeybi et al.
   2019 Sec. 3) and 8 backward (data and weight gradient of each), each paying
   the per-kernel ``τ_half`` of the isolated measurement: the block-level value
   that matches 22.5 µs per kernel is ``(4 + 8) / 2 · 22.5 = 135 µs``. Refit
   with the GEMMs priced per kernel, with leave-one-family-out.
4. Block-level model with the per-iteration cost's bound lifted.
5. The same deficit as ``layer_overhead_us`` (fixed time per layer and
   micro-batch).
6. The FlashAttention-1/2 ratio (``FA1_VS_FA2``) and tile/wave quantization.
"""

from __future__ import annotations

import math
import sys
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import autopar_opt.calibration.fit as fitmod
from autopar_opt.calibration.calibrate import leave_one_family_out, model_records
from autopar_opt.calibration.compare import log_residuals
from autopar_opt.calibration.reading import load_run_file
from autopar_opt.cost import compute
from autopar_opt.cost.params import default_params

import bounds      # benchmarks/calibration/bounds.py: lifted ranges, the NVIDIA guide's tile/wave formulas

HERE = Path(__file__).resolve().parent
DEFAULT_RUNS = HERE.parent.parent / "tests" / "data" / "published_runs.yaml"
#: Isolated H100 bf16 GEMM, benchmarks/kernels (an upper value).
KERNEL_HALF_US = 22.5
#: GEMM kernels of one layer's forward, by kind: a transformer block's QKV,
#: projection, MLP up and down (Shoeybi et al. 2019 Sec. 3); the output
#: layer's one; every calibration record is embedding + blocks + lm_head.
FWD_GEMMS = {"transformer_block": 4, "moe_block": 4, "lm_head": 1, "linear": 1}
BLOCKS = ("transformer_block", "moe_block")
#: SMs of an H100 SXM (NVIDIA H100 Tensor Core GPU datasheet).
H100_SMS = 132
#: (run, hidden, tp, micro-batch) of the records that gain or lose most from τ_half = 60.
QUANT_CASES = (("megatron_readme 1.7B", 2048, 1, 1), ("megatron_readme 7.1B", 4096, 2, 1),
               ("megatron_readme 16B", 6144, 4, 1), ("megatron_readme 32B", 7168, 8, 1),
               ("megatron_readme 70B", 8192, 8, 1), ("llm-foundry MPT-3B", 2560, 1, 6),
               ("llm-foundry MPT-13B", 5120, 1, 2))


def _stats(runs, params) -> str:
    r = log_residuals(runs, params)
    e = np.abs(np.exp(r) - 1.0)
    return f"sum sq. log err {np.sum(r * r):.3f}, median {np.median(e):.1%}, p90 {np.percentile(e, 90):.1%}"


def _block(run):
    """The run's transformer (or MoE) block."""
    return next((l for l in run.graph.layers if l.kind.value in BLOCKS), None)


def _fwd_gemm_us(run) -> float:
    """Per-device forward GEMM work of one block and micro-batch at bf16 peak (µs)."""
    layer = _block(run)
    s = run.strategy
    if layer is None:
        return float("nan")
    per_dev = run.microbatch_samples / (s.dp * s.cp) / s.tp
    dev = run.cluster.device
    peak = dev.peak_flops("bf16" if "bf16" in dev.peak_tflops else "fp16")
    f = (layer.flops_fwd - min(layer.flops_recompute_selective, layer.flops_fwd)) * per_dev
    return f / peak * 1e6


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def _hidden(run) -> int:
    layer = _block(run)
    return int(round(math.sqrt(layer.params / 12))) if layer is not None and layer.params else 0


@contextmanager
def per_kernel_gemms():
    """Price a layer's GEMM work as ``FWD_GEMMS`` kernels per forward-GEMM
    equivalent, each with the fitted ``τ_half`` (diagnosis only)."""
    saved_ct, saved_gt = compute.compute_time, compute._gemm_time
    state = {}

    def compute_time(layer, s, ctx):
        share = ctx.microbatch_samples / (s.dp * s.cp) / s.tp
        core = min(layer.flops_recompute_selective, layer.flops_fwd)
        state["F"] = max((layer.flops_fwd - core) * share, 1.0)
        try:
            return saved_ct(layer, s, ctx)
        finally:
            state.pop("F", None)

    def gemm_time(flops, layer, ctx):
        if flops <= 0:
            return 0.0
        n = FWD_GEMMS.get(layer.kind.value, 1) * flops / state.get("F", flops)
        p, dev = ctx.params, ctx.cluster.device.name
        half = p.efficiency_half_us * n
        if ctx.training.dtype == "fp8" and layer.kind in state.FP8_KINDS:
            return compute.kernel_time(flops, ctx.peak_flops, p.efficiency_for(dev, fp8=True), half)
        return compute.kernel_time(flops, ctx.half_peak_flops, p.efficiency_for(dev), half)

    compute.compute_time, compute._gemm_time = compute_time, gemm_time
    try:
        yield
    finally:
        compute.compute_time, compute._gemm_time = saved_ct, saved_gt


@contextmanager
def fixed(name: str, value: float):
    """Fit with ``name`` held at ``value``."""
    saved = fitmod.SCALARS
    fitmod.SCALARS = tuple(k for k in saved if k != name)
    try:
        yield replace(fitmod.CostParams(), **{name: value})
    finally:
        fitmod.SCALARS = saved


def main(path: Path) -> str:
    every, _ = model_records(load_run_file(path))
    runs = [r for r in every if not r.memory_only]
    shipped = default_params()
    lo = replace(shipped, efficiency_half_us=KERNEL_HALF_US)
    r60, r22 = log_residuals(runs, shipped), log_residuals(runs, lo)
    out = ["# efficiency_half_us probe\n", f"{len(runs)} records; shipped fit: {_stats(runs, shipped)}; "
           f"same with efficiency_half_us = 22.5: {_stats(runs, lo)}.\n",
           "## 1. Records, by |log err at 22.5| - |log err at 60| (positive: 60 helps)\n",
           "| id | family | tp | samples/device/micro-batch | h ≈ √(block params/12) | fwd GEMM µs/block at peak | err @60 | err @22.5 | gain |",
           "|---|---|---|---|---|---|---|---|---|"]
    rows = []
    for run, a, b in zip(runs, r60, r22):
        s = run.strategy
        rows.append((abs(b) - abs(a), run, a, b, s))
    rows.sort(key=lambda t: -t[0])
    for gain, run, a, b, s in rows:
        out.append(f"| {run.id} | {run.family} | {s.tp} | {run.microbatch_samples / (s.dp * s.cp):g} | "
                   f"{_hidden(run)} | {_fwd_gemm_us(run):.0f} | {math.expm1(a):+.1%} | "
                   f"{math.expm1(b):+.1%} | {gain:+.3f} |")
    g = np.array([t[0] for t in rows])
    size = np.array([_fwd_gemm_us(t[1]) for t in rows])
    err = np.array([t[2] for t in rows])
    out += ["", f"Rank correlation of the gain with the block's forward GEMM µs: "
            f"{_spearman(g, -size):+.2f} (positive: smaller GEMMs gain more); with the error at 60 "
            f"(positive: predicted too fast gains more): {_spearman(g, err):+.2f}."]
    fam = {}
    for gain, run, *_ in rows:
        fam.setdefault(run.family, []).append(gain)
    out += ["", "| family | records | sum of gains (log) | records that gain > 0.02 |", "|---|---|---|---|"]
    for f, g in sorted(fam.items(), key=lambda kv: -sum(kv[1])):
        out.append(f"| {f} | {len(g)} | {sum(g):+.3f} | {sum(1 for x in g if x > 0.02)} |")
    out += ["", "## 2. Refit without each family\n",
            "| left out | efficiency_half_us | attention_efficiency | iteration_overhead_s | at a bound |",
            "|---|---|---|---|---|"]
    for f in [None] + sorted({r.family for r in runs}):
        res = fitmod.fit([r for r in every if r.family != f])
        p = res.params
        out.append(f"| {f or '(none)'} | {p.efficiency_half_us:.1f} | {p.attention_efficiency:.3f} | "
                   f"{p.iteration_overhead_s:.3f} | {', '.join(res.at_bound) or '-'} |")
    out += ["", "## 3. GEMMs priced per kernel (4 forward, 8 backward per block)\n",
            "| variant | efficiency_half_us | attention_efficiency | iteration_overhead_s | at a bound | fit |",
            "|---|---|---|---|---|---|"]
    with per_kernel_gemms():
        res = fitmod.fit(every)
        out.append(f"| per kernel, τ_half fitted | {res.params.efficiency_half_us:.1f} | "
                   f"{res.params.attention_efficiency:.3f} | {res.params.iteration_overhead_s:.3f} | "
                   f"{', '.join(res.at_bound) or '-'} | {_stats(runs, res.params)} |")
        with fixed("efficiency_half_us", KERNEL_HALF_US) as prior:
            res = fitmod.fit(every, prior)
        out.append(f"| per kernel, τ_half = 22.5 | {res.params.efficiency_half_us:.1f} | "
                   f"{res.params.attention_efficiency:.3f} | {res.params.iteration_overhead_s:.3f} | "
                   f"{', '.join(res.at_bound) or '-'} | {_stats(runs, res.params)} |")
        with bounds.lifted("iteration_overhead_s"):
            res = fitmod.fit(every)
        out.append(f"| per kernel, τ_half fitted, iteration_overhead_s lifted | "
                   f"{res.params.efficiency_half_us:.1f} | {res.params.attention_efficiency:.3f} | "
                   f"{res.params.iteration_overhead_s:.3f} | {', '.join(res.at_bound) or '-'} | "
                   f"{_stats(runs, res.params)} |")
        lofo = leave_one_family_out(every)
        folds = [(f.family, fitmod.fit([r for r in every if r.family != f.family]).params)
                 for f in lofo]
    errs = np.array([abs(c.rel_error) for f in lofo for c in f.comparisons])
    out += ["", f"Leave-one-family-out with GEMMs per kernel (τ_half fitted): median "
            f"{np.median(errs):.1%}, p90 {np.percentile(errs, 90):.1%}.", "",
            "| held out | median | p90 | τ_half (µs) | attention_efficiency | at a bound |",
            "|---|---|---|---|---|---|"]
    for f, (_, p) in zip(lofo, folds):
        e = np.array([abs(c.rel_error) for c in f.comparisons])
        out.append(f"| {f.family} | {np.median(e):.1%} | {np.percentile(e, 90):.1%} | "
                   f"{p.efficiency_half_us:.1f} | {p.attention_efficiency:.3f} | "
                   f"{', '.join(f.at_bound) or '-'} |")
    out += [
            "", "## 4. Block-level model, per-iteration cost lifted\n",
            "| variant | efficiency_half_us | iteration_overhead_s | at a bound | fit |", "|---|---|---|---|---|"]
    for names in (("iteration_overhead_s",), ("efficiency_half_us", "iteration_overhead_s")):
        with bounds.lifted(*names):
            res = fitmod.fit(every)
        out.append(f"| lifted: {', '.join(names)} | {res.params.efficiency_half_us:.1f} | "
                   f"{res.params.iteration_overhead_s:.4f} | {', '.join(res.at_bound) or '-'} | "
                   f"{_stats(runs, res.params)} |")
    out += ["", "## 5. A fixed time per layer and micro-batch instead (block-level τ_half = 22.5)\n",
            "``kernel_time`` is ``(τ + τ_half)/eff``: τ_half is a fixed time per call, the same "
            "form as ``layer_overhead_us`` (shipped fixed at 0).\n",
            "| variant | layer_overhead_us | iteration_overhead_s | at a bound | fit |", "|---|---|---|---|---|"]
    saved = fitmod.SCALARS
    fitmod.SCALARS = tuple(k for k in saved if k != "efficiency_half_us") + ("layer_overhead_us",)
    try:
        res = fitmod.fit(every, replace(fitmod.CostParams(), efficiency_half_us=KERNEL_HALF_US))
    finally:
        fitmod.SCALARS = saved
    out.append(f"| layer_overhead_us fitted | {res.params.layer_overhead_us:.0f} | "
               f"{res.params.iteration_overhead_s:.4f} | {', '.join(res.at_bound) or '-'} | "
               f"{_stats(runs, res.params)} |")
    out += ["", "## 6. The FlashAttention-1/2 ratio and GEMM quantization\n",
            "| FA1_VS_FA2 | efficiency_half_us | attention_efficiency | at a bound | sum sq. log err |",
            "|---|---|---|---|---|"]
    saved_ratio = compute.FA1_VS_FA2
    try:
        for ratio in (0.5, 0.56, 0.69):
            compute.FA1_VS_FA2 = ratio
            res = fitmod.fit(every)
            out.append(f"| {ratio} | {res.params.efficiency_half_us:.1f} | "
                       f"{res.params.attention_efficiency:.3f} | {', '.join(res.at_bound)} | "
                       f"{res.sum_sq_log_error:.3f} |")
    finally:
        compute.FA1_VS_FA2 = saved_ratio
    saved_sms = bounds.A100_SMS
    bounds.A100_SMS = H100_SMS
    try:
        out += ["", f"Tile and wave quantization of a block's GEMMs with {H100_SMS} SMs (H100):\n",
                "| run | h | tp | mbs | quantization efficiency |", "|---|---|---|---|---|"]
        for name, h, tp, mbs in QUANT_CASES:
            out.append(f"| {name} | {h} | {tp} | {mbs} | {bounds._block_quantization(h, tp, mbs):.3f} |")
    finally:
        bounds.A100_SMS = saved_sms
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    from autopar_opt.cost import compute

    if hasattr(compute, "GEMM_KERNELS"):
        sys.exit("halfus_probe.py diagnoses the model before compute.GEMM_KERNELS (GEMMs once "
                 "per pass); this model already prices GEMMs per kernel: nothing to probe")
    print(main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_RUNS))
