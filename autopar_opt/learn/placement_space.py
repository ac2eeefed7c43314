"""An operator-graph placement instance as a search problem for the searchers.

The decision unit is a colour class (nodes that must share a device: a
forward node and its backward node, Tarnawski et al. 2020). Classes are
ordered topologically along the forward graph and the mirrored edges of a
backward-only class (:func:`autopar_opt.placement.condense.order_edges`, the
exact methods' order; the classes of a cycle consecutive); a candidate gives each class a
device. Candidates are kept **contiguous** by construction where the moves
allow it: the random generator and GDP's decoder cut the class order into
consecutive blocks, one accelerator per block (a block of a topological order
is convex, so the device parts form a chain and the quotient graph is
acyclic), CPU-only classes go to the CPU.

:meth:`PlacementSpace.price` computes the max-load of a candidate with numpy
(loads, memory, contiguity; the model of
:mod:`autopar_opt.placement.evaluate`), and :meth:`plan_value` prices the
best one with :func:`autopar_opt.placement.evaluate.evaluate_placement`, the
value a searcher reports.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np

from autopar_opt.learn.space import Candidate, Priced
from autopar_opt.learn.tasks import NodeTask

#: added to the memory ratio (at least 1) of a non-contiguous candidate: its
#: penalised value doubles on top of any memory overflow
NON_CONTIGUOUS_EXCESS = 0.25
PLACE_NODE_DIM = 9
PLACE_SLOT_DIM = 4


class PlacementSpace:
    """Colour classes of a :class:`~autopar_opt.placement.problem.PlacementProblem`."""

    kind = "placement"

    def __init__(self, problem: Any, contiguous: bool = True) -> None:
        self.problem, self.contiguous = problem, contiguous
        n = problem.num_nodes
        devs = problem.devices()
        self.ndev = len(devs)
        self.time = np.stack([problem.time[dt.name] for dt in devs], axis=1)        # [n, ndev]
        self.cap = np.array([dt.memory_bytes for dt in devs], dtype=float)
        self.pays = np.array([dt.pays_comm for dt in devs], dtype=bool)
        self.accel = np.flatnonzero(self.pays)
        self.host = np.flatnonzero(~self.pays)
        _, self.class_of = np.unique(problem.color, return_inverse=True)
        self.num_classes = int(self.class_of.max()) + 1 if n else 0
        e = np.unique(problem.edges, axis=0) if len(problem.edges) else np.zeros((0, 2), int)
        self.src, self.dst = e[:, 0], e[:, 1]
        from autopar_opt.placement.condense import order_edges
        #: node pairs a contiguous placement runs forward along (the evaluator's and the
        #: exact methods' order: forward edges and a backward-only class's mirrored ones)
        order = order_edges(problem)
        self.order_src, self.order_dst = order[:, 0], order[:, 1]
        self.order = self._class_order()                        # classes in topological order
        self.rank = np.empty(self.num_classes, dtype=int)
        self.rank[self.order] = np.arange(self.num_classes)
        class_time = np.zeros((self.num_classes, self.ndev))
        np.add.at(class_time, self.class_of, self.time)
        #: classes that can only run on a host device (infinite time on every accelerator)
        self.host_only = np.isinf(class_time[:, self.accel]).all(axis=1) if len(self.accel) else \
            np.ones(self.num_classes, bool)
        self.class_time = class_time
        self.reference_s = float(np.nanmin(np.where(np.isinf(self.time), np.nan, self.time), axis=1)
                                 .sum() / max(len(self.accel), 1))

    def _class_order(self) -> np.ndarray:
        g = nx.DiGraph()
        g.add_nodes_from(range(self.num_classes))
        cu, cv = self.class_of[self.order_src], self.class_of[self.order_dst]
        g.add_edges_from((int(a), int(b)) for a, b in zip(cu, cv) if a != b)
        first = np.full(self.num_classes, np.iinfo(np.int64).max)
        np.minimum.at(first, self.class_of, np.arange(len(self.class_of)))
        if nx.is_directed_acyclic_graph(g):
            return np.array(list(nx.lexicographical_topological_sort(g, key=lambda c: first[c])))
        # classes on a cycle (a backward-only class's mirrored edges can close one) must
        # share a device in a contiguous plan, as the exact methods fuse them: order the
        # strongly connected components topologically, each one's classes consecutive
        comp = nx.condensation(g)
        key = {c: min(first[m] for m in comp.nodes[c]["members"]) for c in comp.nodes}
        out = [m for c in nx.lexicographical_topological_sort(comp, key=lambda c: key[c])
               for m in sorted(comp.nodes[c]["members"], key=lambda m: first[m])]
        return np.array(out, dtype=int)

    # ----------------------------------------------------------------- pricing
    def node_assignment(self, cand: Candidate) -> np.ndarray:
        return cand.choice[self.class_of]

    def price(self, cand: Candidate) -> Priced:
        """Max-load, memory ratio and feasibility (memory, host-only, colour, contiguity)."""
        a = self.node_assignment(cand)
        n = len(a)
        compute = np.bincount(a, weights=self.time[np.arange(n), a], minlength=self.ndev)
        memory = np.bincount(a, weights=self.problem.size_bytes, minlength=self.ndev)
        du, dv = a[self.src], a[self.dst]
        cross = du != dv
        comm = np.zeros(self.ndev)
        if cross.any():
            w = self.problem.comm
            recv = np.unique(self.src[cross] * self.ndev + dv[cross])
            comm += np.bincount(recv % self.ndev, weights=w[recv // self.ndev], minlength=self.ndev)
            send = np.unique(self.src[cross])
            comm += np.bincount(a[send], weights=w[send], minlength=self.ndev)
        loads = compute + np.where(self.pays, comm, 0.0)
        ratio = float(np.max(np.where(np.isfinite(self.cap), memory / self.cap, 0.0)))
        ok = bool(ratio <= 1 + 1e-9 and np.isfinite(loads).all())
        ou, ov = a[self.order_src], a[self.order_dst]
        if self.contiguous and not self._acyclic(ou[ou != ov], ov[ou != ov]):
            ok, ratio = False, max(ratio, 1.0) + NON_CONTIGUOUS_EXCESS
        value = float(loads.max()) if np.isfinite(loads).all() else 1e30
        return Priced(value, ratio, ok)

    def _acyclic(self, du: np.ndarray, dv: np.ndarray) -> bool:
        """Whether the device graph of the crossing edges ``du -> dv`` is acyclic, on the
        devices those edges touch (at most two per edge): a matrix over every device was
        ndev^2 bytes, 17 GB and 38 s a candidate with 2 x 65,536 devices (QA round 12)."""
        if du.size == 0:
            return True
        used, local = np.unique(np.concatenate([du, dv]), return_inverse=True)
        k = used.size
        adj = np.zeros((k, k), dtype=bool)
        adj[local[:du.size], local[du.size:]] = True
        alive = np.ones(k, dtype=bool)
        for _ in range(k):
            sources = alive & ~adj[alive].any(axis=0)
            if not sources.any():
                return not alive.any()
            alive &= ~sources
            adj[sources] = False
        return True

    # ------------------------------------------------------------------ moves
    def from_blocks(self, block: np.ndarray, devices: np.ndarray | None = None) -> Candidate:
        """Block index per class (in topological rank order) -> accelerator per class."""
        accel = self.accel if devices is None else devices
        if len(accel) == 0:                 # no accelerator: everything on the first host
            return Candidate(0, np.zeros(0, dtype=int),
                             np.full(self.num_classes, self.host[0], dtype=int))
        choice = accel[np.minimum(block, len(accel) - 1)][self.rank]
        if len(self.host):
            choice = np.where(self.host_only, self.host[0], choice)
        return Candidate(0, np.zeros(0, dtype=int), choice.astype(int))

    def random_candidate(self, rng: np.random.Generator, config: int | None = None) -> Candidate:
        """Random cuts of the class order into one block per accelerator, random device order."""
        m, k = self.num_classes, len(self.accel)
        cuts = np.sort(rng.integers(0, m + 1, size=max(k - 1, 0)))
        block = np.searchsorted(cuts, np.arange(m), side="right")
        return self.from_blocks(block, rng.permutation(self.accel))

    def neighbour(self, cand: Candidate, rng: np.random.Generator) -> Candidate:
        """One local move: shift the boundary between two blocks of the class order
        by one class (70%; keeps block plans contiguous), move a class to the device
        of a class it exchanges data with (20%), or to a random accelerator (10%)."""
        new = cand.copy()
        if len(self.accel) == 0:   # CPU cores only (QA round 12: numpy's "negative dimensions")
            return new             # the searchers keep work off the host: no move
        r = rng.random()
        by_rank = cand.choice[self.order]
        steps = np.flatnonzero(by_rank[:-1] != by_rank[1:])
        if r < 0.7 and len(steps):
            i = int(rng.choice(steps))
            src, dst = (i, i + 1) if rng.random() < 0.5 else (i + 1, i)
            c = self.order[src]
            if not self.host_only[c] and not self.host_only[self.order[dst]]:
                new.choice[c] = by_rank[dst]
            return new
        a = self.node_assignment(cand)
        cross = np.flatnonzero(a[self.src] != a[self.dst])
        if len(cross) and r < 0.9:
            e = int(rng.choice(cross))
            u, v = (self.src[e], self.dst[e]) if rng.random() < 0.5 else (self.dst[e], self.src[e])
            c = self.class_of[u]
            if not self.host_only[c] and a[v] in self.accel:
                new.choice[c] = a[v]
        else:
            c = int(rng.integers(self.num_classes))
            if not self.host_only[c]:
                new.choice[c] = int(rng.choice(self.accel))
        return new

    # ----------------------------------------------------------------- output
    def plan_value(self, cand: Candidate) -> tuple[dict, float, bool, dict]:
        """(placement, evaluate_placement's max-load, feasible, metrics dict)."""
        from autopar_opt.placement.evaluate import evaluate_placement

        assign = self.node_assignment(cand)
        m = evaluate_placement(self.problem, assign, objective="max-load",
                               contiguous=self.contiguous)
        labels = self.problem.device_labels()
        plan = {"assignment": assign.tolist(), "devices": labels}
        return plan, m.value, m.feasible, m.to_dict()

    # ------------------------------------------------------------------ GDP
    def node_task(self) -> NodeTask:
        """The class graph for the GDP policy, in topological order. The policy's
        per-node output is its boundary score ("the next accelerator starts
        here"); ``k − 1`` boundaries cut the order into one block per
        accelerator, so every decoded plan is contiguous (one trivial slot per
        node: the device is the block's)."""
        k, m = len(self.accel), self.num_classes
        t = np.where(np.isinf(self.class_time), np.nan, self.class_time)
        size = np.zeros(m)
        np.add.at(size, self.class_of, self.problem.size_bytes)
        cw = np.zeros(m)
        np.add.at(cw, self.class_of, self.problem.comm)
        cu, cv = self.class_of[self.src], self.class_of[self.dst]
        keep = cu != cv
        edges = np.unique(np.stack([self.rank[cu[keep]], self.rank[cv[keep]]], axis=1), axis=0)
        deg = np.bincount(edges.ravel(), minlength=m) if len(edges) else np.zeros(m)
        scale = max(self.reference_s, 1e-12)
        acc_t = np.nanmin(t[:, self.accel], axis=1) if k else np.zeros(m)
        host_t = np.nanmin(t[:, self.host], axis=1) if len(self.host) else np.zeros(m)
        cap = float(np.nanmin(np.where(np.isfinite(self.cap[self.accel]), self.cap[self.accel], np.nan))) \
            if k and np.isfinite(self.cap[self.accel]).any() else 1.0
        feats = np.stack([np.nan_to_num(acc_t / scale * k), np.nan_to_num(host_t / scale),
                          size / cap * k, cw / scale * k, deg / 8, self.host_only.astype(float),
                          np.arange(m) / max(m - 1, 1), np.full(m, k / 8), np.full(m, m / 1000)],
                         axis=1)[self.order]
        slots = np.zeros((m, 1, PLACE_SLOT_DIM))
        slots[..., 0] = (np.arange(m) / max(m - 1, 1))[:, None]
        slots[..., 1] = k / 8
        mask = np.ones((m, 1), dtype=bool)

        def decode(_slot: np.ndarray, block: np.ndarray) -> Candidate:
            return self.from_blocks(block)

        return NodeTask(self.problem.name, self, feats, edges, slots, mask, k - 1, decode, scale)
