"""Achieved GEMM (bf16, FP8) and attention-kernel efficiency on one GPU.

Measures what the cost model's physical parameters stand for
(``autopar_opt.cost.params.CostParams``):

* ``gemm_efficiency`` / ``fp8_gemm_efficiency``: achieved fraction of the
  dense datasheet peak of large transformer GEMMs (``torch.matmul`` in bf16,
  ``torch._scaled_mm`` with per-tensor scales in FP8 e4m3, the kernel
  Transformer Engine's delayed/current scaling calls);
* ``efficiency_half_us``: how fast efficiency falls for small GEMMs (time at
  peak where half of the large-GEMM efficiency is reached);
* ``attention_efficiency``: causal FlashAttention forward+backward
  (``scaled_dot_product_attention``, flash/cuDNN backend) relative to the
  large-GEMM efficiency;
* ``hbm_efficiency``: a fused Adam-like streaming update (read/write fp32).

Run on the device: ``python3 benchmarks/kernels/h100_kernels.py OUT.json``.
Output: one JSON with every measurement and the device name; the recorded
run is ``benchmarks/kernels/h100_results.json`` with ``RESULTS.md``.
"""

from __future__ import annotations

import json
import sys
import time

import torch
import torch.nn.functional as F

PEAK_BF16 = 989e12   # H100 SXM5 dense bf16 (NVIDIA H100 datasheet)
PEAK_FP8 = 1979e12   # H100 SXM5 dense FP8


def bench(fn, warmup: int = 5, iters: int = 20) -> float:
    """Median seconds of ``fn()`` over ``iters`` CUDA-event timed calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    times.sort()
    return times[len(times) // 2]


def gemm_bf16(m: int, n: int, k: int) -> dict:
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    t = bench(lambda: x @ w)
    fl = 2.0 * m * n * k
    return {"m": m, "n": n, "k": k, "s": t, "tflops": fl / t / 1e12, "eff": fl / t / PEAK_BF16,
            "t_at_peak_us": fl / PEAK_BF16 * 1e6}


def gemm_fp8(m: int, n: int, k: int) -> dict | None:
    if not hasattr(torch, "_scaled_mm"):
        return None
    x = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()   # column-major B
    one = torch.tensor(1.0, device="cuda")
    f = lambda: torch._scaled_mm(x, w, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    try:
        f()
    except Exception as exc:   # noqa: BLE001 - report, do not crash the batch
        return {"m": m, "n": n, "k": k, "error": str(exc)[:200]}
    t = bench(f)
    fl = 2.0 * m * n * k
    return {"m": m, "n": n, "k": k, "s": t, "tflops": fl / t / 1e12, "eff": fl / t / PEAK_FP8,
            "t_at_peak_us": fl / PEAK_FP8 * 1e6}


def attention(b: int, heads: int, seq: int, dim: int = 128) -> dict:
    """Causal attention fwd+bwd; FLOPs counted as FlashAttention-2 does for
    causal masks: 4·b·h·s²·d forward · 1/2 (causal) and 2.5x that backward."""
    q, k, v = (torch.randn(b, heads, seq, dim, device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    g = torch.randn_like(out)

    def fwd():
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def fwd_bwd():
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        torch.autograd.grad(o, (q, k, v), g)

    tf = bench(fwd)
    tfb = bench(fwd_bwd, iters=10)
    f_fwd = 4.0 * b * heads * seq * seq * dim / 2
    f_all = f_fwd * 3.5
    return {"b": b, "heads": heads, "seq": seq, "dim": dim, "fwd_s": tf, "fwd_bwd_s": tfb,
            "fwd_eff": f_fwd / tf / PEAK_BF16, "fwd_bwd_eff": f_all / tfb / PEAK_BF16}


def hbm_stream(n: int = 1 << 28) -> dict:
    """Adam-like update: read p, g, m, v (fp32), write p, m, v: 28 bytes/elem."""
    p, g, m, v = (torch.randn(n, device="cuda") for _ in range(4))
    def step():
        torch._foreach_mul_([m], 0.9)
        m.add_(g, alpha=0.1)
        v.mul_(0.999).addcmul_(g, g, value=0.001)
        p.addcdiv_(m, v.sqrt().add_(1e-8), value=-1e-3)
    t = bench(step)
    bytes_moved = n * 4 * 12   # unfused: each op reads/writes its operands (approx.)
    fused = None
    try:
        params = [p]
        opt = torch.optim.Adam(params, lr=1e-3, fused=True)
        p.grad = g
        tf = bench(opt.step)
        fused = {"s": tf, "bytes_per_param_16": n * 16 / tf / 1e9}
    except Exception as exc:   # noqa: BLE001
        fused = {"error": str(exc)[:200]}
    copy = torch.empty_like(p)
    tc = bench(lambda: copy.copy_(p))
    return {"n": n, "copy_gb_per_s": 2 * n * 4 / tc / 1e9, "unfused_adam_s": t,
            "unfused_gb_per_s": bytes_moved / t / 1e9, "fused_adam": fused}


def main(out: str) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "peak_bf16": PEAK_BF16, "peak_fp8": PEAK_FP8, "started": time.time()}
    shapes = []
    for tokens in (2048, 8192, 16384):                 # b·s per GPU per micro-batch
        for h, ffn in ((4096, 14336), (8192, 28672), (16384, 53248)):
            shapes += [(tokens, 3 * h, h), (tokens, h, h), (tokens, ffn, h), (tokens, h, ffn)]
    for tp in (2, 4, 8):                               # TP-split Llama-70B shapes
        shapes += [(8192, 28672 // tp, 8192), (8192, 8192, 28672 // tp)]
    small = [(256, 1024, 1024), (512, 2048, 2048), (1024, 4096, 1024), (2048, 4096, 4096),
             (4096, 4096, 4096), (1024, 1024, 1024), (128, 4096, 4096)]
    res["gemm_bf16"] = [gemm_bf16(*s) for s in shapes + small]
    res["gemm_fp8"] = [gemm_fp8(*s) for s in shapes + small]
    res["attention"] = [attention(b, hd, s) for b, hd, s in
                        ((4, 32, 2048), (2, 32, 4096), (1, 32, 8192), (1, 64, 8192), (1, 16, 32768),
                         (8, 16, 2048), (1, 8, 65536))]
    res["hbm"] = hbm_stream()
    res["finished"] = time.time()
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)
    for key in ("gemm_bf16", "gemm_fp8"):
        for r in res[key]:
            if r and "eff" in r:
                print(key, r["m"], r["n"], r["k"], f"{r['tflops']:.0f} TFLOP/s eff {r['eff']:.3f}")
    for r in res["attention"]:
        print("attn", r["b"], r["heads"], r["seq"], f"fwd {r['fwd_eff']:.3f} fwd+bwd {r['fwd_bwd_eff']:.3f}")
    print("hbm", res["hbm"])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "h100_results.json")
