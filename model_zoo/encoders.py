"""Encoder-only (BERT) and encoder-decoder (T5) transformer builders.

Per-sample costs come from :func:`autopar_opt.model_zoo.transformer.transformer_block`
(FLOPs: Narayanan et al. 2021 Sec. 5.1; activations: Korthikanti et al. 2022
Eq. 1; tensor-parallel traffic: Shoeybi et al. 2019 Fig. 4).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from autopar_opt.ir.graph import Layer, LayerGraph
from autopar_opt.model_zoo.transformer import embedding, lm_head, transformer_block


def build_encoder_lm(name: str, dims: dict[str, Any], source: str) -> LayerGraph:
    """BERT-style encoder (bidirectional attention, 4h GELU MLP) as a chain.

    Embedding (token + learned positions; the 2-row token-type table is
    ignored), ``num_layers`` blocks, and a tied masked-LM head (``2·s·h·V``
    FLOPs; the head's extra ``h×h`` transform, 0.3% of BERT-Huge's parameters,
    is not modelled). Devlin et al. 2019, Sec. 3.
    """
    s, h, a, f, v = (dims[k] for k in ("seq_len", "hidden", "heads", "ffn_hidden", "vocab"))
    layers = [embedding("embed", s, h, v, learned_positions=True)]
    layers += [transformer_block(f"block{i:03d}", s, h, a, f,
                                 flash_attention=dims.get("flash_attention", False), causal=False)
               for i in range(dims["num_layers"])]
    layers.append(lm_head("head", s, h, v, tied=True))
    return LayerGraph.chain(name, layers, seq_len=s, source=source, causal=False)


def build_encoder_decoder(name: str, dims: dict[str, Any], source: str) -> LayerGraph:
    """T5-style encoder-decoder as a DAG (Raffel et al. 2020, Sec. 3.1).

    Order: ``enc_embed``, ``enc000..``, ``dec_embed``, ``dec000..``, ``head``.
    Edges: the encoder chain, the decoder chain, and ``enc_last -> dec_i`` for
    every decoder layer ``i`` (the encoder's final output feeds every
    cross-attention). Encoder and decoder both use ``seq_len`` tokens. T5 has
    no biases and shares one embedding table between encoder, decoder and
    output layer: its parameters live in ``enc_embed``; ``dec_embed`` and
    ``head`` carry none; with ``pp > 1`` the head (last stage) holds its own
    copy tied to ``enc_embed`` (:attr:`autopar_opt.ir.graph.Layer.tied_params`;
    approximation: the decoder embedding's use of the table is not a tie,
    its stage is a decision).

    Norms (Hugging Face ``modeling_t5.py``): ``T5LayerNorm`` is RMS-style with a
    weight only ("No bias and no subtraction of mean"), one per sub-layer (self-
    attention, cross-attention, MLP) and a ``final_layer_norm`` per stack: the
    encoder's is counted in its last block (parameters only: its stored input is
    not counted), the decoder's in ``head``. The first block of each stack
    (``T5Block(config, has_relative_attention_bias=bool(i == 0))``) holds the
    ``relative_attention_num_buckets x heads`` relative position bias
    (``dims["relative_attention_num_buckets"]``, T5Config's default 32).
    """
    s, h, a, f, v = (dims[k] for k in ("seq_len", "hidden", "heads", "ffn_hidden", "vocab"))
    n_enc, n_dec = dims["encoder_layers"], dims["decoder_layers"]
    flash = dims.get("flash_attention", False)
    rel_bias = int(dims.get("relative_attention_num_buckets", 32)) * a
    enc = [embedding("enc_embed", s, h, v)]
    enc += [transformer_block(f"enc{i:03d}", s, h, a, f, flash_attention=flash, biases=False,
                              causal=False, layer_norm=False)
            for i in range(n_enc)]
    enc[1] = replace(enc[1], params=enc[1].params + rel_bias)
    enc[-1] = replace(enc[-1], params=enc[-1].params + h)        # the encoder's final norm
    dec_embed = embedding("dec_embed", s, h, v)
    dec = [_without_params(dec_embed)]
    dec += [transformer_block(f"dec{i:03d}", s, h, a, f, flash_attention=flash,
                              cross_attention_len=s, biases=False, layer_norm=False)
            for i in range(n_dec)]
    dec[1] = replace(dec[1], params=dec[1].params + rel_bias)
    dec.append(lm_head("head", s, h, v, tied=True, tied_to="enc_embed", layer_norm=False))
    chain = lambda ls: [(x.name, y.name) for x, y in zip(ls, ls[1:])]  # noqa: E731
    cross = [(enc[-1].name, d.name) for d in dec[1:-1]]
    return LayerGraph(name=name, layers=enc + dec, edges=chain(enc) + chain(dec) + cross,
                      seq_len=s, source=source)


def _without_params(layer: Layer) -> Layer:
    """A copy of ``layer`` that owns no parameters (a tied, shared table)."""
    return replace(layer, params=0)
