"""HBM traffic of the FP8 casts around each GEMM of FP8 training.

An FP8 GEMM reads FP8 operands that a separate memory-bound kernel writes:
Transformer Engine (the FP8 path of Megatron-Core, NeMo and llm-foundry)
quantizes each GEMM input and each output gradient before its GEMMs run and
keeps a transposed copy for the other GEMM that reads it (Hopper's FP8 tensor
cores take only the "TN" layout, so the weight-gradient GEMM needs the
transposes: TE ``cast_transpose``, ``transformer_engine/common/transpose/
cast_transpose.cu``; Micikevicius et al. 2022, "FP8 formats for deep
learning", Sec. 4). The GEMM efficiency (``fp8_efficiency``, measured for the
GEMM alone) excludes these kernels; this module prices them as HBM bytes per
device for one micro-batch, at the copy bandwidth measured on an H200
(:data:`COPY_BANDWIDTH_FRACTION`).

Per GEMM of a block, in bytes per element of the tensor cast:

* **Norm-fed inputs** (QKV and the first MLP GEMM: TE ``LayerNormLinear``):
  the fused norm kernel writes its output in FP8 directly (``layernorm_fwd_fp8``,
  ``rmsnorm_fwd_fp8``: no extra pass), and the weight gradient needs its
  transpose (``fp8_transpose``: read 1, write 1) of the whole gathered input a
  tensor-parallel rank multiplies (``ln_out_total``, gathered under sequence
  parallelism): **2 B** per element of ``act_gemm_input_replicated_bytes``,
  not divided by ``tp``.
* **Other inputs** (the output projection's, the second MLP GEMM's, experts'
  dispatched tokens: TE ``Linear``/``GroupedLinear``): ``cast_transpose`` reads
  the 16-bit input and writes its FP8 cast and transpose: **2 + 1 + 1 = 4 B**
  per element, local to a rank (split by ``tp``).
* **Output gradients** (every GEMM's ``grad_output``): ``cast_transpose`` again,
  **4 B** per element, in the backward pass; the column-parallel GEMMs' local
  (split by ``tp``), the row-parallel GEMMs' whole (TE gathers a
  sequence-parallel ``grad_output`` before casting it:
  ``grad_output_preprocess``).

The amax reductions are fused into these kernels (TE computes the amax while
casting). Not priced: the weights' casts (Megatron-Core passes
``is_first_microbatch``, so TE casts each weight once per iteration and
caches it: 4 B per parameter per iteration, against the optimizer's 36) and the
per-iteration scaling-factor update. A layer whose builder states no GEMM
input or output sizes (a user's layer list, a vision model's linear layers)
takes its ``input_bytes`` as a TE ``Linear`` input and its ``output_bytes``
as the output gradient, both split by ``tp``. Expert GEMMs take their mean load.
"""

from __future__ import annotations

from autopar_opt.cost.state import FP8_KINDS
from autopar_opt.ir.graph import Layer
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training

#: HBM bandwidth a copy kernel reaches, as a fraction of the datasheet's: a 16384 x 4096
#: 16-bit tensor copied on one H200 SXM (700 W), 4,072 GB/s of 4,800
#: (``benchmarks/kernels/h200_results.json``, ``elementwise`` op ``copy``, CUDA-event
#: timing of back-to-back calls). TE's cast and transpose kernels read and write
#: like a copy (one read, one or two writes per element); taken for every GPU.
COPY_BANDWIDTH_FRACTION = 4072.3869529761846 / 4800.0

#: Bytes per element moved by each cast (module docstring).
NORM_INPUT_BYTES, INPUT_BYTES, GRAD_OUTPUT_BYTES = 2.0, 4.0, 4.0


def applies(layer: Layer, training: Training) -> bool:
    """Whether the layer's GEMMs run in FP8 (FP8 training, a GEMM kind that
    Transformer Engine replaces: :data:`~autopar_opt.cost.state.FP8_KINDS`)."""
    return training.dtype == "fp8" and layer.kind in FP8_KINDS


def cast_bytes(layer: Layer, s: Strategy, samples: float) -> tuple[float, float]:
    """(forward, backward) HBM bytes of the FP8 casts of one device for
    ``samples`` samples of ``layer`` (the micro-batch's share of one device,
    already divided by ``dp`` and ``cp``) under tensor parallelism ``s.tp``.

    The layer's byte counts are 16-bit (2 B per element), so an element's
    ``k`` bytes are ``k/2`` times them (module docstring)."""
    tp = max(s.tp, 1)
    if layer.act_gemm_input_bytes > 0 or layer.gemm_output_bytes > 0:
        in_norm = layer.act_gemm_input_replicated_bytes
        in_local = layer.act_gemm_input_bytes - in_norm
        out_whole = layer.gemm_output_replicated_bytes
        out_local = layer.gemm_output_bytes - out_whole
    else:
        in_norm, in_local = 0.0, layer.input_bytes
        out_whole, out_local = 0.0, layer.output_bytes
    fwd = NORM_INPUT_BYTES / 2 * in_norm + INPUT_BYTES / 2 * in_local / tp
    bwd = GRAD_OUTPUT_BYTES / 2 * (out_local / tp + out_whole)
    return fwd * samples, bwd * samples


def cast_time(layer: Layer, s: Strategy, samples: float, training: Training,
              hbm_gb_per_s: float) -> tuple[float, float]:
    """(forward, backward) seconds of the FP8 casts (:func:`cast_bytes`) at the
    measured copy bandwidth (:data:`COPY_BANDWIDTH_FRACTION` of the datasheet's);
    (0, 0) where the layer does not run FP8 GEMMs (:func:`applies`)."""
    if not applies(layer, training):
        return 0.0, 0.0
    fwd, bwd = cast_bytes(layer, s, samples)
    bw = hbm_gb_per_s * 1e9 * COPY_BANDWIDTH_FRACTION
    return fwd / bw, bwd / bw
