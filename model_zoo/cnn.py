"""Inception-v3 as a layer-granularity DAG (Szegedy et al. 2016, "Rethinking
the Inception Architecture"; block structure of torchvision's
``torchvision/models/inception.py``, without the auxiliary classifier).

Every conv (conv + batch-norm + ReLU, torchvision's ``BasicConv2d``), pool and
concat is one node. Per-sample costs, 16-bit activations:

* conv forward FLOPs ``2·Cin·Cout·kh·kw·Hout·Wout``; backward 2× (data and
  weight gradients); params ``Cin·Cout·kh·kw + 2·Cout`` (BN scale and shift;
  the convs have no bias).
* pools: ``kh·kw·C·Hout·Wout`` forward operations, backward 1×; no params.
* activations kept for backward = the output feature map (approximation: a
  real conv+BN+ReLU keeps ~2-3 maps; concats keep nothing). A layer's saved
  input is its producer's output, counted once, by the producer. A max pool
  also keeps its int64 arg-max index: PyTorch's ``max_pool2d_with_indices``
  backward is ``max_pool2d_with_indices_backward(grad, self, ..., result1)``
  (``tools/autograd/derivatives.yaml``), so it saves ``self`` (the producer's
  output, already counted) and ``result1`` (the index, counted here). An
  average pool's ``avg_pool2d_backward(grad, self, ...)`` saves only ``self``
  (already counted), the global pool (``mean``) only sizes: both keep their
  output, as every layer does, for the consumer's backward.
* channel-parallel ("tensor-parallel") convs split output channels:
  ``max_tp`` = largest power of two dividing ``Cout``, capped at 8, and
  ``tp_comm_bytes`` = the output map (an all-gather of the output channels).
  This is an approximation of a channel-sharded CNN, not a Megatron layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autopar_opt.ir.graph import Layer, LayerGraph, LayerKind

ACT_BYTES = 2  # 16-bit activations
INDEX_BYTES = 8  # int64 arg-max index of a max pool (DilatedMaxPool2d.cu top_mask)


@dataclass(frozen=True)
class Tensor:
    """A feature map produced by node ``node``: ``c`` channels of ``h×w``."""

    node: str
    c: int
    h: int
    w: int

    @property
    def bytes(self) -> float:
        return float(ACT_BYTES * self.c * self.h * self.w)


def _out(size: int, k: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - k) // stride + 1


def _pow2_tp(c: int, cap: int = 8) -> int:
    tp = 1
    while tp < cap and c % (2 * tp) == 0:
        tp *= 2
    return tp


@dataclass
class CnnBuilder:
    """Accumulates layers and edges in creation (= topological) order."""

    model: str
    layers: list[Layer] = field(default_factory=list)
    edges: list[tuple[str, str]] = field(default_factory=list)

    def _add(self, layer: Layer, inputs: list[Tensor]) -> None:
        self.layers.append(layer)
        self.edges += [(t.node, layer.name) for t in inputs if t.node]

    def conv(self, name: str, x: Tensor, cout: int, k: tuple[int, int] | int,
             stride: int = 1, pad: tuple[int, int] | int = 0) -> Tensor:
        """Conv + BN + ReLU (torchvision ``BasicConv2d``)."""
        kh, kw = (k, k) if isinstance(k, int) else k
        ph, pw = (pad, pad) if isinstance(pad, int) else pad
        y = Tensor(name, cout, _out(x.h, kh, stride, ph), _out(x.w, kw, stride, pw))
        if y.h < 1 or y.w < 1:
            raise ValueError(f"model {self.model!r}: layer {name!r} gets a {x.h}x{x.w} input, "
                             f"too small for a {kh}x{kw} kernel (fix: use a larger image_size)")
        fwd = 2.0 * x.c * cout * kh * kw * y.h * y.w
        self._add(Layer(name=name, kind=LayerKind.conv, flops_fwd=fwd, flops_bwd=2 * fwd,
                        params=x.c * cout * kh * kw + 2 * cout, act_bytes=y.bytes,
                        input_bytes=x.bytes, output_bytes=y.bytes, tp_comm_bytes=y.bytes,
                        max_tp=_pow2_tp(cout)), [x])
        return y

    def pool(self, name: str, x: Tensor, k: int, stride: int, pad: int = 0, *,
             op: str) -> Tensor:
        """Max (``op="max"``) or average (``op="avg"``) pool. A max pool also
        writes and re-reads one int64 arg-max index per output element
        (``Layer.pool_index_bytes``, priced as traffic) and keeps it for the
        backward (in ``act_bytes``: ``max_pool2d_with_indices`` saves
        ``result1``, ``tools/autograd/derivatives.yaml``); its saved input
        ``self`` is the producer's output, already counted by the producer."""
        if op not in ("max", "avg"):
            raise ValueError(f"pool {name!r}: op must be 'max' or 'avg', not {op!r}")
        y = Tensor(name, x.c, _out(x.h, k, stride, pad), _out(x.w, k, stride, pad))
        if y.h < 1 or y.w < 1:
            raise ValueError(f"model {self.model!r}: pool {name!r} gets a {x.h}x{x.w} input "
                             "(fix: use a larger image_size)")
        ops = float(k * k * y.c * y.h * y.w)
        index = float(INDEX_BYTES * y.c * y.h * y.w) if op == "max" else 0.0
        self._add(Layer(name=name, kind=LayerKind.pool, flops_fwd=ops, flops_bwd=ops,
                        act_bytes=y.bytes + index, input_bytes=x.bytes,
                        output_bytes=y.bytes, pool_index_bytes=index), [x])
        return y

    def global_pool(self, name: str, x: Tensor) -> Tensor:
        """Adaptive average pool to 1×1 (``C·H·W`` additions)."""
        y = Tensor(name, x.c, 1, 1)
        ops = float(x.c * x.h * x.w)
        self._add(Layer(name=name, kind=LayerKind.pool, flops_fwd=ops, flops_bwd=ops,
                        act_bytes=y.bytes, input_bytes=x.bytes, output_bytes=y.bytes), [x])
        return y

    def linear(self, name: str, x: Tensor, classes: int) -> None:
        """Classifier ``C·H·W -> classes`` with bias; fp32 logits (``4·classes`` bytes)."""
        fwd = 2.0 * x.c * x.h * x.w * classes
        self._add(Layer(name=name, kind=LayerKind.linear, flops_fwd=fwd, flops_bwd=2 * fwd,
                        params=x.c * x.h * x.w * classes + classes, act_bytes=4.0 * classes,
                        input_bytes=x.bytes, output_bytes=4.0 * classes), [x])

    def concat(self, name: str, parts: list[Tensor]) -> Tensor:
        """Channel concatenation of same-size maps."""
        y = Tensor(name, sum(p.c for p in parts), parts[0].h, parts[0].w)
        self._add(Layer(name=name, kind=LayerKind.concat, input_bytes=y.bytes,
                        output_bytes=y.bytes), parts)
        return y


def _block_a(b: CnnBuilder, n: str, x: Tensor, pool_features: int) -> Tensor:
    b1 = b.conv(f"{n}.branch1x1", x, 64, 1)
    b5 = b.conv(f"{n}.branch5x5_2", b.conv(f"{n}.branch5x5_1", x, 48, 1), 64, 5, pad=2)
    d = b.conv(f"{n}.branch3x3dbl_1", x, 64, 1)
    d = b.conv(f"{n}.branch3x3dbl_2", d, 96, 3, pad=1)
    d = b.conv(f"{n}.branch3x3dbl_3", d, 96, 3, pad=1)
    p = b.conv(f"{n}.branch_pool", b.pool(f"{n}.avg_pool", x, 3, 1, 1, op="avg"),
               pool_features, 1)
    return b.concat(f"{n}.concat", [b1, b5, d, p])


def _block_b(b: CnnBuilder, n: str, x: Tensor) -> Tensor:
    b3 = b.conv(f"{n}.branch3x3", x, 384, 3, stride=2)
    d = b.conv(f"{n}.branch3x3dbl_1", x, 64, 1)
    d = b.conv(f"{n}.branch3x3dbl_2", d, 96, 3, pad=1)
    d = b.conv(f"{n}.branch3x3dbl_3", d, 96, 3, stride=2)
    return b.concat(f"{n}.concat", [b3, d, b.pool(f"{n}.max_pool", x, 3, 2, op="max")])


def _block_c(b: CnnBuilder, n: str, x: Tensor, c7: int) -> Tensor:
    b1 = b.conv(f"{n}.branch1x1", x, 192, 1)
    s = b.conv(f"{n}.branch7x7_1", x, c7, 1)
    s = b.conv(f"{n}.branch7x7_2", s, c7, (1, 7), pad=(0, 3))
    s = b.conv(f"{n}.branch7x7_3", s, 192, (7, 1), pad=(3, 0))
    d = b.conv(f"{n}.branch7x7dbl_1", x, c7, 1)
    for i, (k, pad, cout) in enumerate([((7, 1), (3, 0), c7), ((1, 7), (0, 3), c7),
                                        ((7, 1), (3, 0), c7), ((1, 7), (0, 3), 192)], start=2):
        d = b.conv(f"{n}.branch7x7dbl_{i}", d, cout, k, pad=pad)
    p = b.conv(f"{n}.branch_pool", b.pool(f"{n}.avg_pool", x, 3, 1, 1, op="avg"), 192, 1)
    return b.concat(f"{n}.concat", [b1, s, d, p])


def _block_d(b: CnnBuilder, n: str, x: Tensor) -> Tensor:
    b3 = b.conv(f"{n}.branch3x3_2", b.conv(f"{n}.branch3x3_1", x, 192, 1), 320, 3, stride=2)
    s = b.conv(f"{n}.branch7x7x3_1", x, 192, 1)
    s = b.conv(f"{n}.branch7x7x3_2", s, 192, (1, 7), pad=(0, 3))
    s = b.conv(f"{n}.branch7x7x3_3", s, 192, (7, 1), pad=(3, 0))
    s = b.conv(f"{n}.branch7x7x3_4", s, 192, 3, stride=2)
    return b.concat(f"{n}.concat", [b3, s, b.pool(f"{n}.max_pool", x, 3, 2, op="max")])


def _block_e(b: CnnBuilder, n: str, x: Tensor) -> Tensor:
    b1 = b.conv(f"{n}.branch1x1", x, 320, 1)
    t = b.conv(f"{n}.branch3x3_1", x, 384, 1)
    t = b.concat(f"{n}.branch3x3_cat", [b.conv(f"{n}.branch3x3_2a", t, 384, (1, 3), pad=(0, 1)),
                                        b.conv(f"{n}.branch3x3_2b", t, 384, (3, 1), pad=(1, 0))])
    d = b.conv(f"{n}.branch3x3dbl_1", x, 448, 1)
    d = b.conv(f"{n}.branch3x3dbl_2", d, 384, 3, pad=1)
    d = b.concat(f"{n}.branch3x3dbl_cat",
                 [b.conv(f"{n}.branch3x3dbl_3a", d, 384, (1, 3), pad=(0, 1)),
                  b.conv(f"{n}.branch3x3dbl_3b", d, 384, (3, 1), pad=(1, 0))])
    p = b.conv(f"{n}.branch_pool", b.pool(f"{n}.avg_pool", x, 3, 1, 1, op="avg"), 192, 1)
    return b.concat(f"{n}.concat", [b1, t, d, p])


def build_inception_v3(name: str, dims: dict[str, Any], source: str) -> LayerGraph:
    """Inception-v3: stem, Mixed_5b..Mixed_7c, global average pool, fc.

    Mixed_5b-5d are InceptionA (pool features 32/64/64), Mixed_6a InceptionB,
    Mixed_6b-6e InceptionC (c7 = 128/160/160/192), Mixed_7a InceptionD,
    Mixed_7b-7c InceptionE (torchvision ``Inception3.__init__``).
    """
    b = CnnBuilder(name)
    size = dims["image_size"]
    x = Tensor("", 3, size, size)
    x = b.conv("Conv2d_1a_3x3", x, 32, 3, stride=2)
    x = b.conv("Conv2d_2a_3x3", x, 32, 3)
    x = b.conv("Conv2d_2b_3x3", x, 64, 3, pad=1)
    x = b.pool("maxpool1", x, 3, 2, op="max")
    x = b.conv("Conv2d_3b_1x1", x, 80, 1)
    x = b.conv("Conv2d_4a_3x3", x, 192, 3)
    x = b.pool("maxpool2", x, 3, 2, op="max")
    for n, pf in (("Mixed_5b", 32), ("Mixed_5c", 64), ("Mixed_5d", 64)):
        x = _block_a(b, n, x, pf)
    x = _block_b(b, "Mixed_6a", x)
    for n, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        x = _block_c(b, n, x, c7)
    x = _block_d(b, "Mixed_7a", x)
    x = _block_e(b, "Mixed_7b", x)
    x = _block_e(b, "Mixed_7c", x)
    x = b.global_pool("avgpool", x)
    b.linear("fc", x, dims["num_classes"])
    return LayerGraph(name=name, layers=b.layers, edges=b.edges, seq_len=None, source=source,
                      fixed_tokens="its input image (a CNN, no token sequence)")
