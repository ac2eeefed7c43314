"""Small operator graphs and contexts for the operator-sharding tests, and a brute force."""

from __future__ import annotations

import math

import numpy as np

from autopar_opt.cost.context import StageContext, user_reserve_for
from autopar_opt.cost.params import default_params
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.operators import Operand, Operator, OperatorGraph, OpKind
from autopar_opt.ir.training import Training


def context(devices: int, gpus_per_node: int | None = None, batch: int = 8,
            capacity_gib: float | None = None, device: str = "A100-80GB") -> StageContext:
    """A one-stage context of ``devices`` devices (``gpus_per_node`` per node, default all
    in one node) with ``capacity_gib`` modelled bytes per device (default: the HBM's)."""
    gpn = gpus_per_node or devices
    cluster = make_cluster("test", max(1, devices // gpn), min(gpn, devices), device)
    params = default_params()
    reserve = 0.0 if capacity_gib is None else user_reserve_for(
        capacity_gib, cluster.device.hbm_gib, params)
    return StageContext(cluster, Training(global_batch_size=batch, memory_reserve_gib=reserve), params,
                        devices, batch)


def two_op_graph(rows: int = 64, cols: int = 64) -> OperatorGraph:
    """``y = relu(x)`` then ``z = y + 1``: one (rows, cols) tensor on the edge."""
    g = OperatorGraph("two_op")
    dims = (("i", rows), ("j", cols))
    a = g.add(Operator("a", OpKind.elementwise, dims, (Operand((rows, cols), ("i", "j")),),
                       (rows, cols), ("i", "j"), float(rows * cols)))
    g.add(Operator("b", OpKind.elementwise, dims, (Operand((rows, cols), ("i", "j"), a),),
                   (rows, cols), ("i", "j"), float(rows * cols)))
    return g


def random_graph(rng: np.random.Generator, n_ops: int, size: int = 8) -> OperatorGraph:
    """A random DAG of ``n_ops`` small operators (GEMMs, elementwise, norms): every tensor
    is (size, size) or (size, size, size/2); each operator reads one or two earlier ones."""
    g = OperatorGraph(f"random{n_ops}")
    s, h = size, max(2, size // 2)
    shapes: list[tuple[int, ...]] = []
    for v in range(n_ops):
        kind = rng.choice(["gemm", "elementwise", "norm", "gemm"]) if v else "gemm"
        srcs = [int(rng.integers(v))] if v else []
        if v >= 2 and rng.random() < 0.3:
            srcs.append(int(rng.integers(v)))
        if kind == "gemm":
            x = srcs[0] if srcs else None
            ins = [Operand((s, s), ("m", "k"), x), Operand((s, s), ("k", "n"), None, True)]
            if len(srcs) > 1:
                ins.append(Operand((s, s), ("m", "n"), srcs[1]))
            g.add(Operator(f"op{v}", OpKind.gemm, (("m", s), ("n", s), ("k", s)), tuple(ins), (s, s),
                           ("m", "n"), 2.0 * s ** 3 * 1e4))
        elif kind == "elementwise":
            ins = [Operand((s, s), ("m", "n"), x) for x in srcs]
            g.add(Operator(f"op{v}", OpKind.elementwise, (("m", s), ("n", s)), tuple(ins), (s, s),
                           ("m", "n"), float(s * s)))
        else:
            ins = [Operand((s, s), ("m", "n"), srcs[0]), Operand((2, s), (None, "n"), None, True)]
            g.add(Operator(f"op{v}", OpKind.norm, (("m", s), ("n", s)), tuple(ins), (s, s),
                           ("m", "n"), 5.0 * s * s, stats=("n",)))
        shapes.append((s, s))
    _ = h
    return g


def brute_force(tables, capacity: float | None = None) -> tuple[float, list[int] | None]:
    """Least ``T`` over every configuration choice (within ``capacity``), by enumerating the
    whole product space with numpy (each term indexed by the choice grid)."""
    sizes = tables.sizes
    grids = np.indices(sizes).reshape(len(sizes), -1)           # [n, Π K]
    total = np.zeros(grids.shape[1])
    for v, a in enumerate(tables.time):
        total += a[grids[v]]
    for (u, v), r in zip(tables.edges, tables.redistribution):
        total += r[grids[u], grids[v]]
    if capacity is not None:
        mem = np.zeros(grids.shape[1])
        for v, m in enumerate(tables.memory):
            mem += m[grids[v]]
        total = np.where(mem <= capacity * (1 + 1e-9), total, np.inf)
    j = int(np.argmin(total))
    if not np.isfinite(total[j]):
        return math.inf, None
    return float(total[j]), [int(x) for x in grids[:, j]]


def space_size(tables) -> int:
    return math.prod(tables.sizes)
