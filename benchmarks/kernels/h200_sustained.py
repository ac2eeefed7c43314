"""Sustained GEMM throughput and clocks on one GPU, and PyTorch's FlashAttention implementations.

The cost model's fitted large-GEMM efficiency for training on H100-die GPUs (0.683 of the
dense peak) sits below what an isolated GEMM reaches (0.7-0.8, ``h200_kernels.py``). One
candidate cause a single GPU can show is the clock under sustained load: at the 700 W limit
the SM clock may drop below its 1,980 MHz maximum once the GPU heats. This runs back-to-back
bf16 GEMMs (8192^3) and FP8 GEMMs for a fixed time each, and records achieved TFLOP/s per
second-long window with the SM clock, power draw and temperature nvidia-smi reports beside
it. It also lists ``torch.nn.attention.list_flash_attention_impls()`` and tries to activate
each (FlashAttention-3 where PyTorch ships it).

Run on the device: ``python3 benchmarks/kernels/h200_sustained.py OUT.json [SECONDS]``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import torch

from h200_kernels import PEAK_BF16, PEAK_FP8, cuda_seconds   # this script's folder is on sys.path


def smi() -> dict:
    q = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,"
                        "clocks_throttle_reasons.active", "--format=csv,noheader,nounits"],
                       capture_output=True, text=True, timeout=10).stdout.strip().split(", ")
    keys = ("sm_mhz", "mem_mhz", "power_w", "temp_c", "throttle")
    return {k: (v if k == "throttle" else float(v)) for k, v in zip(keys, q)}


def windows(fn, flops: float, peak: float, seconds: float) -> list[dict]:
    """~1 s windows of back-to-back calls: achieved TFLOP/s, efficiency, clocks."""
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    n = max(5, int(10 / (time.perf_counter() - t)))       # calls per ~1 s
    rows, t0 = [], time.time()
    while time.time() - t0 < seconds:
        dt = cuda_seconds(fn, n)
        r = {"t_s": round(time.time() - t0, 2), "tflops": flops * n / dt / 1e12, "eff": flops * n / dt / peak}
        r.update(smi())
        rows.append(r)
        print(r, flush=True)
    return rows


def main() -> None:
    out = sys.argv[1]
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 40
    res = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "idle": smi()}
    import torch.nn.attention as tna
    try:
        impls = list(tna.list_flash_attention_impls())
    except Exception as exc:  # noqa: BLE001
        impls = [f"error: {exc}"]
    res["flash_attention_impls"] = impls
    res["activate"] = {}
    for name in impls:
        try:
            tna.activate_flash_attention_impl(name)
            res["activate"][str(name)] = "activated"
            tna.restore_flash_attention_impl()
        except Exception as exc:  # noqa: BLE001
            res["activate"][str(name)] = f"{type(exc).__name__}: {str(exc)[:200]}"
    print(res, flush=True)
    m = 8192
    x = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    res["bf16_8192"] = windows(lambda: x @ w, 2.0 * m ** 3, PEAK_BF16, secs)
    xf = x.to(torch.float8_e4m3fn)
    wf = w.to(torch.float8_e4m3fn)
    one = torch.tensor(1.0, device="cuda")
    res["fp8_8192"] = windows(lambda: torch._scaled_mm(xf, wf.t(), scale_a=one, scale_b=one,
                                                         out_dtype=torch.bfloat16), 2.0 * m ** 3, PEAK_FP8, secs / 2)
    res["after"] = smi()
    json.dump(res, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
