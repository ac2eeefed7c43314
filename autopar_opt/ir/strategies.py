"""Intra-layer strategies and their enumeration.

A strategy places one layer on the ``d`` devices of its pipeline stage as a
factorisation ``d = dp * tp * cp`` plus a parameter-sharding level (ZeRO 0-3,
Rajbhandari et al. 2020) and an activation-recomputation mode (Korthikanti et
al. 2022). Ranks inside a stage are ordered tp-innermost, then cp, then dp
(Megatron-LM's default order), so a tp group is ``tp`` consecutive ranks.

Mixture-of-Experts layers add an expert-parallel degree ``ep`` and an
expert tensor-parallel degree ``etp`` (``Strategy.expert_tp``; ``etp = 0``
stores "equal to tp", Megatron-Core's default): the routed experts are laid
over the stage's ``tp × cp × dp`` ranks as ``etp × ep × edp`` (Megatron-Core
``parallel_state.initialize_model_parallel``: the expert rank generator takes
``tp=expert_tensor_parallel_size, ep=expert_model_parallel_size,
dp=world/(etp·ep·pp)``, order tp-ep-dp-pp; "MoE parallel folding", Liu et
al. 2025, arXiv 2504.14960). Expert ranks are ordered etp-innermost, then ep,
so an ep group is ``ep`` ranks spaced ``etp`` apart: with ``etp < tp`` it
spans tensor-parallel ranks as well as data/context-parallel ones.
``etp·ep`` must divide the stage's devices and ``ep`` the number of experts
(``--num-experts`` divisible by ``--expert-model-parallel-size``).

Hybrid sharding (``Strategy.zero_group``): ZeRO shards over groups of
``zero_group`` consecutive ranks of the stage's ``dp × cp`` group and keeps
``replicas = dp·cp / zero_group`` copies of each shard, one per group, whose
gradients are all-reduced across the replicas (PyTorch FSDP ``HYBRID_SHARD``,
Zhao et al. 2023, Sec. 3.2.2 "hybrid sharding", FSDP2 on a 2-D mesh;
torchtitan ``data_parallel_replicate_degree × data_parallel_shard_degree``;
Megatron-Core ``--num-distributed-optimizer-instances``, whose intra-partial
groups are consecutive chunks of the dp-cp ranks,
``parallel_state.initialize_model_parallel``; DeepSpeed's MiCS, Zhang et al.
2022, until its removal in DeepSpeed 0.19). The search offers the group of the
``dp × cp`` ranks inside one node (``gpus_per_node / tp``, the recipe of each
of them; at ZeRO-3 by default, ``SearchSpace.hybrid_zero_levels``), or inside each
node count of ``SearchSpace.hybrid_shard_nodes`` (BloombergGPT sharded over 128
A100s, 16 nodes: Wu et al. 2023, Sec. 3.4), a multiple of ``cp`` (torchtitan shards over ``dp_shard × cp``);
routed experts shard over ``edp / replicas`` (Megatron-Core: the expert
data-parallel size divisible by the instances; torchtitan's expert mesh
``(dp_replicate, efsdp, ep)``).
"""

from __future__ import annotations

import math

from dataclasses import dataclass

from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.training import Recompute, SearchSpace, autocast_casts_weights

#: Layers no framework recomputes (Megatron ``--recompute-*``, torchtitan ``apply_ac``
#: and DeepSpeed's activation checkpointing wrap transformer layers only): they always
#: have ``none`` (:meth:`autopar_opt.ir.target.Target.admitted` gives them nothing else).
NEVER_RECOMPUTED = (LayerKind.embedding, LayerKind.lm_head)


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
    #: expert tensor-parallel degree; 0 = equal to ``tp`` (stored as 0 whenever it is)
    etp: int = 0
    #: fleet group of the stage running it (0 on a homogeneous cluster; see :class:`Layout`)
    group: int = 0
    #: ranks of one ZeRO shard group under hybrid sharding (module docstring); 0 = the
    #: whole ``dp·cp`` group (stored as 0 whenever it is, and without ZeRO)
    zero_group: int = 0

    def __post_init__(self) -> None:
        if self.etp == self.tp:
            object.__setattr__(self, "etp", 0)
        if self.zero == 0 or self.zero_group >= self.dp * self.cp:
            object.__setattr__(self, "zero_group", 0)

    @property
    def replicas(self) -> int:
        """Copies of each ZeRO shard: ``dp·cp / zero_group`` under hybrid sharding, else 1."""
        return self.dp * self.cp // self.zero_group if self.zero_group else 1

    @property
    def hybrid(self) -> bool:
        """Whether ZeRO shards inside groups and replicates across them."""
        return self.zero_group > 0

    @property
    def devices(self) -> int:
        return self.dp * self.tp * self.cp

    @property
    def expert_tp(self) -> int:
        """Tensor-parallel degree of the routed experts (``etp``, or ``tp``)."""
        return self.etp or self.tp

    @property
    def edp(self) -> int:
        """Expert data-parallel degree: replicas of each expert,
        ``tp·cp·dp / (etp·ep)`` (``dp·cp/ep`` when ``etp = tp``)."""
        return self.dp * self.cp * self.tp // (self.expert_tp * self.ep)

    def shard_group(self, group: int) -> int:
        """Ranks one shard spans in a data-parallel ``group`` (``dp·cp`` for dense
        parameters, ``edp`` for routed experts): the group, or its share
        ``group / replicas`` under hybrid sharding."""
        return group // self.replicas if self.replicas > 1 else group

    def zero_divisors(self, group: int) -> tuple[int, int, int]:
        """What ZeRO divides (weights, gradients, optimizer state) by over a
        data-parallel ``group``: ZeRO-1 shards the optimizer state, ZeRO-2 also
        gradients, ZeRO-3 also weights (Rajbhandari et al. 2020, Sec. 5, Fig. 1),
        each over :meth:`shard_group` ranks; 1 = not sharded."""
        shard = self.shard_group(group)
        return (shard if self.zero >= 3 else 1, shard if self.zero >= 2 else 1,
                shard if self.zero >= 1 else 1)

    @property
    def layout(self) -> Layout:
        return Layout(self.dp, self.tp, self.cp, self.sp, self.group)

    def label(self) -> str:
        """Short human label, e.g. ``dp2·tp4·sp·z1·rc-full``."""
        text = self.layout.label()
        if self.ep > 1:
            text += f"·ep{self.ep}"
        if self.etp:
            text += f"·etp{self.etp}"
        if self.zero:
            text += f"·z{self.zero}"
        if self.zero_group:
            text += f"·shard{self.zero_group}"
        if self.recompute is not Recompute.none:
            text += f"·rc-{self.recompute.value}"
        return text

    def to_dict(self) -> dict:
        """JSON form; ``ep`` appears only when > 1 and ``etp`` only when it differs
        from ``tp`` (dense plans keep their old form)."""
        data = {"dp": self.dp, "tp": self.tp, "cp": self.cp, "sp": self.sp,
                "zero": self.zero, "recompute": self.recompute.value}
        if self.ep > 1:
            data["ep"] = self.ep
        if self.etp:
            data["etp"] = self.etp
        if self.group:
            data["group"] = self.group
        if self.zero_group:
            data["zero_group"] = self.zero_group
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Strategy":
        return cls(dp=int(data["dp"]), tp=int(data["tp"]), cp=int(data.get("cp", 1)),
                   sp=bool(data.get("sp", False)), zero=int(data.get("zero", 0)),
                   recompute=Recompute(data.get("recompute", "none")),
                   ep=int(data.get("ep", 1)), etp=int(data.get("etp", 0)),
                   group=int(data.get("group", 0)), zero_group=int(data.get("zero_group", 0)))


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


def ep_degree_ok(layer: Layer, dp: int, cp: int, ep: int, tp: int = 1, etp: int = 0) -> bool:
    """Megatron-Core's rules for an expert-parallel degree: ``etp·ep`` divides
    the ``tp·cp·dp`` ranks (``etp = 0``: equal to ``tp``, then ``ep`` divides
    ``dp·cp``), ``etp`` divides ``tp·cp·dp``, and ``ep`` divides the number of
    routed experts; dense layers only take ``ep = 1`` and ``etp = tp``."""
    etp = etp or tp
    if ep == 1 and etp == tp:
        return True
    return layer.is_moe and (tp * cp * dp) % (etp * ep) == 0 and layer.num_experts % ep == 0


def enumerate_strategies(layer: Layer, devices: int, microbatch_samples: int,
                         space: SearchSpace, gpus_per_node: int,
                         seq_len: int | None = None, autocast: bool = False,
                         head_split_cp: bool = False) -> list[Strategy]:
    """Every strategy of ``space`` valid for ``layer`` on ``devices`` devices.

    Rules (each removes a strategy that cannot run or duplicates another):
    ``dp*tp*cp == devices``; tp divides the layer's ``max_tp`` and stays inside a
    node when ``space.tp_within_node``; ``dp`` divides the micro-batch's
    samples; ``seq_len`` is a multiple of ``2·cp`` (:func:`cp_degree_ok`) and
    cp needs a layer that supports it (and, where context parallelism splits the
    heads, ``head_split_cp``: Ulysses, runtime ``cp_comm_type`` ``a2a``, ``tp·cp``
    dividing the layer's ``max_tp`` as Transformer Engine's a2a requires of the
    query and key/value heads); sp needs
    ``tp > 1`` and a layer that supports it; ZeRO levels collapse to the first
    allowed one when there is nothing to shard (``dp·cp == 1`` or no parameters);
    recomputation modes that change nothing for this layer are dropped (full
    recomputation is kept under ZeRO-3 with ``autocast``, PyTorch AMP: it also
    drops the 16-bit weight casts a micro-batch keeps,
    :func:`autopar_opt.cost.state.autocast_saved_cast_bytes`), and op-level
    checkpointing is offered only where the builder priced its save list
    (``Layer.act_op_saved_bytes``); MoE layers take every ``ep`` of ``space.ep_degrees`` allowed by
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
            if cp > 1 and head_split_cp and not tp_degree_ok(layer, tp * cp):
                continue
            dp = devices // (tp * cp)
            if microbatch_samples % dp:
                continue
            for ep, etp in _ep_options(layer, dp, cp, tp, space):
                for sp in _sp_options(layer, tp, space):
                    for zero in _zero_options(layer, dp * cp, space):
                        groups = _zero_groups(layer, zero, dp, cp, tp, ep, etp, space, gpus_per_node)
                        for rc in _recompute_options(layer, space, autocast and zero >= 3):
                            for zg in groups:
                                out.append(Strategy(dp, tp, cp, sp, zero, rc, ep, etp,
                                                    zero_group=zg))
    return out


def node_shard_group(dp: int, cp: int, tp: int, gpus_per_node: int, nodes: int = 1) -> int | None:
    """The hybrid-sharding group of the ``dp·cp`` ranks inside ``nodes`` nodes
    (``nodes · gpus_per_node / tp``), or None where it is not on offer: the
    ``dp·cp`` group fits in those nodes (sharding over all of it is plain ZeRO),
    ``tp`` does not divide a node's GPUs, the group has one rank (plain
    replication), or it is not a multiple of ``cp`` or does not divide ``dp·cp``
    (module docstring)."""
    if nodes < 1 or tp > gpus_per_node or gpus_per_node % tp:
        return None
    zg = nodes * gpus_per_node // tp
    if zg < 2 or dp * cp <= zg or zg % cp or (dp * cp) % zg:
        return None
    return zg


def _zero_groups(layer: Layer, zero: int, dp: int, cp: int, tp: int, ep: int, etp: int,
                 space: SearchSpace, gpus_per_node: int) -> list[int]:
    """Shard groups of a strategy (``Strategy.zero_group``): 0 (the whole ``dp·cp``
    group) where ``space.hybrid_sharding`` holds False, and where it holds True, ``zero``
    is one of ``space.hybrid_zero_levels`` and ZeRO shards something, the group of the
    ranks in each node count of ``space.hybrid_shard_nodes`` (:func:`node_shard_group`;
    one node by default) whose replicas divide a MoE layer's expert data-parallel degree."""
    out = [0] if False in space.hybrid_sharding else []
    if True in space.hybrid_sharding and zero > 0 and zero in space.hybrid_zero_levels \
            and layer.params > 0:
        edp = Strategy(dp, tp, cp, ep=ep, etp=etp).edp if layer.is_moe else None
        for nodes in sorted(set(space.hybrid_shard_nodes)):
            zg = node_shard_group(dp, cp, tp, gpus_per_node, nodes)
            if zg is not None and zg not in out and (edp is None or edp % (dp * cp // zg) == 0):
                out.append(zg)
    return out or [0]


def _ep_options(layer: Layer, dp: int, cp: int, tp: int, space: SearchSpace) -> list[tuple[int, int]]:
    """(ep, etp) pairs of a layer: ``(1, tp)`` for dense layers; for MoE layers
    every ``etp`` of ``space.etp_degrees`` (None: ``tp`` and 1, the two forms
    the frameworks use: ETP = TP, Megatron-Core's default, and experts without
    tensor parallelism, as the published MoE recipes run them) and every ``ep``
    of ``space.ep_degrees`` with :func:`ep_degree_ok` (internally a 0 stands for
    ``tp``, as in the default; a spec's ``search.etp_degrees`` lists degrees of 1 and
    up, so a stated list does not follow tp)."""
    if not layer.is_moe:
        return [(1, tp)]
    allowed = space.ep_degrees     # a stated list is binding: it may leave no option
    etps = space.etp_degrees if space.etp_degrees is not None else (0, 1)
    out = []
    for etp in sorted({e or tp for e in etps}):      # 0 in etp_degrees: equal to tp
        if (tp * cp * dp) % etp:
            continue
        for ep in divisors(tp * cp * dp // etp):
            if (allowed is None or ep in allowed) and ep_degree_ok(layer, dp, cp, ep, tp, etp):
                out.append((ep, etp))
    return out


def _sp_options(layer: Layer, tp: int, space: SearchSpace) -> list[bool]:
    if tp == 1 or not layer.supports_sp:
        return [False]
    return sorted(set(space.sequence_parallel))


def _zero_options(layer: Layer, shard_group: int, space: SearchSpace) -> list[int]:
    """ZeRO levels for a layer whose parameters can be sharded over
    ``shard_group = dp·cp`` ranks (FSDP and ZeRO shard over the data- and
    context-parallel ranks together: torchtitan ``dp_shard_cp`` mesh,
    Megatron-Core's distributed optimizer over the dp×cp group)."""
    levels = sorted(set(space.zero_levels))
    if shard_group == 1 or layer.params == 0:
        return levels[:1]
    return levels


def _casts_weights(layer: Layer) -> bool:
    """Whether autocast casts parameters of ``layer``
    (:func:`~autopar_opt.ir.training.autocast_casts_weights`)."""
    return (layer.params > 0 or layer.holds_tied_copy) and autocast_casts_weights(layer)


def effective_recompute(layer: Layer, mode: Recompute) -> Recompute:
    """The recomputation ``mode`` does on ``layer``: op-level selective
    checkpointing wraps transformer blocks only (torchtitan
    ``apply_ac``: ``for layer_id, transformer_block in model.layers.named_children()``),
    so on a layer the builder gave no save list (``act_op_saved_bytes`` 0) it
    recomputes nothing."""
    if mode is Recompute.op and layer.act_op_saved_bytes <= 0:
        return Recompute.none
    return mode


def _recompute_options(layer: Layer, space: SearchSpace, casts_saved: bool = False) -> list[Recompute]:
    """The recomputation modes of ``space`` the search tries on ``layer``.

    A mode that frees no memory on this layer (``selective`` where FlashAttention
    keeps no attention core, ``op`` where the layer has no save list, ``full``
    where the stored activations are no larger than the input it keeps) costs at
    least as much time as no recomputation for the same memory, so it is left out
    when ``none`` is in the space; when ``none`` is not, it stays, priced as the
    framework runs it (Megatron's selective recomputation re-runs a FlashAttention
    core all the same). The embedding and the output layer also have ``none``
    (:data:`NEVER_RECOMPUTED`), so the per-layer space holds what every target
    admits and a runnable plan is never priced below the free optimum."""
    allowed = [Recompute(rc) for rc in space.recompute]
    if layer.kind in NEVER_RECOMPUTED and Recompute.none not in allowed:
        allowed.insert(0, Recompute.none)
    modes = []
    for rc in allowed:
        saves_nothing = (
            (rc is Recompute.selective and layer.act_attn_bytes <= 0)
            or (rc is Recompute.op and layer.act_op_saved_bytes <= 0)
            or (rc is Recompute.full and layer.act_bytes <= layer.input_bytes
                and not (casts_saved and _casts_weights(layer))))
        if saves_nothing and Recompute.none in allowed:
            continue
        modes.append(rc)
    return modes or [Recompute.none]
