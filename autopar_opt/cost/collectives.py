"""α–β costs of collectives on one link tier.

Ring algorithms (Thakur, Rabenseifner & Gropp 2005, Sec. 4; Patarasuk & Yuan
2009): for ``n`` ranks and a buffer of ``m`` bytes,

* all-reduce:       ``2(n-1)·α + 2(n-1)/n · m/β``
* all-gather / reduce-scatter (``m`` = full output/input size):
                    ``(n-1)·α + (n-1)/n · m/β``
* all-to-all:       ``(n-1)·α + (n-1)/n · m/β`` (pairwise exchange)
* point-to-point:   ``α + m/β``

β is the tier's per-GPU bandwidth times the achieved efficiency; a group
spanning nodes is bound by the slowest (inter-node) tier.
"""

from __future__ import annotations

from autopar_opt.ir.hardware import LinkTier


def _beta(tier: LinkTier, efficiency: float) -> float:
    return tier.bytes_per_s * efficiency


def allreduce_time(n: int, nbytes: float, tier: LinkTier, efficiency: float = 1.0) -> float:
    """Ring all-reduce of ``nbytes`` over ``n`` ranks."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    return 2 * (n - 1) * tier.latency_s + 2 * (n - 1) / n * nbytes / _beta(tier, efficiency)


def allgather_time(n: int, nbytes: float, tier: LinkTier, efficiency: float = 1.0) -> float:
    """Ring all-gather producing ``nbytes`` on every rank (same for reduce-scatter)."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    return (n - 1) * tier.latency_s + (n - 1) / n * nbytes / _beta(tier, efficiency)


reduce_scatter_time = allgather_time
alltoall_time = allgather_time


def p2p_time(nbytes: float, tier: LinkTier, efficiency: float = 1.0) -> float:
    """One point-to-point send of ``nbytes``."""
    if nbytes <= 0:
        return 0.0
    return tier.latency_s + nbytes / _beta(tier, efficiency)
