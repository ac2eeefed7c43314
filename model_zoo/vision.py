"""Vision transformer builders: ViT (Dosovitskiy et al. 2021) and Swin (Liu et al. 2021).

Token counts are fixed by the image: ``(image_size / patch_size)²`` patches
(+1 class token for ViT). Blocks reuse
:func:`autopar_opt.model_zoo.transformer.transformer_block` (Narayanan et al.
2021 FLOPs, Korthikanti et al. 2022 activations).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from autopar_opt.ir.graph import Layer, LayerGraph, LayerKind
from autopar_opt.model_zoo.transformer import lm_head, transformer_block


def _grid(model: str, image: int, patch: int) -> int:
    """Patches per side; ``ValueError`` when the patch does not tile the image."""
    if image % patch:
        raise ValueError(f"model {model!r}: image_size={image} must be a multiple of "
                         f"patch_size={patch} (fix: change one of them)")
    return image // patch


def patch_embed(name: str, tokens: int, patch: int, channels: int, hidden: int,
                extra_params: int = 0) -> Layer:
    """Patch embedding = a ``patch×patch`` stride-``patch`` conv, i.e. one GEMM.

    Forward FLOPs ``2·N·(3·p²)·h`` (``N`` patches); params ``3·p²·h + h``
    (+ position/class embeddings in ``extra_params``). Not tensor-parallel
    (``max_tp = 1``): it is <0.1% of a ViT-H's FLOPs.
    """
    fwd = 2.0 * tokens * channels * patch * patch * hidden
    out = 2.0 * tokens * hidden
    return Layer(name=name, kind=LayerKind.embedding, flops_fwd=fwd, flops_bwd=2 * fwd,
                 params=channels * patch * patch * hidden + hidden + extra_params,
                 act_bytes=out, act_replicated_bytes=out, input_bytes=2.0 * tokens * channels
                 * patch * patch, output_bytes=out, max_tp=1)


def build_vit(name: str, dims: dict[str, Any], source: str) -> LayerGraph:
    """ViT: patch embedding, ``num_layers`` blocks over ``N+1`` tokens, class head.

    Params ``3p²h + h`` (patch conv) ``+ (N+1)·h`` (positions) ``+ h`` (class
    token) ``+ L·(12h² + 13h) + 2h + h·C + C`` (Dosovitskiy et al. 2021, Eq. 1-4;
    the classifier's bias ``C``: Hugging Face ``ViTForImageClassification.classifier``
    is ``nn.Linear(hidden_size, num_labels)``, biased).
    The head reads the class token only: ``2·h·C`` FLOPs per sample.
    """
    h, a, f = dims["hidden"], dims["heads"], dims["ffn_hidden"]
    n = _grid(name, dims["image_size"], dims["patch_size"]) ** 2
    s = n + 1
    layers = [patch_embed("patch_embed", n, dims["patch_size"], 3, h, extra_params=(s + 1) * h)]
    layers += [transformer_block(f"block{i:03d}", s, h, a, f,
                                 flash_attention=dims.get("flash_attention", False), causal=False)
               for i in range(dims["num_layers"])]
    head = lm_head("head", 1, h, dims["num_classes"], tied=False)
    layers.append(replace(head, kind=LayerKind.linear, input_bytes=2.0 * s * h,
                          params=head.params + dims["num_classes"]))       # + the classifier bias
    side = dims["image_size"] // dims["patch_size"]
    fixed = (f"image_size {dims['image_size']} / patch_size {dims['patch_size']} "
             f"({side}x{side} patches + 1 class token)")
    return LayerGraph.chain(name, layers, seq_len=s, source=source, causal=False,
                            fixed_tokens=fixed)


def window_block(name: str, tokens: int, window: int, hidden: int, heads: int) -> Layer:
    """A Swin block: attention inside ``window×window`` windows, 4h MLP.

    Window attention is exactly ``tokens / window²`` independent sequences of
    ``window²`` tokens, and the linear layers are per-token, so every
    per-sample quantity of one window-sequence block is scaled by the window
    count (Liu et al. 2021, Eq. 2: ``Ω(W-MSA) = 4hwC² + 2M²hwC`` multiply-adds);
    parameters are not scaled, plus the relative position bias table
    ``(2M−1)²·heads``. Shifted windows only roll the map: no extra FLOPs.
    """
    m2 = window * window
    if tokens % m2:
        raise ValueError(f"Swin block {name!r}: {tokens} tokens are not a whole number of "
                         f"{window}x{window} windows (fix: change image_size or window)")
    one = transformer_block(name, m2, hidden, heads, 4 * hidden, causal=False)
    k = tokens // m2
    scaled = {f: getattr(one, f) * k for f in (
        "flops_fwd", "flops_bwd", "act_bytes", "act_replicated_bytes", "act_attn_bytes",
        "flops_recompute_selective", "input_bytes", "output_bytes", "tp_comm_bytes",
        "cp_comm_bytes")}
    return replace(one, params=one.params + (2 * window - 1) ** 2 * heads,
                   supports_cp=False, **scaled)


def patch_merging(name: str, tokens_in: int, channels: int) -> Layer:
    """Swin patch merging: concatenate 2×2 neighbours (4C), LayerNorm, linear 4C→2C.

    Forward FLOPs ``2·(N/4)·4C·2C = 4·N·C²``; params ``8C² + 8C`` (no bias,
    LayerNorm over 4C). Activations: the 4C concat, its norm and the 2C output
    (16-bit). Not tensor-parallel (``max_tp = 1``).
    """
    n_out = tokens_in // 4
    fwd = 2.0 * n_out * 4 * channels * 2 * channels
    out = 2.0 * n_out * 2 * channels
    act = 2.0 * (2 * n_out * 4 * channels) + out
    return Layer(name=name, kind=LayerKind.linear, flops_fwd=fwd, flops_bwd=2 * fwd,
                 params=8 * channels * channels + 8 * channels, act_bytes=act,
                 act_replicated_bytes=act, input_bytes=2.0 * tokens_in * channels,
                 output_bytes=out, max_tp=1)


def build_swin(name: str, dims: dict[str, Any], source: str) -> LayerGraph:
    """Swin: patch embedding, 4 stages of window blocks, patch merging between them.

    Stage ``j`` has ``depths[j]`` blocks at width ``embed_dim·2^j`` with
    ``heads[j]`` heads over ``(image/patch/2^j)²`` tokens (Liu et al. 2021,
    Sec. 3.1 / Fig. 3); the head is LayerNorm + average pool + linear to the
    classes. The layers are non-uniform (four widths, three merges).
    """
    depths, heads, window = dims["depths"], dims["heads"], dims["window"]
    if len(depths) != len(heads):
        raise ValueError(f"model {name!r}: depths {depths} and heads {heads} need one entry "
                         "per stage (fix: make the two lists the same length)")
    side = _grid(name, dims["image_size"], dims["patch_size"])
    c = dims["embed_dim"]
    layers = [patch_embed("patch_embed", side * side, dims["patch_size"], 3, c,
                          extra_params=2 * c)]  # + patch-embedding LayerNorm
    for j, (depth, a) in enumerate(zip(depths, heads)):
        if j:
            layers.append(patch_merging(f"merge{j}", side * side, c))
            side, c = side // 2, 2 * c
        layers += [window_block(f"s{j}b{i:02d}", side * side, min(window, side), c, a)
                   for i in range(depth)]
    layers.append(replace(lm_head("head", 1, c, dims["num_classes"], tied=False),
                          kind=LayerKind.linear, input_bytes=2.0 * side * side * c))
    fixed = (f"image_size {dims['image_size']} / patch_size {dims['patch_size']} and shrinks "
             "at every patch merging (window attention, no single sequence)")
    return LayerGraph.chain(name, layers, seq_len=None, source=source, causal=False,
                            fixed_tokens=fixed)
