"""Operator graphs with iteration spaces: the IR of operator-level sharding (PaSE, Alpa).

An :class:`Operator` is one computation of the model (a matmul, a convolution, a
normalisation, ...) with an *iteration space*: ordered, named dimensions with sizes
(``b`` batch, ``l`` sequence, ``h`` heads, ``e`` hidden, ``f`` ffn, ``k``/``c``
reduction, ...). Every tensor it reads or writes is indexed by some of those
dimensions, einsum style (Elango, "PaSE: Parallelization Strategies for Efficient
DNN Training", IPDPS 2021, Sec. III: "iteration space" of a layer; Zheng et al.,
"Alpa", OSDI 2022, Sec. 4.1: the sharding spec of each tensor dimension follows
from the operator's loop dimensions).

An :class:`Operand` holds one tensor's shape and, per tensor axis, the iteration
dimension that indexes it; ``None`` for an axis that no iteration dimension indexes
(a convolution's input height, which spans the output height plus the filter's
halo; one concat input's slice of the channel axis), or a tuple of dimensions for a
row-major merged axis (a flatten: ``(c, h, w)`` -> one axis). An operand is either
produced by another operator (a graph edge), a graph input (no producer), or a
trainable **parameter**. The iteration dimensions that index no axis of the output
are the operator's *reduction* dimensions (a split one leaves partial sums).

``fixed`` names dimensions that may not be split: the spatial dimensions of
convolutions and pooling (PaSE's rule: no halo exchange is modelled), an LSTM's time
dimension (the recurrence), a concat axis, and the inner dimensions of a merged axis
(only a row-major prefix split stays contiguous). Sizes are integers; element sizes
come from the training dtype when the graph is priced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

AxisRef = "str | tuple[str, ...] | None"


class OpKind(str, Enum):
    """What an operator computes; decides how its time and collectives are priced."""

    gemm = "gemm"                   # einsum / matmul / linear: a GEMM on the local block
    conv = "conv"                   # convolution as an implicit GEMM
    lstm = "lstm"                   # an LSTM layer: one GEMM per time step (recurrent)
    embedding = "embedding"         # a table lookup (memory bound)
    elementwise = "elementwise"     # add, multiply, activation functions
    norm = "norm"                   # layer/batch normalisation over the non-fixed axis
    softmax = "softmax"             # softmax over its last dimension
    softmax_xent = "softmax_xent"   # softmax + cross-entropy loss over the last dimension
    pool = "pool"                   # pooling window
    reduce = "reduce"               # mean over the reduction dimensions
    concat = "concat"               # concatenation along a fixed axis
    reshape = "reshape"             # a view (flatten); no data moved


#: Kinds priced as GEMMs at the device's achieved GEMM efficiency.
GEMM_KINDS = frozenset({OpKind.gemm, OpKind.conv, OpKind.lstm})


def axis_dims(axis: AxisRef) -> tuple[str, ...]:
    """The iteration dimensions of one tensor axis (none, one, or a merged group)."""
    if axis is None:
        return ()
    if isinstance(axis, tuple):
        return axis
    return (axis,)


@dataclass(frozen=True)
class Operand:
    """One tensor an operator reads: shape, the dimension of each axis, where it comes from.

    ``take = (axis, index)``: the operand is one slice of the producer's output along
    that axis (the query slice of a fused QKV projection); the producer never splits the
    sliced axis (it is one of its fixed dimensions), the operand's shape is the producer's
    without that axis."""

    shape: tuple[int, ...]
    axes: tuple
    source: int | None = None
    param: bool = False
    take: tuple[int, int] | None = None

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    def dims(self) -> tuple[str, ...]:
        """Every iteration dimension that indexes this tensor."""
        return tuple(d for a in self.axes for d in axis_dims(a))


@dataclass(frozen=True)
class Operator:
    """One node of an :class:`OperatorGraph` (module docstring)."""

    name: str
    kind: OpKind
    dims: tuple[tuple[str, int], ...]
    inputs: tuple[Operand, ...]
    out_shape: tuple[int, ...]
    out_axes: tuple
    flops: float = 0.0
    fixed: frozenset = frozenset()
    #: dimensions a normalisation / softmax computes statistics over (mean and variance,
    #: max and sum): a split one pays all-reduces of the per-row statistics
    stats: tuple[str, ...] = ()
    #: layer this operator belongs to (a transformer block, ...): templates and pipeline
    #: stage boundaries work on layers; "" = none
    layer: str = ""
    #: role inside its layer (``qkv``, ``out``, ``fc1``, ``fc2``, ``norm1`` ...): the
    #: Megatron templates map roles to configurations
    role: str = ""

    @property
    def sizes(self) -> dict[str, int]:
        return dict(self.dims)

    @property
    def dim_names(self) -> tuple[str, ...]:
        return tuple(d for d, _ in self.dims)

    @property
    def out_dims(self) -> tuple[str, ...]:
        return tuple(d for a in self.out_axes for d in axis_dims(a))

    @property
    def reduction(self) -> tuple[str, ...]:
        """Dimensions that index no output axis (split -> partial sums)."""
        out = set(self.out_dims)
        return tuple(d for d in self.dim_names if d not in out)

    @property
    def out_elements(self) -> int:
        return math.prod(self.out_shape) if self.out_shape else 0

    @property
    def params(self) -> tuple[Operand, ...]:
        return tuple(x for x in self.inputs if x.param)

    @property
    def param_elements(self) -> int:
        return sum(x.elements for x in self.params)

    def splittable(self) -> tuple[str, ...]:
        """Dimensions a configuration may split (size > 1, not fixed)."""
        return tuple(d for d, n in self.dims if n > 1 and d not in self.fixed)


@dataclass
class OperatorGraph:
    """Operators in topological order (every producer index is smaller than its consumer's)."""

    name: str
    ops: list[Operator] = field(default_factory=list)
    #: free text: where the graph's shapes come from
    source: str = ""

    def add(self, op: Operator) -> int:
        """Append ``op`` (its producers must already be in the graph); returns its index."""
        v = len(self.ops)
        for x in op.inputs:
            if x.source is not None and not 0 <= x.source < v:
                raise ValueError(f"{op.name}: operand source {x.source} is not an earlier operator")
        self.ops.append(op)
        return v

    def __len__(self) -> int:
        return len(self.ops)

    def edges(self) -> list[tuple[int, int, int]]:
        """``(producer, consumer, operand index)`` for every operand with a producer."""
        return [(x.source, v, i) for v, op in enumerate(self.ops)
                for i, x in enumerate(op.inputs) if x.source is not None]

    def layers(self) -> list[str]:
        """Layer names in first-seen order (operators with no layer are skipped)."""
        seen: dict[str, None] = {}
        for op in self.ops:
            if op.layer:
                seen.setdefault(op.layer, None)
        return list(seen)

    def problems(self) -> list[str]:
        """Everything wrong with the graph (empty: valid). Checked: unique names, dims
        of positive size, every operand axis names a dimension of the operator with the
        axis's size (a merged axis: the product), the output likewise, fixed dims exist,
        every edge's tensor has the producer's output shape."""
        out: list[str] = []
        names: set[str] = set()
        for v, op in enumerate(self.ops):
            where = f"operator {v} ({op.name})"
            if op.name in names:
                out.append(f"{where}: duplicate name")
            names.add(op.name)
            sizes = op.sizes
            if len(sizes) != len(op.dims):
                out.append(f"{where}: duplicate dimension names")
            for d, n in op.dims:
                if not isinstance(n, int) or n < 1:
                    out.append(f"{where}: dimension {d} has size {n!r} (must be a positive integer)")
            tensors = [("output", op.out_shape, op.out_axes)] + \
                [(f"input {i}", x.shape, x.axes) for i, x in enumerate(op.inputs)]
            for what, shape, axes in tensors:
                if len(shape) != len(axes):
                    out.append(f"{where}: {what} has {len(shape)} axes but {len(axes)} axis names")
                    continue
                for n, a in zip(shape, axes):
                    dims = axis_dims(a)
                    unknown = [d for d in dims if d not in sizes]
                    if unknown:
                        out.append(f"{where}: {what} axis names unknown dimension(s) {unknown}")
                    elif dims and math.prod(sizes[d] for d in dims) != n:
                        out.append(f"{where}: {what} axis {a} has size {n}, its dimensions "
                                   f"{math.prod(sizes[d] for d in dims)}")
            for d in tuple(op.fixed) + tuple(op.stats):
                if d not in sizes:
                    out.append(f"{where}: fixed dimension {d} is not a dimension")
            for i, x in enumerate(op.inputs):
                if x.source is not None and 0 <= x.source < v:
                    prod = self.ops[x.source]
                    shape = tuple(prod.out_shape)
                    if x.take is not None:
                        ax, idx = x.take
                        dims = axis_dims(prod.out_axes[ax]) if 0 <= ax < len(shape) else ()
                        if not dims or any(d not in prod.fixed for d in dims) or not 0 <= idx < shape[ax]:
                            out.append(f"{where}: input {i} takes slice {x.take} of {prod.name}'s "
                                       "output, which needs a fixed axis of the producer and an index in it")
                            continue
                        shape = shape[:ax] + shape[ax + 1:]
                    if shape != tuple(x.shape):
                        out.append(f"{where}: input {i} has shape {x.shape}, producer "
                                   f"{prod.name} writes {shape}")
                if x.param and x.source is not None:
                    out.append(f"{where}: input {i} is a parameter with a producer")
        return out
