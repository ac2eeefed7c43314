"""Operator graphs with iteration spaces (:mod:`autopar_opt.ir.operators`) for operator-level sharding.

PaSE's four benchmark graphs, rebuilt from the layer shapes of PaSE's ``graph.py``
(Elango, IPDPS 2021, Sec. V; github.com/baidu-research/PaSE, commit 32aa761):

* ``alexnet`` — AlexNet as PaSE builds it: 227×227 input, conv 96/11/4, pool, conv
  256/5, pool, conv 384/3, 384/3, 256/3, pool, flatten, FC 4096, 4096, 1024, softmax
  cross-entropy; batch 128.
* ``inception3`` — Inception-v3 (Szegedy et al. 2016; PaSE's ``Inception3``: every
  BasicConv2d is a conv + batch-norm, no auxiliary head), batch 128.
* ``rnnlm`` — the 2-layer LSTM language model (vocabulary 100,000, 2,048 units, 256
  time steps), batch 64. PaSE's single LSTM node may split its layer dimension
  (a wavefront pipeline); here the two layers are two operators run one after the
  other.
* ``transformer`` — the encoder-decoder Transformer (6+6 layers, model 512, 8 heads of
  64, ffn 2048, vocabulary 50,000, sequence 256), batch 64. PaSE stacks Q/K/V into one
  einsum; so does this graph (self-attention: one QKV projection; cross-attention: Q and a
  fused KV).

PaSE's configuration rules are kept where they are rules of the operator: convolution
and pooling do not split their spatial dimensions (no halo exchange), an LSTM does not
split time, a concatenation does not split its axis, a flatten splits only the outer
dimension of the merged axis.

``transformer_lm`` builds a decoder (GPT) or encoder (BERT) language model at operator
granularity from a zoo model's dimensions (``model_zoo/models/*.yaml``): per block
LN, fused QKV, scores, softmax, context, output projection, add, LN, fc1, GELU, fc2, add
(each operator carries its layer and role, which the Megatron templates read), plus the
embedding, final LN, LM head and cross-entropy.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from autopar_opt.ir.operators import Operand, Operator, OperatorGraph, OpKind

Tensor = tuple[int | None, tuple[int, ...]]      # (producer, shape)
PASE_SOURCE = ("Elango, 'PaSE: Parallelization Strategies for Efficient DNN Training', IPDPS 2021; "
               "layer shapes from github.com/baidu-research/PaSE graph.py (commit 32aa761)")


class _Builder:
    """Adds layers of a CNN to a graph, tracking (producer, shape)."""

    def __init__(self, name: str, source: str = PASE_SOURCE) -> None:
        self.g = OperatorGraph(name, source=source)

    def add(self, **kw: Any) -> int:
        return self.g.add(Operator(**kw))

    def conv(self, name: str, x: Tensor, cout: int, k: int | tuple[int, int], stride: int = 1,
             pad: int | tuple[int, int] = 0) -> Tensor:
        src, (b, c, h, w) = x
        kh, kw = k if isinstance(k, tuple) else (k, k)
        ph, pw = pad if isinstance(pad, tuple) else (pad, pad)
        ho, wo = (h + 2 * ph - kh) // stride + 1, (w + 2 * pw - kw) // stride + 1
        dims = (("b", b), ("c", c), ("h", ho), ("w", wo), ("r", kh), ("s", kw), ("n", cout))
        v = self.add(name=name, kind=OpKind.conv, dims=dims,
                     inputs=(Operand((b, c, h, w), ("b", "c", None, None), src),
                             Operand((cout, c, kh, kw), ("n", "c", "r", "s"), None, True)),
                     out_shape=(b, cout, ho, wo), out_axes=("b", "n", "h", "w"),
                     flops=2.0 * b * ho * wo * cout * c * kh * kw,
                     fixed=frozenset({"h", "w", "r", "s"}), layer=name, role="conv")
        return v, (b, cout, ho, wo)

    def pool(self, name: str, x: Tensor, k: int, stride: int, pad: int = 0) -> Tensor:
        src, (b, c, h, w) = x
        ho, wo = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
        v = self.add(name=name, kind=OpKind.pool, dims=(("b", b), ("c", c), ("h", ho), ("w", wo)),
                     inputs=(Operand((b, c, h, w), ("b", "c", None, None), src),),
                     out_shape=(b, c, ho, wo), out_axes=("b", "c", "h", "w"),
                     flops=float(k * k * b * c * ho * wo), fixed=frozenset({"h", "w"}), layer=name,
                     role="pool")
        return v, (b, c, ho, wo)

    def batchnorm(self, name: str, x: Tensor, layer: str) -> Tensor:
        src, (b, c, h, w) = x
        v = self.add(name=name, kind=OpKind.norm, dims=(("b", b), ("c", c), ("h", h), ("w", w)),
                     inputs=(Operand((b, c, h, w), ("b", "c", "h", "w"), src),
                             Operand((2, c), (None, "c"), None, True)),
                     out_shape=(b, c, h, w), out_axes=("b", "c", "h", "w"),
                     flops=5.0 * b * c * h * w, fixed=frozenset({"h", "w"}), stats=("b", "h", "w"),
                     layer=layer, role="bn")
        return v, (b, c, h, w)

    def flatten(self, name: str, x: Tensor) -> Tensor:
        src, (b, c, h, w) = x
        v = self.add(name=name, kind=OpKind.reshape, dims=(("b", b), ("c", c), ("h", h), ("w", w)),
                     inputs=(Operand((b, c, h, w), ("b", "c", "h", "w"), src),),
                     out_shape=(b, c * h * w), out_axes=("b", ("c", "h", "w")),
                     fixed=frozenset({"h", "w"}), layer=name, role="flatten")
        return v, (b, c * h * w)

    def fc(self, name: str, x: Tensor, n: int) -> Tensor:
        src, (b, k) = x
        v = self.add(name=name, kind=OpKind.gemm, dims=(("b", b), ("n", n), ("k", k)),
                     inputs=(Operand((b, k), ("b", "k"), src), Operand((k, n), ("k", "n"), None, True)),
                     out_shape=(b, n), out_axes=("b", "n"), flops=2.0 * b * n * k, layer=name, role="fc")
        return v, (b, n)

    def xent(self, name: str, x: Tensor) -> None:
        src, shape = x
        names = ("b", "v") if len(shape) == 2 else ("b", "l", "v")
        self.add(name=name, kind=OpKind.softmax_xent, dims=tuple(zip(names, shape)),
                 inputs=(Operand(shape, names, src),), out_shape=(), out_axes=(),
                 flops=5.0 * math.prod(shape), stats=("v",), layer=name, role="loss")

    def concat(self, name: str, parts: list[Tensor]) -> Tensor:
        b, _, h, w = parts[0][1]
        c = sum(p[1][1] for p in parts)
        v = self.add(name=name, kind=OpKind.concat, dims=(("b", b), ("c", c), ("h", h), ("w", w)),
                     inputs=tuple(Operand(p[1], ("b", None, "h", "w"), p[0]) for p in parts),
                     out_shape=(b, c, h, w), out_axes=("b", "c", "h", "w"),
                     fixed=frozenset({"c", "h", "w"}), layer=name.rsplit(".", 1)[0], role="concat")
        return v, (b, c, h, w)

    def mean_hw(self, name: str, x: Tensor) -> Tensor:
        src, (b, c, h, w) = x
        v = self.add(name=name, kind=OpKind.reduce, dims=(("b", b), ("c", c), ("h", h), ("w", w)),
                     inputs=(Operand((b, c, h, w), ("b", "c", "h", "w"), src),),
                     out_shape=(b, c), out_axes=("b", "c"), flops=float(b * c * h * w),
                     fixed=frozenset({"h", "w"}), layer=name, role="mean")
        return v, (b, c)


def alexnet(batch: int = 128) -> OperatorGraph:
    """AlexNet as PaSE's ``graph.AlexNet`` (module docstring)."""
    m = _Builder("alexnet")
    x: Tensor = (None, (batch, 3, 227, 227))
    x = m.conv("conv1", x, 96, 11, stride=4)
    x = m.pool("pool1", x, 3, 2)
    x = m.conv("conv2", x, 256, 5, pad=2)
    x = m.pool("pool2", x, 3, 2)
    x = m.conv("conv3", x, 384, 3, pad=1)
    x = m.conv("conv4", x, 384, 3, pad=1)
    x = m.conv("conv5", x, 256, 3, pad=1)
    x = m.pool("pool5", x, 3, 2)
    x = m.flatten("flatten", x)
    x = m.fc("fc6", x, 4096)
    x = m.fc("fc7", x, 4096)
    x = m.fc("fc8", x, 1024)
    m.xent("loss", x)
    return m.g


def inception3(batch: int = 128) -> OperatorGraph:
    """Inception-v3 as PaSE's ``graph.Inception3`` (module docstring)."""
    m = _Builder("inception3")

    def basic(name: str, x: Tensor, cout: int, k, stride: int = 1, pad=0) -> Tensor:
        return m.batchnorm(name + ".bn", m.conv(name + ".conv", x, cout, k, stride, pad), name + ".conv")

    def block_a(x: Tensor, pf: int, n: str) -> Tensor:
        b1 = basic(n + ".b1x1", x, 64, 1)
        b5 = basic(n + ".b5x5_2", basic(n + ".b5x5_1", x, 48, 1), 64, 5, pad=2)
        b3 = basic(n + ".b3dbl_3", basic(n + ".b3dbl_2", basic(n + ".b3dbl_1", x, 64, 1), 96, 3, pad=1),
                   96, 3, pad=1)
        bp = basic(n + ".bpool", m.pool(n + ".avgpool", x, 3, 1, 1), pf, 1)
        return m.concat(n + ".concat", [b1, b5, b3, bp])

    def block_b(x: Tensor, n: str) -> Tensor:
        b3 = basic(n + ".b3x3", x, 384, 3, stride=2)
        bd = basic(n + ".b3dbl_3", basic(n + ".b3dbl_2", basic(n + ".b3dbl_1", x, 64, 1), 96, 3, pad=1),
                   96, 3, stride=2)
        return m.concat(n + ".concat", [b3, bd, m.pool(n + ".maxpool", x, 3, 2)])

    def block_c(x: Tensor, c7: int, n: str) -> Tensor:
        b1 = basic(n + ".b1x1", x, 192, 1)
        b7 = basic(n + ".b7_1", x, c7, 1)
        b7 = basic(n + ".b7_2", b7, c7, (1, 7), pad=(0, 3))
        b7 = basic(n + ".b7_3", b7, 192, (7, 1), pad=(3, 0))
        bd = basic(n + ".b7dbl_1", x, c7, 1)
        for i, (co, k, p) in enumerate([(c7, (7, 1), (3, 0)), (c7, (1, 7), (0, 3)),
                                        (c7, (7, 1), (3, 0)), (192, (1, 7), (0, 3))]):
            bd = basic(f"{n}.b7dbl_{i + 2}", bd, co, k, pad=p)
        bp = basic(n + ".bpool", m.pool(n + ".avgpool", x, 3, 1, 1), 192, 1)
        return m.concat(n + ".concat", [b1, b7, bd, bp])

    def block_d(x: Tensor, n: str) -> Tensor:
        b3 = basic(n + ".b3_2", basic(n + ".b3_1", x, 192, 1), 320, 3, stride=2)
        b7 = basic(n + ".b7_1", x, 192, 1)
        b7 = basic(n + ".b7_2", b7, 192, (1, 7), pad=(0, 3))
        b7 = basic(n + ".b7_3", b7, 192, (7, 1), pad=(3, 0))
        b7 = basic(n + ".b7_4", b7, 192, 3, stride=2)
        return m.concat(n + ".concat", [b3, b7, m.pool(n + ".maxpool", x, 3, 2)])

    def block_e(x: Tensor, n: str) -> Tensor:
        b1 = basic(n + ".b1x1", x, 320, 1)
        b3 = basic(n + ".b3_1", x, 384, 1)
        b3 = m.concat(n + ".concat3", [basic(n + ".b3_2a", b3, 384, (1, 3), pad=(0, 1)),
                                        basic(n + ".b3_2b", b3, 384, (3, 1), pad=(1, 0))])
        bd = basic(n + ".b3dbl_2", basic(n + ".b3dbl_1", x, 448, 1), 384, 3, pad=1)
        bd = m.concat(n + ".concatd", [basic(n + ".b3dbl_3a", bd, 384, (1, 3), pad=(0, 1)),
                                        basic(n + ".b3dbl_3b", bd, 384, (3, 1), pad=(1, 0))])
        bp = basic(n + ".bpool", m.pool(n + ".avgpool", x, 3, 1, 1), 192, 1)
        return m.concat(n + ".concat", [b1, b3, bd, bp])

    x: Tensor = (None, (batch, 3, 299, 299))
    x = basic("Conv2d_1a", x, 32, 3, stride=2)
    x = basic("Conv2d_2a", x, 32, 3)
    x = basic("Conv2d_2b", x, 64, 3, pad=1)
    x = m.pool("maxpool1", x, 3, 2)
    x = basic("Conv2d_3b", x, 80, 1)
    x = basic("Conv2d_4a", x, 192, 3)
    x = m.pool("maxpool2", x, 3, 2)
    for n, pf in (("Mixed_5b", 32), ("Mixed_5c", 64), ("Mixed_5d", 64)):
        x = block_a(x, pf, n)
    x = block_b(x, "Mixed_6a")
    for n, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        x = block_c(x, c7, n)
    x = block_d(x, "Mixed_7a")
    x = block_e(x, "Mixed_7b")
    x = block_e(x, "Mixed_7c")
    x = m.mean_hw("avgpool", x)
    x = m.fc("fc", x, 1000)
    m.xent("loss", x)
    return m.g


def rnnlm(batch: int = 64, layers: int = 2, vocab: int = 100_000, units: int = 2048,
          seq: int = 256) -> OperatorGraph:
    """The LSTM language model of PaSE's ``graph.RNNLM`` (module docstring)."""
    g = OperatorGraph("rnnlm", source=PASE_SOURCE)
    b, u = batch, units
    x = g.add(Operator("embedding", OpKind.embedding, (("b", b), ("l", seq), ("e", u), ("v", vocab)),
                       (Operand((vocab, u), ("v", "e"), None, True),), (b, seq, u), ("b", "l", "e"),
                       layer="embedding", role="embedding"))
    for i in range(layers):
        # gates [i, f, g, o] = [x_t; h_{t-1}] · W, W (2u, 4u): per time step (b, 4u) += (b, 2u)·(2u, 4u)
        x = g.add(Operator(f"lstm{i}", OpKind.lstm, (("b", b), ("l", seq), ("n", 4 * u), ("k", 2 * u)),
                           (Operand((b, seq, u), ("b", "l", None), x),
                            Operand((2 * u, 4 * u), ("k", "n"), None, True)),
                           (b, seq, u), ("b", "l", None), flops=2.0 * b * seq * 4 * u * 2 * u,
                           fixed=frozenset({"l"}), layer=f"lstm{i}", role="lstm"))
    y = g.add(Operator("proj", OpKind.gemm, (("b", b), ("l", seq), ("v", vocab), ("e", u)),
                       (Operand((b, seq, u), ("b", "l", "e"), x), Operand((u, vocab), ("e", "v"), None, True)),
                       (b, seq, vocab), ("b", "l", "v"), flops=2.0 * b * seq * vocab * u,
                       layer="proj", role="lm_head"))
    g.add(Operator("loss", OpKind.softmax_xent, (("b", b), ("l", seq), ("v", vocab)),
                   (Operand((b, seq, vocab), ("b", "l", "v"), y),), (), (), flops=5.0 * b * seq * vocab,
                   stats=("v",), layer="loss", role="loss"))
    return g


# ---------------------------------------------------------------- transformers
class _Tx:
    """Transformer operators: tensors (b, l, e) between blocks, heads h of size d."""

    def __init__(self, g: OperatorGraph, b: int, s: int, e: int, heads: int, ff: int) -> None:
        self.g, self.b, self.s, self.e, self.a, self.ff = g, b, s, e, heads, ff
        self.d = e // heads

    def op(self, name: str, kind: OpKind, dims: dict[str, int], ins: list[Operand], out_axes: tuple,
           layer: str, role: str, flops: float | None = None, stats: tuple[str, ...] = (),
           fixed: frozenset = frozenset()) -> int:
        shape = tuple(dims[a] for a in out_axes)
        if flops is None:
            flops = 2.0 * math.prod(dims.values())
        return self.g.add(Operator(name, kind, tuple(dims.items()), tuple(ins), shape, out_axes, flops,
                                   fixed, stats, layer, role))

    def act(self, src: int, axes=("b", "l", "e")) -> Operand:
        return Operand((self.b, self.s, self.e), axes, src)

    def norm(self, name: str, x: int, layer: str, role: str) -> int:
        b, s, e = self.b, self.s, self.e
        return self.op(name, OpKind.norm, dict(b=b, l=s, e=e),
                       [self.act(x), Operand((2, e), (None, "e"), None, True)], ("b", "l", "e"), layer, role,
                       flops=5.0 * b * s * e, stats=("e",))

    def add(self, name: str, x: int, y: int, layer: str, role: str) -> int:
        b, s, e = self.b, self.s, self.e
        return self.op(name, OpKind.elementwise, dict(b=b, l=s, e=e), [self.act(x), self.act(y)],
                       ("b", "l", "e"), layer, role, flops=float(b * s * e))

    def attention(self, x: int, kv: int, n: str) -> int:
        """Q, K, V, scores, softmax, context, output projection: returns the projection.
        Self-attention (``x == kv``) fuses Q, K and V into one projection with a fixed
        dimension ``s`` of size 3 (Megatron-LM's fused QKV: one input and one input
        gradient, Shoeybi et al. 2019, Sec. 3); cross-attention projects Q from ``x`` and
        K, V (``s`` of size 2) from ``kv``."""
        b, s, e, a, d = self.b, self.s, self.e, self.a, self.d
        qkv_shape = (b, s, a, d)
        if x == kv:
            q = k = v = self.op(n + ".qkv", OpKind.gemm, dict(b=b, l=s, t=3, h=a, d=d, e=e),
                                [self.act(x), Operand((e, 3, a, d), ("e", "t", "h", "d"), None, True)],
                                ("b", "l", "t", "h", "d"), n, "qkv", fixed=frozenset({"t"}))
            slots = (0, 1, 2)
        else:
            q = self.op(n + ".q", OpKind.gemm, dict(b=b, l=s, h=a, d=d, e=e),
                        [self.act(x), Operand((e, a, d), ("e", "h", "d"), None, True)],
                        ("b", "l", "h", "d"), n, "q")
            k = v = self.op(n + ".kv", OpKind.gemm, dict(b=b, l=s, t=2, h=a, d=d, e=e),
                            [self.act(kv), Operand((e, 2, a, d), ("e", "t", "h", "d"), None, True)],
                            ("b", "l", "t", "h", "d"), n, "kv", fixed=frozenset({"t"}))
            slots = (None, 0, 1)

        def part(src: int, slot: int | None, axes: tuple) -> Operand:
            return Operand(qkv_shape, axes, src, take=None if slot is None else (2, slot))

        sc = self.op(n + ".scores", OpKind.gemm, dict(b=b, h=a, l=s, m=s, d=d),
                     [part(q, slots[0], ("b", "l", "h", "d")), part(k, slots[1], ("b", "m", "h", "d"))],
                     ("b", "h", "l", "m"), n, "scores")
        sm = self.op(n + ".softmax", OpKind.softmax, dict(b=b, h=a, l=s, m=s),
                     [Operand((b, a, s, s), ("b", "h", "l", "m"), sc)], ("b", "h", "l", "m"), n, "softmax",
                     flops=5.0 * b * a * s * s, stats=("m",))
        cx = self.op(n + ".context", OpKind.gemm, dict(b=b, l=s, h=a, d=d, m=s),
                     [Operand((b, a, s, s), ("b", "h", "l", "m"), sm), part(v, slots[2], ("b", "m", "h", "d"))],
                     ("b", "l", "h", "d"), n, "context")
        return self.op(n + ".out", OpKind.gemm, dict(b=b, l=s, e=e, h=a, d=d),
                       [Operand(qkv_shape, ("b", "l", "h", "d"), cx),
                        Operand((a, d, e), ("h", "d", "e"), None, True)],
                       ("b", "l", "e"), n, "out")

    def mlp(self, x: int, n: str, gated: bool = False) -> int:
        """fc1, GELU, fc2; ``gated``: SwiGLU (Shazeer 2020): fc1 makes the gate and the up
        projection at once (a fixed dimension ``t`` of size 2, Megatron's fused
        ``linear_fc1``) and the activation multiplies the two slices."""
        b, s, e, f = self.b, self.s, self.e, self.ff
        if gated:
            f1 = self.op(n + ".fc1", OpKind.gemm, dict(b=b, l=s, t=2, f=f, e=e),
                         [self.act(x), Operand((e, 2, f), ("e", "t", "f"), None, True)],
                         ("b", "l", "t", "f"), n, "fc1", fixed=frozenset({"t"}))
            ins = [Operand((b, s, f), ("b", "l", "f"), f1, take=(2, 0)),
                   Operand((b, s, f), ("b", "l", "f"), f1, take=(2, 1))]
        else:
            f1 = self.op(n + ".fc1", OpKind.gemm, dict(b=b, l=s, f=f, e=e),
                         [self.act(x), Operand((e, f), ("e", "f"), None, True)], ("b", "l", "f"), n, "fc1")
            ins = [Operand((b, s, f), ("b", "l", "f"), f1)]
        ge = self.op(n + ".gelu", OpKind.elementwise, dict(b=b, l=s, f=f), ins, ("b", "l", "f"), n, "gelu",
                     flops=8.0 * b * s * f)
        return self.op(n + ".fc2", OpKind.gemm, dict(b=b, l=s, e=e, f=f),
                       [Operand((b, s, f), ("b", "l", "f"), ge), Operand((f, e), ("f", "e"), None, True)],
                       ("b", "l", "e"), n, "fc2")

    def embedding(self, name: str, vocab: int) -> int:
        b, s, e = self.b, self.s, self.e
        return self.op(name, OpKind.embedding, dict(b=b, l=s, e=e, v=vocab),
                       [Operand((vocab, e), ("v", "e"), None, True)], ("b", "l", "e"), name, "embedding",
                       flops=0.0)

    def head(self, x: int, vocab: int, name: str = "lm_head") -> int:
        b, s, e = self.b, self.s, self.e
        y = self.op(name, OpKind.gemm, dict(b=b, l=s, v=vocab, e=e),
                    [self.act(x), Operand((e, vocab), ("e", "v"), None, True)], ("b", "l", "v"), name,
                    "lm_head")
        return self.op("loss", OpKind.softmax_xent, dict(b=b, l=s, v=vocab),
                       [Operand((b, s, vocab), ("b", "l", "v"), y)], (), "loss", "loss",
                       flops=5.0 * b * s * vocab, stats=("v",))


def transformer(batch: int = 64, seq: int = 256, vocab: int = 50_000, hidden: int = 512,
                heads: int = 8, ffn: int = 2048, layers: int = 6) -> OperatorGraph:
    """PaSE's encoder-decoder ``graph.Transformer`` (post-LN; module docstring)."""
    g = OperatorGraph("transformer", source=PASE_SOURCE)
    t = _Tx(g, batch, seq, hidden, heads, ffn)

    def sub(x: int, y: int, n: str) -> int:
        return t.norm(n + ".norm", t.add(n + ".add", x, y, n, "add"), n, "norm")

    x = t.embedding("enc.embedding", vocab)
    for i in range(layers):
        n = f"enc{i}"
        x = sub(x, t.attention(x, x, n + ".att"), n + ".att")
        x = sub(x, t.mlp(x, n + ".mlp"), n + ".mlp")
    enc = x
    x = t.embedding("dec.embedding", vocab)
    for i in range(layers):
        n = f"dec{i}"
        x = sub(x, t.attention(x, x, n + ".self"), n + ".self")
        x = sub(x, t.attention(x, enc, n + ".cross"), n + ".cross")
        x = sub(x, t.mlp(x, n + ".mlp"), n + ".mlp")
    t.head(x, vocab)
    return g


def transformer_lm(batch: int, seq_len: int, hidden: int, heads: int, ffn_hidden: int, vocab: int,
                   num_layers: int, name: str = "transformer_lm", embeddings: bool = True,
                   source: str = "", gated_mlp: bool = False) -> OperatorGraph:
    """A pre-LN decoder/encoder LM at operator granularity (module docstring): blocks named
    ``block{i}``, operators with roles ln1, qkv, scores, softmax, context, out, add1,
    ln2, fc1, gelu (SwiGLU with ``gated_mlp``), fc2, add2."""
    g = OperatorGraph(name, source=source)
    t = _Tx(g, batch, seq_len, hidden, heads, ffn_hidden)
    if embeddings:
        x = t.embedding("embedding", vocab)
    else:   # the blocks alone: the first LN reads the input activations (a graph input)
        x = None
    for i in range(num_layers):
        n = f"block{i}"
        if x is None:
            b, s, e = batch, seq_len, hidden
            ln = t.op(n + ".ln1", OpKind.norm, dict(b=b, l=s, e=e),
                      [Operand((b, s, e), ("b", "l", "e"), None), Operand((2, e), (None, "e"), None, True)],
                      ("b", "l", "e"), n, "ln1", flops=5.0 * b * s * e, stats=("e",))
            res = ln
        else:
            ln = t.norm(n + ".ln1", x, n, "ln1")
            res = x
        a1 = t.add(n + ".add1", res, t.attention(ln, ln, n), n, "add1")
        x = t.add(n + ".add2", a1, t.mlp(t.norm(n + ".ln2", a1, n, "ln2"), n, gated_mlp), n, "add2")
    if embeddings:
        t.head(t.norm("final_ln", x, "final_ln", "ln"), vocab)
    return g


#: Operator graphs by name (``problem.graph.zoo`` of an operator-sharding spec).
OPERATOR_GRAPHS: dict[str, Callable[..., OperatorGraph]] = {
    "alexnet": alexnet,
    "inception3": inception3,
    "rnnlm": rnnlm,
    "transformer": transformer,
}
