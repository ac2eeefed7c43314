"""MILP for single-sample latency (the "calls" block model of Tarnawski et al.'s latency IP).

Model (``latency-ip/lip.py`` of msr-fiddle/dnn-partitioning, NeurIPS 2020 §5):
every comm-paying device ``d`` runs its node set as one block; it starts
once every input produced outside the block is ready and lasts
``load_d`` (time + sending + receiving, as in max-load). Nodes on a host type
(no communication) run individually as soon as their inputs are ready (as
many host cores as needed). Latency = the last finishing time.

Variables per node ``v`` and comm-paying device ``d`` (``H`` = the pooled host):
``x[v,d], x[v,H] ∈ {0,1}``; per-device convexity ``z[v,d]`` (``z ≥ x``,
``z[v] ≤ z[u]`` and ``z[v] ≤ x[v] − x[u] + 1`` on every edge ``u → v``);
``cin[u,d] ≥ x[v,d] − x[u,d]``, ``cout[u,d] ≥ x[u,d] − x[v,d]``;
``start_d ≥ lat[u] − M(1 − cin[u,d])``; ``finish_d = start_d + load_d``;
``lat[v] ≥ finish_d − M(1 − x[v,d])``; host: ``lat[v] ≥ lat[u] + t_H(v)·x[v,H]``.
``M`` is the latency of a known feasible placement (everything on the host,
or the warm start), with ``T ≤ M``: it excludes only worse placements.
Colour classes: ``x[u,d] = x[v,d]`` inside a class. Works on the original
nodes (not the condensed units), since host nodes of one class still run
individually.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autopar_opt.placement.condense import Condensed
from autopar_opt.core.matrix_builder import MatrixBuilder
from autopar_opt.core.matrix import MatrixForm


@dataclass
class LatencyMILP:
    form: MatrixForm
    x: np.ndarray              # (n, D+1) last column = host
    devices: list[int]         # device index of each comm column
    host_device: int | None
    node_level: bool = True
    cols: dict = None          # name -> column indices (z{k}, cin{k}, cout{k}, start{k}, ...)

    def decode(self, sol: np.ndarray, cond: Condensed) -> np.ndarray:
        col = np.argmax(sol[self.x], axis=1)
        dev = np.array(self.devices + [self.host_device if self.host_device is not None else -1])
        return dev[col]


def _rows_le(b: MatrixBuilder, cols: list[np.ndarray], vals: list[np.ndarray], rhs: np.ndarray) -> None:
    """Elementwise rows ``Σ_k vals[k]_i · x[cols[k]_i] <= rhs_i``."""
    n = np.asarray(rhs).size
    r = np.arange(n)
    b.add_rows(np.concatenate([r] * len(cols)), np.concatenate([np.ravel(c) for c in cols]),
               np.concatenate([np.broadcast_to(v, (n,)).astype(float) for v in vals]),
               np.full(n, -np.inf), np.broadcast_to(rhs, (n,)).astype(float))


def build_latency_milp(cond: Condensed, *, contiguous: bool = True, big_m: float | None = None,
                       builder: MatrixBuilder | None = None) -> LatencyMILP:
    """The MILP of the module docstring (``contiguous`` must be True: blocks are convex).
    ``builder``: a :class:`~autopar_opt.core.matrix_builder.MatrixCounter` counts it instead."""
    if not contiguous:
        raise ValueError("the latency objective runs each device's nodes as one block, which "
                         "needs contiguous parts; use --contiguous (or --objective max-load)")
    p = cond.problem
    n = p.num_nodes
    devs = p.devices()
    comm_devs = [d for d, t in enumerate(devs) if t.pays_comm]
    host = next((d for d, t in enumerate(devs) if not t.pays_comm), None)
    host_t = p.time[devs[host].name] if host is not None else None
    if big_m is None:
        big_m = _sequential_bound(p)
    big_m = float(big_m) * (1 + 1e-9) + 1e-9
    b = MatrixBuilder() if builder is None else builder
    nd = len(comm_devs)
    x = b.add_vars("x", (n, nd + 1), 0.0, 1.0, integer=True)
    if host is None:
        b.hi[-1].reshape(n, nd + 1)[:, nd] = 0.0
    xhi = b.hi[-1].reshape(n, nd + 1)
    for k, d in enumerate(comm_devs):
        xhi[np.isinf(p.time[devs[d].name]), k] = 0.0
    if host is not None:
        xhi[np.isinf(host_t), nd] = 0.0
    r = np.repeat(np.arange(n), nd + 1)
    b.add_rows(r, x.ravel(), np.ones(x.size), np.ones(n), np.ones(n))
    for c in np.unique(p.color):                        # colour classes
        mem = np.flatnonzero(p.color == c)
        for u, v in zip(mem[:-1], mem[1:]):
            rr = np.arange(nd + 1)
            b.add_rows(np.r_[rr, rr], np.r_[x[u], x[v]], np.r_[np.ones(nd + 1), -np.ones(nd + 1)],
                       np.zeros(nd + 1), np.zeros(nd + 1))
    src, dst = p.edges[:, 0], p.edges[:, 1]
    lat = b.add_vars("lat", (n,), 0.0, big_m)
    total = b.add_vars("T", (), 0.0, big_m)
    b.set_cost(int(total), 1.0)
    _rows_le(b, [lat, np.full(n, total)], [1.0, -1.0], np.zeros(n))
    if host is not None:
        _rows_le(b, [x[:, nd], lat], [host_t, -1.0], np.zeros(n))
        _rows_le(b, [lat[src], x[dst, nd], lat[dst]], [1.0, host_t[dst], -1.0], np.zeros(src.size))
    cols = {"lat": lat, "T": int(total)}
    for k, d in enumerate(comm_devs):
        cols.update(_device_rows(b, cond, x, k, devs[d], lat, src, dst, big_m))
    return LatencyMILP(form=b.build(), x=x, devices=comm_devs, host_device=host, cols=cols)


def _device_rows(b: MatrixBuilder, cond: Condensed, x: np.ndarray, k: int, dt, lat: np.ndarray,
                 src: np.ndarray, dst: np.ndarray, big_m: float) -> dict:
    p = cond.problem
    n = p.num_nodes
    z = b.add_vars(f"z{k}", (n,), 0.0, 1.0)
    _rows_le(b, [x[:, k], z], [1.0, -1.0], np.zeros(n))                       # z >= x
    _rows_le(b, [z[dst], z[src]], [1.0, -1.0], np.zeros(src.size))            # z_v <= z_u
    _rows_le(b, [z[dst], x[dst, k], x[src, k]], [1.0, -1.0, 1.0], np.ones(src.size))
    cin = b.add_vars(f"cin{k}", (n,), 0.0, 1.0)
    cout = b.add_vars(f"cout{k}", (n,), 0.0, 1.0)
    _rows_le(b, [x[dst, k], x[src, k], cin[src]], [1.0, -1.0, -1.0], np.zeros(src.size))
    _rows_le(b, [x[src, k], x[dst, k], cout[src]], [1.0, -1.0, -1.0], np.zeros(src.size))
    start = b.add_vars(f"start{k}", (), 0.0, big_m)
    finish = b.add_vars(f"finish{k}", (), 0.0, big_m)
    t = np.where(np.isinf(p.time[dt.name]), 0.0, p.time[dt.name])
    cols = np.r_[x[:, k], cin, cout, start, finish]
    vals = np.r_[t, p.comm, p.comm, 1.0, -1.0]
    b.add_rows(np.zeros(cols.size, np.int64), cols, vals, [0.0], [0.0])       # finish = start + load
    # start >= lat[u] - M (1 - cin[u])  <=>  lat[u] + M cin[u] - start <= M
    _rows_le(b, [lat, cin, np.full(n, start)], [1.0, big_m, -1.0], np.full(n, big_m))
    # lat[v] >= finish - M (1 - x[v])  <=>  finish + M x[v] - lat[v] <= M
    _rows_le(b, [np.full(n, finish), x[:, k], lat], [1.0, big_m, -1.0], np.full(n, big_m))
    if np.isfinite(dt.memory_bytes) and p.size_bytes.sum() > dt.memory_bytes:
        b.add_rows(np.zeros(n, np.int64), x[:, k], p.size_bytes, [-np.inf], [dt.memory_bytes])
    return {f"z{k}": z, f"cin{k}": cin, f"cout{k}": cout, f"start{k}": int(start),
            f"finish{k}": int(finish)}


def latency_start(milp: LatencyMILP, problem, assign: np.ndarray) -> np.ndarray:
    """A feasible column vector (MIP start) for a contiguous placement of finite latency.

    ``x`` from the placement (host devices pooled); ``z`` = the block and its ancestors
    (predecessor-closed, and no block node's successor outside the block is in it, by
    convexity); ``cin``/``cout`` = received/sent outputs; block start = the latest
    finishing outside input, finish = start + load, every accelerator node finishes
    with its block and a host node ``t_H`` after its latest input (the times of
    :func:`~autopar_opt.placement.evaluate.block_times`)."""
    from autopar_opt.placement.evaluate import block_times

    n = problem.num_nodes
    sol = np.zeros(milp.form.num_cols)
    assign = np.asarray(assign, dtype=np.int64)
    col = np.full(problem.num_devices, milp.x.shape[1] - 1)
    col[milp.devices] = np.arange(len(milp.devices))
    sol[milp.x[np.arange(n), col[assign]]] = 1.0
    node_finish, dev_start, dev_finish = block_times(problem, assign)
    sol[milp.cols["lat"]] = node_finish
    sol[milp.cols["T"]] = float(node_finish.max()) if n else 0.0
    src, dst = problem.edges[:, 0], problem.edges[:, 1]
    order = _reverse_topological(problem)
    for k, d in enumerate(milp.devices):
        on = assign == d
        z = on.copy()
        for v in order:                                   # ancestors of the block
            if not z[v]:
                z[v] = bool(np.any(z[dst[src == v]]))
        sol[milp.cols[f"z{k}"]] = z
        cin, cout = np.zeros(n), np.zeros(n)
        cin[src[on[dst] & ~on[src]]] = 1.0
        cout[src[on[src] & ~on[dst]]] = 1.0
        sol[milp.cols[f"cin{k}"]], sol[milp.cols[f"cout{k}"]] = cin, cout
        sol[milp.cols[f"start{k}"]] = dev_start[d]
        sol[milp.cols[f"finish{k}"]] = dev_finish[d]
    return sol


def _reverse_topological(problem) -> list[int]:
    from autopar_opt.core.ideals import topological_order

    return topological_order(problem.num_nodes, [tuple(e) for e in problem.edges.tolist()]
                             ).tolist()[::-1]


def _sequential_bound(p) -> float:
    """Latency of any placement is at most running every node one after the other on its
    slowest type plus every transfer paid by every device: a valid big-M."""
    finite = [np.where(np.isinf(t), 0.0, t) for t in p.time.values()]
    return float(np.sum(np.max(finite, axis=0)) + p.num_devices * p.comm.sum()) + 1.0
