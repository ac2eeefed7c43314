"""Operator graphs for device placement (GDP benchmark families) with catalog-based costs.

Generators (``OP_GRAPHS``):

- ``inception_v3`` — Inception-v3 (Szegedy et al., CVPR 2016; the torchvision
  module layout: stem, 3×A, B, 4×C, D, 2×E, pool, fc; no auxiliary head) at
  ``granularity="op"`` (conv, batch-norm, ReLU, pool, concat as nodes) or
  ``"layer"`` (conv+BN+ReLU as one node).
- ``transformer`` / ``transformer_xl`` — a pre-LN decoder stack at operator
  granularity (LN, Q/K/V projections, scores, softmax, context, output
  projection, residual adds, MLP); the XL variant adds Transformer-XL's
  memory concatenation and relative-position branch (Dai et al., ACL 2019,
  §3.3: ``W_{k,R} R`` and the ``Q·(W_{k,R}R)ᵀ`` term).
- ``synthetic_transformer`` — the transformer stack truncated to exactly
  ``nodes`` operators (10,000 and 50,000 in the scale benchmarks).
- ``gnmt`` — GNMT (Wu et al. 2016, §3-4): 8 encoder and 8 decoder LSTM layers of 1,024
  units, a bi-directional bottom encoder layer, residual connections from the third
  layer on, normalised Bahdanau attention from the bottom decoder layer whose context
  feeds every decoder layer, a 32k word-piece vocabulary; unrolled over ``seq`` steps at
  TensorFlow operator granularity (an LSTM cell is 14 ops; each layer's kernel is one
  variable read by every step), as the GDP paper places it (Zhou et al. 2019: an 8-layer
  GNMT of more than 50,000 nodes).
- ``transformer_xl`` with ``segments > 1`` unrolls Transformer-XL's segment recurrence:
  layer ``i`` of segment ``s`` reads the (gradient-stopped) input of layer ``i`` of
  segment ``s - 1`` as its memory (Dai et al. 2019, §3.2).

``training=True`` (``transformer``, ``transformer_xl``, ``gnmt``) adds one backward op per
forward op, in the forward op's colour class (they must share a device), with the
gradient edges reversed, as in the public training graphs (:meth:`OpGraph.with_backward`).

The graphs carry FLOPs and bytes only; :mod:`autopar_opt.placement.importers.zoo` turns
them into a placement problem with these costs (times in milliseconds, sizes
in bytes), from the device catalog and the calibrated parameters:

- node time on device ``D``: roofline (Williams, Waterman & Patterson, CACM
  2009): ``max(flops / (peak_D · eff_D), bytes_moved / hbm_bw_D)`` with the
  cost model's achieved GEMM efficiency ``eff_D`` for matmul/conv nodes and
  ``1`` for memory-bound nodes;
- transfer of a node's output: α–β (Hockney 1994) on the device's intra-node
  link, ``α + out_bytes / bandwidth`` (:data:`~autopar_opt.ir.hardware.DEFAULT_INTRA_NODE`;
  several device types: the slowest of their links,
  :func:`~autopar_opt.placement.importers.zoo.transfer_link`);
- size on a device: parameters (bf16) plus the output activation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable



BYTES = 2            # bf16 activations and weights


@dataclass
class OpGraph:
    """Operators with FLOPs, bytes moved, output bytes and parameter bytes."""

    names: list[str] = field(default_factory=list)
    flops: list[float] = field(default_factory=list)
    mem_bytes: list[float] = field(default_factory=list)
    out_bytes: list[float] = field(default_factory=list)
    param_bytes: list[float] = field(default_factory=list)
    gemm: list[bool] = field(default_factory=list)
    edges: list[tuple[int, int]] = field(default_factory=list)
    #: training graphs: colour class and backward flag per op (empty: forward only)
    color: list[int] = field(default_factory=list)
    backward: list[bool] = field(default_factory=list)
    #: forward edges that carry no gradient (Transformer-XL's memory)
    stop_grad: set[tuple[int, int]] = field(default_factory=set)

    def add(self, name: str, inputs: list[int], *, flops: float = 0.0, out: float,
            mem: float | None = None, params: float = 0.0, gemm: bool = False) -> int:
        v = len(self.names)
        in_bytes = sum(self.out_bytes[u] for u in inputs)
        self.names.append(name)
        self.flops.append(float(flops))
        self.mem_bytes.append(float(mem if mem is not None else in_bytes + out + params))
        self.out_bytes.append(float(out))
        self.param_bytes.append(float(params))
        self.gemm.append(gemm)
        self.edges.extend((u, v) for u in inputs)
        return v

    def repeat_layers(self, x: int, count: int, build: Callable[["OpGraph", int, int], int]) -> int:
        """Append ``count`` copies of a layer (``build(g, x, i)`` adds layer ``i`` on input ``x``
        and returns its output) and return the last output.

        Layer 0 is built; the others are copies of its operators with names, edges and
        the input renumbered (a million operators in well under a second, where calling
        ``build`` per layer took seconds). Every copy must be the same as a built layer:
        its numbers depend only on ``out_bytes`` of its input, which must equal that of
        the layer's own output (checked), and names carry the layer as ``l{i}.``."""
        if count <= 0:
            return x
        start, edge_start = len(self.names), len(self.edges)
        last = build(self, x, 0)
        k = len(self.names) - start
        if self.out_bytes[last] != self.out_bytes[x]:
            raise ValueError("a repeated layer's output must be as large as its input")
        prefix = "l0."
        suffixes = [n[len(prefix):] if n.startswith(prefix) else None for n in self.names[start:]]
        if None in suffixes:
            raise ValueError("repeated layers name their operators l{i}.*")
        template = self.edges[edge_start:]
        rel_out = last - start
        for col in (self.flops, self.mem_bytes, self.out_bytes, self.param_bytes, self.gemm):
            col.extend(col[start:start + k] * (count - 1))
        self.names.extend(f"l{i}.{sfx}" for i in range(1, count) for sfx in suffixes)
        for i in range(1, count):
            base, prev = start + i * k, start + (i - 1) * k + rel_out
            self.edges.extend((prev if u == x else u - start + base, v - start + base)
                              for u, v in template)
        return start + (count - 1) * k + rel_out

    def with_backward(self) -> "OpGraph":
        """This forward graph plus one backward op per op (module docstring).

        The backward op of ``v`` reads the backward ops of ``v``'s consumers (reversed
        edges, except :attr:`stop_grad` ones) and ``v`` itself (its saved activations);
        its FLOPs are twice ``v``'s for a GEMM (input and weight gradients), once
        otherwise; its output is the gradient of ``v``'s inputs (of its weights for a
        variable: an op without inputs)."""
        n = len(self.names)
        g = OpGraph(list(self.names), list(self.flops), list(self.mem_bytes), list(self.out_bytes),
                    list(self.param_bytes), list(self.gemm), list(self.edges))
        preds: list[list[int]] = [[] for _ in range(n)]
        succs: list[list[int]] = [[] for _ in range(n)]
        for u, v in self.edges:
            preds[v].append(u)
            if (u, v) not in self.stop_grad:
                succs[u].append(v)
        back: dict[int, int] = {}
        for v in reversed(range(n)):
            grad_in = sum(self.out_bytes[u] for u in preds[v]) if preds[v] else self.param_bytes[v]
            back[v] = g.add(f"{self.names[v]}.grad", [back[w] for w in succs[v]] + [v],
                            flops=(2.0 if self.gemm[v] else 1.0) * self.flops[v],
                            out=grad_in or self.out_bytes[v], gemm=self.gemm[v])
        g.color = list(range(n)) + list(reversed(range(n)))
        g.backward = [False] * n + [True] * n
        return g

    def truncate(self, n: int) -> "OpGraph":
        """The first ``n`` operators (a topological prefix, so still a DAG)."""
        g = OpGraph(self.names[:n], self.flops[:n], self.mem_bytes[:n], self.out_bytes[:n],
                    self.param_bytes[:n], self.gemm[:n], [(u, v) for u, v in self.edges if v < n])
        return g


# ---------------------------------------------------------------- Inception-v3
class _Conv:
    """Tracks (channels, height, width) while adding BasicConv2d blocks."""

    def __init__(self, g: OpGraph, batch: int, op_level: bool) -> None:
        self.g, self.b, self.op = g, batch, op_level

    def conv(self, name: str, x: tuple[int, int, int, int], cout: int, k: tuple[int, int],
             stride: int = 1, pad: tuple[int, int] = (0, 0)) -> tuple[int, int, int, int]:
        node, c, h, w = x
        ho = (h + 2 * pad[0] - k[0]) // stride + 1
        wo = (w + 2 * pad[1] - k[1]) // stride + 1
        out = self.b * cout * ho * wo * BYTES
        flops = 2.0 * self.b * ho * wo * cout * c * k[0] * k[1]
        params = (c * cout * k[0] * k[1] + 2 * cout) * BYTES
        if not self.op:
            v = self.g.add(name, [node], flops=flops, out=out, params=params, gemm=True)
            return v, cout, ho, wo
        v = self.g.add(name + ".conv", [node], flops=flops, out=out, params=params - 2 * cout * BYTES,
                       gemm=True)
        v = self.g.add(name + ".bn", [v], flops=4.0 * out / BYTES, out=out, params=2 * cout * BYTES)
        v = self.g.add(name + ".relu", [v], flops=out / BYTES, out=out)
        return v, cout, ho, wo

    def pool(self, name: str, x, k: int, stride: int, pad: int = 0):
        node, c, h, w = x
        ho, wo = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
        out = self.b * c * ho * wo * BYTES
        return self.g.add(name, [node], flops=k * k * out / BYTES, out=out), c, ho, wo

    def concat(self, name: str, parts):
        c = sum(p[1] for p in parts)
        _, _, h, w = parts[0]
        out = self.b * c * h * w * BYTES
        return self.g.add(name, [p[0] for p in parts], out=out), c, h, w


def _inception_a(m: _Conv, x, pool_f: int, name: str):
    b1 = m.conv(f"{name}.b1x1", x, 64, (1, 1))
    b5 = m.conv(f"{name}.b5x5_2", m.conv(f"{name}.b5x5_1", x, 48, (1, 1)), 64, (5, 5), pad=(2, 2))
    b3 = m.conv(f"{name}.b3dbl_1", x, 64, (1, 1))
    b3 = m.conv(f"{name}.b3dbl_2", b3, 96, (3, 3), pad=(1, 1))
    b3 = m.conv(f"{name}.b3dbl_3", b3, 96, (3, 3), pad=(1, 1))
    bp = m.conv(f"{name}.bpool", m.pool(f"{name}.avgpool", x, 3, 1, 1), pool_f, (1, 1))
    return m.concat(f"{name}.concat", [b1, b5, b3, bp])


def _inception_c(m: _Conv, x, c7: int, name: str):
    b1 = m.conv(f"{name}.b1x1", x, 192, (1, 1))
    b7 = m.conv(f"{name}.b7_1", x, c7, (1, 1))
    b7 = m.conv(f"{name}.b7_2", b7, c7, (1, 7), pad=(0, 3))
    b7 = m.conv(f"{name}.b7_3", b7, 192, (7, 1), pad=(3, 0))
    bd = m.conv(f"{name}.b7dbl_1", x, c7, (1, 1))
    for i, (cout, k, p) in enumerate([(c7, (7, 1), (3, 0)), (c7, (1, 7), (0, 3)),
                                      (c7, (7, 1), (3, 0)), (192, (1, 7), (0, 3))]):
        bd = m.conv(f"{name}.b7dbl_{i + 2}", bd, cout, k, pad=p)
    bp = m.conv(f"{name}.bpool", m.pool(f"{name}.avgpool", x, 3, 1, 1), 192, (1, 1))
    return m.concat(f"{name}.concat", [b1, b7, bd, bp])


def _inception_e(m: _Conv, x, name: str):
    b1 = m.conv(f"{name}.b1x1", x, 320, (1, 1))
    b3 = m.conv(f"{name}.b3_1", x, 384, (1, 1))
    b3 = [m.conv(f"{name}.b3_2a", b3, 384, (1, 3), pad=(0, 1)),
          m.conv(f"{name}.b3_2b", b3, 384, (3, 1), pad=(1, 0))]
    bd = m.conv(f"{name}.b3dbl_1", x, 448, (1, 1))
    bd = m.conv(f"{name}.b3dbl_2", bd, 384, (3, 3), pad=(1, 1))
    bd = [m.conv(f"{name}.b3dbl_3a", bd, 384, (1, 3), pad=(0, 1)),
          m.conv(f"{name}.b3dbl_3b", bd, 384, (3, 1), pad=(1, 0))]
    bp = m.conv(f"{name}.bpool", m.pool(f"{name}.avgpool", x, 3, 1, 1), 192, (1, 1))
    return m.concat(f"{name}.concat", [b1, *b3, *bd, bp])


def inception_v3(batch: int = 32, granularity: str = "op") -> OpGraph:
    """Inception-v3 forward graph (module docstring); ``granularity`` ``op`` or ``layer``."""
    if granularity not in ("op", "layer"):
        raise ValueError(f"granularity {granularity!r}: use 'op' or 'layer'")
    g = OpGraph()
    m = _Conv(g, batch, granularity == "op")
    x = (g.add("input", [], out=batch * 3 * 299 * 299 * BYTES), 3, 299, 299)
    x = m.conv("Conv2d_1a", x, 32, (3, 3), stride=2)
    x = m.conv("Conv2d_2a", x, 32, (3, 3))
    x = m.conv("Conv2d_2b", x, 64, (3, 3), pad=(1, 1))
    x = m.pool("maxpool1", x, 3, 2)
    x = m.conv("Conv2d_3b", x, 80, (1, 1))
    x = m.conv("Conv2d_4a", x, 192, (3, 3))
    x = m.pool("maxpool2", x, 3, 2)
    for name, pf in (("Mixed_5b", 32), ("Mixed_5c", 64), ("Mixed_5d", 64)):
        x = _inception_a(m, x, pf, name)
    b3 = m.conv("Mixed_6a.b3x3", x, 384, (3, 3), stride=2)
    bd = m.conv("Mixed_6a.b3dbl_1", x, 64, (1, 1))
    bd = m.conv("Mixed_6a.b3dbl_2", bd, 96, (3, 3), pad=(1, 1))
    bd = m.conv("Mixed_6a.b3dbl_3", bd, 96, (3, 3), stride=2)
    x = m.concat("Mixed_6a.concat", [b3, bd, m.pool("Mixed_6a.maxpool", x, 3, 2)])
    for name, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        x = _inception_c(m, x, c7, name)
    b3 = m.conv("Mixed_7a.b3_2", m.conv("Mixed_7a.b3_1", x, 192, (1, 1)), 320, (3, 3), stride=2)
    b7 = m.conv("Mixed_7a.b7_1", x, 192, (1, 1))
    b7 = m.conv("Mixed_7a.b7_2", b7, 192, (1, 7), pad=(0, 3))
    b7 = m.conv("Mixed_7a.b7_3", b7, 192, (7, 1), pad=(3, 0))
    b7 = m.conv("Mixed_7a.b7_4", b7, 192, (3, 3), stride=2)
    x = m.concat("Mixed_7a.concat", [b3, b7, m.pool("Mixed_7a.maxpool", x, 3, 2)])
    for name in ("Mixed_7b", "Mixed_7c"):
        x = _inception_e(m, x, name)
    node, c, h, w = m.pool("avgpool", x, x[2], 1)
    g.add("fc", [node], flops=2.0 * batch * c * 1000, out=batch * 1000 * BYTES,
          params=(c * 1000 + 1000) * BYTES, gemm=True)
    return g


# ---------------------------------------------------------------- transformers
def _layer(g: OpGraph, x: int, i: int, b: int, s: int, h: int, xl: bool, mem_len: int,
           tag: str = "", memory: int | None = None) -> int:
    """One layer; ``memory``: the op whose output is this layer's XL memory (the previous
    segment's input to this layer; gradient stopped). Weights counted in the first segment."""
    act = b * s * h * BYTES
    first = not tag or tag == "s0."
    w = (lambda n: n * BYTES if first else 0.0)
    lin = dict(flops=2.0 * b * s * h * h, out=act, params=w(h * h), gemm=True)
    i_name = f"{tag}l{i}"
    ln = g.add(f"{i_name}.ln1", [x], flops=5.0 * b * s * h, out=act, params=w(2 * h))
    kv_in = ln
    s_kv = s
    if xl:
        s_kv = s + mem_len
        kv_in = g.add(f"{i_name}.mem_concat", [ln] + ([memory] if memory is not None else []),
                      out=b * s_kv * h * BYTES)
        if memory is not None:
            g.stop_grad.add((memory, kv_in))
    q = g.add(f"{i_name}.q", [ln], **lin)
    kv = dict(flops=2.0 * b * s_kv * h * h, out=b * s_kv * h * BYTES, params=w(h * h), gemm=True)
    k = g.add(f"{i_name}.k", [kv_in], **kv)
    v = g.add(f"{i_name}.v", [kv_in], **kv)
    scores_out = b * s * s_kv * BYTES
    sc = g.add(f"{i_name}.scores", [q, k], flops=2.0 * b * s * s_kv * h, out=scores_out, gemm=True)
    if xl:
        r = g.add(f"{i_name}.r_proj", [], flops=2.0 * s_kv * h * h, out=s_kv * h * BYTES,
                  params=w(h * h), gemm=True)
        pos = g.add(f"{i_name}.pos_scores", [q, r], flops=2.0 * b * s * s_kv * h, out=scores_out, gemm=True)
        sc = g.add(f"{i_name}.score_add", [sc, pos], flops=b * s * s_kv, out=scores_out)
    sm = g.add(f"{i_name}.softmax", [sc], flops=5.0 * b * s * s_kv, out=scores_out)
    ctx = g.add(f"{i_name}.context", [sm, v], flops=2.0 * b * s * s_kv * h, out=act, gemm=True)
    o = g.add(f"{i_name}.out_proj", [ctx], **lin)
    a1 = g.add(f"{i_name}.add1", [x, o], flops=b * s * h, out=act)
    ln2 = g.add(f"{i_name}.ln2", [a1], flops=5.0 * b * s * h, out=act, params=w(2 * h))
    f1 = g.add(f"{i_name}.fc1", [ln2], flops=8.0 * b * s * h * h, out=4 * act, params=w(4 * h * h),
               gemm=True)
    ge = g.add(f"{i_name}.gelu", [f1], flops=8.0 * b * s * h, out=4 * act)
    f2 = g.add(f"{i_name}.fc2", [ge], flops=8.0 * b * s * h * h, out=act, params=w(4 * h * h),
               gemm=True)
    return g.add(f"{i_name}.add2", [a1, f2], flops=b * s * h, out=act)


def transformer(layers: int = 24, hidden: int = 1024, seq: int = 512, batch: int = 8,
                xl: bool = False, mem_len: int = 512, vocab: int = 32000, segments: int = 1,
                training: bool = False) -> OpGraph:
    """Decoder stack at operator granularity (module docstring); ``segments`` (XL only)
    unrolls the segment recurrence, ``training`` adds the backward graph."""
    g = OpGraph()
    act = batch * seq * hidden * BYTES
    prev: list[int] = []                  # inputs of each layer in the previous segment
    for s in range(segments if xl else 1):
        tag = f"s{s}." if segments > 1 else ""
        x = g.add(f"{tag}embedding", [], flops=0.0, out=act, mem=2 * act,
                  params=vocab * hidden * BYTES if s == 0 else 0.0)
        if xl and segments > 1:           # each layer also reads the previous segment's input
            inputs = []
            for i in range(layers):
                inputs.append(x)
                x = _layer(g, x, i, batch, seq, hidden, xl, mem_len, tag, prev[i] if prev else None)
            prev = inputs
        else:                             # identical layers: built once, copied (repeat_layers)
            x = g.repeat_layers(x, layers, lambda gg, xx, i: _layer(gg, xx, i, batch, seq, hidden,
                                                                    xl, mem_len))
        x = g.add(f"{tag}final_ln", [x], flops=5.0 * batch * seq * hidden, out=act,
                  params=2 * hidden * BYTES if s == 0 else 0.0)
        g.add(f"{tag}lm_head", [x], flops=2.0 * batch * seq * hidden * vocab,
              out=batch * seq * vocab * BYTES, params=vocab * hidden * BYTES if s == 0 else 0.0,
              gemm=True)
    return g.with_backward() if training else g


def synthetic_transformer(nodes: int = 10_000, hidden: int = 1024, seq: int = 512,
                          batch: int = 8) -> OpGraph:
    """A transformer op graph with exactly ``nodes`` operators (14 per layer)."""
    layers = max(1, math.ceil(nodes / 14))
    return transformer(layers, hidden, seq, batch).truncate(nodes)


# ---------------------------------------------------------------- GNMT
def _lstm_cell(g: OpGraph, name: str, inputs: list[int], state: tuple[int, int] | None, b: int,
               in_dim: int, h: int, kernel: int) -> tuple[int, int]:
    """One LSTM step at TensorFlow op granularity (BasicLSTMCell; Hochreiter & Schmidhuber
    1997): concat [x, h] -> matmul with the layer's kernel -> bias add -> split into the
    gates i, j, f, o -> sigmoid / tanh / forget-bias add -> c = c·f + i·j -> h = o·tanh(c).
    14 ops; returns (h, c)."""
    act = b * h * BYTES
    x = g.add(f"{name}.concat", inputs + ([state[0]] if state else []), out=b * (in_dim + h) * BYTES)
    z = g.add(f"{name}.matmul", [x, kernel], flops=2.0 * b * (in_dim + h) * 4 * h, out=4 * act,
              gemm=True)
    z = g.add(f"{name}.bias_add", [z], flops=4.0 * b * h, out=4 * act)
    z = g.add(f"{name}.split", [z], out=4 * act)
    i = g.add(f"{name}.sigmoid_i", [z], flops=4.0 * b * h, out=act)
    j = g.add(f"{name}.tanh_j", [z], flops=4.0 * b * h, out=act)
    f = g.add(f"{name}.sigmoid_f", [g.add(f"{name}.forget_bias", [z], flops=b * h, out=act)],
              flops=4.0 * b * h, out=act)
    o = g.add(f"{name}.sigmoid_o", [z], flops=4.0 * b * h, out=act)
    cf = g.add(f"{name}.mul_cf", [f] + ([state[1]] if state else []), flops=b * h, out=act)
    c = g.add(f"{name}.add_c", [cf, g.add(f"{name}.mul_ij", [i, j], flops=b * h, out=act)],
              flops=b * h, out=act)
    tc = g.add(f"{name}.tanh_c", [c], flops=4.0 * b * h, out=act)
    return g.add(f"{name}.mul_h", [o, tc], flops=b * h, out=act), c


def _variable(g: OpGraph, name: str, size: float) -> int:
    """A weight read by every step that uses it (its transfer is charged once per device)."""
    return g.add(name, [], out=size, params=size)


def _encoder(g: OpGraph, layers: int, h: int, seq: int, b: int, vocab: int) -> list[int]:
    """GNMT's encoder: bi-directional bottom layer, residuals from the third layer on."""
    act = b * h * BYTES
    emb = _variable(g, "enc.embedding", vocab * h * BYTES)
    x = [g.add(f"enc.embed.t{t}", [emb], out=act) for t in range(seq)]
    outs = {}
    for d, steps in (("fw", range(seq)), ("bw", reversed(range(seq)))):
        kernel = _variable(g, f"enc.l0.{d}.kernel", (2 * h * 4 * h + 4 * h) * BYTES)
        state = None
        for t in steps:
            state = _lstm_cell(g, f"enc.l0.{d}.t{t}", [x[t]], state, b, h, h, kernel)
            outs[d, t] = state[0]
    x = [g.add(f"enc.l0.concat.t{t}", [outs["fw", t], outs["bw", t]], out=2 * act) for t in range(seq)]
    in_dim = 2 * h
    for layer in range(1, layers):
        kernel = _variable(g, f"enc.l{layer}.kernel", ((in_dim + h) * 4 * h + 4 * h) * BYTES)
        state, out = None, []
        for t in range(seq):
            state = _lstm_cell(g, f"enc.l{layer}.t{t}", [x[t]], state, b, in_dim, h, kernel)
            y = state[0]
            if layer >= 2:
                y = g.add(f"enc.l{layer}.residual.t{t}", [x[t], y], flops=b * h, out=act)
            out.append(y)
        x, in_dim = out, h
    return x


def gnmt(layers: int = 8, hidden: int = 1024, seq: int = 100, batch: int = 128,
         vocab: int = 32000, training: bool = True) -> OpGraph:
    """GNMT (module docstring), ``layers`` encoder and ``layers`` decoder layers unrolled
    over ``seq`` source and ``seq`` target steps (52,046 ops with the defaults)."""
    g = OpGraph()
    h, b = hidden, batch
    act = b * h * BYTES
    top = _encoder(g, layers, h, seq, b, vocab)
    values = g.add("attn.values", top, out=b * seq * h * BYTES)
    keys = g.add("attn.memory_layer", [values, _variable(g, "attn.memory_kernel", h * h * BYTES)],
                 flops=2.0 * b * seq * h * h, out=b * seq * h * BYTES, gemm=True)
    emb = _variable(g, "dec.embedding", vocab * h * BYTES)
    kernels = [_variable(g, f"dec.l{k}.kernel", (3 * h * 4 * h + 4 * h) * BYTES)
               for k in range(layers)]
    w_query = _variable(g, "attn.query_kernel", h * h * BYTES)
    w_score = _variable(g, "attn.score_vector", h * BYTES)
    w_out = _variable(g, "softmax.kernel", h * vocab * BYTES)
    states: list[tuple[int, int] | None] = [None] * layers
    context: int | None = None
    for t in range(seq):
        e = g.add(f"dec.embed.t{t}", [emb], out=act)
        states[0] = _lstm_cell(g, f"dec.l0.t{t}", [e] + ([context] if context is not None else []),
                               states[0], b, 2 * h, h, kernels[0])
        q = g.add(f"attn.query.t{t}", [states[0][0], w_query], flops=2.0 * b * h * h, out=act,
                  gemm=True)
        s = g.add(f"attn.add_tanh.t{t}", [q, keys], flops=2.0 * b * seq * h, out=b * seq * h * BYTES)
        s = g.add(f"attn.score.t{t}", [s, w_score], flops=2.0 * b * seq * h, out=b * seq * BYTES,
                  gemm=True)
        s = g.add(f"attn.softmax.t{t}", [s], flops=5.0 * b * seq, out=b * seq * BYTES)
        context = g.add(f"attn.context.t{t}", [s, values], flops=2.0 * b * seq * h, out=act, gemm=True)
        y = states[0][0]
        for k in range(1, layers):
            states[k] = _lstm_cell(g, f"dec.l{k}.t{t}", [y, context], states[k], b, 2 * h, h,
                                   kernels[k])
            y = states[k][0] if k < 2 else g.add(f"dec.l{k}.residual.t{t}", [y, states[k][0]],
                                                 flops=b * h, out=act)
        logits = g.add(f"softmax.logits.t{t}", [y, w_out], flops=2.0 * b * h * vocab,
                       out=b * vocab * BYTES, gemm=True)
        g.add(f"softmax.loss.t{t}", [logits], flops=5.0 * b * vocab, out=b * BYTES)
    return g.with_backward() if training else g


OP_GRAPHS: dict[str, Callable[..., OpGraph]] = {
    "inception_v3": inception_v3,
    "transformer": transformer,
    "transformer_xl": lambda **kw: transformer(xl=True, **kw),
    "synthetic_transformer": synthetic_transformer,
    "gnmt": gnmt,
}
