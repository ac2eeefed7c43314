"""Sliding-window (local) causal attention: the share of the causal core it computes.

A layer with a window of ``w`` tokens lets the query at position ``i`` attend to
the ``w`` keys ``i-w+1 .. i``, itself included. Every stack states it that way:

* Hugging Face ``sliding_window`` (``transformers`` ``masking_utils``:
  ``sliding_window_overlay`` keeps ``kv_idx > q_idx - sliding_window`` on top of
  the causal mask), read from Mistral's, Mixtral's, Qwen2's and Qwen3's configs;
* FlashAttention-2 (>= 2.3) and Transformer Engine / Megatron-Core
  ``window_size=(w - 1, 0)`` (TE ``dot_product_attention/utils.py``, self-attention:
  the query at position ``i`` attends to the keys ``[i - window_size[0], i +
  window_size[1]]`` inclusive);
* torchtitan's ``get_sliding_window_mask_mod`` with FlexAttention, which its
  gpt-oss model builds with ``window_size=(sliding_window_size - 1, 0)``.

Over ``s`` tokens such a layer computes ``E(s, w) = w·s - w(w-1)/2`` query-key
pairs when ``w <= s`` (row ``i`` has ``min(i+1, w)``), the causal ``s(s+1)/2``
when ``w >= s``. The graph counts its attention core as a fraction
:func:`window_share` of the causal core's FLOPs, so model FLOPs, MFU and the
fused kernels' time follow the work done; an unfused core (two batched GEMMs
and a softmax over the whole ``s x s`` score matrix, the window only masking
it) still computes all of it (:mod:`autopar_opt.cost.compute`).
"""

from __future__ import annotations

from collections import Counter


def causal_pairs(seq_len: float, window: int = 0) -> float:
    """Query-key pairs a causal core over ``seq_len`` tokens computes with a
    window of ``window`` keys per query (0: no window): ``w·s - w(w-1)/2``,
    or ``s(s+1)/2`` once the window covers the sequence."""
    s = float(seq_len)
    if window <= 0 or window >= s:
        return s * (s + 1.0) / 2.0
    w = float(window)
    return w * s - w * (w - 1.0) / 2.0


def window_share(seq_len: float, window: int) -> float:
    """Share of the causal core's pairs a window of ``window`` keys keeps over
    ``seq_len`` tokens: ``E(s, w) / E(s, s)``; 1 without a window or when it
    covers the sequence."""
    if window <= 0 or seq_len <= 0 or window >= seq_len:
        return 1.0
    return causal_pairs(seq_len, window) / causal_pairs(seq_len)


def window_counts(windows: list[int]) -> dict[int, int]:
    """Attention layers per window size, smallest first, of ``windows`` (one entry per
    attention layer, 0: full attention, not counted)."""
    return dict(sorted(Counter(w for w in windows if w).items()))


def windows_text(windows: list[int]) -> str:
    """``windows`` (one entry per attention layer, 0: full attention) in words, e.g.
    ``sliding-window attention of 4,096 keys per query on 32 of 32 attention
    layers``; empty when no layer has a window."""
    found = window_counts(windows)
    if not found:
        return ""
    parts = [f"{w:,} keys per query on {n} of {len(windows)}" for w, n in found.items()]
    return "sliding-window attention of " + "; ".join(parts) + " attention layers"
