"""Write ``benchmarks/kernels/H200.md``: the H200 device check (issue 28) as tables.

The raw results of one H200 (700 W) are ``h200_results.json`` (``h200_kernels.py``: SDPA
attention per backend, the zoo's GEMMs, element-wise kernels, memory outside PyTorch, a
4-block Llama-3-8B-shaped training step) and ``h200_sustained.json`` (``h200_sustained.py``:
8192^3 GEMMs back-to-back with clocks, power and throttle reasons). This script reads them,
and the repository's own data and code at run time, and sets each measurement beside what
the project publishes or predicts for it:

* attention against the published H100 rows of ``autopar_opt/cost/data/attention_kernels.yaml``
  (H200 = the H100 SXM's GH100 die and peaks with faster HBM, ``DEVICE_CATALOG``);
* every measured GEMM against :func:`autopar_opt.cost.compute.kernel_time` with the shipped
  parameters (:func:`autopar_opt.cost.params.default_params`);
* the fused AdamW and memory figures against ``optimizer_bytes_per_param``,
  ``memory_reserve_gib`` and ``memory_fragmentation``;
* the training step against ``evaluate`` of the same model, plan and runtime.

No number in the Markdown is typed in: each comes from the JSON files, the data files or the
cost model when this runs. Run: ``python benchmarks/kernels/h200_report.py [OUT.md]``.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from importlib import resources
from pathlib import Path

import yaml

from autopar_opt.cost.compute import autocast_weight_time, compute_time, kernel_time
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.cost.params import RANGES, default_params
from autopar_opt.ir.hardware import DEVICE_CATALOG
from autopar_opt.spec import build_spec

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEVICE = "H200-141GB"
BACKENDS = ("cudnn", "flash", "efficient")
#: our SDPA backend -> the kernel name of the published rows it is compared with
PUBLISHED_KERNEL = {"cudnn": "cudnn", "flash": "flash_attention_2"}
PASSES = {"fwd": "fwd_tflops", "bwd": "bwd_tflops", "fwd_bwd": "fwd_bwd_tflops"}
#: NVML clocks-event (throttle) reason bits (NVML API reference, "NvmlClocksThrottleReasons",
#: https://docs.nvidia.com/deploy/archive/R510/nvml-api/group__nvmlClocksThrottleReasons.html)
NVML_REASONS = {0x1: "GPU idle", 0x2: "applications clocks setting",
                0x4: "SW power cap (the SW power-scaling algorithm reduces the clocks below the "
                     "requested clocks)", 0x8: "HW slowdown", 0x10: "sync boost",
                0x20: "SW thermal slowdown", 0x40: "HW thermal slowdown",
                0x80: "HW power-brake slowdown", 0x100: "display clock setting"}


def table(head: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def pct(values: list[float], q: float) -> float:
    """The q-quantile of ``values`` (linear interpolation, numpy's default)."""
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = math.floor(pos)
    return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (pos - lo)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def command(argv: list[str]) -> str:
    """The command line as run from the repository root (no machine paths in the record)."""
    script = Path(argv[0]).resolve()
    return " ".join(["python", str(script.relative_to(ROOT)) if script.is_relative_to(ROOT) else script.name,
                     *argv[1:]])


def header(res: dict, sus: dict, argv: list[str]) -> str:
    return (f"# H200 device check (issue 28)\n\nWritten {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
            f"at commit `{git('rev-parse', '--short', 'HEAD')}` by `{command(argv)}` from `h200_results.json` (run "
            f"{res['started']} - {res['finished']}, committed at "
            f"`{git('log', '-1', '--format=%h', '--', 'benchmarks/kernels/h200_results.json')}`) and "
            f"`h200_sustained.json` (run {sus['started']}). Every figure below is read from those "
            "files, the repository's data files or the cost model when the script runs.\n")


def setup(res: dict, sus: dict) -> str:
    env = res["env"]
    smi_head, *smi_rows = env["nvidia_smi"].splitlines()
    smi = dict(zip(smi_head.split(", "), smi_rows[0].split(", ")))
    absent = ", ".join(f"`{k}`" for k, v in env["attention_packages"].items() if v.startswith("not"))
    impls = "; ".join(f"{k}: {v}" for k, v in sus["activate"].items())
    dev = DEVICE_CATALOG[DEVICE]
    rows = [["device", f"{env['device']} (sm_{''.join(map(str, env['capability']))}, {env['sm_count']} SMs, "
             f"{env['total_gib']:.1f} GiB), driver {smi['driver_version']}"],
            ["software", f"PyTorch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}, "
             f"Python {env['python']}"],
            ["power limit / max", f"{smi['power.limit [W]']} / {smi['power.max_limit [W]']}"],
            ["max clocks", f"SM {smi['clocks.max.sm [MHz]']}, memory {smi['clocks.max.memory [MHz]']}"],
            ["peaks used", f"{res['peak_bf16'] / 1e12:g} TFLOP/s bf16 dense, {res['peak_fp8'] / 1e12:g} FP8 "
             f"(catalog {DEVICE}: {dev.peak_tflops['bf16']:g} / {dev.peak_tflops['fp8']:g}, "
             f"{dev.hbm_gb_per_s:g} GB/s HBM; {dev.source})"],
            ["GPUs visible", f"{len(smi_rows)}: no collective (NCCL) measurement is possible"],
            ["FlashAttention-3/4", f"not measurable: packages {absent} absent; torch lists "
             f"{', '.join(sus['flash_attention_impls'])} ({impls})"],
            ["run", f"kernels {res['started']} - {res['finished']} ({res['elapsed_s']} s), "
             f"sustained {sus['started']}"]]
    return "## 1. Setup\n\n" + table(["", ""], rows)


def _cell(r: dict, key: str, peak: float) -> str:
    return f"{r[key]:.0f} ({r[key] * 1e12 / peak:.2f})" if key in r else r.get("error", "-")[:20]


def attention(res: dict) -> str:
    peak = res["peak_bf16"]
    rows = {(r["backend"], r["causal"], r["head_dim"], r["seq"]): r for r in res["attention"]}
    seqs = sorted({r["seq"] for r in res["attention"]})
    cols = [(b, c) for b in BACKENDS for c in (True, False)]
    out = ["## 2. Attention\n",
           "`F.scaled_dot_product_attention` per SDPA backend (`flash` = PyTorch's FlashAttention-2 "
           "kernel), bf16, FlashAttention benchmark convention (batch = 16k/seq, hidden 2048; FLOPs "
           "4·b·s²·h·d forward, halved when causal; backward 2.5x, forward+backward 3.5x). Cells: "
           f"TFLOP/s (fraction of the {peak / 1e12:g} TFLOP/s dense bf16 peak).\n"]
    for hd in sorted({r["head_dim"] for r in res["attention"]}, reverse=True):
        for name, key in PASSES.items():
            body = [[s] + [_cell(rows[(b, c, hd, s)], key, peak) if (b, c, hd, s) in rows else "-"
                           for b, c in cols] for s in seqs]
            out.append(f"**head dim {hd}, {name}**\n\n" + table(
                ["seq"] + [f"{b} {'causal' if c else 'full'}" for b, c in cols], body))
    return "\n".join(out)


def attention_published(res: dict) -> str:
    """Measured / published at equal (kernel, causal, head dim, seq, pass), H100 sources only."""
    doc = yaml.safe_load(resources.files("autopar_opt.cost").joinpath(
        "data", "attention_kernels.yaml").read_text())
    h100 = {k for k, v in doc["sources"].items() if v["gpu"].startswith("H100")}
    ours = {(PUBLISHED_KERNEL[r["backend"]], r["causal"], r["head_dim"], r["seq"]): r
            for r in res["attention"] if r["backend"] in PUBLISHED_KERNEL}
    groups: dict[tuple, dict[int, float]] = defaultdict(dict)
    for p in doc["rows"]:
        r = ours.get((p["kernel"], p["causal"], p["head_dim"], p["seq_len"]))
        if p["source"] in h100 and r is not None and PASSES[p["pass"]] in r:
            key = (p["kernel"], p["source"], p["pass"], p["causal"], p["head_dim"])
            groups[key][p["seq_len"]] = r[PASSES[p["pass"]]] / p["tflops"]
    seqs = sorted({s for g in groups.values() for s in g})
    body = [[k[0], k[1], k[2], "causal" if k[3] else "full", k[4]]
            + [f"{g[s]:.2f}" if s in g else "" for s in seqs] + [f"**{statistics.median(g.values()):.2f}**"]
            for k, g in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0])))]
    by_kernel: dict[tuple, list[float]] = defaultdict(list)
    for k, g in groups.items():
        by_kernel[(k[0], "causal" if k[3] else "full", k[4])].extend(g.values())
    summary = [[*k, len(v), f"{statistics.median(v):.2f}", f"{min(v):.2f}-{max(v):.2f}"]
               for k, v in sorted(by_kernel.items(), key=lambda kv: tuple(map(str, kv[0])))]
    h100_dev, h200_dev = DEVICE_CATALOG["H100-SXM-80GB"], DEVICE_CATALOG[DEVICE]
    return ("### Against the published H100 rows\n\n"
            f"Ratio measured on the H200 / published on the H100 at the same (kernel, pass, mask, head "
            f"dim, seq), for every row of `autopar_opt/cost/data/attention_kernels.yaml` whose source is "
            f"an H100 ({', '.join(sorted(h100))}); our `cudnn` against the table's `cudnn`, our `flash` "
            f"against `flash_attention_2`. The H200 is the same GH100 die with the same peaks as the H100 "
            f"SXM ({h200_dev.peak_tflops['bf16']:g} vs {h100_dev.peak_tflops['bf16']:g} TFLOP/s bf16, "
            f"{h200_dev.sms} vs {h100_dev.sms} SMs in `DEVICE_CATALOG`) and faster HBM "
            f"({h200_dev.hbm_gb_per_s:g} vs {h100_dev.hbm_gb_per_s:g} GB/s); fused attention is "
            "compute bound, so a ratio near 1 is expected where the kernel version matches.\n\n"
            + table(["kernel", "source", "pass", "mask", "hd"] + [str(s) for s in seqs] + ["median"], body)
            + "\nMedian per (kernel, mask, head dim), all sources and passes:\n\n"
            + table(["kernel", "mask", "hd", "points", "median", "range"], summary))


def attention_fill(res: dict, sweep: dict) -> str:
    """Heads per call: the first run's cuDNN column and the sweep (h200_fill.json) as ratios
    to the 64-head call, per kernel, mask, head dim and length."""
    peak = res["peak_bf16"]
    fill = res["attention_fill"]
    heads = sorted({r["heads"] for r in fill})
    seqs = sorted({r["seq"] for r in fill})
    at = {(r["seq"], r["heads"]): r for r in fill}
    body = [[h] + [_cell(at[(s, h)], "fwd_bwd_tflops", peak) if (s, h) in at else "-" for s in seqs]
            for h in heads]
    lo, hi = at[(seqs[0], heads[0])], at[(seqs[0], heads[-1])]
    be = fill[0]["backend"]
    rows = [r for r in sweep["rows"] if "error" not in r]
    keys = sorted({(r["backend"], r["causal"], r["head_dim"], r["seq"]) for r in rows},
                  key=lambda k: (k[0], not k[1], -k[2], k[3]))
    sweep_heads = sorted({r["heads"] for r in rows})
    speed = {(r["backend"], r["causal"], r["head_dim"], r["seq"], r["heads"]): r["fwd_bwd_tflops"]
             for r in rows}
    sweep_body = []
    for k in keys:
        top = speed[k + (sweep_heads[-1],)]
        sweep_body.append([k[0], "causal" if k[1] else "non-causal", k[2], k[3]]
                          + [f"{speed[k + (h,)] / top:.2f}" for h in sweep_heads])
    return ("### Heads per call (one sequence)\n\n"
            f"The {be} kernel, causal, head dim {fill[0]['head_dim']}, one sequence, forward+backward "
            "TFLOP/s (fraction of peak) against the heads in one call. The published curves keep 16k "
            "tokens x 2048 hidden per call; a tensor-parallel rank runs heads/tp heads of each sequence "
            f"per call. At {seqs[0]} tokens the efficiency falls from "
            f"{hi['fwd_bwd_tflops'] * 1e12 / peak:.2f} of peak with {heads[-1]} heads to "
            f"{lo['fwd_bwd_tflops'] * 1e12 / peak:.2f} with {heads[0]}.\n\n"
            + table(["heads"] + [f"seq {s}" for s in seqs], body)
            + "\n\nThe sweep of `h200_fill.py` (`h200_fill.json`, run "
            f"{sweep.get('started', '?')}): forward+backward speed with 1-{sweep_heads[-1]} heads of one "
            f"sequence over the {sweep_heads[-1]}-head speed, per kernel, mask, head dim and length. The "
            "cost model prices it (`autopar_opt/cost/attention.py` `fill_factor`, data "
            "`autopar_opt/cost/data/attention_fill.yaml`): a call's batch x heads against the published "
            "call's, on its kernel's curves.\n\n"
            + table(["kernel", "mask", "head dim", "seq"] + [f"{h} heads" for h in sweep_heads],
                    sweep_body))


def _bucket(t_us: float) -> int:
    return math.floor(math.log2(t_us))


def _predicted(r: dict, p) -> float:
    fp8 = r["dtype"] == "fp8"
    peak = DEVICE_CATALOG[DEVICE].peak_flops("fp8" if fp8 else "bf16")
    return kernel_time(2.0 * r["m"] * r["n"] * r["k"], peak, p.efficiency_for(DEVICE, fp8=fp8),
                       p.efficiency_half_us)


def gemms(res: dict) -> str:
    rows = [r for r in res["gemm"] if "error" not in r]
    skipped = [r for r in res["gemm"] if "error" in r]
    p = default_params()
    by: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        by[(r["dtype"], r["layout"], _bucket(r["t_at_peak_us"]))].append(r)
    body = []
    for (dt, lay, b), rs in sorted(by.items()):
        eff = [r["eff"] for r in rs]
        err = [_predicted(r, p) / r["s"] - 1 for r in rs]
        body.append([dt, lay, f"{2 ** b:g}-{2 ** (b + 1):g}", len(rs), f"{statistics.median(eff):.3f}",
                     f"{min(eff):.3f}-{max(eff):.3f}", f"{statistics.median(err):+.2f}",
                     f"{statistics.median(map(abs, err)):.2f}", f"{pct([abs(e) for e in err], 0.9):.2f}"])
    every = [abs(_predicted(r, p) / r["s"] - 1) for r in rows]
    lay: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        lay[(r["dtype"], r["layout"])].append(r)
    layouts = [[dt, ly, len(rs), f"{statistics.median(r['eff'] for r in rs):.3f}",
                f"{statistics.median(abs(_predicted(r, p) / r['s'] - 1) for r in rs):.2f}"]
               for (dt, ly), rs in sorted(lay.items())]
    odd = [r for r in rows if r["dtype"] == "bf16" and any(r[x] % 8 for x in "mnk")]
    odd_text = ""
    if odd:
        names = ", ".join(sorted({f"{r['model']} {r['gemm']} n={r['n']}" for r in odd}))
        rest = [r["eff"] for r in rows if r["dtype"] == "bf16" and r not in odd]
        odd_text = (f"{len(odd)} bf16 timings have a dimension not divisible by 8 ({names}): median "
                    f"efficiency {statistics.median(r['eff'] for r in odd):.3f}, against "
                    f"{statistics.median(rest):.3f} for the other bf16 GEMMs; the model prices them as "
                    "any other GEMM.\n\n")
    models: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for r in rows:
        models[r["model"]][r["gemm"]][r["dtype"]].append(r["eff"])
    kinds = list(dict.fromkeys(r["gemm"] for r in rows))
    per_model = [[m] + ["/".join(f"{statistics.median(g[d]):.2f}" if d in g else "-" for d in ("bf16", "fp8"))
                        if (g := ks.get(k)) else "" for k in kinds] for m, ks in models.items()]
    return ("## 3. GEMMs\n\n"
            f"{res['gemm_shapes']} GEMM shapes of the zoo's models (`h200_kernels.py` zoo_shapes), each "
            "in three bf16 layouts and FP8 forward, timed back-to-back between two CUDA events with the "
            f"operands rotated over copies that do not stay in L2 ({len(rows)} timings; {len(skipped)} FP8 "
            "shapes skipped, a dimension not divisible by 16). Efficiency = achieved / dense peak of the "
            "dtype. Buckets: the GEMM's time at peak (2mnk / peak), log2, in µs.\n\n"
            "Prediction: `kernel_time(2mnk, peak, eff_max, half_us)` "
            f"(`autopar_opt.cost.compute`) with the shipped `default_params()`: eff_max "
            f"{p.efficiency_for(DEVICE):g} bf16 / {p.efficiency_for(DEVICE, fp8=True):g} FP8 "
            f"(`efficiency_for('{DEVICE}')`), half_us {p.efficiency_half_us:g} µs; peak "
            f"`DEVICE_CATALOG['{DEVICE}'].peak_flops`. Error = predicted / measured time - 1 "
            "(positive: the model is slower than the kernel).\n\n"
            + table(["dtype", "layout", "µs at peak", "n", "median eff", "range", "median err",
                     "median abs err", "p90 abs err"], body)
            + f"\nAll {len(every)} GEMMs: median |error| {statistics.median(every):.2f}, p90 "
            f"{pct(every, 0.9):.2f}. By layout:\n\n"
            + table(["dtype", "layout", "n", "median eff", "median abs err"], layouts) + "\n" + odd_text
            + "Median efficiency per zoo model and GEMM kind (all tensor-parallel degrees and token "
            "counts; cells bf16 over the three layouts / FP8 forward):\n\n" + table(["model"] + kinds, per_model))


def sustained(res: dict, sus: dict) -> str:
    smi_head, smi_row = res["env"]["nvidia_smi"].splitlines()[:2]
    max_sm = float(dict(zip(smi_head.split(", "), smi_row.split(", ")))["clocks.max.sm [MHz]"].split()[0])
    short = {}
    for key, dt in (("bf16_8192", "bf16"), ("fp8_8192", "fp8")):
        n = int(key.rsplit("_", 1)[1])                 # the n^3 GEMM h200_sustained.py runs
        work_us = 2.0 * n ** 3 / res[f"peak_{dt}"] * 1e6
        short[key] = [r["eff"] for r in res["gemm"] if r.get("dtype") == dt and "eff" in r
                      and r["t_at_peak_us"] >= work_us], work_us
    body, reasons = [], set()
    for key, dt in (("bf16_8192", "bf16"), ("fp8_8192", "fp8")):
        w = sus[key]
        reasons |= {int(x["throttle"], 16) for x in w}
        eff, mhz = statistics.median(x["eff"] for x in w), statistics.median(x["sm_mhz"] for x in w)
        s_eff, work_us = short[key]
        body.append([key, len(w), f"{w[-1]['t_s']:.0f}", f"{eff:.3f}", f"{mhz:.0f} ({mhz / max_sm:.2f})",
                     f"{min(x['sm_mhz'] for x in w):.0f}-{max(x['sm_mhz'] for x in w):.0f}",
                     f"{statistics.median(x['power_w'] for x in w):.0f}",
                     f"{max(x['temp_c'] for x in w):.0f}",
                     f"{statistics.median(s_eff):.3f} (n={len(s_eff)}, >= {work_us:.0f} µs at peak)"])
    bits = "; ".join(f"0x{b:x}: " + ", ".join(t for m, t in NVML_REASONS.items() if b & m) for b in sorted(reasons))
    p = default_params()
    return ("## 4. Sustained GEMMs\n\n"
            f"8192³ GEMMs back-to-back, ~1 s windows, nvidia-smi clocks/power/temperature/throttle "
            f"reasons per window (`h200_sustained.py`). Idle before: SM {sus['idle']['sm_mhz']:.0f} MHz, "
            f"{sus['idle']['power_w']:.0f} W, {sus['idle']['temp_c']:.0f} °C, reasons {sus['idle']['throttle']}; "
            f"after: SM {sus['after']['sm_mhz']:.0f} MHz, {sus['after']['power_w']:.0f} W, reasons "
            f"{sus['after']['throttle']}.\n\n"
            + table(["run", "windows", "s", "median eff", f"median SM MHz (of {max_sm:.0f})", "SM MHz range",
                     "median W", "max °C", "GEMM sweep, shapes with at least this work: median eff"], body)
            + f"\nThrottle reasons reported under load: {bits} (NVML clocks-event reason bits, "
            "`nvmlClocksThrottleReasons` in the NVML API reference). The GPU draws its power limit and "
            "the SW power-scaling algorithm holds the SM clock below its maximum: the 8192³ GEMM runs at "
            "the power-capped clock, not the boost clock. The short-call sweep timed each shape for "
            "~20 ms, with no clock recorded, so whether its large GEMMs ran capped too is not known. "
            f"The shipped large-GEMM efficiency for {DEVICE} is {p.efficiency_for(DEVICE):g} bf16 / "
            f"{p.efficiency_for(DEVICE, fp8=True):g} FP8 (`default_params()`).\n")


def elementwise(res: dict, step: dict) -> str:
    bw = DEVICE_CATALOG[DEVICE].hbm_gb_per_s
    p = default_params()
    body, adam = [], None
    for r in res["elementwise"]:
        if r["op"] == "fused_adamw_fp32":
            adam = r
        if "error" in r:
            body.append([r["op"], "", "", "", r["error"][:40], ""])
            continue
        shape = "x".join(map(str, r["shape"])) if r.get("shape") else f"{r['params']} params"
        body.append([r["op"], shape, f"{r['s'] * 1e6:.0f}", f"{r['min_bytes'] / 1e6:.0f}",
                     f"{r['gb_per_s']:.0f}", f"{r['gb_per_s'] / bw:.2f}"])
    per_param = adam["s"] * bw * 1e9 / adam["params"]
    step_pp = step["optimizer_s"] * bw * 1e9 / step["params"]
    return ("## 5. Element-wise kernels\n\n"
            f"Time and bandwidth over the bytes each kernel must move at least, against the "
            f"{bw:g} GB/s datasheet HBM bandwidth of {DEVICE} (`DEVICE_CATALOG`). bf16 tensors; the "
            "cross-entropy row's logits have a quarter of the listed rows (`T // 4` in `h200_kernels.py`; "
            "its bytes are counted so).\n\n"
            + table(["op", "shape", "µs", "min MB", "GB/s", "of datasheet"], body)
            + f"\nFused AdamW, fp32 parameters and fp32 gradients ({adam['min_bytes'] // adam['params']} bytes "
            f"per parameter at least): {adam['s'] * 1e3:.3f} ms for {adam['params']} parameters, i.e. "
            f"**{per_param:.1f} bytes per parameter at datasheet bandwidth**; the training step's own "
            f"fused AdamW ({step['params']} fp32 parameters, `step.optimizer_s`) {step_pp:.1f}. The shipped "
            f"`optimizer_bytes_per_param` is {p.optimizer_bytes_per_param:g} (params.py: fused Adam's 28 "
            "bytes with 16-bit gradients at 0.76 of datasheet); with fp32 gradients the same kernel moves "
            f"{adam['min_bytes'] // adam['params']} bytes, so at the measured "
            f"{adam['gb_per_s'] / bw:.2f} of datasheet 28 bytes would take "
            f"{28 * bw / adam['gb_per_s']:.1f}.\n")


def memory(res: dict) -> str:
    p = default_params()
    pts = [("after CUDA init (memory_first)", res["memory_first"]),
           ("after cuBLAS/cuDNN ran (memory_libraries)", res["memory_libraries"]),
           ("after two training steps (memory.after_step)", res["memory"]["after_step"])]
    body = [[n, f"{m['used_gib']:.2f}", f"{m['torch_reserved_gib']:.2f}", f"**{m['outside_torch_gib']:.2f}**"]
            for n, m in pts]
    s = res["step"]
    return ("## 6. Device memory\n\n`cudaMemGetInfo` used minus PyTorch's reserved (GiB): the CUDA "
            "context and library workspaces outside the caching allocator.\n\n"
            + table(["point", "used", "PyTorch reserved", "outside PyTorch"], body)
            + f"\nTraining step peak: {s['peak_allocated_gib']:.2f} GiB allocated, {s['peak_reserved_gib']:.2f} "
            f"reserved, reserved/allocated - 1 = **{s['reserved_over_allocated']:.3f}**. Shipped "
            f"(`default_params()`): `memory_reserve_gib` {p.memory_reserve_gib:g}, `memory_fragmentation` "
            f"{p.memory_fragmentation:g}. One GPU: no NCCL buffers, which `memory_reserve_gib` also covers.\n")


def step_spec(step: dict) -> dict:
    """The measured step as a spec: the zoo's Llama-3 builder with the step's dimensions, one
    H200, plain PyTorch (pytorch-ddp on one GPU: no DDP traffic) with fused AdamW and cuDNN
    attention, fp32 parameters under bf16 autocast, ``micro_batches`` micro-batches of one
    sequence (``h200_kernels.py`` step())."""
    d = step["dims"]
    return {"model": {"zoo": "llama3-8b", "overrides": {
                "num_layers": d["layers"], "hidden": d["h"], "heads": d["heads"], "kv_heads": d["kv"],
                "ffn_hidden": d["ffn"], "vocab": d["vocab"], "seq_len": step["seq"]}},
            "cluster": {"name": "1x1-h200", "nodes": 1, "gpus_per_node": 1, "device": DEVICE},
            "training": {"global_batch_size": step["micro_batches"], "seq_len": step["seq"], "dtype": "bf16",
                         "optimizer": "adam_mixed", "autocast": True, "runtime": "pytorch-ddp",
                         "runtime_options": {"fused_optimizer": True, "attention_kernel": "cudnn"}},
            "plan": {"tp": 1, "pp": 1, "dp": 1, "micro_batch_size": 1, "microbatches": step["micro_batches"]}}


def measured_parts(res: dict) -> dict[str, float]:
    """One micro-batch's GEMMs and attention from the kernel sweeps at the step's own shapes
    (bf16, forward + data gradient + weight gradient; cuDNN attention of one sequence with the
    step's heads, forward+backward), seconds; the rest is what the micro-batch leaves over."""
    st = res["step"]
    d, s = st["dims"], st["seq"]
    hd = d["h"] // d["heads"]
    shapes = {"block": [(s, (d["heads"] + 2 * d["kv"]) * hd, d["h"]), (s, d["h"], d["heads"] * hd),
                        (s, 2 * d["ffn"], d["h"]), (s, d["h"], d["ffn"])],
              "head": [(s, d["vocab"], d["h"])]}
    t = {(r["m"], r["n"], r["k"], r["layout"]): r["s"] for r in res["gemm"] if r.get("dtype") == "bf16" and "s" in r}
    gemm = {part: sum(t[(*mnk, lay)] for mnk in mnks for lay in ("fwd", "dgrad", "wgrad"))
            for part, mnks in shapes.items()}
    att = next(r for r in res["attention_fill"] if r["seq"] == s and r["heads"] == d["heads"]
               and r["head_dim"] == hd)
    blocks_gemm = d["layers"] * gemm["block"]
    attn = d["layers"] * att["fwd_bwd_s"]
    return {"gemm": blocks_gemm + gemm["head"], "gemm_head": gemm["head"], "attention": attn,
            "rest": st["micro_batch_s"] - blocks_gemm - gemm["head"] - attn}


def step(res: dict) -> str:
    st = res["step"]
    mb = st["micro_batches"]
    meas = [["micro-batch (fwd+bwd, 1 x %d tokens)" % st["seq"], f"{st['micro_batch_s'] * 1e3:.1f}"],
            ["gradient clipping", f"{st['clip_s'] * 1e3:.2f}"], ["optimizer (fused AdamW)", f"{st['optimizer_s'] * 1e3:.2f}"],
            ["zero_grad", f"{st['zero_grad_s'] * 1e3:.2f}"],
            [f"parts: {mb} x micro-batch + clip + optimizer", f"{st['parts_s'] * 1e3:.1f}"],
            ["iteration (median of %d)" % len(st["iteration_all_s"]), f"**{st['iteration_s'] * 1e3:.1f}**"],
            ["leftover (iteration - parts)", f"{st['leftover_s'] * 1e3:+.1f}"]]
    d = st["dims"]
    out = ["## 7. Training step\n",
           f"A Llama-3-8B-shaped model cut to {d['layers']} blocks (h {d['h']}, {d['heads']} heads, "
           f"{d['kv']} KV heads, SwiGLU {d['ffn']}, vocabulary {d['vocab']}; {st['params']} parameters), "
           f"fp32 parameters, bf16 autocast, fused AdamW, {mb} micro-batches of 1 x {st['seq']} tokens "
           "(`h200_kernels.py` step()). Each part timed alone, then whole iterations (ms):\n",
           table(["part", "ms"], meas)]
    data = step_spec(st)
    spec = build_spec(data, HERE / "H200.md")
    m = evaluate(spec.plan, spec.graph, spec.cluster, spec.training, spec.cost_params)
    ctx = StageContext(spec.cluster, spec.training, spec.cost_params, 1, 1)
    layers = {lay.name: lay for lay in spec.graph.layers}
    stage = spec.plan.stages[0]
    comp = [compute_time(layers[n], s, ctx) for n, s in zip(stage.layers, stage.strategies)]
    g = sum(c.gemm_s for c in comp)
    a = sum(c.attn_s for c in comp)
    amp = sum(autocast_weight_time(layers[n], layers[n], s, ctx)
              for n, s in zip(stage.layers, stage.strategies))
    tot = sum(c.total_s for c in comp) + amp
    head_gemm = sum(c.gemm_s for n, c in zip(stage.layers, comp) if layers[n].kind.value == "lm_head")
    parts = measured_parts(res)
    bd = m.breakdown
    sm = m.stages[0]

    def row(name: str, pred: float, meas: float, error: bool = True) -> list:
        return [name, f"{pred * 1e3:.2f}", f"{meas * 1e3:.2f}", f"{pred / meas - 1:+.2f}" if error else ""]
    cmp = [row("micro-batch: GEMMs (all layers)", g, parts["gemm"]),
           row("  of which the output layer", head_gemm, parts["gemm_head"]),
           row("micro-batch: attention core", a, parts["attention"]),
           row("micro-batch: the rest (element-wise, loss, embedding, AMP casts)", tot - g - a,
               parts["rest"]),
           ["  of which AMP weight casts and fp32 gradient accumulation (model)", f"{amp * 1e3:.2f}",
            "", ""],
           row("**micro-batch**", sm.compute_s, st["micro_batch_s"]),
           row(f"{mb} micro-batches", bd["compute_s"], mb * st["micro_batch_s"]),
           row("optimizer step (model) / clip + optimizer (measured)", bd["optimizer_s"],
               st["clip_s"] + st["optimizer_s"]),
           row("fixed per iteration (model) / leftover (measured)", bd["fixed_s"], st["leftover_s"], False),
           row("**iteration**", m.iteration_time_s, st["iteration_s"])]
    p = default_params()
    lo, hi, _ = RANGES["iteration_overhead_s"]
    verdict = (f"The iteration is off by {m.iteration_time_s / st['iteration_s'] - 1:+.1%}. The model's "
               f"fixed per-iteration term (`iteration_overhead_s` = {p.iteration_overhead_s:g} s, "
               f"plausible range {lo:g}-{hi:g} s in `RANGES`, fitted on the published runs) stands where "
               f"the measured iteration leaves {st['leftover_s'] * 1e3:+.1f} ms over its parts (pinned at "
               "that measurement, 0, the refit moves the runs' deficit into `efficiency_half_us` and "
               "prices MoE experts' small GEMMs worse: `benchmarks/calibration/BOUNDS.md`); the model's "
               "micro-batch is "
               f"{sm.compute_s / st['micro_batch_s'] - 1:+.0%} off ({(sm.compute_s - st['micro_batch_s']) * 1e3:+.1f} "
               f"ms, of which {(tot - g - a - parts['rest']) * 1e3:+.1f} ms outside the GEMMs and attention), "
               f"and its optimizer step {bd['optimizer_s'] / (st['clip_s'] + st['optimizer_s']) - 1:+.0%} "
               "against clipping + AdamW.\n")
    diff = spec.graph.total_params() - st["params"]
    norms = 2 * d["layers"] + 1
    why = (f" The difference is {norms} x hidden, one vector per norm ({norms} RMSNorms): the zoo's "
           "blocks and head count a bias beside each norm weight (`model_zoo/transformer.py`: `4 * h` in "
           "`transformer_block`, `2 * h` in `lm_head`), PyTorch's `RMSNorm` has none."
           if diff == norms * d["h"] else "")
    outside = res["memory"]["after_step"]["outside_torch_gib"]
    mem = [["weights / grads / optimizer", f"{sm.weights_gib:.2f} / {sm.grads_gib:.2f} / {sm.optimizer_gib:.2f}", ""],
           ["activations / logits / working set", f"{sm.activation_gib:.2f} / {sm.logits_gib:.2f} / {sm.working_gib:.2f}", ""],
           ["model tensors (measured: peak allocated)", f"{sm.peak_memory_gib - sm.reserve_gib:.2f}",
            f"{st['peak_allocated_gib']:.2f}"],
           ["reserve + fragmentation (measured: reserved - allocated + outside PyTorch)",
            f"{sm.reserve_gib:.2f}", f"{st['peak_reserved_gib'] - st['peak_allocated_gib'] + outside:.2f}"],
           ["**peak per device** (measured: peak reserved + outside PyTorch)", f"{sm.peak_memory_gib:.2f}",
            f"{st['peak_reserved_gib'] + outside:.2f}"]]
    out += ["### The same step priced by the cost model\n",
            "`evaluate` of this spec (built from `step` in the JSON; shipped `default_params()`):\n",
            "```yaml\n" + yaml.safe_dump(data, sort_keys=False) + "```\n",
            f"Built: {spec.graph.total_params()} parameters ({len(spec.graph.layers)} layers) against "
            f"{st['params']} measured ({diff:+d}).{why} The measured split of a micro-batch takes the GEMM sweep's times of "
            "the step's own shapes (bf16, forward + data gradient + weight gradient, each timed alone) and "
            "the cuDNN attention of one sequence with the step's heads (`attention_fill`; MHA there, GQA in "
            "the step, the same FLOPs); the rest is the micro-batch minus both. Times in ms; error = "
            "predicted / measured - 1.\n",
            table(["", "predicted", "measured", "error"], cmp), verdict,
            "\nMemory (GiB):\n", table(["", "predicted", "measured"], mem),
            "\nAssumed by the model:\n", "\n".join(f"- {x}" for x in spec_assumed(spec)) + "\n"]
    return "\n".join(out)


def spec_assumed(spec) -> list[str]:
    from autopar_opt.cost.assumptions import cost_assumptions
    return cost_assumptions(spec.graph, spec.cluster, spec.training, spec.cost_params)


def main(argv: list[str]) -> None:
    out = Path(argv[1]) if len(argv) > 1 else HERE / "H200.md"
    res = json.loads((HERE / "h200_results.json").read_text())
    sus = json.loads((HERE / "h200_sustained.json").read_text())
    sweep = json.loads((HERE / "h200_fill.json").read_text())
    text = "\n".join([header(res, sus, argv), setup(res, sus), attention(res), attention_published(res),
                      attention_fill(res, sweep), gemms(res), sustained(res, sus), elementwise(res, res["step"]),
                      memory(res), step(res)])
    tmp = out.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv)
