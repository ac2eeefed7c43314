"""Independent evaluation of a placement (no solver): loads, memory, latency, violations.

``evaluate_placement(problem, assignment)`` recomputes everything from the
original (uncondensed) graph, so that a solver's objective can be checked
against it (the project's strongest oracle, docs/DESIGN.md §1).

- **max-load** (throughput of a pipelined deployment; Tarnawski et al., NeurIPS
  2020, §3): load of device ``d`` = ``Σ_{v on d} time[type(d)][v]`` + (if the
  type pays communication) ``Σ_u comm[u]`` over nodes ``u`` on ``d`` whose output
  is consumed off ``d`` (sending, once) and over nodes ``u`` off ``d`` with a
  consumer on ``d`` (receiving, once per distinct consuming device).
  Objective: ``max_d load_d``.
- **latency** (single sample; the "calls" model of the same authors' latency
  IP, ``latency-ip/lip.py``): each device that pays communication runs its
  whole node set as one block of length ``load_d`` once every input from
  outside the block is ready; nodes on a host (CPU) type run as soon as their
  inputs are ready, on as many cores as needed. Objective: the longest path
  through this block graph (``inf`` when blocks depend on each other in a
  cycle, i.e. the placement is not contiguous).
- **contiguous**: the device parts of the forward graph (backward nodes follow
  their colour class; a class of backward nodes only is ordered along its backward
  edges reversed, as in the exact DP) can be ordered so that every forward edge goes
  to the same or a later part, i.e. the quotient graph is acyclic; this makes every
  part convex (no path leaves it and comes back) and is exactly a chain of
  ideals (:mod:`autopar_opt.core.ideals`). Under **latency** it is the block
  graph that must be acyclic (every accelerator's block convex, no two blocks
  feeding each other): host nodes run one by one, so the host's node set need
  not be contiguous, as in the latency IP (``lip.py`` puts every CPU core in one
  machine with no contiguity rows) and in the MILP of
  :mod:`autopar_opt.placement.exact.latency_milp` (QA round 12: the host-inclusive
  check threw away the MILP's proven optimum as "not contiguous").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from autopar_opt.core.ideals import unique_rows
from autopar_opt.placement.problem import PlacementProblem

MEM_RTOL = 1e-9


@dataclass
class PlacementMetrics:
    """What :func:`evaluate_placement` returns (JSON-able via :meth:`to_dict`)."""

    objective: str
    value: float
    max_load: float
    latency: float
    loads: list[float]
    compute: list[float]
    comm: list[float]
    memory_bytes: list[float]
    critical_device: int
    cut_nodes: list[int]                  # nodes whose output crosses devices
    contiguous: bool
    violations: list[str] = field(default_factory=list)

    @property
    def feasible(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("objective", "value", "max_load", "latency", "loads",
                                              "compute", "comm", "memory_bytes", "critical_device",
                                              "cut_nodes", "contiguous", "violations")}


def assigned_times(problem: PlacementProblem, assign: np.ndarray) -> np.ndarray:
    """``(n,)`` every node's time on the type of the device it is assigned to."""
    devs = problem.devices()
    type_of = np.array([i for i, dt in enumerate(problem.device_types) for _ in range(dt.count)],
                       dtype=np.int64)
    kind = type_of[assign] if len(devs) else np.zeros(0, dtype=np.int64)
    out = np.zeros(problem.num_nodes)
    for i, dt in enumerate(problem.device_types):
        on = kind == i
        out[on] = problem.time[dt.name][on]
    return out


def device_loads(problem: PlacementProblem, assign: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """Per-device compute, communication and memory, and the nodes whose output is cut.

    Array work over the nodes and edges (``O(E log E)``): a node ``u`` whose output is
    read on another device pays ``comm[u]`` once on its own device and once on every
    other device that reads it; the additions happen in node order, as a loop would."""
    devs = problem.devices()
    nd = len(devs)
    compute = np.bincount(assign, weights=assigned_times(problem, assign), minlength=nd)
    memory = np.bincount(assign, weights=problem.size_bytes, minlength=nd)
    edges = unique_rows(problem.edges) if len(problem.edges) else problem.edges
    du, dv = assign[edges[:, 0]], assign[edges[:, 1]]
    cross = du != dv
    src = edges[cross, 0]
    rows = np.concatenate([np.stack([src, dv[cross]], axis=1),
                           np.stack([src, du[cross]], axis=1)]).reshape(-1, 2)
    rows = unique_rows(rows) if len(rows) else rows          # (node, paying device), node order
    comm = np.bincount(rows[:, 1], weights=problem.comm[rows[:, 0]], minlength=nd).astype(float)
    cut = np.flatnonzero(np.bincount(src, minlength=problem.num_nodes) > 0).tolist()
    pays = np.array([dt.pays_comm for dt in devs], dtype=bool)
    return compute, np.where(pays, comm, 0.0), memory, cut


def _is_acyclic(num: int, src: np.ndarray, dst: np.ndarray) -> bool:
    from autopar_opt.core.ideals import topological_order

    try:
        topological_order(num, list(zip(src.tolist(), dst.tolist())))
    except ValueError:
        return False
    return True


def quotient_is_acyclic(problem: PlacementProblem, assign: np.ndarray) -> bool:
    """Whether the device parts can be ordered along every forward edge (and every
    mirrored edge of a backward-only class: :func:`~autopar_opt.placement.condense.order_edges`,
    the exact methods' order)."""
    from autopar_opt.placement.condense import order_edges

    edges = order_edges(problem)
    a, b = assign[edges[:, 0]], assign[edges[:, 1]]
    cut = a != b
    if not np.any(cut):
        return True
    pairs = unique_rows(np.stack([a[cut], b[cut]], axis=1))
    return _is_acyclic(int(assign.max()) + 1, pairs[:, 0], pairs[:, 1])


def _block_finish(problem: PlacementProblem, assign: np.ndarray, loads: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Finish time of every block (``D`` devices, then one per host node), the block of
    every node and the block weights; None when the block graph has a cycle."""
    devs = problem.devices()
    nd, n = len(devs), problem.num_nodes
    pays = np.array([dt.pays_comm for dt in devs], dtype=bool)
    assign = np.asarray(assign, dtype=np.int64)
    key = np.where(pays[assign], assign, nd + np.arange(n))
    weight = np.zeros(nd + n)
    weight[:nd] = np.where(pays, loads, 0.0)
    host = ~pays[assign]
    weight[nd + np.flatnonzero(host)] = assigned_times(problem, assign)[host]
    ku, kv = key[problem.edges[:, 0]], key[problem.edges[:, 1]]
    keep = ku != kv
    pairs = unique_rows(np.stack([ku[keep], kv[keep]], axis=1)) if np.any(keep) \
        else np.zeros((0, 2), dtype=np.int64)
    from autopar_opt.core.ideals import topological_order, unique_ints

    # only the blocks an edge touches need ordering (the others finish at their weight)
    used = unique_ints(pairs.ravel()) if len(pairs) else np.zeros(0, dtype=np.int64)
    local = np.searchsorted(used, pairs) if len(pairs) else pairs
    try:
        order = topological_order(len(used), [tuple(e) for e in local.tolist()])
    except ValueError:
        return None
    preds: list[list[int]] = [[] for _ in range(len(used))]
    for u, v in local.tolist():
        preds[v].append(u)
    finish = weight.copy()
    fin_used = [0.0] * len(used)
    w_used = weight[used].tolist()
    for k in order.tolist():
        fin_used[k] = max((fin_used[p] for p in preds[k]), default=0.0) + w_used[k]
    finish[used] = fin_used
    return finish, key, weight


def block_latency(problem: PlacementProblem, assign: np.ndarray, loads: np.ndarray) -> float:
    """Longest path of the block graph (module docstring); ``inf`` when it has a cycle.

    Block ids: device ``d`` (one block per communication-paying device) or
    ``D + v`` for a node ``v`` on a host type (each runs on its own)."""
    res = _block_finish(problem, assign, loads)
    if res is None:
        return float("inf")
    finish, key, _ = res
    return float(finish[key].max()) if problem.num_nodes else 0.0


def block_times(problem: PlacementProblem, assign: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node its finish time (its block's), per device its block's start and finish
    (0 for an unused device) under the latency model; ValueError on a cyclic block graph."""
    compute, comm, _, _ = device_loads(problem, np.asarray(assign, dtype=np.int64))
    res = _block_finish(problem, assign, compute + comm)
    if res is None:
        raise ValueError("the placement is not contiguous: its block graph has a cycle")
    finish, key, weight = res
    nd = problem.num_devices
    return finish[key], finish[:nd] - weight[:nd], finish[:nd]


def _split_classes(color: np.ndarray, assign: np.ndarray) -> list[str]:
    """One message per colour class whose nodes sit on more than one device (one sort,
    not one scan per class)."""
    if color.size == 0:
        return []
    order = np.argsort(color, kind="stable")
    c, a = color[order], assign[order]
    starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
    lo, hi = np.minimum.reduceat(a, starts), np.maximum.reduceat(a, starts)
    ends = np.r_[starts[1:], c.size]
    return [f"colour class {int(c[s])} split over devices {sorted(set(a[s:e].tolist()))}"
            for s, e in zip(starts[lo != hi], ends[lo != hi])]


def _violations(problem: PlacementProblem, assign: np.ndarray, memory: np.ndarray,
                contiguous: bool | None, acyclic: bool) -> list[str]:
    out = []
    devs = problem.devices()
    if assign.shape != (problem.num_nodes,) or assign.min() < 0 or assign.max() >= len(devs):
        return [f"assignment must give every node a device in 0..{len(devs) - 1}"]
    stuck = np.isinf(assigned_times(problem, assign))
    bad_devices = set(assign[stuck].tolist())
    for d, dt in enumerate(devs):
        if memory[d] > dt.memory_bytes * (1 + MEM_RTOL):
            out.append(f"device {d} ({dt.name}) holds {memory[d]:.6g} bytes > {dt.memory_bytes:.6g}")
        if d in bad_devices:
            bad = np.flatnonzero(stuck & (assign == d))
            out.append(f"nodes {bad[:5].tolist()} cannot run on {dt.name} (device {d})")
    out += _split_classes(problem.color, assign)
    if contiguous and not acyclic:
        out.append("not contiguous: the device parts depend on each other in a cycle (no order "
                   "of the devices runs every edge forward)")
    return out


def evaluate_placement(problem: PlacementProblem, assignment, *, objective: str = "max-load",
                       contiguous: bool | None = None) -> PlacementMetrics:
    """Evaluate ``assignment`` (device index per node, devices as in
    :meth:`PlacementProblem.devices`) under ``objective`` (``"max-load"`` or
    ``"latency"``); ``contiguous=True`` adds contiguity to the feasibility checks.
    """
    assign = np.asarray(assignment, dtype=np.int64)
    ndev = problem.num_devices
    if assign.shape != (problem.num_nodes,) or (assign.size and (assign.min() < 0 or assign.max() >= ndev)):
        raise ValueError(f"assignment must give each of the {problem.num_nodes} nodes a device "
                         f"in 0..{ndev - 1}")
    compute, comm, memory, cut = device_loads(problem, assign)
    loads = compute + comm
    latency = block_latency(problem, assign, loads)
    acyclic = quotient_is_acyclic(problem, assign) if objective != "latency" else \
        _block_finish(problem, assign, loads) is not None
    max_load = float(loads.max()) if loads.size else 0.0
    value = max_load if objective == "max-load" else latency
    if objective not in ("max-load", "latency"):
        raise ValueError(f"objective must be 'max-load' or 'latency', not {objective!r}")
    return PlacementMetrics(objective=objective, value=value, max_load=max_load, latency=latency,
                            loads=loads.tolist(), compute=compute.tolist(), comm=comm.tolist(),
                            memory_bytes=memory.tolist(), critical_device=int(np.argmax(loads)),
                            cut_nodes=cut, contiguous=acyclic,
                            violations=_violations(problem, assign, memory, contiguous, acyclic))
