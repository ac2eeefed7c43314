"""Add the project's own H200 attention measurements to ``autopar_opt/cost/data/attention_kernels.yaml``.

Source ``own_h200_sdpa``: ``benchmarks/kernels/h200_kernels.py`` on one H200 (2026-11-29,
``h200_results.json`` ``attention``): ``F.scaled_dot_product_attention`` with each SDPA backend
forced (``sdpa_kernel``): cuDNN fused attention (kernel ``cudnn``), PyTorch's FlashAttention-2
kernel (``flash_attention_2``) and the memory-efficient kernel (``sdpa_memory_efficient``, which
the model never chooses: kept for the record), causal and not, head dim 64 and 128, 512-131,072
tokens, forward and backward rows (the backward timed as forward+backward minus forward, so
that it averages with the published backward rows at the same point). The H200 is the
GH100 die of the H100 SXM at the same 700 W and dense peak (its faster HBM does not bound these
compute-bound kernels), so its rows count as Hopper rows beside the H100 ones.

Idempotent: the source and its rows are replaced, the rest of the file is kept byte for byte.
Also writes ``autopar_opt/cost/data/attention_fill.yaml`` from ``h200_results.json``'s
``attention_fill`` and ``h200_fill.json`` (one sequence, 1-64 heads per call, per kernel,
mask and head dim: :func:`autopar_opt.cost.attention.fill_factor`).

Usage: ``python benchmarks/kernels/attention_rows.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
TABLE = HERE.parents[1] / "autopar_opt" / "cost" / "data" / "attention_kernels.yaml"
SOURCE = "own_h200_sdpa"
KERNEL = {"cudnn": "cudnn", "flash": "flash_attention_2", "efficient": "sdpa_memory_efficient"}
SOURCE_TEXT = f"""  {SOURCE}:
    citation: this project's own measurement, benchmarks/kernels/h200_kernels.py attention(), raw results
      benchmarks/kernels/h200_results.json 'attention' (2026-11-29; benchmarks/kernels/H200.md)
    file: benchmarks/kernels/h200_results.json
    setup: 'one H200 141GB HBM3e SXM (700 W power limit), PyTorch 2.11 + CUDA 13.0, cuDNN 9.19,
      F.scaled_dot_product_attention with one backend forced by sdpa_kernel (CUDNN_ATTENTION -> cudnn,
      FLASH_ATTENTION -> flash_attention_2, EFFICIENT_ATTENTION -> sdpa_memory_efficient), bf16, the
      FlashAttention benchmark sizes (batch = 16k / seqlen, at least 1; hidden 2048: heads = 2048 / head dim);
      back-to-back calls between two CUDA events, median of 3; the H200 is the GH100 die of the H100 SXM at
      the same dense peak and power limit'
    gpu: H200-SXM-141GB
    peak_tflops: 989.0
"""


def rows_text(results: dict) -> str:
    out = []
    for i, r in enumerate(results["attention"]):
        if "error" in r:
            continue
        for pass_, key in (("fwd", "fwd_tflops"), ("bwd", "bwd_tflops")):
            out.append(f"""- source: {SOURCE}
  kernel: {KERNEL[r['backend']]}
  pass: {pass_}
  causal: {str(r['causal']).lower()}
  head_dim: {r['head_dim']}
  seq_len: {r['seq']}
  batch: {r['b']}
  heads: {r['heads']}
  tflops: {r[key]:.1f}
  locator: h200_results.json attention[{i}] (backend {r['backend']}, {key})
""")
    return "".join(out)


def without_source(text: str) -> str:
    """``text`` with the source's entry and rows removed (a no-op when absent)."""
    head, rows = text.split("\nrows:\n", 1)
    if f"\n  {SOURCE}:\n" in head:
        a = head.index(f"\n  {SOURCE}:\n")         # the block as main() writes it:
        b = a + len(SOURCE_TEXT)                      # a newline, then SOURCE_TEXT less its last
        head = head[:a] + head[b:]
    kept = [c for c in ("\n" + rows).split("\n- ")[1:] if not c.startswith(f"source: {SOURCE}\n")]
    return head + "\nrows:\n" + "".join("- " + c + ("" if c.endswith("\n") else "\n") for c in kept)


FILL = HERE.parents[1] / "autopar_opt" / "cost" / "data" / "attention_fill.yaml"
FILL_HEAD = """description: How full one attention call keeps the GPU. F.scaled_dot_product_attention with one
  backend forced (cuDNN fused attention -> kernel cudnn, PyTorch's FlashAttention-2 kernel ->
  flash_attention_2), bf16, forward+backward TFLOP/s (FlashAttention convention, attention_kernels.yaml
  flop_convention) of ONE sequence with 1-64 heads per call, causal and not, head dim 64 and 128, at 2k-16k
  tokens. The published curves (attention_kernels.yaml) keep 16k tokens x 2,048 hidden per call (batch x
  heads = 16384/seqlen x 2048/head_dim); a tensor-parallel rank runs heads/tp heads of its micro-batch per
  call, fewer at high tp. Read by autopar_opt.cost.attention.fill_factor. Written by
  benchmarks/kernels/attention_rows.py; a point measured twice is averaged by the reader.
source: 'this project''s own measurements on one H200 (the GH100 die of the H100 SXM, 700 W), 2026-11-29:
  benchmarks/kernels/h200_kernels.py (h200_results.json attention_fill: cuDNN, causal, head dim 128, 4k and
  16k) and benchmarks/kernels/h200_fill.py (h200_fill.json: both kernels, both masks, both head dims, 2k-16k);
  benchmarks/kernels/H200.md'
rows:
"""


def _fill_row(r: dict, locator: str) -> str:
    return (f"- {{kernel: {KERNEL[r['backend']]}, causal: {str(r['causal']).lower()}, head_dim: "
            f"{r['head_dim']}, seq_len: {r['seq']}, batch: {r['b']}, heads: {r['heads']}, "
            f"tflops: {r['fwd_bwd_tflops']:.1f}, locator: '{locator}'}}\n")


def fill_text(results: dict, sweep: dict) -> str:
    rows = [_fill_row(r, f"h200_results.json attention_fill[{i}]")
            for i, r in enumerate(results["attention_fill"]) if "error" not in r]
    rows += [_fill_row(r, f"h200_fill.json rows[{i}]")
             for i, r in enumerate(sweep["rows"]) if "error" not in r]
    return FILL_HEAD + "".join(rows)


def main() -> None:
    results = json.loads((HERE / "h200_results.json").read_text())
    FILL.write_text(fill_text(results, json.loads((HERE / "h200_fill.json").read_text())))
    text = without_source(TABLE.read_text())
    head, rows = text.split("\nrows:\n", 1)
    TABLE.write_text(head + "\n" + SOURCE_TEXT.rstrip("\n") + "\nrows:\n" + rows + rows_text(results))
    print(f"{TABLE}: {TABLE.read_text().count('source: ' + SOURCE)} rows of {SOURCE}")


if __name__ == "__main__":
    main()
