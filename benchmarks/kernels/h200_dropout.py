"""What attention dropout and the FP8 casts cost on the GPU (device run).

Two questions the cost model prices without a measurement:

1. **Attention dropout in a fused kernel.** Megatron-LM's default ``--attention-dropout
   0.1`` runs inside the fused attention kernel (cuDNN fused attention under Transformer
   Engine, FlashAttention-2), which then draws a random number per score element; the
   published kernel tables (``autopar_opt/cost/data/attention_kernels.yaml``) are all
   without dropout. Each SDPA backend is timed forward and forward+backward with
   ``dropout_p`` 0 and 0.1, causal and not, head dim 64 and 128, 2k-16k tokens, calls of
   16,384 tokens x 2,048 hidden (the FlashAttention benchmark's convention).
2. **The FP8 cast and transpose kernels** (``autopar_opt/cost/fp8_casts.py`` prices them
   as copies at the measured copy bandwidth): PyTorch's own cast to ``float8_e4m3fn``
   (read 2 B, write 1 B), the FP8 transpose (read 1, write 1), the amax reduction (read
   2) and a 16-bit copy, at the zoo's activation shapes. Transformer Engine's fused
   ``cast_transpose`` is not installable on the device; these are its unfused parts.

Run on the device: ``python3 benchmarks/kernels/h200_dropout.py OUT.json`` (``--dry`` on a
CPU runs a few tiny points through the math backend to check the script).
"""

from __future__ import annotations

import sys
import time

import torch
import torch.nn.functional as F

import h200_kernels as hk

SEQS = (2048, 4096, 8192, 16384)
REF_TOKENS, REF_HIDDEN = 16384, 2048


def attn_dropout_point(name: str, backend, s: int, d: int, causal: bool, p: float) -> dict:
    """One forward and forward+backward timing of SDPA with ``dropout_p = p``."""
    from torch.nn.attention import sdpa_kernel
    b, h = (1, 2) if hk.DRY else (max(REF_TOKENS // s, 1), REF_HIDDEN // d)
    dt = torch.bfloat16 if hk.DEV == "cuda" else torch.float32
    row = {"backend": name, "b": b, "heads": h, "seq": s, "head_dim": d, "causal": causal,
           "dropout_p": p}
    try:
        q, k, v = (torch.randn(b, h, s, d, device=hk.DEV, dtype=dt, requires_grad=True)
                   for _ in range(3))
        g = torch.randn(b, h, s, d, device=hk.DEV, dtype=dt)
        with sdpa_kernel([backend]):
            def fwd():
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=p)

            def fwd_bwd():
                o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=p)
                torch.autograd.grad(o, (q, k, v), g)
            tf = hk.timed(fwd, target_s=0.06)
            tfb = hk.timed(fwd_bwd, target_s=0.06)
    except Exception as exc:  # noqa: BLE001 - an unsupported backend/option is a result
        row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        return row
    finally:
        if hk.DEV == "cuda":
            torch.cuda.empty_cache()
    flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
    row.update(fwd_s=tf, fwd_bwd_s=tfb, fwd_tflops=flops / tf / 1e12,
               fwd_bwd_tflops=3.5 * flops / tfb / 1e12)
    return row


def casts(res: dict) -> None:
    """PyTorch's unfused pieces of an FP8 cast_transpose at activation shapes."""
    shapes = [(64, 64)] if hk.DRY else [(16384, 4096), (16384, 14336), (8192, 8192)]
    fp8 = getattr(torch, "float8_e4m3fn", None)
    rows = []
    for m, n in shapes:
        x = torch.randn(m, n, device=hk.DEV, dtype=torch.bfloat16)
        y = x.to(fp8) if fp8 is not None else x
        e = m * n
        ops = {"copy_bf16": (lambda: x.clone(), 4 * e),
               "cast_bf16_to_fp8": (lambda: x.to(fp8), 3 * e),
               "scale_cast_bf16_to_fp8": (lambda: (x * 0.5).to(fp8), 7 * e),
               "transpose_fp8": (lambda: y.t().contiguous(), 2 * e),
               "amax_bf16": (lambda: x.abs().amax(), 2 * e)}
        for op, (fn, nbytes) in ops.items():
            try:
                t = hk.timed(fn, target_s=0.05)
                rows.append({"op": op, "shape": [m, n], "s": t, "min_bytes": nbytes,
                             "gb_per_s": nbytes / t / 1e9})
            except Exception as exc:  # noqa: BLE001
                rows.append({"op": op, "shape": [m, n], "error": f"{type(exc).__name__}: {exc}"[:200]})
            print(rows[-1], flush=True)
    res["casts"] = rows


def main() -> None:
    hk.DRY = "--dry" in sys.argv
    hk.DEV = "cpu" if hk.DRY else "cuda"
    hk.DEADLINE = 60.0 if hk.DRY else 150.0
    out = [a for a in sys.argv[1:] if not a.startswith("--")][0]
    res = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "env": hk.env(),
           "attention_dropout": []}
    casts(res)
    hk.save(res, out)
    backends = hk._backends()
    seqs = (128,) if hk.DRY else SEQS
    for d in (128, 64):
        for causal in (True, False):
            for s in seqs:
                for name, be in backends:
                    for p in (0.0, 0.1):
                        if hk.left() < 10:
                            res["cut"] = f"stopped at d={d} causal={causal} s={s} {name} p={p}"
                            hk.save(res, out)
                            return
                        r = attn_dropout_point(name, be, s, d, causal, p)
                        res["attention_dropout"].append(r)
                        print(name, d, causal, s, p, round(r.get("fwd_bwd_tflops", -1), 1),
                              r.get("error", ""), flush=True)
                hk.save(res, out)
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    hk.save(res, out)


if __name__ == "__main__":
    main()
