"""Readers of the encoder and vision families: BERT, T5 v1.0 and ViT (the zoo's
encoder, encoder-decoder and ViT builders with each config's extra tables)."""

from __future__ import annotations

from dataclasses import replace

from autopar_opt.ir.graph import LayerGraph
from autopar_opt.model_zoo.encoders import build_encoder_decoder, build_encoder_lm
from autopar_opt.model_zoo.hf_keys import Cfg, HfConfigError
from autopar_opt.model_zoo.hf_parts import heads_divide, position_rows
from autopar_opt.model_zoo.vision import build_vit

def read_bert(c: Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """BERT: the zoo's encoder plus the token-type table and embedding LayerNorm
    (in ``embed``) and the pooler and masked-LM transform (in ``head``)."""
    heads_divide(c, "hidden_size", "num_attention_heads")
    h = c("hidden_size")
    dims = dict(seq_len=s, hidden=h, heads=c("num_attention_heads"),
                ffn_hidden=c("intermediate_size"), vocab=c("vocab_size"),
                num_layers=c("num_hidden_layers"), flash_attention=opts["flash_attention"])
    g = build_encoder_lm(name, dims, source)
    v, positions = c("vocab_size"), position_rows(c, s, "max_position_embeddings")
    embed_params = v * h + positions * h + c("type_vocab_size", 2) * h + 2 * h
    extra_head = (h * h + h) + (h * h + h + 2 * h) + v   # pooler, MLM transform, decoder bias
    layers = [replace(layer, params=embed_params) if layer.name == "embed" else
              replace(layer, params=layer.params + extra_head) if layer.name == "head" else layer
              for layer in g.layers]
    return LayerGraph.chain(name, layers, seq_len=s, source=source, causal=False)


def read_t5(c: Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """T5 (v1.0, ReLU MLP): the zoo's encoder-decoder DAG."""
    proj = c("feed_forward_proj", "relu")
    if proj != "relu":
        raise HfConfigError(f"{c.origin}: feed_forward_proj={proj!r} (gated T5 v1.1) is not "
                            "supported; only 'relu' (T5 v1.0) is (fix: use a T5 v1.0 config)")
    h, heads, d_kv = c("d_model"), c("num_heads"), c("d_kv", 64)
    if not isinstance(d_kv, int) or isinstance(d_kv, bool) or heads * d_kv != h:
        # T5Attention's q, k, v, o are d_model x (num_heads · d_kv) (inner_dim); the zoo's
        # blocks make every head d_model / num_heads wide. QA round 11: t5-3b (32 heads of
        # 128 over d_model 1024) was built with 1.95 B parameters instead of its 2.85 B,
        # t5-11b with 6.8 B instead of 11.3 B, without a word.
        raise HfConfigError(f"{c.origin}: d_kv = {d_kv!r} with num_heads = {heads}: the "
                            f"attention's inner width num_heads x d_kv differs from d_model = "
                            f"{h} (T5-3B and T5-11B widen it), which the encoder-decoder blocks "
                            "do not model (every head d_model / num_heads wide) (fix: use a T5 "
                            "size with num_heads x d_kv = d_model (t5-small, -base, -large), or "
                            "describe the model as an explicit layer list)")
    n = c("num_layers")
    dims = dict(seq_len=s, hidden=h, heads=heads, ffn_hidden=c("d_ff"),
                vocab=c("vocab_size"), encoder_layers=n,
                decoder_layers=c("num_decoder_layers", n) or n,
                relative_attention_num_buckets=c("relative_attention_num_buckets", 32),
                flash_attention=opts["flash_attention"])
    return build_encoder_decoder(name, dims, source)


def read_vit(c: Cfg, name: str, s: int | None, opts: dict, source: str) -> LayerGraph:
    """ViT for image classification (``num_labels`` from ``id2label``, else 1000)."""
    heads_divide(c, "hidden_size", "num_attention_heads")
    labels = len(c("id2label", {}) or {}) or 1000
    dims = dict(num_layers=c("num_hidden_layers"), image_size=c("image_size"),
                patch_size=c("patch_size"), hidden=c("hidden_size"),
                heads=c("num_attention_heads"), ffn_hidden=c("intermediate_size"),
                num_classes=labels, flash_attention=opts["flash_attention"])
    return build_vit(name, dims, source)
