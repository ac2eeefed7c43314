"""Kernel and training-step microbenchmarks on one Hopper GPU (issue 28, device check).

What the cost model assumes and a single GPU can measure, in one bounded run:

1. ``env``: the software (PyTorch, CUDA, cuDNN), the GPU, its clocks and power limit, and
   which attention kernels are importable (FlashAttention-2/3 packages, PyTorch's SDPA
   backends).
2. ``attention``: ``F.scaled_dot_product_attention`` per SDPA backend (cuDNN fused attention,
   PyTorch's FlashAttention-2 kernel, memory-efficient attention), causal and not, head dim
   64 and 128, sequence length 512-131,072, forward and forward+backward, in the
   FlashAttention benchmark's convention (batch = 16k / s, hidden 2048, so heads = 2048 / d;
   FLOPs forward 4·b·s²·h·d, halved with a causal mask, forward+backward 3.5x). Plus
   ``attention_fill``: the cuDNN kernel with 1-64 heads of one sequence, the per-call work a
   tensor-parallel rank runs (the published curves keep 16k tokens x 2048 hidden per call).
3. ``gemm``: the GEMMs the zoo's transformers produce (``model_zoo/models/*.yaml``: QKV,
   attention projection, MLP in and out, logits; dense models at tensor-parallel degree
   1-8 and 2k-16k tokens per micro-batch; MoE experts at 128-8k tokens per expert), each in
   the three layouts a linear layer runs (forward ``x·Wᵀ``, data gradient ``dy·W``, weight
   gradient ``dyᵀ·x``), bf16, and FP8 e4m3 (``torch._scaled_mm``, forward layout). Each
   figure: back-to-back calls between two CUDA events (training's queued kernels), the
   operands rotated over enough copies that they do not stay in the 50-60 MB L2.
4. ``elementwise``: copy, residual add, RMSNorm, LayerNorm, SwiGLU, GeLU, the vocabulary
   cross-entropy: time, and bandwidth over the bytes each must move at least.
5. ``memory``: device memory outside PyTorch's allocator (CUDA context, cuBLAS/cuDNN
   workspaces) after each library has run (``cudaMemGetInfo`` minus PyTorch's reserved).
6. ``step``: a Llama-3-8B-shaped model cut to 4 blocks (h 4096, 32 heads, 8 KV heads,
   SwiGLU 14336, vocabulary 128,256), fp32 parameters, bf16 autocast, fused AdamW, 4
   micro-batches of 1 x 4096 tokens: each part of an iteration timed alone and the whole
   iteration, so the host work per iteration is what the whole leaves over the parts; the
   caching allocator's reserved-over-allocated peak.

Run on the device: ``python3 benchmarks/kernels/h200_kernels.py OUT.json`` (``--dry`` runs
every section on the CPU at toy sizes, to check the script without a GPU). Sections run in
the order above inside a deadline (``--deadline`` seconds, default 420); the JSON is
rewritten after each section, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import time

import torch
import torch.nn.functional as F
import yaml

PEAK_BF16 = 989e12   # H100/H200 SXM dense bf16 (NVIDIA H100 and H200 datasheets)
PEAK_FP8 = 1979e12   # dense FP8 e4m3
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DRY = False
DEV = "cuda"
T0 = time.time()
DEADLINE = 420.0


def left() -> float:
    return DEADLINE - (time.time() - T0)


def sync() -> None:
    if DEV == "cuda":
        torch.cuda.synchronize()


def cuda_seconds(fn, n: int) -> float:
    """Seconds of ``n`` back-to-back calls of ``fn`` between two CUDA events."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1e-3


def timed(fn, target_s: float = 0.15, reps: int = 3, max_calls: int = 200) -> float:
    """Seconds per call of ``fn``: after warm-up, ``n`` back-to-back calls between two
    events (n sized so a repeat lasts ~target_s), median of ``reps`` repeats."""
    fn()
    sync()
    t = time.perf_counter()
    fn()
    sync()
    one = max(time.perf_counter() - t, 1e-6)
    n = int(min(max_calls, max(1, target_s / one)))
    out = []
    for _ in range(reps if one < 1.0 else 2):
        if DEV == "cuda":
            out.append(cuda_seconds(fn, n) / n)
        else:
            t = time.perf_counter()
            for _ in range(n):
                fn()
            out.append((time.perf_counter() - t) / n)
    out.sort()
    return out[len(out) // 2]


def save(res: dict, path: str) -> None:
    res["elapsed_s"] = round(time.time() - T0, 1)
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(res, fh, indent=1)
    os.replace(tmp, path)


# ---------------------------------------------------------------- 1. environment
def env() -> dict:
    info = {"torch": torch.__version__, "python": platform.python_version(), "dry": DRY}
    if DEV == "cuda":
        p = torch.cuda.get_device_properties(0)
        info.update(device=torch.cuda.get_device_name(), sm_count=p.multi_processor_count,
                    total_gib=p.total_memory / 2**30, cuda=torch.version.cuda,
                    cudnn=torch.backends.cudnn.version(), capability=list(torch.cuda.get_device_capability()))
        try:
            q = subprocess.run(["nvidia-smi", "--query-gpu=name,power.limit,power.max_limit,clocks.max.sm,"
                                "clocks.max.mem,driver_version,memory.total", "--format=csv"],
                               capture_output=True, text=True, timeout=20)
            info["nvidia_smi"] = q.stdout.strip()
        except Exception as exc:  # noqa: BLE001 - record, go on
            info["nvidia_smi"] = f"error: {exc}"
    mods = {}
    for name in ("flash_attn", "flash_attn_interface", "flash_attn_3", "transformer_engine", "xformers"):
        try:
            m = __import__(name)
            mods[name] = getattr(m, "__version__", "imported")
        except Exception as exc:  # noqa: BLE001
            mods[name] = f"not importable: {type(exc).__name__}"
    info["attention_packages"] = mods
    import torch.nn.attention as tna
    info["torch_nn_attention"] = sorted(n for n in dir(tna) if not n.startswith("_"))
    return info


# ---------------------------------------------------------------- 2. attention
def _backends():
    from torch.nn.attention import SDPBackend
    if DRY:
        return [("math", SDPBackend.MATH)]
    return [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
            ("efficient", SDPBackend.EFFICIENT_ATTENTION)]


def attn_point(backend, b: int, h: int, s: int, d: int, causal: bool) -> dict:
    from torch.nn.attention import sdpa_kernel
    dt = torch.bfloat16 if DEV == "cuda" else torch.float32
    row = {"b": b, "heads": h, "seq": s, "head_dim": d, "causal": causal}
    try:
        q, k, v = (torch.randn(b, h, s, d, device=DEV, dtype=dt, requires_grad=True) for _ in range(3))
        g = torch.randn(b, h, s, d, device=DEV, dtype=dt)
        with sdpa_kernel([backend]):
            def fwd():
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            def fwd_bwd():
                o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                torch.autograd.grad(o, (q, k, v), g)
            tf = timed(fwd, target_s=0.08)
            tfb = timed(fwd_bwd, target_s=0.08)
    except Exception as exc:  # noqa: BLE001 - an unsupported backend/shape is a result
        row["error"] = f"{type(exc).__name__}: {str(exc)[:160]}"
        return row
    finally:
        if DEV == "cuda":
            torch.cuda.empty_cache()
    flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
    row.update(fwd_s=tf, fwd_bwd_s=tfb, fwd_tflops=flops / tf / 1e12,
               fwd_bwd_tflops=3.5 * flops / tfb / 1e12,
               bwd_tflops=2.5 * flops / max(tfb - tf, 1e-9) / 1e12)
    return row


def attention(res: dict, path: str) -> None:
    seqs = [128, 256] if DRY else [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
    hidden, tokens = (64, 512) if DRY else (2048, 16384)
    res["attention"] = rows = []
    for s in seqs:                       # all lengths of one kind before the next, so a cut keeps a sweep
        for d in ((16, 32) if DRY else (128, 64)):
            for causal in (True, False):
                for name, be in _backends():
                    if left() < 150:       # keep time for the later sections
                        res["attention_cut"] = f"stopped before s={s} d={d}"
                        return
                    r = attn_point(be, max(1, tokens // s), hidden // d, s, d, causal)
                    r["backend"] = name
                    rows.append(r)
                    print("attn", name, s, d, causal, {k: round(v, 1) for k, v in r.items()
                                                       if k.endswith("tflops")} or r.get("error"), flush=True)
        save(res, path)
    res["attention_fill"] = fill = []
    for s in ((128,) if DRY else (4096, 16384)):
        for h in ((1, 2) if DRY else (1, 2, 4, 8, 16, 32, 64)):
            if left() < 120:
                return
            r = attn_point(_backends()[0][1], 1, h, s, 32 if DRY else 128, True)
            r["backend"] = _backends()[0][0]
            fill.append(r)
            print("fill", s, h, r.get("fwd_bwd_tflops"), flush=True)
    save(res, path)


# ---------------------------------------------------------------- 3. GEMMs
def zoo_shapes() -> list[dict]:
    """(m, n, k) of every linear layer of the zoo's transformer models (forward layout
    ``y[m,n] = x[m,k]·W[n,k]ᵀ``), by model, tensor-parallel degree and tokens."""
    out = []
    dense = {"gpt-1.7b": ((1, 2), (2048, 8192)), "llama3-8b": ((1, 2, 4, 8), (4096, 16384)),
             "llama3-70b": ((2, 4, 8), (4096, 8192)), "gpt3-175b": ((4, 8), (2048, 8192)),
             "llama3-405b": ((8,), (4096, 8192))}
    # MoE experts (hidden, expert FFN) as the zoo's descriptions state them (their dims point
    # at Hugging Face configs): Mixtral-8x7B 4096/14336, DeepSeek-V3 7168/2048, Qwen3-235B 4096/1536
    moe = {"mixtral-8x7b": (4096, 14336, (512, 2048, 8192)), "deepseek-v3": (7168, 2048, (128, 512, 2048, 8192)),
           "qwen3-235b-a22b": (4096, 1536, (128, 512, 2048))}
    for name, (tps, toks) in dense.items():
        dims = yaml.safe_load(open(os.path.join(ROOT, "model_zoo", "models", f"{name}.yaml")))["dims"]
        h, heads, ffn, vocab = dims["hidden"], dims["heads"], dims["ffn_hidden"], dims["vocab"]
        kv = dims.get("kv_heads", heads)
        hd = dims.get("head_dim", h // heads)
        gated = "llama" in name
        for tp in tps:
            for m in toks:
                for gemm, n, k in (("qkv", (heads + 2 * kv) * hd // tp, h), ("proj", h, heads * hd // tp),
                                   ("fc1", (2 if gated else 1) * ffn // tp, h), ("fc2", h, ffn // tp),
                                   ("logits", -(-vocab // tp), h)):
                    out.append({"model": name, "tp": tp, "tokens": m, "gemm": gemm, "m": m, "n": n, "k": k})
    for name, (h, ffn, toks) in moe.items():
        for m in toks:
            out.append({"model": name, "tp": 1, "tokens": m, "gemm": "expert_fc1", "m": m, "n": 2 * ffn, "k": h})
            out.append({"model": name, "tp": 1, "tokens": m, "gemm": "expert_fc2", "m": m, "n": h, "k": ffn})
    return out


def _rotating(nbytes: int) -> int:
    return int(min(8, max(1, math.ceil(256e6 / max(nbytes, 1)))))


def gemm_point(sh: dict, fp8: bool) -> list[dict]:
    m, n, k = sh["m"], sh["n"], sh["k"]
    if DRY:
        m, n, k = max(16, m // 64), max(16, n // 64), max(16, k // 64)
    dt = torch.bfloat16 if DEV == "cuda" else torch.float32
    rows = []
    nb = _rotating(2 * (m * k + n * k + m * n))
    if fp8:
        if DEV != "cuda" or m % 16 or n % 16 or k % 16:
            return [dict(sh, layout="fwd", dtype="fp8", error="needs CUDA and dims divisible by 16")]
        xs = [torch.randn(m, k, device=DEV).to(torch.float8_e4m3fn) for _ in range(nb)]
        ws = [torch.randn(n, k, device=DEV).to(torch.float8_e4m3fn) for _ in range(nb)]
        one = torch.tensor(1.0, device=DEV)
        it = iter(range(10**9))

        def f():
            i = next(it) % nb
            return torch._scaled_mm(xs[i], ws[i].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        layouts = {"fwd": f}
    else:
        xs = [torch.randn(m, k, device=DEV, dtype=dt) for _ in range(nb)]
        ws = [torch.randn(n, k, device=DEV, dtype=dt) for _ in range(nb)]
        dys = [torch.randn(m, n, device=DEV, dtype=dt) for _ in range(nb)]
        c = [0]

        def nxt():
            c[0] += 1
            return c[0] % nb
        layouts = {"fwd": lambda: F.linear(xs[nxt()], ws[c[0] % nb]),
                   "dgrad": lambda: dys[nxt()] @ ws[c[0] % nb],
                   "wgrad": lambda: dys[nxt()].t() @ xs[c[0] % nb]}
    for layout, fn in layouts.items():
        try:
            t = timed(fn, target_s=0.02, max_calls=500)
        except Exception as exc:  # noqa: BLE001
            rows.append(dict(sh, layout=layout, dtype="fp8" if fp8 else "bf16", error=str(exc)[:160]))
            continue
        fl = 2.0 * m * n * k
        peak = PEAK_FP8 if fp8 else PEAK_BF16
        rows.append(dict(sh, layout=layout, dtype="fp8" if fp8 else "bf16", s=t, tflops=fl / t / 1e12,
                         eff=fl / t / peak, t_at_peak_us=fl / peak * 1e6, operand_copies=nb))
    layouts = None                       # drops the closures and with them the operands
    if DEV == "cuda":
        torch.cuda.empty_cache()
    return rows


def gemms(res: dict, path: str) -> None:
    shapes = zoo_shapes()
    res["gemm_shapes"] = len(shapes)
    res["gemm"] = rows = []
    for fp8 in (False, True):
        for sh in shapes:
            if left() < 75:
                res["gemm_cut"] = f"stopped at {sh} fp8={fp8}"
                save(res, path)
                return
            rows.extend(gemm_point(sh, fp8))
        save(res, path)
        print("gemm rows", len(rows), "at", round(time.time() - T0), "s", flush=True)


# ---------------------------------------------------------------- 4. element-wise
def elementwise(res: dict, path: str) -> None:
    dt = torch.bfloat16 if DEV == "cuda" else torch.float32
    T, h, ffn, V = (256, 64, 224, 1000) if DRY else (16384, 4096, 14336, 128256)
    e = torch.tensor([], dtype=dt).element_size()
    x = torch.randn(T, h, device=DEV, dtype=dt, requires_grad=True)
    y = torch.randn(T, h, device=DEV, dtype=dt)
    w = torch.ones(h, device=DEV, dtype=dt, requires_grad=True)
    gx = torch.randn(T, h, device=DEV, dtype=dt)
    a = torch.randn(T, ffn, device=DEV, dtype=dt, requires_grad=True)
    bb = torch.randn(T, ffn, device=DEV, dtype=dt, requires_grad=True)
    ga = torch.randn(T, ffn, device=DEV, dtype=dt)
    logits = torch.randn(T // 4, V, device=DEV, dtype=dt, requires_grad=True)
    tgt = torch.randint(0, V, (T // 4,), device=DEV)
    out = torch.empty_like(y)

    def fb(f, inputs, grad):
        def run():
            o = f()
            torch.autograd.grad(o, inputs, grad)
        return run
    cases = {
        # name: (function, minimum bytes moved)
        "copy": (lambda: out.copy_(y), 2 * T * h * e),
        "residual_add": (lambda: torch.add(y, gx, out=out), 3 * T * h * e),
        "rms_norm_fwd": (lambda: F.rms_norm(x.detach(), (h,), w.detach()), 2 * T * h * e),
        "rms_norm_fwd_bwd": (fb(lambda: F.rms_norm(x, (h,), w), (x, w), gx), 5 * T * h * e),
        "layer_norm_fwd_bwd": (fb(lambda: F.layer_norm(x, (h,), w), (x, w), gx), 5 * T * h * e),
        "swiglu_fwd": (lambda: F.silu(a.detach()) * bb.detach(), 3 * T * ffn * e),
        "swiglu_fwd_bwd": (fb(lambda: F.silu(a) * bb, (a, bb), ga), 8 * T * ffn * e),
        "gelu_fwd_bwd": (fb(lambda: F.gelu(a, approximate="tanh"), (a,), ga), 5 * T * ffn * e),
        "cross_entropy_fwd_bwd": (fb(lambda: F.cross_entropy(logits, tgt), (logits,), torch.tensor(1.0, device=DEV)),
                                  2 * (T // 4) * V * e),
    }
    res["elementwise"] = rows = []
    for name, (fn, nbytes) in cases.items():
        if left() < 50:
            break
        try:
            t = timed(fn)
            rows.append({"op": name, "s": t, "min_bytes": nbytes, "gb_per_s": nbytes / t / 1e9,
                         "shape": [T, ffn if "lu" in name else V if "entropy" in name else h]})
        except Exception as exc:  # noqa: BLE001
            rows.append({"op": name, "error": str(exc)[:160]})
        print("elementwise", rows[-1], flush=True)
    # fused Adam on 2^28 fp32 parameters: 28 bytes each (read p, m, v, g; write p, m, v... g bf16 in
    # mixed precision; here g fp32 -> 32 bytes)
    n = 1 << (16 if DRY else 28)
    p = torch.zeros(n, device=DEV, requires_grad=True)
    p.grad = torch.randn(n, device=DEV)
    try:
        opt = torch.optim.AdamW([p], lr=1e-4, fused=DEV == "cuda")
        t = timed(opt.step)
        rows.append({"op": "fused_adamw_fp32", "s": t, "params": n, "min_bytes": 32 * n,
                     "gb_per_s": 32 * n / t / 1e9})
    except Exception as exc:  # noqa: BLE001
        rows.append({"op": "fused_adamw_fp32", "error": str(exc)[:160]})
    save(res, path)


# ---------------------------------------------------------------- 5. memory outside PyTorch
def outside_torch() -> dict:
    if DEV != "cuda":
        return {}
    free, total = torch.cuda.mem_get_info()
    return {"used_gib": (total - free) / 2**30, "torch_reserved_gib": torch.cuda.memory_reserved() / 2**30,
            "outside_torch_gib": (total - free - torch.cuda.memory_reserved()) / 2**30}


# ---------------------------------------------------------------- 6. a training step
class Block(torch.nn.Module):
    def __init__(self, h: int, heads: int, kv: int, ffn: int):
        super().__init__()
        self.h, self.heads, self.kv, self.hd = h, heads, kv, h // heads
        self.n1 = torch.nn.RMSNorm(h)
        self.qkv = torch.nn.Linear(h, (heads + 2 * kv) * self.hd, bias=False)
        self.proj = torch.nn.Linear(h, h, bias=False)
        self.n2 = torch.nn.RMSNorm(h)
        self.fc1 = torch.nn.Linear(h, 2 * ffn, bias=False)
        self.fc2 = torch.nn.Linear(ffn, h, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.n1(x)).split([self.heads * self.hd, self.kv * self.hd, self.kv * self.hd], -1)
        q = q.view(b, s, self.heads, self.hd).transpose(1, 2)
        k = k.view(b, s, self.kv, self.hd).transpose(1, 2)
        v = v.view(b, s, self.kv, self.hd).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.proj(o.transpose(1, 2).reshape(b, s, self.h))
        a, g = self.fc1(self.n2(x)).chunk(2, -1)
        return x + self.fc2(F.silu(a) * g)


class Model(torch.nn.Module):
    def __init__(self, layers: int, h: int, heads: int, kv: int, ffn: int, vocab: int):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, h)
        self.blocks = torch.nn.ModuleList(Block(h, heads, kv, ffn) for _ in range(layers))
        self.norm = torch.nn.RMSNorm(h)
        self.out = torch.nn.Linear(h, vocab, bias=False)

    def forward(self, tokens, targets):
        x = self.emb(tokens)
        for blk in self.blocks:
            x = blk(x)
        logits = self.out(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def step(res: dict, path: str) -> None:
    cfg = (dict(layers=2, h=64, heads=4, kv=2, ffn=128, vocab=1000), 128) if DRY else \
          (dict(layers=4, h=4096, heads=32, kv=8, ffn=14336, vocab=128256), 4096)
    dims, seq = cfg
    mb = 4
    res["memory"] = {"after_init": outside_torch()}
    torch.manual_seed(0)
    model = Model(**dims).to(DEV)
    params = [p for p in model.parameters()]
    nparam = sum(p.numel() for p in params)
    opt = torch.optim.AdamW(params, lr=1e-5, fused=DEV == "cuda")
    toks = [torch.randint(0, dims["vocab"], (1, seq), device=DEV) for _ in range(mb)]
    ac = torch.autocast(DEV, dtype=torch.bfloat16)

    def micro(i: int):
        with ac:
            loss = model(toks[i], toks[(i + 1) % mb]) / mb
        loss.backward()
        return loss

    def iteration():
        opt.zero_grad(set_to_none=True)
        tot = 0.0
        for i in range(mb):
            tot = tot + micro(i).detach()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return float(tot)              # the loss read on the host each iteration, as trainers log it

    for _ in range(2):
        iteration()
    sync()
    res["memory"]["after_step"] = outside_torch()
    if DEV == "cuda":
        torch.cuda.reset_peak_memory_stats()
    iteration()
    sync()
    r = {"dims": dims, "seq": seq, "micro_batches": mb, "params": nparam}
    if DEV == "cuda":
        r["peak_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
        r["peak_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30
        r["reserved_over_allocated"] = r["peak_reserved_gib"] / r["peak_allocated_gib"] - 1
    # parts alone (grads kept between micro-batches, as in the iteration)
    opt.zero_grad(set_to_none=False)
    r["micro_batch_s"] = timed(lambda: micro(0), target_s=0.5)
    r["clip_s"] = timed(lambda: torch.nn.utils.clip_grad_norm_(params, 1.0), target_s=0.2)
    r["optimizer_s"] = timed(opt.step, target_s=0.2)
    r["zero_grad_s"] = timed(lambda: opt.zero_grad(set_to_none=False), target_s=0.05)
    walls = []
    for _ in range(5):
        sync()
        t = time.perf_counter()
        iteration()
        sync()
        walls.append(time.perf_counter() - t)
    walls.sort()
    r["iteration_s"] = walls[2]
    r["iteration_all_s"] = walls
    r["parts_s"] = mb * r["micro_batch_s"] + r["clip_s"] + r["optimizer_s"]
    r["leftover_s"] = r["iteration_s"] - r["parts_s"]
    res["step"] = r
    print("step", {k: v for k, v in r.items() if k != "dims"}, flush=True)
    save(res, path)


def main() -> None:
    global DRY, DEV, DEADLINE
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--dry", action="store_true", help="toy sizes on the CPU (checks the script)")
    ap.add_argument("--deadline", type=float, default=420.0, help="seconds for the whole run")
    args = ap.parse_args()
    DRY, DEADLINE = args.dry, args.deadline
    DEV = "cpu" if DRY else "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    res = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "peak_bf16": PEAK_BF16,
           "peak_fp8": PEAK_FP8}
    res["env"] = env()
    res["memory_first"] = outside_torch()
    save(res, args.out)
    for section in (attention, gemms, elementwise):
        section(res, args.out)
    res["memory_libraries"] = outside_torch()   # cuBLAS/cuDNN workspaces now created
    step(res, args.out)
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    save(res, args.out)
    print("done in", round(time.time() - T0, 1), "s", flush=True)


if __name__ == "__main__":
    main()
