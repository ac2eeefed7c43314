"""Attention-kernel efficiency from published microbenchmarks (cost model v3).

The attention core (``QKᵀ``, softmax, ``·V`` and their gradients) of a fused
kernel runs at an efficiency that depends on the kernel, the GPU, the head
dimension, the causal mask and the sequence length: FlashAttention-2 on an
A100 reaches 0.28-0.65 of the bf16 peak forward+backward, on an H100 only
0.14-0.34, the Hopper-native kernels (cuDNN fused attention, FlashAttention-3)
0.19-0.59 (``data/attention_kernels.yaml``). Those figures are measured, so
they are read, not fitted (issue 28, point 1): the rows of
``data/attention_kernels.yaml`` hold every published point with its source and
locator (FlashAttention-2 paper figures on A100 and H100, FlashAttention-3
paper forward and backward figures on H100, this project's own SDPA
measurements in ``benchmarks/kernels``: H100, causal, head dim 128, 2k-64k; H200,
the GH100 die at the same peak, per backend (cuDNN, FlashAttention-2), causal and
not, head dim 64 and 128, 512-131,072 tokens, ``benchmarks/kernels/attention_rows.py``).
Several sources at one point (:func:`_pool`): the forward is their mean; each
source gives one backward, measured or recovered from its forward+backward row
(below) with its own forward or, where it has none, the pooled one; the
backward is the mean of those.

Conventions. A row's ``tflops`` counts FLOPs as the FlashAttention benchmarks
do (``benchmarks/benchmark_flash_attention.py`` ``flops()``): forward
``4·b·s²·h·d``, halved with a causal mask; backward 2.5x forward;
forward+backward 3.5x. The cost model counts the attention core's forward as
``F`` (the same forward count, ``Layer.flops_recompute_selective``) and its
backward as ``2F`` (``Layer.flops_bwd = 2·flops_fwd``), so a pass's efficiency
in the model's count is:

* forward: ``R_f / peak``;
* backward: ``(2/2.5)·R_b / peak`` (the kernel recomputes ``QKᵀ``: 2.5F of
  work for the 2F the model counts);
* both passes from a forward+backward figure only: ``(3/3.5)·R_fb / peak``
  for each (their sum is then exact).

``R_fb = 3.5 / (1/R_f + 2.5/R_b)`` combines separate forward and backward
figures; ``R_b = 2.5 / (3.5/R_fb - 1/R_f)`` recovers a backward figure from a
forward and a combined one. A causal backward measured nowhere (the
FlashAttention-3 backward figure is non-causal) takes the non-causal backward
times the forward's causal/non-causal ratio at the same length (stated as an
assumption).

Lookup (:func:`pass_efficiency`): the kernel's rows on the GPU's architecture;
a head dimension between two measured ones interpolates linearly, outside
them takes the nearest (stated); the sequence length interpolates linearly
in ``log2(s)`` between measured lengths and is clamped at both ends (the
curves plateau by 8k-16k; the project's own H200 rows reach 128k). The length
is the query length of one kernel call: ``s`` without context parallelism,
the chunk a context-parallel step processes with it
(:mod:`autopar_opt.cost.comm`). A GPU architecture without rows takes the same
kernel's fractions of peak on the closest generation measured (Blackwell:
Hopper), and a kernel not measured on an architecture the next kernel class
down (FlashAttention-3 -> cuDNN -> FlashAttention-2 -> FlashAttention-1); both
are reported by :func:`lookup` and printed with the plan
(:func:`autopar_opt.cost.assumptions.cost_assumptions`). Which kernel a
runtime runs on a GPU: :func:`kernel_for`.

Fill (:func:`fill_factor`): the published curves vary the per-call work with
``s`` at a fixed 16k tokens x 2,048 hidden per call (batch x heads =
``16384/s x 2048/d``); a tensor-parallel rank runs ``heads/tp`` heads of its
micro-batch per call, and a call with fewer heads fills fewer of the GPU's
multiprocessors. Measured on one H200 (``data/attention_fill.yaml``: cuDNN and
PyTorch's FlashAttention-2 kernel, causal and not, head dim 64 and 128, one
sequence of 2k-16k tokens with 1-64 heads): cuDNN, causal, head dim 128 at 4k
tokens reaches 0.72 of its 64-head speed with 8 heads and 0.15 with 1; at 16k,
0.57 with 1 head and 0.90 with 2; without the mask a call saturates sooner
(4 heads at 4k: 0.97). The factor is the measured ratio between the call's
batch x heads and the published call's, interpolated in ``log2`` of batch x
heads and of ``s`` between the measured lengths; outside them, the nearer
length's curve at the same number of query tiles (batch x heads x ``s``). A
kernel takes its own curves where measured, FlashAttention-3 cuDNN's (both
Hopper-native), every other kernel FlashAttention-2's; a head dim the nearest
measured one (stated with the plan).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

#: The kernels of the table (``kernel`` column) the model chooses between.
KERNELS = ("flash_attention_1", "flash_attention_2", "flash_attention_3", "cudnn")
#: GPU architecture of each benchmark GPU of the table (``sources[*].gpu``).
BENCHMARK_ARCH = {"A100-SXM4-80GB": "ampere", "H100-SXM5-80GB": "hopper",
                  "H200-SXM-141GB": "hopper"}     # the GH100 die of the H100 SXM, same peak
#: A kernel not measured on an architecture: the next class down (each is the
#: kernel the one before replaced; FlashAttention-3 and cuDNN are Hopper-native,
#: Shah et al. 2024, Sec. 1).
KERNEL_FALLBACK = {"flash_attention_3": "cudnn", "cudnn": "flash_attention_2",
                   "flash_attention_2": "flash_attention_1"}
#: An architecture without rows: the closest generation with rows.
ARCH_FALLBACK = {"blackwell": "hopper"}
#: The FLOP multiples of the FlashAttention convention (module docstring).
BWD_OVER_FWD, FWD_BWD_OVER_FWD = 2.5, 3.5
#: Passes in the model's FLOP count: forward F, backward 2F (module docstring).
MODEL_BWD_OVER_FWD = 2.0


@dataclass(frozen=True)
class Curves:
    """Efficiency (fraction of the benchmark GPU's dense 16-bit peak, in the
    FlashAttention convention) by sequence length, per pass."""

    fwd: dict[int, float] = field(default_factory=dict)
    bwd: dict[int, float] = field(default_factory=dict)
    fwd_bwd: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Lookup:
    """What :func:`lookup` used: the kernel and architecture whose rows priced
    the call, and the sentences saying what was assumed (empty when the rows
    are exactly the ones asked for)."""

    kernel: str
    arch: str
    fwd: float
    bwd: float
    notes: tuple[str, ...] = ()


#: The published benchmarks' work per call: batch x heads = REF_TOKENS/s x REF_HIDDEN/d
#: (flash-attention ``benchmarks/benchmark_flash_attention.py``: batch = 16k/seqlen, dim 2048).
REF_TOKENS, REF_HIDDEN = 16384, 2048


def _fill_text() -> str:
    return resources.files("autopar_opt.cost").joinpath("data", "attention_fill.yaml").read_text()


#: The kernel whose measured fill a kernel takes: the Hopper-native ones cuDNN's, the others
#: FlashAttention-2's (the two measured, ``data/attention_fill.yaml``).
FILL_KERNEL = {"cudnn": "cudnn", "flash_attention_3": "cudnn"}


@lru_cache(maxsize=1)
def fill_curves() -> dict[tuple[str, bool, int], dict[int, dict[int, float]]]:
    """Measured speed (TFLOP/s) by batch x heads per call, per sequence length, per
    (kernel, causal, head dim) (``data/attention_fill.yaml``; a point measured twice is
    averaged)."""
    import yaml

    raw: dict[tuple[str, bool, int], dict[int, dict[int, list[float]]]] = {}
    for row in yaml.safe_load(_fill_text())["rows"]:
        key = (row["kernel"], bool(row["causal"]), int(row["head_dim"]))
        bh = int(row["batch"]) * int(row["heads"])
        raw.setdefault(key, {}).setdefault(int(row["seq_len"]), {}).setdefault(bh, []).append(
            float(row["tflops"]))
    return {k: {n: {bh: sum(v) / len(v) for bh, v in c.items()} for n, c in d.items()}
            for k, d in raw.items()}


@lru_cache(maxsize=None)
def fill_curve_for(kernel: str, causal: bool, head_dim: int) -> tuple[tuple[str, bool, int],
                                                                       dict[int, dict[int, float]]]:
    """The measured fill curves a call of ``kernel`` takes (:data:`FILL_KERNEL`; the
    nearest measured head dim, in ``log2``), with their key. Cached: every attention
    lookup of a plan's pricing asks for it."""
    kern = FILL_KERNEL.get(kernel, "flash_attention_2")
    dims = sorted({d for k, _, d in fill_curves() if k == kern})
    dim = min(dims, key=lambda d: (abs(math.log2(d) - math.log2(max(head_dim, 1))), -d))
    key = (kern, bool(causal), dim)
    return key, fill_curves()[key]


def reference_calls(seq: float, head_dim: int) -> float:
    """Batch x heads of one call of the published benchmarks at ``seq`` tokens."""
    return max(1.0, REF_TOKENS / seq) * REF_HIDDEN / head_dim


def fill_factor(batch_heads: float, seq: float, head_dim: int, kernel: str = "cudnn",
                causal: bool = True) -> float:
    """Speed of a call of ``batch_heads`` (batch x heads) at ``seq`` tokens over the
    published call's at the same length (module docstring, "Fill"); 1 when the call is
    at least as large. Each measured length gives the ratio of its curve at the two
    sizes (interpolated in ``log2``); the lengths between interpolate in ``log2(seq)``;
    outside them, the nearer length's curve at the same number of query tiles."""
    ref = reference_calls(seq, head_dim)
    if batch_heads >= ref:
        return 1.0
    _, curves = fill_curve_for(kernel, causal, head_dim)
    lengths = sorted(curves)
    if lengths[0] <= seq <= lengths[-1]:
        ratio = {n: min(1.0, interpolate(curves[n], batch_heads) / interpolate(curves[n], ref))
                 for n in lengths}
        return min(1.0, interpolate(ratio, seq))
    n = lengths[0] if seq < lengths[0] else lengths[-1]
    scale = seq / n
    return min(1.0, interpolate(curves[n], batch_heads * scale) / interpolate(curves[n], ref * scale))


def _data_text() -> str:
    return resources.files("autopar_opt.cost").joinpath("data", "attention_kernels.yaml").read_text()


@lru_cache(maxsize=1)
def table() -> dict[tuple[str, str, bool, int], Curves]:
    """The rows of ``data/attention_kernels.yaml`` as efficiency curves, keyed by
    (kernel, architecture, causal, head dim), with the derived passes of the
    module docstring filled in where measured ones allow."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(_data_text(), Loader=loader)
    src = data["sources"]
    raw: dict[tuple, dict[str, dict[str, dict[int, list[float]]]]] = {}
    for row in data["rows"]:
        s = src[row["source"]]
        key = (row["kernel"], BENCHMARK_ARCH[s["gpu"]], bool(row["causal"]), int(row["head_dim"]))
        eff = float(row["tflops"]) / float(s["peak_tflops"])
        (raw.setdefault(key, {}).setdefault(row["source"], {}).setdefault(row["pass"], {})
         .setdefault(int(row["seq_len"]), []).append(eff))
    out = {}
    for key, sources in raw.items():
        out[key] = _pool(sources)
    for key, curves in list(out.items()):
        kernel, arch, causal, hd = key
        other = out.get((kernel, arch, False, hd))
        if not causal or other is None:
            continue
        missing = {s: other.bwd[s] * curves.fwd[s] / other.fwd[s] for s in curves.fwd
                   if s not in curves.bwd and s in other.bwd and s in other.fwd}
        if missing:
            out[key] = _complete(curves.fwd, {**missing, **curves.bwd}, curves.fwd_bwd)
    # a curve prices both passes only with forward and backward, or forward+backward
    return {k: c for k, c in out.items() if (c.fwd and c.bwd) or c.fwd_bwd}


def _pool(sources: dict[str, dict[str, dict[int, list[float]]]]) -> Curves:
    """One point's curves from several sources (each ``pass -> seq -> values``): the
    forward is the mean over the sources that measure it; each source gives one backward
    per length, measured, or derived from its forward+backward row and its own forward
    (the pooled forward where it has none); the backward is the mean of those. A length
    with no backward keeps the pooled forward+backward."""
    def mean(v: list[float]) -> float:
        return sum(v) / len(v)

    per = {src: {p: {s: mean(v) for s, v in c.items()} for p, c in d.items()}
           for src, d in sources.items()}
    fwd: dict[int, list[float]] = {}
    for d in per.values():
        for s, v in d.get("fwd", {}).items():
            fwd.setdefault(s, []).append(v)
    fwd_mean = {s: mean(v) for s, v in fwd.items()}
    bwd: dict[int, list[float]] = {}
    fb: dict[int, list[float]] = {}
    for d in per.values():
        own_f, own_b, own_fb = d.get("fwd", {}), d.get("bwd", {}), d.get("fwd_bwd", {})
        for s in set(own_b) | set(own_fb):
            if s in own_b:
                bwd.setdefault(s, []).append(own_b[s])
                continue
            fb.setdefault(s, []).append(own_fb[s])
            f = own_f.get(s, fwd_mean.get(s))
            rest = FWD_BWD_OVER_FWD / own_fb[s] - 1.0 / f if f else 0.0
            if rest > 0:
                bwd.setdefault(s, []).append(BWD_OVER_FWD / rest)
    return _complete(fwd_mean, {s: mean(v) for s, v in bwd.items()},
                     {s: mean(v) for s, v in fb.items()})


def _complete(fwd: dict[int, float], bwd: dict[int, float], fb: dict[int, float]) -> Curves:
    """Fill the pass a pair of measured passes determines (module docstring)."""
    fwd, bwd, fb = dict(fwd), dict(bwd), dict(fb)
    for s in set(fwd) & set(bwd):
        fb.setdefault(s, FWD_BWD_OVER_FWD / (1.0 / fwd[s] + BWD_OVER_FWD / bwd[s]))
    for s in set(fwd) & set(fb):
        rest = FWD_BWD_OVER_FWD / fb[s] - 1.0 / fwd[s]
        if s not in bwd and rest > 0:
            bwd[s] = BWD_OVER_FWD / rest
    return Curves(dict(sorted(fwd.items())), dict(sorted(bwd.items())), dict(sorted(fb.items())))


def interpolate(curve: dict[int, float], seq: float) -> float:
    """Piecewise linear in ``log2(seq)`` between measured lengths, clamped at both ends."""
    xs = sorted(curve)
    if seq <= xs[0]:
        return curve[xs[0]]
    if seq >= xs[-1]:
        return curve[xs[-1]]
    for a, b in zip(xs, xs[1:]):
        if a <= seq <= b:
            t = (math.log2(seq) - math.log2(a)) / (math.log2(b) - math.log2(a))
            return curve[a] + t * (curve[b] - curve[a])
    raise AssertionError("unreachable: seq inside the measured range")


def _pass_pair(c: Curves, seq: float) -> tuple[float, float]:
    """(forward, backward) efficiency in the model's FLOP count at ``seq``."""
    if c.fwd and c.bwd:
        return (interpolate(c.fwd, seq),
                MODEL_BWD_OVER_FWD / BWD_OVER_FWD * interpolate(c.bwd, seq))
    e = (1.0 + MODEL_BWD_OVER_FWD) / FWD_BWD_OVER_FWD * interpolate(c.fwd_bwd, seq)
    return e, e


def lookup(kernel: str, arch: str, causal: bool, head_dim: int, seq: float) -> Lookup:
    """Forward and backward efficiency (fraction of the dense 16-bit peak, in
    the model's FLOP count) of ``kernel`` on an ``arch`` GPU for one call of
    query length ``seq``, with what was assumed to get them.

    Raises KeyError when neither the kernel nor any fallback has rows for the
    architecture or its fallbacks (an unfused-attention device: Volta)."""
    t = table()
    notes: list[str] = []
    k, a = kernel, arch
    while True:
        dims = sorted({hd for (kk, aa, cc, hd) in t if kk == k and aa == a and cc == causal})
        if dims:
            break
        if not any(aa == a for (_, aa, _, _) in t) and a in ARCH_FALLBACK:
            notes.append(f"no attention-kernel measurements on {a}: the {ARCH_FALLBACK[a]} "
                         "fractions of peak used")
            a = ARCH_FALLBACK[a]
            continue
        lower = KERNEL_FALLBACK.get(k)
        if lower is None:
            raise KeyError(f"no measured attention kernel for {kernel} on {arch}")
        notes.append(f"{k} has no measured rows on {a}: priced as {lower}")
        k = lower
    if head_dim in dims:
        fwd, bwd = _pass_pair(t[(k, a, causal, head_dim)], seq)
    elif head_dim < dims[0] or head_dim > dims[-1]:
        near = dims[0] if head_dim < dims[0] else dims[-1]
        notes.append(f"head dim {head_dim} outside the measured {dims}: {near} used")
        fwd, bwd = _pass_pair(t[(k, a, causal, near)], seq)
    else:
        lo = max(d for d in dims if d < head_dim)
        hi = min(d for d in dims if d > head_dim)
        w = (head_dim - lo) / (hi - lo)
        f0, b0 = _pass_pair(t[(k, a, causal, lo)], seq)
        f1, b1 = _pass_pair(t[(k, a, causal, hi)], seq)
        fwd, bwd = (1 - w) * f0 + w * f1, (1 - w) * b0 + w * b1
        notes.append(f"head dim {head_dim} interpolated between the measured {lo} and {hi}")
    return Lookup(k, a, fwd, bwd, tuple(notes))


#: A device architecture without fused attention kernels: FlashAttention needs
#: Ampere or later (flash-attention README: "Ampere, Ada, or Hopper GPUs";
#: FlashAttention-1 also Turing), Transformer Engine falls back to unfused
#: attention on Volta.
NO_FUSED_ATTENTION = frozenset({"volta"})
#: A device whose architecture is not known (a spec's own device) is priced
#: with the Ampere rows (the oldest generation with fused kernels measured).
UNKNOWN_ARCH = "ampere"
#: The kernels a runtime may name (``Runtime.attention_kernel``); ``auto``
#: derives it from the runtime's flags and the device (:func:`kernel_for`).
RUNTIME_KERNELS = ("auto",) + KERNELS


def kernel_for(attention_kernel: str, flash_attention: bool, flash_v2: bool,
               hopper_native: bool, arch: str) -> str | None:
    """The fused kernel a runtime runs on an ``arch`` GPU, None for unfused
    attention (batched GEMMs, priced as GEMMs by the compute model).

    ``auto``: no fused attention -> None; a FlashAttention-1-class kernel
    (``flash_v2_attention`` off: FlashAttention-1 CUDA or the pre-MLIR Triton
    kernel) -> ``flash_attention_1``; a Hopper-native stack on a Hopper or
    Blackwell GPU -> ``cudnn`` (Transformer Engine prefers cuDNN fused attention
    on sm90+, ``get_attention_backend``; PyTorch SDPA puts cuDNN first on sm90
    and sm100 with cuDNN > 9.15, ``sdp_utils.cpp`` ``check_prefer_cudnn_attention``,
    pytorch/pytorch @ 001f694a); otherwise ``flash_attention_2`` (FlashAttention-2,
    and SDPA's flash backend, which is FlashAttention-2). A named kernel is
    taken as named. A Volta GPU has no fused kernel: None."""
    if not flash_attention or arch in NO_FUSED_ATTENTION:
        return None
    if attention_kernel != "auto":
        return attention_kernel
    if not flash_v2:
        return "flash_attention_1"
    if hopper_native and arch in ("hopper", "blackwell"):
        return "cudnn"
    return "flash_attention_2"


def runtime_kernel(runtime, arch: str) -> str | None:
    """:func:`kernel_for` of a :class:`~autopar_opt.ir.runtime.Runtime` on an ``arch`` GPU:
    the one reading of its flags that compute, the assumptions and a spec's attention rule
    share."""
    return kernel_for(runtime.attention_kernel, runtime.flash_attention,
                      runtime.flash_v2_attention, runtime.hopper_attention, arch)
