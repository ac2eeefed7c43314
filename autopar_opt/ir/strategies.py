"""Intra-layer strategies and their enumeration.

A strategy places one layer on the ``d`` devices of its pipeline stage as a
factorisation ``d = dp * tp * cp`` plus a parameter-sharding level (ZeRO 0-3,
Rajbhandari et al. 2020) and an activation-recomputation mode (Korthikanti et
al. 2022). Ranks inside a stage are ordered tp-innermost, then cp, then dp
(Megatron-LM's default order), so a tp group is ``tp`` consecutive ranks.

Mixture-of-Experts layers add an expert-parallel degree ``ep``: the routed
experts are split over ``ep`` ranks carved out of the ``dp × cp`` ranks,
with the experts' tensor-parallel degree equal to ``tp`` (Megatron-Core
``initialize_model_parallel``: ``expert_tensor_parallel_size ×
expert_model_parallel_size × expert_data_parallel_size = tp × cp × dp`` of
the attention layers, "MoE parallel folding", Liu et al. 2025, arXiv
2504.14960; ETP defaults to TP). Expert ranks are ordered etp-innermost, then
ep, so an ep group is ``ep`` ranks spaced ``tp`` apart. ``ep`` must divide
the number of experts (``--num-experts`` divisible by
``--expert-model-parallel-size``).
"""

from __future__ import annotations

import math

from dataclasses import dataclass

from autopar_opt.ir.graph import Layer
from autopar_opt.ir.training import Recompute, SearchSpace, autocast_casts_weights


@dataclass(frozen=True, order=True)
class Layout:
    """How a layer's activations are split over a stage's devices.

    Resharding between neighbouring layers depends only on their layouts.
    ``sp`` means the output is split along the sequence inside each tp group
    (Megatron sequence parallelism), otherwise replicated inside it.
    """

    dp: int
    tp: int
    cp: int = 1
    sp: bool = False
    #: the fleet group (device type) of the stage (:mod:`autopar_opt.ir.fleet`);
    #: 0 on a homogeneous cluster. Part of the layout: two groups never reshard
    #: inside one stage, and their strategies never prune one another.
    group: int = 0

    def label(self) -> str:
        parts = [f"dp{self.dp}", f"tp{self.tp}"]
        if self.cp > 1:
            parts.append(f"cp{self.cp}")
        if self.sp:
            parts.append("sp")
        text = "·".join(parts)
        return f"{text}@g{self.group}" if self.group else text


@dataclass(frozen=True, order=True)
class Strategy:
    """One intra-layer strategy (see module docstring)."""

    dp: int
    tp: int
    cp: int = 1
    sp: bool = False
    zero: int = 0
    recompute: Recompute = Recompute.none
    ep: int = 1
    #: fleet group of the stage running it (0 on a homogeneous cluster; see :class:`Layout`)
    group: int = 0

    @property
    def devices(self) -> int:
        return self.dp * self.tp * self.cp

    @property
    def edp(self) -> int:
        """Expert data-parallel degree: replicas of each expert, ``dp·cp/ep``."""
        return self.dp * self.cp // self.ep

    def zero_divisors(self, group: int) -> tuple[int, int, int]:
        """What ZeRO divides (weights, gradients, optimizer state) by over ``group``
        ranks: ZeRO-1 shards the optimizer state, ZeRO-2 also gradients, ZeRO-3
        also weights (Rajbhandari et al. 2020, Sec. 5, Fig. 1); 1 = not sharded."""
        return (group if self.zero >= 3 else 1, group if self.zero >= 2 else 1,
                group if self.zero >= 1 else 1)

    @property
    def layout(self) -> Layout:
        return Layout(self.dp, self.tp, self.cp, self.sp, self.group)

    def label(self) -> str:
        """Short human label, e.g. ``dp2·tp4·sp·z1·rc-full``."""
        text = self.layout.label()
        if self.ep > 1:
            text += f"·ep{self.ep}"
        if self.zero:
            text += f"·z{self.zero}"
        if self.recompute is not Recompute.none:
            text += f"·rc-{self.recompute.value}"
        return text

    def to_dict(self) -> dict:
        """JSON form; ``ep`` appears only when > 1 (dense plans keep their old form)."""
        data = {"dp": self.dp, "tp": self.tp, "cp": self.cp, "sp": self.sp,
                "zero": self.zero, "recompute": self.recompute.value}
        if self.ep > 1:
            data["ep"] = self.ep
        if self.group:
            data["group"] = self.group
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Strategy":
        return cls(dp=int(data["dp"]), tp=int(data["tp"]), cp=int(data.get("cp", 1)),
                   sp=bool(data.get("sp", False)), zero=int(data.get("zero", 0)),
                   recompute=Recompute(data.get("recompute", "none")),
                   ep=int(data.get("ep", 1)), group=int(data.get("group", 0)))


def layout_ids(strats: list[Strategy]) -> list[int]:
    """The layout group of every strategy (groups numbered in first-seen order).

    Resharding and transfer costs depend on layouts only, so formulations and
    DPs that reason about edges work on these groups."""
    seen: dict[Layout, int] = {}
    return [seen.setdefault(s.layout, len(seen)) for s in strats]


def divisors(n: int) -> list[int]:
    """All positive divisors of ``n`` in increasing order (O(sqrt n) trial division)."""
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return small + [n // k for k in reversed(small) if k * k != n]


def tp_degree_ok(layer: Layer, tp: int) -> bool:
    """tp must divide the layer's ``max_tp`` (e.g. its head count)."""
    if tp == 1:
        return True
    if layer.measured:
        return layer.measured_for(tp) is not None
    return tp <= layer.max_tp and layer.max_tp % tp == 0


def cp_degree_ok(seq_len: int | None, cp: int) -> bool:
    """A context-parallel degree the sequence can be split into.

    Megatron-Core's load-balanced causal context parallelism cuts the sequence
    into ``2·cp`` chunks and gives rank ``r`` chunks ``r`` and ``2·cp-1-r``
    (Megatron-Core context-parallel docs; Transformer Engine
    ``get_batch_on_this_cp_rank``), so ``seq_len`` must be a multiple of
    ``2·cp``; the cost model then prices ``seq_len / cp`` tokens per rank
    (:mod:`autopar_opt.cost.layer_cost`, the ``dp·cp`` share). ``cp = 1``
    always holds; a known ``seq_len`` is needed for ``cp > 1``.
    """
    return cp == 1 or bool(seq_len) and seq_len % (2 * cp) == 0


def cp_degrees_for(seq_len: int) -> list[int]:
    """Every cp with :func:`cp_degree_ok` for ``seq_len``: 1 and the divisors of
    ``seq_len / 2`` (only 1 for an odd ``seq_len``)."""
    return divisors(seq_len // 2) if seq_len % 2 == 0 else [1]


def ep_degree_ok(layer: Layer, dp: int, cp: int, ep: int) -> bool:
    """Megatron-Core's rules for an expert-parallel degree: ``ep`` divides
    ``dp·cp`` (experts fold into the data/context-parallel ranks, ETP = TP)
    and the number of routed experts; dense layers only take ``ep = 1``."""
    if ep == 1:
        return True
    return layer.is_moe and (dp * cp) % ep == 0 and layer.num_experts % ep == 0


def enumerate_strategies(layer: Layer, devices: int, microbatch_samples: int,
                         space: SearchSpace, gpus_per_node: int,
                         seq_len: int | None = None, autocast: bool = False) -> list[Strategy]:
    """Every strategy of ``space`` valid for ``layer`` on ``devices`` devices.

    Rules (each removes a strategy that cannot run or duplicates another):
    ``dp*tp*cp == devices``; tp divides the layer's ``max_tp`` and stays inside a
    node when ``space.tp_within_node``; ``dp`` divides the micro-batch's
    samples; ``seq_len`` is a multiple of ``2·cp`` (:func:`cp_degree_ok`) and
    cp needs a layer that supports it; sp needs
    ``tp > 1`` and a layer that supports it; ZeRO levels collapse to the first
    allowed one when there is nothing to shard (``dp == 1`` or no parameters);
    recomputation modes that change nothing for this layer are dropped
    (full recomputation is kept under ZeRO-3 with ``autocast``, PyTorch AMP:
    it also drops the 16-bit weight casts a micro-batch keeps,
    :func:`autopar_opt.cost.state.autocast_saved_cast_bytes`); MoE layers take every ``ep`` of ``space.ep_degrees`` allowed by
    :func:`ep_degree_ok`.
    """
    out: list[Strategy] = []
    tp_allowed = space.tp_degrees
    for tp in divisors(devices):
        if tp_allowed is not None and tp not in tp_allowed:
            continue
        if space.tp_within_node and tp > gpus_per_node:
            continue
        if not tp_degree_ok(layer, tp):
            continue
        for cp in divisors(devices // tp):
            if cp not in space.cp_degrees:
                continue
            if cp > 1 and (not layer.supports_cp or not cp_degree_ok(seq_len, cp)):
                continue
            dp = devices // (tp * cp)
            if microbatch_samples % dp:
                continue
            for ep in _ep_options(layer, dp, cp, space):
                for sp in _sp_options(layer, tp, space):
                    for zero in _zero_options(layer, dp, space):
                        for rc in _recompute_options(layer, space, autocast and zero >= 3):
                            out.append(Strategy(dp, tp, cp, sp, zero, rc, ep))
    return out


def _ep_options(layer: Layer, dp: int, cp: int, space: SearchSpace) -> list[int]:
    if not layer.is_moe:
        return [1]
    allowed = space.ep_degrees     # a stated list is binding: it may leave no option
    return [ep for ep in divisors(dp * cp)
            if (allowed is None or ep in allowed) and ep_degree_ok(layer, dp, cp, ep)]


def _sp_options(layer: Layer, tp: int, space: SearchSpace) -> list[bool]:
    if tp == 1 or not layer.supports_sp:
        return [False]
    return sorted(set(space.sequence_parallel))


def _zero_options(layer: Layer, dp: int, space: SearchSpace) -> list[int]:
    levels = sorted(set(space.zero_levels))
    if dp == 1 or layer.params == 0:
        return levels[:1]
    return levels


def _casts_weights(layer: Layer) -> bool:
    """Whether autocast casts parameters of ``layer``
    (:func:`~autopar_opt.ir.training.autocast_casts_weights`)."""
    return (layer.params > 0 or layer.holds_tied_copy) and autocast_casts_weights(layer)


def _recompute_options(layer: Layer, space: SearchSpace, casts_saved: bool = False) -> list[Recompute]:
    modes = []
    for rc in space.recompute:
        rc = Recompute(rc)
        if rc is Recompute.selective and layer.act_attn_bytes <= 0:
            continue
        if rc is Recompute.full and layer.act_bytes <= layer.input_bytes \
                and not (casts_saved and _casts_weights(layer)):
            continue
        modes.append(rc)
    return modes or [Recompute.none]
