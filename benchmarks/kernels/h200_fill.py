"""How full one attention call keeps the GPU, per SDPA backend, head dim and mask (device run).

``h200_kernels.py`` measured the fill (speed by heads per call, one sequence) for cuDNN,
causal, head dim 128 at 4k and 16k tokens; the cost model took that curve for every kernel,
head dimension and mask (``autopar_opt.cost.attention.fill_factor``). This run measures the
same sweep for cuDNN and PyTorch's FlashAttention-2 kernel, causal and not, head dim 64 and
128, at 2k, 4k, 8k and 16k tokens (forward+backward, FlashAttention FLOP convention), so the
factor can be read per kernel, head dim and mask and checked between and outside the lengths.

Run on the device: ``python3 benchmarks/kernels/h200_fill.py OUT.json``.
"""

from __future__ import annotations

import json
import sys
import time

import h200_kernels as hk


def main() -> None:
    out = sys.argv[1]
    hk.DEV, hk.DRY, hk.DEADLINE = "cuda", False, 400.0
    from torch.nn.attention import SDPBackend
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
    res = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": []}
    for s in (4096, 16384, 2048, 8192):
        for name, be in backends.items():
            for d in (128, 64):
                for causal in (True, False):
                    for h in (1, 2, 4, 8, 16, 32, 64):
                        if hk.left() < 20:
                            res["cut"] = f"stopped at s={s} {name} d={d} causal={causal} h={h}"
                            json.dump(res, open(out, "w"), indent=1)
                            return
                        r = hk.attn_point(be, 1, h, s, d, causal)
                        r["backend"] = name
                        res["rows"].append(r)
                        print(name, s, d, causal, h, round(r.get("fwd_bwd_tflops", -1), 1), flush=True)
        json.dump(res, open(out, "w"), indent=1)
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    json.dump(res, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
