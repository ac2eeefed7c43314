"""Communication of one layer under one strategy, and how much of it is exposed.

Overlap is physics, not a fraction: every collective is either exposed or hidden
behind a named compute window, ``exposed = max(0, comm - window)``
(:func:`exposed`); which windows exist is the runtime's capability
(:mod:`autopar_opt.ir.runtime`). Tensor-parallel and context-parallel collectives
per micro-batch, ZeRO-3/FSDP gathers and reduce-scatters, the once-per-iteration
gradient synchronisation with the optimizer step (:func:`gradient_sync`), and the
tied-parameter synchronisation between the first and last stage. A collective is
priced by NCCL's own cost model (:mod:`autopar_opt.cost.nccl`: ring and tree, LL,
LL128 and Simple, hop latencies) on the group :func:`collective_group` forms from
the cluster's topology; point-to-point transfers keep the α-β times of
:mod:`autopar_opt.cost.collectives`."""

from __future__ import annotations

import math

from autopar_opt.cost import moe, nccl, overlap, tp_replicated
from autopar_opt.cost.collectives import p2p_time
from autopar_opt.cost.context import Compute, StageContext
from autopar_opt.cost.state import reduced_grad_bytes, state_bytes
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import LinkTier
from autopar_opt.ir.strategies import Strategy, effective_recompute
from autopar_opt.ir.training import DTYPE_BYTES, Recompute, Training, param_state_bytes


def exposed(comm: float, window: float) -> float:
    """Communication left on the critical path when it overlaps ``window``:
    ``max(0, comm - window)`` (the comm runs on its own stream/channels
    concurrently with the window's kernels)."""
    return max(0.0, comm - window)


#: GPU generation index of NCCL's tuning tables (``llMaxBws``, the ring plateau).
GENERATION = {"volta": 0, "ampere": 1, "hopper": 2, "blackwell": 3}
#: The generation whose NCCL tables price a device of unknown architecture (a spec's own
#: device), said with the plan's assumptions (:mod:`autopar_opt.cost.assumptions`).
UNKNOWN_GENERATION = "hopper"


def link_kind(tier: LinkTier) -> str:
    """NCCL's hardware class of an intra-node tier: ``pci`` for a PCIe tier (its
    name starts with ``pcie``), ``nvlink`` otherwise."""
    return "pci" if tier.name.lower().startswith("pcie") else "nvlink"


def collective_group(ctx: StageContext, group: int, stride: int) -> nccl.Group:
    """What NCCL sees for ``group`` ranks spaced ``stride`` apart in the stage.

    Inside one node: the intra-node tier at its measured nccl-tests efficiency
    (``comm_efficiency``: bus bandwidth of an NVLink ring over the datasheet's
    per-direction bandwidth), times the share of a GPU's NVLinks that reach the
    group's own members on a point-to-point board
    (:meth:`~autopar_opt.ir.hardware.Cluster.intra_share`: a third for a pair of a
    4-GPU HGX board; all of it under NVSwitch). Across nodes: ``k = min(group, gpus/stride)``
    members per node, ``ceil(group/k)`` nodes; NCCL runs one ring per channel and
    each channel crosses the network on one NIC, so the group's bus bandwidth is
    ``min(intra·η, C·NIC·η_net)`` with ``C`` the NICs of its own members
    (:meth:`~autopar_opt.ir.hardware.Cluster.nic_share_gb_per_s`: one per member
    with one NIC per GPU, fewer with fewer NICs; every group of the node
    communicates at once) at ``inter_comm_efficiency`` of the line rate (nccl-tests
    all-reduce across DGX nodes: 192/200 GB/s A100, 380/400 H100, NVIDIA GTC 2024
    S62129). One member per node (a data-parallel ring of a tp=8 model) sees its
    own NIC share alone. A group spanning more nodes than one leaf switch serves
    gets the blocking fabric's share above the leaves
    (:meth:`~autopar_opt.ir.hardware.Cluster.fabric_share`). The group's channels
    (one per NIC it uses: :func:`autopar_opt.cost.nccl.inter_node_channels`) cap
    the tree. The figure nccl-tests report as bus bandwidth
    (tests/data/microbench/nccl_tests.yaml; :mod:`autopar_opt.cost.nccl` adds the
    latencies and the algorithm choice).
    """
    cl = ctx.cluster
    gen = GENERATION.get(cl.device.arch, GENERATION[UNKNOWN_GENERATION])
    intra = cl.intra_node.bandwidth_gb_per_s * ctx.params.comm_efficiency
    kind = link_kind(cl.intra_node)
    if group <= 1 or ctx.tier(group * stride) is cl.intra_node:
        return nccl.Group(max(group, 1), 1, intra * cl.intra_share(group), kind, gen)
    per_node = max(1, min(group, cl.gpus_per_node // max(stride, 1)))
    intra *= cl.intra_share(per_node)
    nodes = -(-group // per_node)
    net = cl.nic_share_gb_per_s(per_node) * ctx.params.inter_comm_efficiency \
        * cl.fabric_share(nodes)
    bus = net if per_node == 1 else min(intra, net)
    nics = per_node * cl.nics / cl.gpus_per_node              # the NICs the group uses
    channels = nccl.inter_node_channels(nics, cl.inter_node.bandwidth_gb_per_s, gen)
    return nccl.Group(group, nodes, bus, kind, gen, channels)


def collective(ctx: StageContext, kind: str, group: int, stride: int, nbytes: float,
               messages: float = 1.0) -> float:
    """Seconds of ``messages`` collectives ``kind`` that together move ``nbytes``
    (each ``nbytes/messages``) over the group of :func:`collective_group`. A
    fractional ``messages`` below 1 is a share of one larger message (a layer's
    part of a gradient bucket it shares with other layers): that share of the
    bucket's time."""
    if group <= 1 or nbytes <= 0:
        return 0.0
    return messages * nccl.collective_time(kind, nbytes / messages, collective_group(ctx, group, stride))


def grad_bucket_messages(nbytes: float, runtime_name: str, group: int, elem_bytes: float) -> float:
    """Messages one layer's gradient reduction is sent as: ``ceil(bytes/bucket)``
    when the layer fills buckets, else its share ``bytes/bucket`` of one bucket
    (buckets pack consecutive layers; each bucket pays the collective's latency
    once). Bucket sizes, the frameworks' defaults:

    * Megatron-Core / Megatron-Bridge ``DistributedDataParallelConfig.bucket_size =
      max(40,000,000, 1,000,000 · dp)`` parameters
      (``megatron/core/distributed/distributed_data_parallel.py``);
    * DeepSpeed ``reduce_bucket_size`` 5e8 elements (ZeRO config docs);
    * PyTorch DDP ``bucket_cap_mb = 25`` (Megatron-LM's torch DDP, Lightning DDP);
      FSDP reduces per unit (one layer: :func:`zero3_comm`).
    """
    if runtime_name in ("megatron-core", "megatron-bridge"):
        bucket = max(40e6, 1e6 * group) * elem_bytes
    elif runtime_name.startswith("deepspeed"):
        bucket = 5e8 * elem_bytes
    else:
        bucket = 25.0 * 2**20
    if nbytes <= bucket:
        return nbytes / bucket
    return float(math.ceil(nbytes / bucket))


def zero12_messages(s: Strategy, ctx: StageContext, nbytes: float, group: int,
                    elem_bytes: float) -> float:
    """Collective calls of one layer's data-parallel gradient reduction (and parameter
    gather): the framework's buckets (:func:`grad_bucket_messages`), but one per unit
    for FSDP's ``SHARD_GRAD_OP`` (``zero2_forward_gather``), which reduce-scatters and
    gathers each wrapped unit's flat parameter in one call, as at ZeRO-3
    (:func:`_unit_gather_scatter`); DDP's 25 MB buckets are not FSDP's."""
    if s.zero == 2 and ctx.training.runtime.zero2_forward_gather:
        return 1.0
    return grad_bucket_messages(nbytes, ctx.training.runtime.name, group, elem_bytes)


def tp_collectives(layer: Layer) -> float:
    """Tensor-parallel collectives per pass of ``layer``: ``Layer.tp_collectives``
    where its builder set it, else 2 for a transformer or MoE block (after the
    attention and after the MLP, Shoeybi et al. 2019, Fig. 4), 1 otherwise."""
    if layer.tp_collectives:
        return float(layer.tp_collectives)
    return 2.0 if layer.kind in (LayerKind.transformer_block, LayerKind.moe_block) else 1.0


def projection_inputs(layer: Layer, runtime, n: float) -> float:
    """Tensor-parallel input redistributions per forward pass of ``layer``: ``n`` (one per
    sub-block, :func:`tp_collectives`), or, on a runtime whose every column-parallel
    projection redistributes its own input (``tp_input_per_projection``), one per
    column-parallel GEMM of a dense transformer block: its forward GEMM kernels
    (:func:`~autopar_opt.cost.compute.gemm_kernels`: 7 with separate Q, K, V, gate and
    up projections, 4 fused) less its ``n`` row-parallel ones (output and down
    projections)."""
    if not runtime.tp_input_per_projection or layer.kind is not LayerKind.transformer_block \
            or n != 2:
        return n
    from autopar_opt.cost.compute import gemm_kernels   # compute does not import comm

    return max(float(gemm_kernels(layer, runtime)) - n, n)


def tp_comm_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """Tensor-parallel collectives of one micro-batch (before overlap).

    Megatron: two all-reduces forward and two backward per block of
    ``2·b·s·h`` bytes (Shoeybi et al. 2019, Fig. 4); with sequence parallelism
    each becomes a reduce-scatter and an all-gather of the same tensor
    (Korthikanti et al. 2022, Sec. 4.2.2). ``Layer.tp_comm_bytes`` is the
    forward volume, split into :func:`tp_collectives` messages (each priced by
    NCCL's model: the latency per message counts). Full recomputation repeats
    the forward ones. Op-level selective checkpointing (:attr:`Recompute.op`)
    keeps the reduce-scatters' outputs (``_c10d_functional.reduce_scatter_tensor``
    is in torchtitan's save list) and repeats the rest: the all-gathers, or
    the all-reduces without sequence parallelism.
    """
    if layer.tp_comm_bytes <= 0:
        return 0.0
    nbytes = layer.tp_comm_bytes * ctx.microbatch_samples / (s.dp * s.cp)
    repeat = effective_recompute(layer, s.recompute) in (Recompute.full, Recompute.op)
    if layer.kind in (LayerKind.embedding, LayerKind.lm_head):
        return vocab_layer_tp_time(layer, s, ctx, nbytes, repeat)
    passes = 3 if repeat else 2
    rs_passes = 3 if s.recompute is Recompute.full else 2
    n = tp_collectives(layer)
    # a runtime whose column-parallel projections each redistribute their own input
    # (tp_input_per_projection) adds, per extra projection, a forward gather (repeated when
    # recomputed) and a backward reduce-scatter of its input gradient (all-reduce without
    # sequence parallelism); the row-parallel outputs' n stay as they are
    extra = projection_inputs(layer, ctx.training.runtime, n) - n

    def on(group: int, share: float, messages: float, more: float = 0.0) -> float:
        if group <= 1:
            return 0.0
        per = share / messages
        if s.sp:
            t = rs_passes * collective(ctx, "reduce_scatter", group, 1, share, messages) \
                + passes * collective(ctx, "all_gather", group, 1, share, messages)
            if more:
                gathers = more * (passes - 1)
                t += collective(ctx, "all_gather", group, 1, gathers * per, gathers) \
                    + collective(ctx, "reduce_scatter", group, 1, more * per, more)
            return t
        t = passes * collective(ctx, "all_reduce", group, 1, share, messages)
        return t + (collective(ctx, "all_reduce", group, 1, more * per, more) if more else 0.0)

    if layer.is_moe and s.etp:
        # expert TP apart from TP: the block's attention half stays on the tp group, its
        # MoE half (the experts' gather/scatter of sequence-parallel tokens) runs over the
        # etp group, none at etp = 1 (Megatron-Core MoEAlltoAllTokenDispatcher: the tokens
        # are gathered over the expert-TP group only). The zoo's blocks split tp_comm_bytes
        # and the messages evenly between the two (model_zoo/blocks.py: 2·s·h each).
        half, msgs = nbytes / 2, max(1.0, n / 2)
        return on(s.tp, half, msgs) + on(s.expert_tp, half, msgs)
    return on(s.tp, nbytes, n, extra)


def sp_regather_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """The backward all-gathers of the sequence-sharded inputs of a block's
    column-parallel layers for their weight gradients, one micro-batch, before overlap
    (runtime ``sp_input_regather``; Korthikanti et al. 2022, Sec. 4.2.2; Megatron-Core
    ``LinearWithGradAccumulationAndAsyncCommunication.backward``): the same volume as the
    forward pass's all-gathers (one per sub-block, ``Layer.tp_comm_bytes`` in
    :func:`tp_collectives` messages), whatever the recomputation (a recomputed forward
    saves the shard again). A Mixture-of-Experts block gathers only its attention input
    so: its experts take the dispatcher's gathered tokens, which their GEMMs save
    (Megatron-Core ``MoEAlltoAllTokenDispatcher``: ``gather_from_sequence_parallel_region``,
    whose backward is a reduce-scatter). Zero without sequence parallelism, for the
    vocabulary layers (their gathers are :func:`vocab_layer_tp_time`'s) and on
    DTensor stacks."""
    if not s.sp or s.tp <= 1 or layer.tp_comm_bytes <= 0 \
            or not ctx.training.runtime.sp_input_regather \
            or layer.kind not in (LayerKind.transformer_block, LayerKind.moe_block):
        return 0.0
    nbytes = layer.tp_comm_bytes * ctx.microbatch_samples / (s.dp * s.cp)
    n = tp_collectives(layer)
    if layer.is_moe:
        return collective(ctx, "all_gather", s.tp, 1, nbytes / 2, max(1.0, n / 2))
    return collective(ctx, "all_gather", s.tp, 1, nbytes, n)


def vocab_layer_tp_time(layer: Layer, s: Strategy, ctx: StageContext, nbytes: float,
                        repeat: bool = False) -> float:
    """Tensor-parallel collectives of one micro-batch of the vocabulary-parallel
    embedding or output layer, whose ``nbytes`` (``Layer.tp_comm_bytes``: the
    ``2·s·h`` hidden state) cross the tensor-parallel group once each way, not
    twice as a block's do (Shoeybi et al. 2019, Sec. 3 and Fig. 3: the embedding's
    output is a ``g`` operator, all-reduce forward and identity backward; the output
    projection's input an ``f``, identity forward and all-reduce backward;
    Megatron-Core ``VocabParallelEmbedding`` ``reduce_from_tensor_model_parallel_region``
    and ``ColumnParallelLinear`` ``copy_to_tensor_model_parallel_region``). With
    sequence parallelism (Korthikanti et al. 2022, Sec. 4.2.2) the embedding
    reduce-scatters forward and all-gathers its output gradient backward (its weight
    gradient needs every token), the output layer all-gathers its input forward and
    reduce-scatters the input gradient backward. A recomputed forward repeats the
    forward collective."""
    if s.tp <= 1 or nbytes <= 0:
        return 0.0
    one = "reduce_scatter" if s.sp else "all_reduce"
    gather = collective(ctx, "all_gather", s.tp, 1, nbytes) if s.sp else 0.0
    reduce = collective(ctx, one, s.tp, 1, nbytes)
    fwd, bwd = (reduce, gather) if layer.kind is LayerKind.embedding else (gather, reduce)
    return (2.0 if repeat else 1.0) * fwd + bwd


def logits_gather_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """The forward all-gather of the output layer's 16-bit logits over the
    tensor-parallel group on a runtime without ``loss_parallel`` (DTensor
    ``ColwiseParallel(output_layouts=Replicate())``: :mod:`autopar_opt.ir.runtime`),
    once per micro-batch, exposed (the loss waits for it); its backward takes
    the local chunk of the replicated gradient, no communication. ``s·V`` logits
    per sample at 2 bytes (4 in 32-bit training). 0 otherwise."""
    from autopar_opt.cost.memory import logits_per_device   # memory imports this module

    if layer.kind is not LayerKind.lm_head or s.tp <= 1 or ctx.training.runtime.loss_parallel \
            or tp_replicated.replicated_over_tp(layer, s, ctx):
        return 0.0
    width = 4.0 if DTYPE_BYTES.get(ctx.training.dtype, 4) >= 4 else 2.0
    return collective(ctx, "all_gather", s.tp, 1,
                      width * logits_per_device(layer, s, ctx.microbatch_samples, False))


def cp_comm(layer: Layer, s: Strategy, ctx: StageContext, comp: Compute
            ) -> tuple[float, float, float]:
    """Context parallelism for one micro-batch: (K/V communication time, its
    exposed part, the partial-output merge time on the critical path).

    ``p2p`` (ring attention: Liu et al. 2023; Transformer Engine
    ``AttnFuncWithCPAndKVP2P``, Megatron-Core's default): ``cp`` steps, each
    computing one K/V chunk's attention while the next chunk travels to the
    neighbour (``Layer.cp_comm_bytes``: the K/V of the whole sequence per
    sample; a rank's chunk is ``1/cp`` of the rank's samples' share), and the
    backward sending K/V and dK/dV (twice the bytes); exposed per step
    :func:`~autopar_opt.cost.overlap.cp_ring_exposed`. Each step's partial
    output is merged by its log-sum-exp (``CP_MERGE_BYTES`` per output element
    and step at HBM bandwidth, forward and backward), and each step's kernel
    runs on the chunk (the attention efficiency at ``s/cp``:
    :func:`~autopar_opt.cost.compute.attention_lookup`). A hop across nodes runs
    at one GPU's NIC share (every rank of the ring sends at once).

    ``all_gather`` (Transformer Engine ``cp_comm_type="all_gather"``; the Llama
    3 paper's context parallelism; torchtitan's default rotation): all-gather
    K/V before the local attention, again in the backward pass (not kept),
    and reduce-scatter dK/dV, nothing overlapped (the attention waits for its
    K/V). Full and selective recomputation repeat the forward exchange of every
    variant (the recomputed core attention is the context-parallel kernel).

    ``a2a`` (DeepSpeed-Ulysses, Jacobs et al. 2023, arXiv 2309.14509, Sec. 3.1;
    Transformer Engine ``cp_comm_type="a2a"``): before the attention core an
    all-to-all over the ``cp`` ranks turns each rank's ``s/cp`` tokens of Q, K
    and V into the whole sequence of ``1/cp`` of the heads, after it one turns
    the output back; the backward pass exchanges their gradients the same way.
    Per rank and all-to-all set: Q and O the layer input's size
    (``input_bytes``, ``2·s·h``), K and V ``cp_comm_bytes``, each a ``1/cp``
    share of the rank's samples; :func:`~autopar_opt.cost.moe.alltoall_tiers_time`
    (the paper's per-link volume ``4·N·h/P``). Nothing overlapped (the
    attention waits for its heads), no merge; the kernel runs the whole
    sequence (:func:`~autopar_opt.cost.compute.attention_lookup`)."""
    if s.cp <= 1 or layer.cp_comm_bytes <= 0:
        return 0.0, 0.0, 0.0
    kv = layer.cp_comm_bytes / s.tp * ctx.microbatch_samples / s.dp
    # the recomputed forward exchanges again: full recomputation, and selective, whose
    # checkpointed core attention (Megatron-Core ``core_attn``) is Transformer Engine's
    # attention with its context-parallel exchange inside (AttnFuncWithCPAndKVP2P, ...)
    fwd_passes = 2 if s.recompute in (Recompute.full, Recompute.selective) else 1
    if ctx.training.runtime.cp_splits_heads:
        share = ctx.microbatch_samples / (s.dp * s.cp * s.tp)
        fwd = moe.alltoall_tiers_time(ctx, s.cp, s.tp, (layer.input_bytes + layer.cp_comm_bytes) * share) \
            + moe.alltoall_tiers_time(ctx, s.cp, s.tp, layer.input_bytes * share)
        raw = (fwd_passes + 1) * fwd
        return raw, raw, 0.0
    if ctx.training.runtime.cp_comm_type == "all_gather":
        ag = collective(ctx, "all_gather", s.cp, s.tp, kv)
        rs = collective(ctx, "reduce_scatter", s.cp, s.tp, kv)
        raw = (fwd_passes + 1) * ag + rs
        return raw, raw, 0.0
    cl = ctx.cluster
    if ctx.tier(s.cp * s.tp) is cl.intra_node:
        hop, eff = cl.intra_pair, ctx.params.comm_efficiency    # one neighbour's links
    else:
        hop, eff = cl.inter_node_per_gpu, ctx.params.inter_comm_efficiency
    chunk = kv / s.cp
    c_fwd, c_bwd = p2p_time(chunk, hop, eff), p2p_time(2 * chunk, hop, eff)
    raw, exp = overlap.cp_ring_exposed(c_fwd, c_bwd, comp.attn_fwd_s,
                                       comp.attn_s - comp.attn_fwd_s, s.cp, fwd_passes)
    out_elems = layer.input_bytes / 2.0 / s.tp * ctx.microbatch_samples / (s.dp * s.cp)
    merge = (fwd_passes + 1) * s.cp * overlap.CP_MERGE_BYTES * out_elems \
        / (cl.device.hbm_gb_per_s * 1e9)
    return raw, exp, merge


def zero3_bytes(training: Training) -> tuple[float, float]:
    """Bytes per parameter ZeRO-3/FSDP moves unsharded: (gathered weight, reduced
    gradient). The weight in its state dtype (16-bit; fp32 under PyTorch AMP,
    :func:`~autopar_opt.ir.training.param_state_bytes`); the gradient in the same
    dtype, or 4 bytes with ``fp32_grad_reduce`` (FSDP ``reduce_dtype=float32``)."""
    w_bytes = param_state_bytes(training)[0]
    return w_bytes, (max(w_bytes, 4.0) if training.runtime.fp32_grad_reduce else w_bytes)


def zero3_gather_calls(layer: Layer, ctx: StageContext) -> int:
    """All-gathers one ZeRO-3 gather of a layer's dense parameters takes: one per
    linear module where the runtime gathers module by module (DeepSpeed ZeRO-3,
    runtime ``zero3_gather_per_module``: a transformer block's GEMM weights, the
    forward GEMM kernels of :func:`~autopar_opt.cost.compute.gemm_kernels`; its norms
    stay gathered under ``stage3_param_persistence_threshold``), else one (an FSDP
    unit's flat parameter)."""
    from autopar_opt.cost.compute import gemm_kernels   # compute does not import comm
    if not ctx.training.runtime.zero3_gather_per_module:
        return 1
    return max(gemm_kernels(layer, ctx.training.runtime), 1)


def _unit_gather_scatter(layer: Layer, s: Strategy, ctx: StageContext) -> tuple[float, float]:
    """(all-gather, reduce-scatter) seconds of one ZeRO-3/FSDP unit, the layer:
    its dense parameters over the dp x cp group, its routed experts over the
    expert-data-parallel group (MoE: :func:`autopar_opt.cost.moe.split_params`), in the
    bytes :func:`zero3_bytes` gives the gathered weight and the reduced gradient. The
    dense gather runs as :func:`zero3_gather_calls` collectives of equal shares, each
    paying NCCL's latency over the whole group (the hop latencies that dominate a
    module's gather across hundreds of ranks)."""
    w_bytes, g_bytes = zero3_bytes(ctx.training)
    dense, expert = moe.split_params(layer, s)

    def unit(nbytes_per_param: float, kind: str, calls: int = 1) -> float:
        t = calls * collective(ctx, kind, s.shard_group(s.dp * s.cp), s.tp,
                               dense * nbytes_per_param / calls)
        return t + (collective(ctx, kind, s.shard_group(s.edp), moe.expert_stride(s),
                               expert * nbytes_per_param) if expert else 0.0)
    gather = unit(w_bytes, "all_gather", zero3_gather_calls(layer, ctx))
    return gather, unit(g_bytes, "reduce_scatter") + replica_all_reduce(ctx, s, dense, expert, g_bytes)


def data_parallel_parts(s: Strategy, dense: float, expert: float
                        ) -> tuple[tuple[float, int, int], tuple[float, int, int]]:
    """``(local parameters, data-parallel group, rank stride)`` of a layer's two kinds of
    parameters (:func:`autopar_opt.cost.moe.split_params`): dense ones reduce over the
    ``dp·cp`` ranks ``tp`` apart, routed experts over the ``edp`` ranks
    :func:`~autopar_opt.cost.moe.expert_stride` apart."""
    return (dense, s.dp * s.cp, s.tp), (expert, s.edp, moe.expert_stride(s))


def replica_all_reduce(ctx: StageContext, s: Strategy, dense: float, expert: float,
                       nbytes_per_param: float) -> float:
    """Seconds of hybrid sharding's all-reduce of the reduced gradient shard
    across the replicas (0 without hybrid sharding): after the reduce-scatter
    inside each shard group, each rank all-reduces its shard, ``local /
    shard_group`` parameters, with the rank holding the same shard in every
    other group: ``replicas`` ranks spaced ``stride · shard_group`` apart
    (FSDP2 ``foreach_reduce``: reduce-scatter over the shard mesh dimension,
    then all-reduce over the replicate dimension; Megatron-Core
    ``param_and_grad_buffer``: reduce-scatter in the intra-partial group, then
    all-reduce in the inter-partial group; Zhao et al. 2023, Sec. 3.2.2).
    ``dense``/``expert``: the layer's local parameters of each kind
    (:func:`autopar_opt.cost.moe.split_params`); priced by NCCL's model like
    every collective."""
    return sum(_replica_part(ctx, s, local, group, stride, nbytes_per_param)
               for local, group, stride in data_parallel_parts(s, dense, expert))


def _replica_part(ctx: StageContext, s: Strategy, local: float, group: int, stride: int,
                  nbytes_per_param: float, messages: float = 1.0) -> float:
    """:func:`replica_all_reduce` of one kind of parameter: ``local`` of them reduced
    over a data-parallel ``group`` of ranks ``stride`` apart, sent as ``messages``
    (gradient buckets, :func:`grad_bucket_messages`); 0 without hybrid sharding."""
    if s.replicas <= 1 or local <= 0 or group <= 1:
        return 0.0
    shard = s.shard_group(group)
    return collective(ctx, "all_reduce", s.replicas, stride * shard,
                      local * nbytes_per_param / shard, messages)


def zero3_comm(layer: Layer, s: Strategy, ctx: StageContext, comp: Compute
                ) -> tuple[float, float]:
    """ZeRO-3/FSDP per micro-batch: all-gather parameters for forward and for
    backward, reduce-scatter gradients (Rajbhandari et al. 2020, Sec. 7.2.2:
    3x the parameter volume). The reduce-scatter moves the gradient dtype:
    the weight bytes, or 4 with ``fp32_grad_reduce`` (FSDP
    ``reduce_dtype=float32``). One gather per layer for an FSDP unit, one per linear
    module under DeepSpeed ZeRO-3 (:func:`zero3_gather_calls`), priced by NCCL's model.
    With prefetch the forward gather hides behind the forward
    compute of the neighbouring layer and the backward gather +
    reduce-scatter behind its backward (Zhao et al. 2023, Sec. 3.3); the
    neighbour is priced as this layer (a stack of equal layers). In such a
    stack the exposed part is the same for any prefetch depth >= 1 (FSDP2's
    implicit one-layer prefetch, ``set_modules_to_forward_prefetch`` deeper,
    DeepSpeed's ``stage3_prefetch_bucket_size``): in steady state one layer's
    gathers run per layer of compute, so a deeper queue absorbs jitter, not a
    bandwidth deficit; it costs memory (the gathered units in flight:
    :func:`~autopar_opt.cost.memory.working_set_bytes`, two with prefetch).
    Returns (all gather/scatter time, exposed part)."""
    if s.zero < 3 or s.dp * s.cp <= 1 or layer.params <= 0:
        return 0.0, 0.0
    gather, rs = _unit_gather_scatter(layer, s, ctx)
    if accumulates_unsharded(s, ctx):
        rs = 0.0                    # once per iteration instead: zero3_sync
    prefetch = ctx.training.runtime.fsdp_prefetch
    if reshards_after_forward(ctx):
        raw = 2 * gather + rs
        if not prefetch:
            return raw, raw
        return raw, exposed(gather, comp.fwd_s) + exposed(gather + rs, comp.bwd_s)
    if ctx.pipelined:               # gathered once per iteration: zero3_sync
        return 0.0, 0.0
    raw = gather + rs               # kept from forward to backward: no backward gather
    if not prefetch:
        return raw, raw
    return raw, exposed(gather, comp.fwd_s) + exposed(rs, comp.bwd_s)


def accumulates_unsharded(s: Strategy, ctx: StageContext) -> bool:
    """Whether a ZeRO-3/FSDP layer keeps its gradient unsharded across the
    micro-batches and reduce-scatters it once per iteration because the
    runtime turns gradient sync off on all but the last micro-batch
    (``fsdp_no_sync_accumulation``; :mod:`autopar_opt.ir.runtime`), with more
    than one micro-batch. Under pipelining without resharding the schedule does
    so anyway (:func:`zero3_sync`), which is not counted here again."""
    if s.zero < 3 or s.dp * s.cp <= 1 or ctx.microbatches <= 1 \
            or not ctx.training.runtime.fsdp_no_sync_accumulation:
        return False
    return reshards_after_forward(ctx) or not ctx.pipelined


def reshards_after_forward(ctx: StageContext) -> bool:
    """Whether ZeRO-3/FSDP reshards after the forward pass in this stage context
    (:meth:`~autopar_opt.ir.runtime.Runtime.reshards_after_forward`)."""
    return ctx.training.runtime.reshards_after_forward(ctx.pipelined)


def zero3_sync(layer: Layer, s: Strategy, ctx: StageContext, comp: Compute
               ) -> tuple[float, float]:
    """ZeRO-3/FSDP under pipelining without resharding (:func:`reshards_after_forward`
    False, ``pp > 1``): the pipeline schedule keeps the parameters unsharded
    and the gradients unreduced across the micro-batches (PyTorch pipelining
    sets ``set_reshard_after_backward(False)`` and
    ``set_requires_gradient_sync(False)`` on FSDP modules until the last
    micro-batch, ``torch/distributed/pipelining/stage.py``), so each layer
    gathers once per iteration (behind its first forward with prefetch) and
    reduce-scatters once (behind its last backward). Likewise the reduce-scatter
    alone of a runtime that turns gradient sync off until the last micro-batch
    (:func:`accumulates_unsharded`): once per iteration, in the last
    micro-batch's backward beside that micro-batch's backward gather (the
    exposed time it adds to what :func:`zero3_comm` charges every micro-batch).
    A pipeline runtime that runs these reduce-scatters after the schedule's last
    backward (``pipeline_reduce_after_schedule``: ``torch.distributed.pipelining``,
    whose ``PipelineStage.backward_maybe_with_nosync`` turns gradient sync off for
    every micro-batch of an FSDP stage and whose REDUCE_GRAD action, "scheduled
    after all microbatches W, B actions", calls each FSDP parameter group's
    ``post_backward`` in ``perform_reduce_grad``, ``torch/distributed/pipelining/
    stage.py``) leaves no backward to hide them: exposed whole.
    Returns (once-per-iteration exposed time, hidden part); (0, 0) in every
    other case (:func:`zero3_comm`)."""
    if s.zero < 3 or s.dp * s.cp <= 1 or layer.params <= 0:
        return 0.0, 0.0
    deferred = ctx.pipelined and ctx.training.runtime.pipeline_reduce_after_schedule
    if accumulates_unsharded(s, ctx):
        gather, rs = _unit_gather_scatter(layer, s, ctx)
        if not ctx.training.runtime.fsdp_prefetch or deferred:
            return rs, 0.0
        # the last backward's window already hides (part of) its gather, if it gathers
        before = gather if reshards_after_forward(ctx) else 0.0
        exp = exposed(before + rs, comp.bwd_s) - exposed(before, comp.bwd_s)
        return exp, rs - exp
    if not ctx.pipelined or reshards_after_forward(ctx):
        return 0.0, 0.0
    gather, rs = _unit_gather_scatter(layer, s, ctx)
    if not ctx.training.runtime.fsdp_prefetch:
        return gather + rs, 0.0
    exp = exposed(gather, comp.fwd_s) + (rs if deferred else exposed(rs, comp.bwd_s))
    return exp, gather + rs - exp


def gradient_sync(layer: Layer, s: Strategy, ctx: StageContext, comp: Compute
          ) -> tuple[float, float, float]:
    """(exposed gradient reduction, its hidden part, optimizer step), once per iteration.

    Gradient reduction over the dp×cp group: an all-reduce, or with ZeRO-1/2 a
    reduce-scatter + all-gather of the same total volume (ZeRO-3 reduced per
    micro-batch already); DeepSpeed all-reduces instead of reduce-scattering
    (``zero_grad_all_reduce``, :func:`_zero12_reduction`) and reduces ZeRO-2 gradients
    every micro-batch (``zero2_microbatch_reduce``, :func:`zero2_microbatch_comm`:
    here only the all-gather and the step); with hybrid sharding the reduce-scatter and the
    all-gather run inside the shard group and the shard is all-reduced across
    the replicas between them (Megatron-Core ``--num-distributed-optimizer-instances``,
    :func:`replica_all_reduce`), sent in the framework's gradient buckets
    (:func:`grad_bucket_messages`) and priced by NCCL's model. With ``grad_reduce_overlap`` the
    reduction of a layer's gradient bucket runs while the last micro-batch's
    backward continues: window = the layer's backward (one bucket per layer;
    PyTorch DDP, Li et al. 2020, Sec. 3.2.3; Megatron-Core
    ``--overlap-grad-reduce``); the all-gather of updated parameters hides
    behind the next forward with ``param_gather_overlap``; under FSDP's
    ``SHARD_GRAD_OP`` (``zero2_forward_gather``) it is the forward's own unit-by-unit
    gather, prefetched behind the neighbouring unit's forward
    (:func:`zero2_gather_window`), here once per iteration, or every micro-batch
    with the reduce-scatter in :func:`zero2_microbatch_comm` when gradients are
    synchronised each micro-batch; a runtime that sends each rank's partition as its own
    broadcast (``zero_param_broadcast``, InternEvo) pays those broadcasts instead
    (:func:`param_broadcast_time`; the all-gather where the stage's parameters are not
    known or under hybrid sharding). The step itself is
    HBM-bound: ``shard · bytes_per_param / HBM bandwidth``.
    """
    if layer.params <= 0:
        return 0.0, 0.0, 0.0
    p, rt = ctx.params, ctx.training.runtime
    w_bytes = state_bytes(ctx.training, s.zero)[0]
    g_bytes = reduced_grad_bytes(ctx.training, s.zero)
    dense, expert = moe.split_params(layer, s)   # MoE: expert grads reduce over edp
    comm = raw = shard = 0.0
    bwd_window = comp.bwd_s if rt.grad_reduce_overlap else 0.0
    fwd_window = zero2_gather_window(s, comp, ctx)
    per_microbatch = zero2_reduces_per_microbatch(s, ctx)
    regathers = fsdp_zero2_regathers(s, ctx)     # gathered every micro-batch instead
    for local, group, stride in data_parallel_parts(s, dense, expert):
        if local <= 0:
            continue
        if s.zero < 3 and group > 1:
            msgs = zero12_messages(s, ctx, local * g_bytes, group, g_bytes)
            if s.zero == 0:
                ar = collective(ctx, "all_reduce", group, stride, local * g_bytes, msgs)
                raw += ar
                comm += exposed(ar, bwd_window)
            else:
                sg = s.shard_group(group)     # hybrid: the shard group, then the replicas
                rs = 0.0 if per_microbatch else _zero12_reduction(ctx, s, local, group, stride,
                                                                  g_bytes, msgs)
                if regathers:
                    ag = 0.0
                elif rt.zero_param_broadcast and ctx.stage_params > 0 and not s.hybrid:
                    ag = param_broadcast_time(ctx, sg, stride, local, w_bytes, s.tp)
                else:
                    ag = collective(ctx, "all_gather", sg, stride, local * w_bytes, msgs)
                raw += rs + ag
                comm += exposed(rs, bwd_window) + exposed(ag, fwd_window)
        shard += local / s.zero_divisors(group)[2]
    step = shard * p.optimizer_step_bytes(ctx.training.optimizer) \
        / (ctx.cluster.device.hbm_gb_per_s * 1e9)
    if not rt.fused_optimizer:
        step *= p.unfused_optimizer_factor
    return comm, raw - comm, step


def param_broadcast_time(ctx: StageContext, group: int, stride: int, local: float,
                         w_bytes: float, tp: int) -> float:
    """Seconds of one layer's share of ZeRO-1/2's parameter broadcasts on a runtime with
    ``zero_param_broadcast`` (InternEvo ``broadcast_params``): each of the ``group`` ranks
    broadcasts its partition of the parameters a rank of the stage holds, ``P/group`` of
    ``P = stage_params / tp`` (:attr:`~autopar_opt.cost.context.StageContext.stage_params`,
    the even split; tensor parallelism divides the dense parameters), one broadcast after
    another on the communicator's stream, each priced by NCCL's model (its chain's fill
    across the group, :mod:`autopar_opt.cost.nccl`). The layer's share is ``local / P`` of
    the ``group`` broadcasts: its own bytes, and that share of their latencies. Summed over
    a stage of the even split: ``group`` broadcasts of ``P/group`` parameters."""
    part = ctx.stage_params / max(tp, 1) / group      # one rank's partition, parameters
    if part <= 0 or local <= 0:
        return 0.0
    return collective(ctx, "broadcast", group, stride, local * w_bytes, messages=local / part)


def _zero12_reduction(ctx: StageContext, s: Strategy, local: float, group: int, stride: int,
                      g_bytes: float, msgs: float) -> float:
    """Seconds of the ZeRO-1/2 gradient reduction of ``local`` parameters over a
    data-parallel ``group``: a reduce-scatter (inside the shard group, then the
    replicas' all-reduce of the shard under hybrid sharding), or, on a runtime with
    ``zero_grad_all_reduce`` (DeepSpeed), an all-reduce of the whole gradient of which
    each rank keeps its partition (:mod:`autopar_opt.ir.runtime`)."""
    if ctx.training.runtime.zero_grad_all_reduce and not s.hybrid:
        return collective(ctx, "all_reduce", group, stride, local * g_bytes, msgs)
    return collective(ctx, "reduce_scatter", s.shard_group(group), stride, local * g_bytes, msgs) \
        + _replica_part(ctx, s, local, group, stride, g_bytes, msgs)


def zero2_reduces_per_microbatch(s: Strategy, ctx: StageContext) -> bool:
    """Whether this ZeRO-2 layer reduces its gradients every micro-batch instead of
    once per iteration: ``zero2_microbatch_reduce`` (DeepSpeed), or FSDP's
    ``SHARD_GRAD_OP`` (``zero2_forward_gather``) with gradients synchronised on
    every micro-batch (no ``fsdp_no_sync_accumulation``)."""
    rt = ctx.training.runtime
    return s.zero == 2 and (rt.zero2_microbatch_reduce or fsdp_zero2_regathers(s, ctx))


def fsdp_zero2_regathers(s: Strategy, ctx: StageContext) -> bool:
    """Whether an FSDP ``SHARD_GRAD_OP`` layer (``zero2_forward_gather``) frees its
    gathered parameters after every micro-batch's backward and gathers them again in
    the next forward (:mod:`autopar_opt.ir.runtime`): gradients synchronised each
    micro-batch, more than one micro-batch, no pipeline schedule (PyTorch pipelining
    turns resharding after backward and gradient sync off until the last micro-batch,
    ``torch/distributed/pipelining/stage.py``, as :func:`zero3_sync` says)."""
    rt = ctx.training.runtime
    return (s.zero == 2 and rt.zero2_forward_gather and not rt.fsdp_no_sync_accumulation
            and ctx.microbatches > 1 and not ctx.pipelined)


def zero2_gather_window(s: Strategy, comp: Compute, ctx: StageContext) -> float:
    """The compute window behind which a ZeRO-1/2 layer's parameter all-gather runs:
    at ZeRO-2 the neighbouring unit's forward under FSDP's ``SHARD_GRAD_OP`` with
    prefetch (``zero2_forward_gather``, ``fsdp_prefetch``; the gather of a stack of
    equal units sits behind the forward of the one before it, as :func:`zero3_comm`'s),
    else the next forward with ``param_gather_overlap`` (Megatron-Core), else none: the
    gather runs after the optimizer step on the critical path (ZeRO-1 is a sharded
    optimizer on every stack, FSDP has no such strategy)."""
    rt = ctx.training.runtime
    if s.zero == 2 and rt.zero2_forward_gather:
        return comp.fwd_s if rt.fsdp_prefetch else 0.0
    return comp.fwd_s if rt.param_gather_overlap else 0.0


def zero2_microbatch_comm(layer: Layer, s: Strategy, ctx: StageContext, comp: Compute
                          ) -> tuple[float, float]:
    """(raw, exposed) seconds per micro-batch of a ZeRO-2 layer's gradient reduction on a
    runtime that reduces every micro-batch (:func:`zero2_reduces_per_microbatch`; 0, 0
    otherwise): :func:`_zero12_reduction` of the layer's gradient in its reduction dtype,
    sent in the framework's buckets, exposed unless ``grad_reduce_overlap`` hides it behind
    the layer's backward; under FSDP's ``SHARD_GRAD_OP`` also the forward's all-gather
    of the parameters freed after the previous micro-batch's backward, behind the
    neighbouring unit's forward with prefetch (:func:`zero2_gather_window`).
    :func:`gradient_sync` then prices the all-gather of the updated parameters (none
    when FSDP gathers every micro-batch here) and the step, once per iteration."""
    if not zero2_reduces_per_microbatch(s, ctx) or layer.params <= 0:
        return 0.0, 0.0
    rt = ctx.training.runtime
    g_bytes = reduced_grad_bytes(ctx.training, s.zero)
    w_bytes = state_bytes(ctx.training, s.zero)[0]
    dense, expert = moe.split_params(layer, s)
    raw = gather = 0.0
    regathers = fsdp_zero2_regathers(s, ctx)
    for local, group, stride in data_parallel_parts(s, dense, expert):
        if local > 0 and group > 1:
            msgs = zero12_messages(s, ctx, local * g_bytes, group, g_bytes)
            raw += _zero12_reduction(ctx, s, local, group, stride, g_bytes, msgs)
            if regathers:
                gather += collective(ctx, "all_gather", s.shard_group(group), stride,
                                     local * w_bytes, msgs)
    exp = exposed(raw, comp.bwd_s if rt.grad_reduce_overlap else 0.0) \
        + exposed(gather, zero2_gather_window(s, comp, ctx))
    return raw + gather, exp


def tie_sync_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """The tied-gradient all-reduce between the first and the last pipeline
    stage, once per iteration, exposed (0 without a tie or with one stage).

    After the backward pass and the data-parallel reduction, the two copies
    of the word-embedding gradient are all-reduced over a 2-rank group, one
    per tensor-parallel rank (Megatron-Core ``finalize_model_grads``:
    ``_allreduce_word_embedding_grads`` all-reduces ``main_grad`` over the
    embedding group of the first and last stage; DeepSpeed
    ``PipelineModule.allreduce_tied_weight_gradients``, called by
    ``PipelineEngine._exec_reduce_tied_grads``). Nothing overlaps it: the
    optimizer step waits for it. Bytes: the layer's own tensor-parallel shard
    of the tied parameters in the gradient-reduction dtype
    (:func:`~autopar_opt.cost.state.reduced_grad_bytes`); a 2-rank all-reduce
    (NCCL's model) over ``ctx.tie_tier`` (across nodes: one GPU's NIC share). Both ends of the
    tie pay it (the copy holder on the last stage, the owner on the first):
    the collective completes for both once the later of the two arrives, which
    is what adding it to each stage's once-per-iteration term gives under the
    ``max_i g_i`` of docs/DESIGN.md §3.
    """
    tier = ctx.tie_tier
    if tier is None or layer.tied_params <= 0:
        return 0.0
    nbytes = layer.tied_params / s.tp * reduced_grad_bytes(ctx.training, s.zero)
    cl = ctx.cluster
    gen = GENERATION.get(cl.device.arch, GENERATION[UNKNOWN_GENERATION])
    if tier is cl.intra_node or tier.name == cl.intra_node.name:
        g = nccl.Group(2, 1, tier.bandwidth_gb_per_s * ctx.params.comm_efficiency,
                       link_kind(tier), gen)
    else:
        g = nccl.Group(2, 2, cl.nic_share_gb_per_s(1.0) * ctx.params.inter_comm_efficiency,
                       link_kind(cl.intra_node), gen)
    return nccl.collective_time("all_reduce", nbytes, g)
