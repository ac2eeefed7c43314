"""Device meshes, configurations and the blocks of a tensor each device holds.

A logical mesh ``(m0, m1)`` arranges ``N = m0·m1`` devices; rank ``r = i0·m1 + i1``,
so mesh axis 1 runs over consecutive ranks (inside a node when ``m1`` divides the GPUs
per node). A 1-D mesh is ``(1, N)``.

A :class:`Config` of an operator gives every iteration dimension a split factor on
each mesh axis; on each axis the factors' product divides the axis size, the rest of
the axis replicates. Two rule sets enumerate them (:func:`enumerate_configs`):

* ``alpa`` (Zheng et al., OSDI 2022, Sec. 4.1): a mesh axis goes whole to one
  dimension or to none (sharding specs ``R``, ``S0``, ``S1``, ``S01`` of each
  dimension);
* ``pase`` (Elango, IPDPS 2021, Sec. III and ``GetConfigs``): on a 1-D mesh any split
  factor per dimension, the product dividing ``N``. PaSE keeps every product ``≤ p``: a
  product dividing ``N`` is here too (the devices it leaves over hold replicas, which
  costs the same time as leaving them idle), a product that does not divide ``N`` (3 or
  6 of 8 devices) is not in this space at all. On PaSE's own eleven tables
  (``tests/data/peers/pase``) those are 0-28% of the configurations (2,252 of 7,949 on
  Inception-v3 at p = 16) and PaSE's optimum uses none of them (QA round 35). PaSE's
  block cutoff (a split leaves blocks of at least 4, or 1 on RNNLM and the Transformer)
  is not applied; on its four graphs at 8 devices no configuration here falls below it.

Every factor divides its dimension's size and fixed dimensions stay whole. A split
reduction dimension leaves partial sums, reduced by an all-reduce; with
``reduce_scatter`` a configuration may instead reduce-scatter them onto one output
dimension (Megatron-LM's sequence parallelism: Korthikanti et al. 2022, Sec. 4.2.2),
whose blocks are then also split over the reduction group.

Rank to block: on each mesh axis the coordinate is a mixed-radix number, replication
outermost, then the split dimensions in the operator's order, the first outermost; a
dimension split on both axes has block ``c0·f1 + c1``. So two operators whose tensors
are split alike also place the blocks alike, and resharding between them is free.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from autopar_opt.ir.operators import Operator, axis_dims
from autopar_opt.ir.strategies import divisors

#: Configuration rule sets of :func:`enumerate_configs`.
SPLIT_RULES = ("alpa", "pase")


@dataclass(frozen=True)
class Mesh:
    """A logical ``(m0, m1)`` mesh on nodes of ``gpus_per_node`` devices (module docstring)."""

    shape: tuple[int, int]
    gpus_per_node: int
    #: the cluster rank of the mesh's rank 0 (a pipeline stage's first device)
    first_rank: int = 0
    #: copies of the whole mesh that run the same plan on the remaining devices (a plan
    #: that uses ``N / replicas`` devices: PaSE's "product ≤ p"; replicas compute the same
    #: blocks, so they add no communication and no memory)
    replicas: int = 1

    @property
    def devices(self) -> int:
        return self.shape[0] * self.shape[1]

    def label(self) -> str:
        text = f"{self.shape[0]}x{self.shape[1]}"
        return text if self.replicas == 1 else f"{self.replicas}x({text})"

    @cached_property
    def coords(self) -> tuple[np.ndarray, np.ndarray]:
        """Mesh coordinates ``(i0, i1)`` of every rank."""
        r = np.arange(self.devices)
        return r // self.shape[1], r % self.shape[1]

    @cached_property
    def node(self) -> np.ndarray:
        """Node of every rank, numbered from 0 within the mesh (cluster ranks are
        numbered node-major)."""
        nodes = (self.first_rank + np.arange(self.devices)) // self.gpus_per_node
        return nodes - nodes[0]


@dataclass(frozen=True, order=True)
class Config:
    """Split factors per mesh axis and dimension; ``scatter``: the output dimension the
    reduction group's partial sums are reduce-scattered onto ("" = all-reduce)."""

    factors: tuple[tuple[int, ...], ...]
    scatter: str = ""

    @cached_property
    def total(self) -> tuple[int, ...]:
        """Total split factor of every dimension (both mesh axes)."""
        return tuple(math.prod(col) for col in zip(*self.factors))

    def factor(self, i: int) -> int:
        """Total split factor of the ``i``-th dimension."""
        return self.total[i]

    def totals(self, op: Operator) -> dict[str, int]:
        return dict(zip(op.dim_names, self.total))

    def parts(self) -> int:
        """Number of distinct blocks of the iteration space (devices doing distinct work)."""
        return math.prod(math.prod(f) for f in self.factors)

    def label(self, op: Operator) -> str:
        """Readable form, e.g. ``b4·h2`` or ``b2·k2>l`` (reduce-scattered onto ``l``);
        ``rep`` when nothing is split."""
        parts = []
        for i, d in enumerate(op.dim_names):
            per = [f[i] for f in self.factors]
            if math.prod(per) > 1:
                parts.append(d + "".join(str(f) if f > 1 else "" for f in per)
                             if sum(f > 1 for f in per) == 1 else d + "x".join(map(str, per)))
        text = "·".join(parts) or "rep"
        return text + (f">{self.scatter}" if self.scatter else "")

    def to_dict(self, op: Operator) -> dict:
        return {"split": {d: self.factor(i) for i, d in enumerate(op.dim_names) if self.factor(i) > 1},
                "mesh_axes": [list(f) for f in self.factors], "reduce_scatter": self.scatter or None,
                "label": self.label(op)}


def _axis_options(op: Operator, m: int, rule: str) -> list[tuple[int, ...]]:
    """Factor vectors of one mesh axis of size ``m``."""
    names = op.dim_names
    sizes = op.sizes
    split = set(op.splittable())
    if m == 1:
        return [tuple(1 for _ in names)]
    if rule == "alpa":
        out = [tuple(1 for _ in names)]
        for i, d in enumerate(names):
            if d in split and sizes[d] % m == 0:
                out.append(tuple(m if j == i else 1 for j in range(len(names))))
        return out
    opts = [[f for f in divisors(m) if sizes[d] % f == 0] if d in split else [1] for d in names]
    return [t for t in itertools.product(*opts) if m % math.prod(t) == 0]


def enumerate_configs(op: Operator, mesh: Mesh, rule: str = "alpa",
                      reduce_scatter: bool = True) -> list[Config]:
    """Every configuration of ``op`` on ``mesh`` under ``rule`` (module docstring)."""
    if rule not in SPLIT_RULES:
        raise ValueError(f"unknown split rule {rule!r}; choose one of {', '.join(SPLIT_RULES)}")
    if rule == "pase" and mesh.shape[0] != 1:
        raise ValueError("the pase rule splits over a 1-D mesh (1, N)")
    sizes = [n for _, n in op.dims]
    per_axis = [_axis_options(op, m, rule) for m in mesh.shape]
    out: list[Config] = []
    red = set(op.reduction)
    out_dims = [d for d in op.out_dims if d not in op.fixed]
    for combo in itertools.product(*per_axis):
        tot = [math.prod(f[i] for f in combo) for i in range(len(sizes))]
        if any(n % t for n, t in zip(sizes, tot)):
            continue
        cfg = Config(tuple(combo))
        out.append(cfg)
        g = math.prod(t for d, t in zip(op.dim_names, tot) if d in red)
        if reduce_scatter and g > 1 and op.out_shape:
            sz = op.sizes
            for i, d in enumerate(op.dim_names):
                if d in out_dims and sz[d] % (tot[i] * g) == 0 and _scatter_ok(op, d):
                    out.append(Config(tuple(combo), d))
    return out


def _scatter_ok(op: Operator, d: str) -> bool:
    """A reduce-scatter target must be a whole output axis or the first (outer) dimension
    of a merged one, so that its finer blocks stay row-major contiguous."""
    for a in op.out_axes:
        dims = axis_dims(a)
        if d in dims:
            return dims[0] == d
    return False


def dim_blocks(op: Operator, cfg: Config, mesh: Mesh) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Block index of every dimension on every rank, and the replica index per rank.

    Mixed radix per mesh axis: replication outermost, split dimensions in operator
    order (first outermost); a dimension split on both axes: ``c0·f1 + c1``.
    (Cached by dimension names, configuration and mesh: the arrays are read-only.)"""
    return _dim_blocks(op.dim_names, cfg, mesh)


@lru_cache(maxsize=65536)
def _dim_blocks(names: tuple[str, ...], cfg: Config, mesh: Mesh) -> tuple[dict[str, np.ndarray], np.ndarray]:
    idx = {d: np.zeros(mesh.devices, dtype=np.int64) for d in names}
    rep = np.zeros(mesh.devices, dtype=np.int64)
    for j, coord in enumerate(mesh.coords):
        f_axis = cfg.factors[j]
        c = coord.copy()
        local = {}
        for i in range(len(names) - 1, -1, -1):
            local[names[i]] = c % f_axis[i]
            c = c // f_axis[i]
        rep = rep * (mesh.shape[j] // math.prod(f_axis)) + c
        for i, d in enumerate(names):
            idx[d] = idx[d] * f_axis[i] + local[d]
    for arr in (*idx.values(), rep):
        arr.setflags(write=False)
    return idx, rep


def tensor_blocks(op: Operator, cfg: Config, mesh: Mesh, axes: tuple,
                  output: bool = False) -> tuple[np.ndarray, tuple[int, ...]]:
    """Block index of every rank on every axis of a tensor (``[N, A]``) and the number of
    blocks per axis. ``output``: the operator's output, where a reduce-scatter target
    axis is split further over the reduction group. (Cached; read-only arrays.)"""
    return _tensor_blocks(op.dim_names, op.reduction, cfg, mesh, tuple(axes), output)


@lru_cache(maxsize=65536)
def _tensor_blocks(names: tuple[str, ...], reduction: tuple[str, ...], cfg: Config, mesh: Mesh,
                   axes: tuple, output: bool) -> tuple[np.ndarray, tuple[int, ...]]:
    idx, _ = _dim_blocks(names, cfg, mesh)
    tot = dict(zip(names, cfg.total))
    n = mesh.devices
    cols, facs = [], []
    red_idx, red_n = np.zeros(n, dtype=np.int64), 1
    if output and cfg.scatter:
        for d in reduction:
            red_idx, red_n = red_idx * tot[d] + idx[d], red_n * tot[d]
    for a in axes:
        i, f = np.zeros(n, dtype=np.int64), 1
        for d in axis_dims(a):
            i, f = i * tot[d] + idx[d], f * tot[d]
            if output and d == cfg.scatter:
                i, f = i * red_n + red_idx, f * red_n
        cols.append(i)
        facs.append(f)
    blocks = np.stack(cols, axis=1) if cols else np.zeros((n, 0), dtype=np.int64)
    blocks.setflags(write=False)
    return blocks, tuple(facs)


def output_blocks(op: Operator, cfg: Config, mesh: Mesh,
                  take: tuple[int, int] | None = None) -> tuple[np.ndarray, tuple[int, ...]]:
    """Blocks of ``op``'s output, or of the slice ``take`` of it (the sliced axis, never
    split, dropped)."""
    blocks, facs = tensor_blocks(op, cfg, mesh, op.out_axes, output=True)
    if take is None:
        return blocks, facs
    ax = take[0]
    return np.delete(blocks, ax, axis=1), facs[:ax] + facs[ax + 1:]


def group_ranks(op: Operator, cfg: Config, mesh: Mesh, dims: tuple[str, ...]) -> np.ndarray:
    """Ranks of rank 0's group over ``dims``: the ranks that differ from rank 0 only in
    the blocks of ``dims`` (same blocks of every other dimension, same replica)."""
    return _group_ranks(op.dim_names, cfg, mesh, tuple(dims))


@lru_cache(maxsize=65536)
def _group_ranks(names: tuple[str, ...], cfg: Config, mesh: Mesh, dims: tuple[str, ...]) -> np.ndarray:
    idx, rep = _dim_blocks(names, cfg, mesh)
    same = rep == rep[0]
    for d in names:
        if d not in dims:
            same &= idx[d] == idx[d][0]
    return np.flatnonzero(same)


def logical_meshes(devices: int, gpus_per_node: int, one_d_only: bool = False,
                   submeshes: bool = True) -> list[Mesh]:
    """Every logical 2-D shape ``(m0, m1)`` of ``devices`` (Alpa enumerates the logical
    shapes of a device mesh, Sec. 5.2), 1-D ``(1, N)`` first (``(N, 1)`` is the same mesh);
    ``one_d_only``: just that one.

    ``submeshes``: also every 2-D shape ``(a, b)``, ``a, b > 1``, of a proper divisor ``d``
    of the devices, on ranks ``0..d-1`` and replicated ``N/d`` times (a plan that leaves
    devices to replicas, as PaSE's configurations with a product below ``p`` do). Without
    them a plan of ``d`` devices on a 2-D mesh could not be used on ``N`` devices (it would
    need a third mesh axis), and more devices could give a worse optimum. A 1-D shape of
    ``d`` devices needs no entry: it is ``(N/d, d)`` with mesh axis 0 unused."""
    if one_d_only:
        return [Mesh((1, devices), gpus_per_node)]
    out = [Mesh((devices // m1, m1), gpus_per_node) for m1 in reversed(divisors(devices))
           if m1 > 1 or devices == 1]
    if submeshes:
        for d in divisors(devices)[:-1]:
            out += [Mesh((d // m1, m1), gpus_per_node, 0, devices // d) for m1 in reversed(divisors(d))
                    if 1 < m1 < d]
    return out
