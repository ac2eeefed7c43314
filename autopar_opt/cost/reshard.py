"""Resharding between neighbouring layers and transfers between stages.

A layer's output of ``X`` bytes per micro-batch is split over a stage's ranks
along the batch (by ``dp``) and the sequence (by ``cp``, and by ``tp`` too
when sequence parallelism is on), replicated otherwise. Ranks are ordered
tp-innermost, then cp, then dp. Resharding from layout ``L_u`` to ``L_v`` makes
every rank fetch the part of its new slice it does not already hold; the
slowest rank bounds the time (α–β point-to-point, forward activations and
backward gradients: twice). This is the redistribution cost of Alpa
(Zheng et al. 2022, Sec. 4.1 "resharding cost") on a 2-D batch×sequence split.
"""

from __future__ import annotations

from functools import lru_cache

from autopar_opt.cost.collectives import allgather_time, p2p_time
from autopar_opt.ir.hardware import LinkTier
from autopar_opt.ir.strategies import Layout


def _slice(layout: Layout, rank):
    """(batch interval, sequence interval) held by ``rank``, as fractions of 1
    (``rank`` an int, or a numpy array of ranks: the same operators elementwise)."""
    tp_rank = rank % layout.tp
    cp_rank = (rank // layout.tp) % layout.cp
    dp_rank = rank // (layout.tp * layout.cp)
    b = (dp_rank / layout.dp, (dp_rank + 1) / layout.dp)
    if layout.sp:
        parts = layout.cp * layout.tp
        idx = cp_rank * layout.tp + tp_rank
    else:
        parts = layout.cp
        idx = cp_rank
    s = (idx / parts, (idx + 1) / parts)
    return b, s


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


#: Above this many ranks :func:`missing_fraction` runs over all ranks at once in
#: numpy (same arithmetic, same floats); below it the loop, so that pricing a
#: small plan (``autopar estimate``) does not import numpy.
VECTOR_RANKS = 32


@lru_cache(maxsize=65536)
def missing_fraction(src: Layout, dst: Layout) -> float:
    """Largest fraction of the whole tensor any rank must fetch to go src -> dst."""
    if src == dst:
        return 0.0
    devices = src.dp * src.tp * src.cp
    if devices > VECTOR_RANKS:
        return _missing_fraction_numpy(src, dst, devices)
    worst = 0.0
    for r in range(devices):
        (sb, ss), (db, ds) = _slice(src, r), _slice(dst, r)
        need = (db[1] - db[0]) * (ds[1] - ds[0])
        have = _overlap(sb, db) * _overlap(ss, ds)
        worst = max(worst, need - have)
    return worst


def _missing_fraction_numpy(src: Layout, dst: Layout, devices: int) -> float:
    """:func:`missing_fraction`'s loop over ranks as numpy arrays: :func:`_slice`
    evaluated on every rank at once (its integer and division operators act
    elementwise, so the floats are the loop's). On 1,024 ranks the loop priced
    each pair of layouts in milliseconds, a third of table building (issue 18
    profile)."""
    import numpy as np

    ranks = np.arange(devices)
    (sb, ss), (db, ds) = _slice(src, ranks), _slice(dst, ranks)

    def overlap(a, b):
        return np.maximum(0.0, np.minimum(a[1], b[1]) - np.maximum(a[0], b[0]))

    need = (db[1] - db[0]) * (ds[1] - ds[0])
    have = overlap(sb, db) * overlap(ss, ds)
    return max(0.0, float((need - have).max()))


def unique_fraction(layout: Layout) -> float:
    """Fraction of the tensor that one rank owns without replicas."""
    return 1.0 / (layout.dp * layout.cp * (layout.tp if layout.sp else 1))


def reshard_time(src: Layout, dst: Layout, nbytes: float, tier: LinkTier,
                 efficiency: float) -> float:
    """Forward + backward resharding time of a ``nbytes`` tensor inside a stage."""
    frac = missing_fraction(src, dst)
    if frac <= 1e-12 or nbytes <= 0:
        return 0.0
    return 2 * p2p_time(frac * nbytes, tier, efficiency)


def cross_stage_time(src: Layout, dst: Layout, nbytes: float, tier: LinkTier,
                     intra: LinkTier, efficiency: float, intra_efficiency: float) -> float:
    """Forward activation + backward gradient transfer between adjacent stages.

    With Megatron's scatter/gather optimisation (Narayanan et al. 2021,
    Sec. 4.1) each sender ships only its unique 1/t share over ``tier`` (at
    ``efficiency``, that tier's); a receiver whose layer needs the tensor
    replicated in its tp group then all-gathers it over the intra-node tier
    ``intra`` at ``intra_efficiency`` (the NVLink figure even when the send
    crossed the network: the gather runs inside the receiving node).
    """
    if nbytes <= 0:
        return 0.0
    per_rank = 1.0 / (dst.dp * dst.cp * dst.tp)
    send = max(per_rank, unique_fraction(src) / max(1, (src.tp if not src.sp else 1)))
    t = p2p_time(send * nbytes, tier, efficiency)
    if not dst.sp and dst.tp > 1:
        t += allgather_time(dst.tp, nbytes / (dst.dp * dst.cp), intra, intra_efficiency)
    return 2 * t
