"""Redistribution of a tensor between two layouts (the edge cost of operator-level sharding).

A layout says which block of the tensor each device holds: per device and tensor axis
a block index, and per axis the number of blocks (:func:`~autopar_opt.ir.mesh.tensor_blocks`).
Going from the producer's layout ``P`` to the consumer's ``C``, device ``r`` needs its
consumer block; it already holds the part of it inside its own producer block and
receives the rest from the producer blocks that intersect it (Alpa's resharding cost,
Zheng et al., OSDI 2022, Sec. 4.1; PaSE's ``GetAreaNeeded`` volume, Elango 2021,
counts the same missing part with one bandwidth). Its time is

    ``t_r = steps_r · α + missing_r · S / β``

with ``steps_r`` the intersecting producer blocks other than its own (one message
each), ``missing_r`` the fraction of the tensor it lacks, ``S`` the tensor's bytes;
``(α, β)`` are the NVLink tier's when every block it needs is held by a device of its
own node, else the network's (one NIC per GPU). The slowest device bounds the
redistribution. In the uniform cases this is the ring formula of
:mod:`autopar_opt.cost.collectives` exactly: the same layout or a slice of a
replicated tensor costs nothing; split over ``g`` → replicated is an all-gather,
``(g-1)·α + (g-1)/g · S/β``; split along one axis → split along another over the same
``g`` devices is an all-to-all, ``(g-1)·α + (g-1)/g · (S/g)/β``.

:func:`redistribution_matrix` prices every pair of two layout sets at once (numpy);
:func:`redistribution_time` prices one pair with a plain loop over devices, the
independent reference the evaluator uses.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from autopar_opt.cost.context import StageContext
from autopar_opt.ir.mesh import Mesh

#: A missing fraction below this is taken as nothing to move (round-off of the interval
#: arithmetic on block boundaries).
MISSING_EPS = 1e-12


@dataclass(frozen=True)
class Links:
    """What a redistribution sees: the two tiers as (bytes/s effective, latency s) and
    the node of every rank."""

    intra_bps: float
    intra_lat_s: float
    inter_bps: float
    inter_lat_s: float
    node: np.ndarray

    @property
    def nodes(self) -> int:
        return int(self.node.max()) + 1 if len(self.node) else 1


def links_of(ctx: StageContext, mesh: Mesh) -> Links:
    """The tiers a redistribution on ``mesh`` sees (NCCL efficiency applied)."""
    cl = ctx.cluster
    return Links(cl.intra_node.bytes_per_s * ctx.link_efficiency(cl.intra_node), cl.intra_node.latency_s,
                 cl.inter_node.bytes_per_s * ctx.link_efficiency(cl.inter_node), cl.inter_node.latency_s,
                 mesh.node)


def _codes(blocks: np.ndarray, facs: np.ndarray) -> np.ndarray:
    code = np.zeros(blocks.shape[0], dtype=np.int64)
    for a in range(blocks.shape[1]):
        code = code * int(facs[a]) + blocks[:, a]
    return code


@dataclass(frozen=True)
class Exchange:
    """What every device does in each pair of layouts, ``[Gp, Gc, N]`` each: messages,
    missing fraction of the tensor, whether all it needs is held inside its node."""

    steps: np.ndarray
    missing: np.ndarray
    local: np.ndarray

    def times(self, nbytes: float, links: Links) -> np.ndarray:
        """``[Gp, Gc]`` seconds for a tensor of ``nbytes`` (module docstring)."""
        if self.steps.size == 0 or nbytes <= 0:
            return np.zeros(self.steps.shape[:2])
        bw = np.where(self.local, links.intra_bps, links.inter_bps)
        lat = np.where(self.local, links.intra_lat_s, links.inter_lat_s)
        t = np.where(self.missing > MISSING_EPS, self.steps * lat + self.missing * nbytes / bw, 0.0)
        return t.max(axis=2)


def redistribution_matrix(P: np.ndarray, Pf: np.ndarray, C: np.ndarray, Cf: np.ndarray,
                          nbytes: float, links: Links) -> np.ndarray:
    """Seconds to go from each producer layout to each consumer layout, ``[Gp, Gc]``.

    ``P`` ``[Gp, N, A]`` block indices and ``Pf`` ``[Gp, A]`` blocks per axis; ``C``,
    ``Cf`` likewise. One direction (forward); the caller adds the backward one."""
    return exchange(P, Pf, C, Cf, links).times(nbytes, links)


def exchange(P: np.ndarray, Pf: np.ndarray, C: np.ndarray, Cf: np.ndarray, links: Links) -> Exchange:
    """The size-independent part of :func:`redistribution_matrix` (cache it per layout pair)."""
    Gp, N, A = P.shape
    Gc = C.shape[0]
    steps = np.zeros((Gp, Gc, N))
    missing = np.zeros((Gp, Gc, N))
    local = np.ones((Gp, Gc, N), dtype=bool)
    if A == 0 or Gp == 0 or Gc == 0:
        return Exchange(steps, missing, local)
    Cfb = Cf[:, None, :].astype(np.int64)
    need = 1.0 / np.prod(Cf, axis=1)[:, None]
    node = links.node
    nnodes = links.nodes
    for p in range(Gp):
        pf = Pf[p][None, None, :].astype(np.int64)
        Pb = P[p][None, :, :]
        lo = (C * pf) // Cfb
        hi = ((C + 1) * pf - 1) // Cfb
        own = np.all((Pb >= lo) & (Pb <= hi), axis=2)
        steps[p] = np.prod(hi - lo + 1, axis=2) - own
        a0 = np.maximum(C / Cfb, Pb / pf)
        a1 = np.minimum((C + 1) / Cfb, (Pb + 1) / pf)
        missing[p] = need - np.prod(np.maximum(0.0, a1 - a0), axis=2)
        if nnodes > 1:
            local[p] = _held_in_node(P[p], Pf[p], lo, hi, node, nnodes)
    return Exchange(steps, missing, local)


def _held_in_node(Pb: np.ndarray, pf: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                  node: np.ndarray, nnodes: int) -> np.ndarray:
    """``[Gc, N]``: every producer block device ``r`` needs (the box ``lo..hi`` of block
    indices) is held by a device of its node. A summed-area table of the blocks each node
    holds answers every box with ``2^A`` lookups (inclusion–exclusion)."""
    A = len(pf)
    shape = tuple(int(f) for f in pf)
    pres = np.zeros((nnodes,) + shape, dtype=np.int64)
    pres[(node,) + tuple(Pb[:, a] for a in range(A))] = 1
    sat = np.zeros((nnodes,) + tuple(f + 1 for f in shape), dtype=np.int64)
    acc = pres
    for a in range(A):
        acc = np.cumsum(acc, axis=a + 1)
    sat[(slice(None),) + tuple(slice(1, None) for _ in range(A))] = acc
    flat = sat.reshape(-1)
    strides = np.cumprod((1,) + tuple(f + 1 for f in shape)[::-1])[::-1]   # node, axes...
    base = np.broadcast_to(node[None, :] * strides[0], lo.shape[:2])
    lows = [lo[..., a] * strides[a + 1] for a in range(A)]
    highs = [(hi[..., a] + 1) * strides[a + 1] for a in range(A)]
    total = np.zeros(lo.shape[:2], dtype=np.int64)
    for corner in itertools.product((0, 1), repeat=A):
        lin = base.copy()
        for a, c in enumerate(corner):
            lin += highs[a] if c else lows[a]
        if (A - sum(corner)) % 2:
            total -= flat[lin]
        else:
            total += flat[lin]
    return total == np.prod(hi - lo + 1, axis=2)


def redistribution_time(P: np.ndarray, Pf: tuple[int, ...], C: np.ndarray, Cf: tuple[int, ...],
                        nbytes: float, links: Links) -> float:
    """One pair, device by device (the reference :func:`redistribution_matrix` must match)."""
    N, A = P.shape
    if A == 0 or nbytes <= 0:
        return 0.0
    worst = 0.0
    for r in range(N):
        need_lo = [C[r, a] / Cf[a] for a in range(A)]
        need_hi = [(C[r, a] + 1) / Cf[a] for a in range(A)]
        need = 1.0
        have = 1.0
        blocks = []
        for a in range(A):
            need *= need_hi[a] - need_lo[a]
            own_lo, own_hi = P[r, a] / Pf[a], (P[r, a] + 1) / Pf[a]
            have *= max(0.0, min(need_hi[a], own_hi) - max(need_lo[a], own_lo))
            blocks.append([q for q in range(Pf[a])
                           if min(need_hi[a], (q + 1) / Pf[a]) - max(need_lo[a], q / Pf[a]) > 0])
        missing = need - have
        if missing <= MISSING_EPS:
            continue
        wanted = [b for b in itertools.product(*blocks) if b != tuple(P[r])]
        mates = [tuple(P[s]) for s in range(N) if links.node[s] == links.node[r]]
        local = all(b in mates for b in wanted)
        bw, lat = (links.intra_bps, links.intra_lat_s) if local else (links.inter_bps, links.inter_lat_s)
        worst = max(worst, len(wanted) * lat + missing * nbytes / bw)
    return worst


def transfer_matrix(P: np.ndarray, Pf: np.ndarray, C: np.ndarray, Cf: np.ndarray, nbytes: float,
                    bps: float, lat_s: float) -> np.ndarray:
    """Seconds to send a tensor from a producer layout on one device set to a consumer
    layout on another (a pipeline stage boundary), forward + backward, ``[Gp, Gc]``.

    No device holds any part of what it needs: each consumer device receives its whole
    block, one message per producer block that intersects it (forward); each producer
    device receives its block of the gradient likewise (backward); ``(α, β)`` of the link
    between the two stages; the slowest device bounds each direction."""
    return _send(P, Pf, C, Cf, nbytes, bps, lat_s) + _send(C, Cf, P, Pf, nbytes, bps, lat_s).T


def _send(P: np.ndarray, Pf: np.ndarray, C: np.ndarray, Cf: np.ndarray, nbytes: float, bps: float,
          lat_s: float) -> np.ndarray:
    Gp, _, A = P.shape
    Gc = C.shape[0]
    if A == 0 or nbytes <= 0 or Gp == 0 or Gc == 0:
        return np.zeros((Gp, Gc))
    need = nbytes / np.prod(Cf, axis=1)                                   # [Gc]
    lo = (C[None] * Pf[:, None, None, :]) // Cf[None, :, None, :]          # [Gp, Gc, N, A]
    hi = ((C[None] + 1) * Pf[:, None, None, :] - 1) // Cf[None, :, None, :]
    steps = np.prod(hi - lo + 1, axis=3)                                  # [Gp, Gc, N]
    return (steps * lat_s + need[None, :, None] / bps).max(axis=2)


def transfer_time(P: np.ndarray, Pf: tuple[int, ...], C: np.ndarray, Cf: tuple[int, ...], nbytes: float,
                  bps: float, lat_s: float) -> float:
    """One pair of :func:`transfer_matrix`, device by device (its reference)."""
    def one_way(src, sf, dst, df) -> float:
        worst = 0.0
        for r in range(dst.shape[0]):
            blocks, need = 1, 1.0
            for a in range(dst.shape[1]):
                lo, hi = dst[r, a] / df[a], (dst[r, a] + 1) / df[a]
                need *= hi - lo
                blocks *= sum(1 for q in range(sf[a]) if min(hi, (q + 1) / sf[a]) - max(lo, q / sf[a]) > 0)
            worst = max(worst, blocks * lat_s + need * nbytes / bps)
        return worst
    if P.shape[1] == 0 or nbytes <= 0:
        return 0.0
    return one_way(P, Pf, C, Cf) + one_way(C, Cf, P, Pf)
