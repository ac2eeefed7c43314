"""Bytes an unfused attention core keeps per score, by the runtime's softmax.

An unfused core (no fused/flash kernel: runtime ``flash_attention`` off) keeps
``a·s²`` scores per layer and sample for the backward pass. How many bytes each
costs depends on the code that runs the softmax, a runtime fact
(:attr:`autopar_opt.ir.runtime.Runtime.fp32_attention_softmax`, its sources in
:mod:`autopar_opt.ir.runtime`), and on the attention dropout:

* 16-bit softmax kept once (Megatron's ``FusedScaleMaskSoftmax``; a plain softmax
  on a 16-bit model): the softmax output, 2 bytes, which its backward and the
  ``softmax·V`` GEMM share; with dropout also the dropout's mask (1) and its
  output (2), which the GEMM keeps instead: 5 (Korthikanti et al. 2022, Sec. 4.1).
* fp32 softmax (Hugging Face ``eager_attention_forward``: ``softmax(...,
  dtype=torch.float32).to(query.dtype)``; any PyTorch softmax under
  ``torch.autocast``): the softmax's backward keeps its fp32 output (4) and the
  GEMM the 16-bit cast (2): 6; with dropout the cast feeds the dropout, which keeps
  its mask (1) and the GEMM its output (2): 7.

The builders count ``Layer.act_attn_bytes`` the first way
(:func:`autopar_opt.model_zoo.transformer.kept_per_score`, ``Layer.attn_dropout``
saying with or without dropout); :func:`score_bytes` rescales it for the runtime.
In fp32 training the softmax is fp32 without any cast: the builders' count (whose
elements are ``act_dtype_bytes`` wide) stands.
"""

from __future__ import annotations

from autopar_opt.ir.graph import COUNTED_SCORE_BYTES, Layer
from autopar_opt.ir.training import DTYPE_BYTES, Training

#: Bytes per score kept with a 16-bit softmax, (without, with) dropout: the builders' count.
SIXTEEN_BIT = tuple(float(b) for b in COUNTED_SCORE_BYTES)
#: Bytes per score kept with an fp32 softmax and its 16-bit cast, (without, with) dropout.
FP32 = (6.0, 7.0)


def fp32_softmax(training: Training) -> bool:
    """Whether an unfused core keeps an fp32 softmax: the runtime says so
    (``fp32_attention_softmax``) or ``torch.autocast`` runs it (``training.autocast``),
    in 16-bit (or FP8) training."""
    sixteen_bit = DTYPE_BYTES.get(training.dtype, 4) < 4
    return sixteen_bit and (training.runtime.fp32_attention_softmax or training.autocast)


def per_score(training: Training, dropout: bool) -> float:
    """Bytes kept per score of an unfused core (module docstring)."""
    return (FP32 if fp32_softmax(training) else SIXTEEN_BIT)[1 if dropout else 0]


def score_bytes(layer: Layer, training: Training | None) -> float:
    """``layer.act_attn_bytes`` as the runtime of ``training`` keeps them: rescaled
    from the builders' 16-bit count by :func:`per_score`; as stated where the layer
    does not say how it was counted (``attn_dropout`` None) or no training is given."""
    if training is None or layer.attn_dropout is None or layer.act_attn_bytes <= 0:
        return layer.act_attn_bytes
    dropout = layer.attn_dropout
    return layer.act_attn_bytes * per_score(training, dropout) / SIXTEEN_BIT[1 if dropout else 0]


def score_rule(training: Training) -> str:
    """The rule, as the plan's assumptions say it."""
    if fp32_softmax(training):
        why = ("torch.autocast runs the softmax in fp32" if training.autocast
               and not training.runtime.fp32_attention_softmax else
               f"runtime {training.runtime.name}: fp32_attention_softmax, as Hugging Face's "
               "eager_attention_forward")
        return (f"unfused attention keeps an fp32 softmax and its 16-bit cast: 6 bytes per "
                f"score, 7 with attention dropout ({why}; runtime_options: "
                "{fp32_attention_softmax: false} for a 16-bit softmax)")
    return ("unfused attention keeps one 16-bit softmax output: 2 bytes per score, 5 with "
            "attention dropout (Megatron's fused softmax; runtime_options: "
            "{fp32_attention_softmax: true} for Hugging Face's eager fp32 softmax)")
