"""Pin what a microbenchmark measures: the three fitted scalars, in sample and out of sample.

Issue 28, point 1: end-to-end runs should fit only what no microbenchmark can measure, and
its targets ask for no fitted parameter at a bound. The shipped fit still frees three
scalars that a measurement on the project's own H200 (``benchmarks/kernels/H200.md``)
speaks to:

* ``iteration_overhead_s`` (host work per iteration): one H200 iteration ran 15.4 ms *under*
  the sum of its parts timed alone (section 7), so the host work it stands for measures 0;
* ``efficiency_half_us`` (the GEMM size at which a kernel's efficiency halves): 5.8 µs on the
  H100 die's back-to-back curve (``benchmarks/kernels/GEMM.md``), 22.5 µs for isolated calls;
* ``elementwise_passes`` (HBM passes over a layer's stored activations by its element-wise
  kernels): :func:`measured_passes` derives it from the section 5 kernel timings of a
  Llama-3 block (two RMSNorms and a SwiGLU forward + backward, four residual adds) over
  the bytes the model stores for that block (:func:`~autopar_opt.cost.memory.activation_bytes`)
  at the datasheet HBM bandwidth.

Each variant pins some of them at those values and refits the rest, then reports: in
sample on ``tests/data/published_runs.yaml`` (the shipped fit's file), and out of sample
over both record files: leave-one-source-family-out and the regime groups of
``intervals.py`` (median / p90 of |error|, targets 10% / 25% per group of >= 5 runs), and
how many of the fits (the in-sample one and every leave-out one) put a parameter at a bound
by the fit's own rule. The shipped parameters are not changed by this script.

Writes ``PINNING.md`` next to this file. Usage: ``python benchmarks/calibration/pinning.py``
(one fit per group and variant: about 4 minutes per variant on 2 cores).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from autopar_opt.calibration.compare import compare
from autopar_opt.calibration.fit import fit
from autopar_opt.cost.memory import activation_bytes
from autopar_opt.cost.params import CostParams
from autopar_opt.ir.hardware import DEVICE_CATALOG
from autopar_opt.ir.graph import LayerKind
from autopar_opt.ir.training import Recompute
from autopar_opt.spec import build_spec

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "benchmarks" / "kernels"))
import intervals  # noqa: E402  (the groups and the runs of both files, one definition)

KERNELS = ROOT / "benchmarks" / "kernels" / "h200_results.json"
#: Kernels of one Llama-3 block's element-wise work in forward + backward, with how many
#: times each runs: two RMSNorms, the SwiGLU, and the two residual adds of the forward with
#: the two gradient accumulations into the residual stream in the backward.
LLAMA_BLOCK_KERNELS = (("rms_norm_fwd_bwd", 2), ("swiglu_fwd_bwd", 1), ("residual_add", 4))
BACK_TO_BACK_HALF_US = 5.8     # benchmarks/kernels/GEMM.md: the H100 die's back-to-back curve


def _hits(r: dict, name: str) -> int:
    """How many of a variant's fits put ``name`` at a bound."""
    return sum(1 for names in r["at_bound"].values() if name in names)


def reading(results: list, passes: float) -> str:
    """The hand-written reading, its figures taken from ``results`` (in :func:`variants`'
    order) so that a regeneration cannot leave them stale."""
    shipped, io0, half, everything, _mixed, clip = (r for _label, _pinned, r in results)
    fits = len(shipped["groups"]) + 1

    def pair(x: tuple[float, float]) -> str:
        return f"{x[0]:.1%} / {x[1]:.1%}"

    return f"""## Reading (hand-written, session 37; figures from the table above)

No variant meets every target. Pinned at all three measurements, no parameter is at a bound in
{fits - sum(1 for v in everything["at_bound"].values() if v)} of the {fits} fits, but the
in-sample median goes from {shipped["in_sample"][0]:.1%} to {everything["in_sample"][0]:.1%},
leave-one-family-out from {pair(shipped["lofo"])} to {pair(everything["lofo"])} and
{len(everything["missed"])} of {everything["sized"]} groups miss instead of {len(shipped["missed"])}:
the three scalars stand in for time the model does not price, and the fit wants more of it than
the measured physics gives (the model is fast on most held-out families: FlagPerf's H100 rows,
KempnerForge's pipelines, llm-foundry 2024 at 256-512 GPUs, CARAML's capped GH200). Pinning
only the host overhead at its measured 0 moves the bound to `elementwise_passes`
({_hits(io0, "elementwise_passes")} of {fits} fits) and leave-one-family-out to
{pair(io0["lofo"])}; pinning the GEMM curve too puts `elementwise_passes` at its upper bound in
{_hits(half, "elementwise_passes")} of {fits}. The measured element-wise figure ({passes:.2f}
passes, a Llama-3 block's kernels) is below the fitted {shipped["fitted"]["elementwise_passes"]:.2f}:
where the fit puts the missing time is not where the H200 measures it.

Pricing what the H200 step measured and the model leaves out, gradient clipping (6.66 ms beside
the step's 16.6 ms fused AdamW; the model's optimizer step 14.4 ms), is the last variant: in
sample {pair(clip["in_sample"])}, leave-one-family-out {pair(clip["lofo"])}, and
`iteration_overhead_s` at its bound in {_hits(clip, "iteration_overhead_s")} of {fits} fits
({_hits(shipped, "iteration_overhead_s")} shipped). So the missing time is not the optimizer's
either; the same step measured the model's micro-batch 10% short (7.9 ms, 9.6 of them outside
GEMMs and attention), a single-GPU figure no published multi-node run isolates. The shipped fit
is unchanged: issue 28's "pin what a microbenchmark can pin" stays partial for these three
scalars, and "no fitted parameter at a bound" is missed.
"""


def measured_passes() -> tuple[float, str]:
    """(``elementwise_passes`` measured on the H200, how): the time of
    :data:`LLAMA_BLOCK_KERNELS` at the section 5 shapes (16,384 tokens, hidden 4,096, SwiGLU
    14,336: a Llama-3-8B block at 4 x 4,096 tokens) over the time one pass over the block's
    stored activations takes at the datasheet HBM bandwidth. RoPE is not among the timed
    kernels (it would add to the figure)."""
    import h200_report

    res = json.loads(KERNELS.read_text())
    us = {r["op"]: r["s"] * 1e6 for r in res["elementwise"]}
    rows = [r for r in res["elementwise"] if r["op"] == "swiglu_fwd_bwd"]
    tokens = rows[0]["shape"][0]
    step = dict(res["step"])
    spec = build_spec(h200_report.step_spec(step), HERE / "PINNING.md")
    block = next(lay for lay in spec.graph.layers if lay.kind is LayerKind.transformer_block)
    strategy = spec.plan.stages[0].strategies[spec.plan.stages[0].layers.index(block.name)]
    samples = tokens // step["seq"]
    stored = activation_bytes(block, strategy, samples, Recompute.none, spec.training,
                              fp8_casts=False)
    bw = DEVICE_CATALOG[spec.cluster.device.name].hbm_gb_per_s * 1e9
    kernel_us = sum(us[op] * n for op, n in LLAMA_BLOCK_KERNELS)
    one_pass_us = stored / bw * 1e6
    how = (f"{' + '.join(f'{n} x {op} {us[op]:.0f} µs' for op, n in LLAMA_BLOCK_KERNELS)} = "
           f"{kernel_us:.0f} µs, over one pass of the {stored / 1e6:.0f} MB the model stores for "
           f"a Llama-3-8B block at {samples} x {step['seq']} tokens at {bw / 1e12:.1f} TB/s "
           f"({one_pass_us:.0f} µs)")
    return kernel_us / one_pass_us, how


def measured_clip_bytes() -> tuple[float, str]:
    """(HBM bytes per parameter at the datasheet bandwidth that gradient-norm clipping took in
    the H200 training step, how): ``torch.nn.utils.clip_grad_norm_`` over the step's fp32
    gradients, timed alone (section 7)."""
    step = json.loads(KERNELS.read_text())["step"]
    bw = DEVICE_CATALOG["H200-141GB"].hbm_gb_per_s * 1e9
    per = step["clip_s"] * bw / step["params"]
    return per, (f"{step['clip_s'] * 1e3:.2f} ms for {step['params']:,} fp32 gradients at "
                 f"{bw / 1e12:.1f} TB/s")


def variants(passes: float, clip: float) -> tuple[tuple[str, dict, dict], ...]:
    """(label, parameters pinned, prior changes) of every variant, the shipped fit first."""
    return (
        ("shipped: all three fitted", {}, {}),
        ("`iteration_overhead_s` at 0", {"iteration_overhead_s": 0.0}, {}),
        ("... and `efficiency_half_us` at 5.8 µs", {"iteration_overhead_s": 0.0,
                                                     "efficiency_half_us": BACK_TO_BACK_HALF_US}, {}),
        (f"... and `elementwise_passes` at {passes:.2f}",
         {"iteration_overhead_s": 0.0, "efficiency_half_us": BACK_TO_BACK_HALF_US,
          "elementwise_passes": passes}, {}),
        (f"`iteration_overhead_s` at 0, `elementwise_passes` at {passes:.2f}",
         {"iteration_overhead_s": 0.0, "elementwise_passes": passes}, {}),
        (f"all three fitted, gradient clipping priced (+{clip:.1f} B per parameter)", {},
         {"optimizer_bytes_per_param": CostParams().optimizer_bytes_per_param + clip}),
    )


def _stats(errors) -> tuple[float, float]:
    a = np.abs(np.asarray(errors, dtype=float))
    return float(np.median(a)), float(np.percentile(a, 90))


def evaluate_variant(runs, published_ids: set[str], groups: dict[str, set[str]],
                     pinned: dict, prior: dict) -> dict:
    """In sample on the published file, and every leave-one-group-out fit, with ``pinned``
    and the prior's ``prior`` changes."""
    base = CostParams().updated(prior)
    published = [r for r in runs if r.id in published_ids]
    shipped = fit(published, base, pinned=pinned)
    own = [compare(r, shipped.params).rel_error for r in published if not r.memory_only]
    out = {"fitted": {k: getattr(shipped.params, k) for k in
                      ("iteration_overhead_s", "efficiency_half_us", "elementwise_passes")},
           "in_sample": _stats(own), "at_bound": {"in sample": shipped.at_bound}, "groups": {}}
    for name, ids in sorted(groups.items()):
        res = fit([r for r in runs if r.id not in ids], base, pinned=pinned)
        if res.at_bound:
            out["at_bound"][name] = res.at_bound
        out["groups"][name] = [compare(r, res.params).rel_error for r in runs if r.id in ids]
    family = [e for g, errs in out["groups"].items() if g.startswith("family:") for e in errs]
    out["lofo"] = _stats(family)
    out["missed"] = sorted(g for g, errs in out["groups"].items()
                           if len(errs) >= 5 and (_stats(errs)[0] > 0.10 or _stats(errs)[1] > 0.25))
    out["sized"] = sum(1 for errs in out["groups"].values() if len(errs) >= 5)
    return out


def _row(label: str, pinned: dict, r: dict) -> str:
    f = r["fitted"]
    cells = [f"{f[k]:.3g}" + ("" if k in pinned else " (fitted)")
             for k in ("iteration_overhead_s", "efficiency_half_us", "elementwise_passes")]
    hits: dict[str, int] = {}
    for names in r["at_bound"].values():
        for n in names:
            hits[n] = hits.get(n, 0) + 1
    bound = ", ".join(f"`{n}` in {c}" for n, c in sorted(hits.items(), key=lambda x: -x[1])) or "none"
    fits = len(r["groups"]) + 1
    nb = sum(1 for v in r["at_bound"].values() if v)
    return (f"| {label} | {' | '.join(cells)} | {r['in_sample'][0]:.1%} / {r['in_sample'][1]:.1%} | "
            f"{r['lofo'][0]:.1%} / {r['lofo'][1]:.1%} | {len(r['missed'])} of {r['sized']} | "
            f"{nb} of {fits}: {bound} |")


def main() -> str:
    load, t0 = os.getloadavg(), time.perf_counter()
    runs, _ = intervals._runs()
    published_ids = {d["id"] for d in intervals.load_run_file(intervals.FILES[0])}
    groups = intervals._groups(runs)
    passes, how = measured_passes()
    clip, clip_how = measured_clip_bytes()
    results = [(label, pinned, evaluate_variant(runs, published_ids, groups, pinned, prior))
               for label, pinned, prior in variants(passes, clip)]
    lines = ["# Pinning the fitted scalars at their measurements (issue 28, point 1)\n",
             f"Generated by `python benchmarks/calibration/pinning.py` on {_dt.date.today()} "
             f"({time.perf_counter() - t0:.0f} s on a shared 2-core machine, load average "
             f"{load[0]:.1f} at start). Records: `published_runs.yaml` (in sample: the shipped "
             "fit's file) and `holdout_runs.yaml` (out of sample, with it: the groups of "
             "`intervals.py`, every source family and regime group left out of its own fit).\n",
             "Measured values: `iteration_overhead_s` 0 (one H200 iteration ran 15.4 ms under "
             "the sum of its parts, `benchmarks/kernels/H200.md` section 7); "
             "`efficiency_half_us` 5.8 µs (the H100 die's back-to-back GEMM curve, "
             f"`benchmarks/kernels/GEMM.md`); `elementwise_passes` {passes:.2f} ({how}; "
             "`benchmarks/kernels/H200.md` section 5). Gradient clipping, which the model does "
             f"not price, {clip:.1f} bytes per parameter at the datasheet bandwidth ({clip_how}, "
             "section 7), added to the optimizer step's "
             f"{CostParams().optimizer_bytes_per_param:g} (`optimizer_bytes_per_param`) in the "
             "last variant.\n",
             "Targets: in sample median <= 5%; leave-one-family-out and every group of >= 5 runs "
             "median <= 10% and p90 <= 25%; no fitted parameter at a bound (the fit's rule: "
             "within 0.1% of its range's span).\n",
             "| variant | iteration_overhead_s (s) | efficiency_half_us (µs) | elementwise_passes "
             "| in sample median / p90 | leave-one-family-out median / p90 | groups missing "
             "10% / 25% | fits with a parameter at a bound |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [_row(label, pinned, r) for label, pinned, r in results]
    lines += ["", "Groups missing the targets per variant:\n"]
    for label, _pinned, r in results:
        lines.append(f"- {label}: " + ", ".join(f"`{g}`" for g in r["missed"]))
    lines += ["", reading(results, passes)]
    out = "\n".join(lines) + "\n"
    (HERE / "PINNING.md").write_text(out)
    return out


if __name__ == "__main__":
    print(main())
