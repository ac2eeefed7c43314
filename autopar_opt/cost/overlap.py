"""How much tensor- and context-parallel communication an overlap mechanism hides.

Overlap is computed, never assumed (issue 28, point 5): each mechanism
decomposes a collective and the GEMM or attention kernel it overlaps into
chunks, and a software pipeline of ``n`` chunks of communication ``c/n`` and
compute ``g/n`` leaves ``max(0, c/n - g/n)`` exposed per overlapped chunk plus
whatever chunk has nothing to hide behind. The chunk counts, the pairing of
collectives with GEMMs and the SMs the communication kernels take are the
mechanisms' documented defaults, cited below; nothing is fitted.

Tensor parallelism with sequence parallelism runs, per transformer block and
pass, four collectives of one activation each (Korthikanti et al. 2022,
Sec. 4.2.2): an all-gather before the QKV and the first MLP GEMM, a
reduce-scatter after the attention output projection and the second MLP
GEMM; the backward pass mirrors them (:func:`autopar_opt.cost.comm.tp_comm_time`
prices their volume), and Megatron's layers all-gather the sharded QKV and MLP
inputs once more for the weight gradients, behind the input-gradient GEMMs
(:func:`regather_cost`; runtime ``sp_input_regather``).

* Transformer Engine user buffers (Megatron-Core ``--tp-comm-overlap``;
  TransformerEngine ``transformer_engine/pytorch/module/base.py``
  ``initialize_ub`` defaults): ``ring_exchange`` for ``qkv_fprop``,
  ``fc1_fprop``, ``proj_dgrad``, ``fc2_dgrad`` (``num_splits = tp``, copy
  engines, no SM margin): the local chunk's GEMM needs no communication, so
  ``(tp-1)·max(0, c/(tp-1) - g/tp)`` stays exposed; ``pipeline`` for
  ``proj_fprop``, ``fc2_fprop`` (``num_splits = 4``, ``num_sm = 16``,
  ``set_sm_margin``): the last chunk's reduce-scatter has nothing after it,
  ``c/4 + 3·max(0, c/4 - g/4)``; ``bulk`` for ``qkv_dgrad``/``fc1_dgrad``
  (the input-gradient reduce-scatter behind the weight-gradient GEMM) and
  ``qkv_wgrad``/``fc1_wgrad``: ``max(0, c - g)``. Where the communication
  kernels hold ``num_sm`` SMs (``set_sm_margin``: the GEMM is launched on the
  others), the GEMM runs ``num_sm/(SMs - num_sm)`` longer.
* Async tensor parallelism (PyTorch ``torch.distributed._symmetric_memory``
  micro-pipelining, torchtitan ``enable_async_tensor_parallel``): every
  all-gather-matmul and matmul-reduce-scatter pair decomposed per rank
  (``n = tp``), copy-engine transfers: the ring-exchange remainder for each
  pair, no SM margin.

The GEMM of each pair is the block's own (QKV, projection, first and second
MLP GEMM) by its share of the block's forward GEMM FLOPs
(``Layer.tp_gemm_shares``, set by the transformer builders; an even split for a
layer without them, stated); a backward GEMM pair (input or weight gradient)
takes the forward GEMM's time (each backward GEMM has the forward's FLOPs,
Narayanan et al. 2021, Sec. 5.1).
"""

from __future__ import annotations

from autopar_opt.cost.context import Compute, StageContext
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.strategies import Strategy, effective_recompute
from autopar_opt.ir.training import Recompute

#: Transformer Engine ``initialize_ub`` defaults: splits of a ``pipeline``
#: overlap and SMs its communication kernels (and a ``bulk`` overlap's) hold.
TE_PIPELINE_SPLITS = 4
TE_COMM_SMS = 16
#: Collective-GEMM pairs per pass of a tensor-parallel block (QKV, projection,
#: MLP up, MLP down).
PAIRS = 4
#: SMs of a device the catalog does not describe (an H100 SXM's 132).
DEFAULT_SMS = 132


def _shares(layer: Layer) -> tuple[float, ...]:
    shares = layer.tp_gemm_shares
    if len(shares) == PAIRS and sum(shares) > 0:
        total = sum(shares)
        return tuple(x / total for x in shares)
    return (1.0 / PAIRS,) * PAIRS


def async_dgrad_hidden(c: float, g: list[float], sp: bool) -> float:
    """TP time Megatron's asynchronous input-gradient collective hides per micro-batch
    (:class:`~autopar_opt.ir.runtime.Runtime` ``async_dgrad``): the backward collective of
    each column-parallel GEMM (QKV and the first MLP GEMM, ``g[0]`` and ``g[2]``) runs
    behind that GEMM's weight-gradient GEMM (the forward GEMM's FLOPs, Narayanan et al.
    2021, Sec. 5.1): a reduce-scatter (one collective ``c``) under sequence parallelism,
    an all-reduce (two, Korthikanti et al. 2022 Sec. 4.2.2) without. A recomputed forward
    adds no backward collective, so one backward pass is hidden whatever the recompute."""
    unit = c if sp else 2.0 * c
    return min(unit, g[0]) + min(unit, g[2])


def vocab_dgrad_hidden(layer: Layer, s: Strategy, comp: Compute, raw: float,
                       recomputed: bool) -> float:
    """The asynchronous input-gradient collective of a vocabulary-parallel layer: the
    output layer is a column-parallel linear whose backward all-reduce (reduce-scatter
    under SP) hides behind its weight-gradient GEMM (its forward GEMM's FLOPs); the
    embedding's collectives (forward all-reduce, backward all-gather of the output
    gradient) have no such window. ``raw`` is :func:`autopar_opt.cost.comm.vocab_layer_tp_time`:
    the backward collective alone without SP, one of ``2`` (``3`` with the forward
    recomputed) equal-sized gather/reduce collectives with it."""
    if layer.kind is not LayerKind.lm_head:
        return 0.0
    bwd = raw / (3.0 if recomputed else 2.0) if s.sp else raw
    return min(bwd, comp.gemm_fwd_s)


def ring_exchange_exposed(c: float, g: float, n: int) -> float:
    """A ``ring_exchange`` (or per-rank micro-pipelined) collective ``c``
    overlapped with its GEMM ``g`` in ``n`` chunks: the first chunk's GEMM is
    local, each of the ``n-1`` transfers hides behind the next chunk's GEMM."""
    if n <= 1:
        return 0.0
    return (n - 1) * max(0.0, c / (n - 1) - g / n)


def pipeline_exposed(c: float, g: float, splits: int = TE_PIPELINE_SPLITS) -> float:
    """A ``pipeline`` GEMM then reduce-scatter in ``splits`` chunks: chunk ``i``'s
    reduce-scatter overlaps chunk ``i+1``'s GEMM; the last one is exposed."""
    return c / splits + (splits - 1) * max(0.0, c / splits - g / splits)


def bulk_exposed(c: float, g: float) -> float:
    """A ``bulk`` overlap: the whole collective behind one independent GEMM."""
    return max(0.0, c - g)


def _plain_collectives(rt, s: Strategy) -> bool:
    """The TP collectives run as NCCL kernels, not split by an overlap mechanism: no
    ``tp_comm_overlap``, or user buffers without sequence parallelism (Megatron-LM's
    validate_args: "Tensor parallel communication/GEMM overlap can happen only when
    sequence parallelism is enabled")."""
    return not rt.tp_comm_overlap or (rt.tp_overlap == "te_userbuffers" and not s.sp)


def tp_nccl_hidden(s: Strategy, ctx: StageContext, raw: float, exposed: float) -> float:
    """The TP time NCCL kernels hide behind compute on the compute's SMs, of ``raw`` of which
    :func:`tp_exposed` left ``exposed`` (the async input-gradient collectives of
    :func:`async_dgrad_hidden`), which slows that compute as any hidden NCCL traffic does
    (:func:`autopar_opt.cost.layer_cost.layer_cost`); zero where an overlap mechanism prices
    its own SM share (user buffers) or runs on copy engines (async TP)."""
    rt = ctx.training.runtime
    if raw <= 0 or not rt.async_dgrad or not _plain_collectives(rt, s):
        return 0.0
    return raw - exposed


def te_sm_margin(ctx: StageContext) -> float:
    """How much longer a GEMM runs while Transformer Engine's communication kernels hold
    ``TE_COMM_SMS`` of the device's SMs (``set_sm_margin``: the GEMM gets the others)."""
    sms = ctx.cluster.device.sms or DEFAULT_SMS
    return TE_COMM_SMS / max(sms - TE_COMM_SMS, 1)


def regather_cost(layer: Layer, s: Strategy, ctx: StageContext, comp: Compute,
                  raw: float) -> tuple[float, float]:
    """Exposed time and NCCL-hidden time of the backward re-gathers of a block's
    sequence-sharded column-parallel inputs (``raw``: :func:`autopar_opt.cost.comm.sp_regather_time`).
    Each runs behind its layer's input-gradient GEMM (QKV and the first MLP GEMM, the
    forward GEMM's FLOPs, Narayanan et al. 2021, Sec. 5.1; the attention's alone in a
    Mixture-of-Experts block): ``max(0, c - g)`` each (Megatron-Core launches the gather
    with ``async_op=True`` before ``grad_output.matmul(weight)`` and waits after it).
    Under Transformer Engine's user buffers it is the ``qkv_dgrad``/``fc1_dgrad`` bulk
    overlap, whose kernels hold ``TE_COMM_SMS`` SMs (the GEMM runs the SM margin longer,
    exposed, and nothing is left for ``comm_interference``); otherwise the hidden part is
    NCCL traffic on the compute's SMs, returned for ``comm_interference``."""
    if raw <= 0:
        return 0.0, 0.0
    exposed, margin = regather_parts(layer, s, ctx, comp, raw)
    if margin is not None:
        return exposed + margin, 0.0
    return exposed, raw - exposed


def regather_parts(layer: Layer, s: Strategy, ctx: StageContext, comp: Compute,
                   raw: float) -> tuple[float, float | None]:
    """(communication left exposed, SM-margin slowdown) of :func:`regather_cost`'s re-gathers:
    the margin Transformer Engine's bulk overlap adds to the input-gradient GEMMs under user
    buffers, None where the re-gathers are NCCL kernels on the compute's SMs (whose hidden
    part, ``raw`` less the exposed one, is charged ``comm_interference`` instead). Kept apart
    so that the hidden part and the slowdown can be stated (:mod:`autopar_opt.cost.comm_split`)."""
    if raw <= 0:
        return 0.0, None
    qkv, _, fc1, _ = (comp.gemm_fwd_s * x for x in _shares(layer))
    windows = (qkv,) if layer.is_moe else (qkv, fc1)
    c = raw / len(windows)
    exposed = sum(bulk_exposed(c, g) for g in windows)
    rt = ctx.training.runtime
    if rt.tp_comm_overlap and rt.tp_overlap == "te_userbuffers" and s.sp:
        return exposed, te_sm_margin(ctx) * sum(windows)
    return exposed, None


def _passes(layer: Layer, s: Strategy) -> tuple[Recompute, float, bool]:
    """(effective recompute, passes of the TP collectives, whether the repeated pass is the
    forward all-gathers alone) of one micro-batch: op-level checkpointing with sequence
    parallelism repeats the forward all-gathers only (comm.tp_comm_time): half a pass more."""
    rc = effective_recompute(layer, s.recompute)
    gathers_only = rc is Recompute.op and s.sp
    passes = 3 if rc is Recompute.full or (rc is Recompute.op and not s.sp) \
        else 2.5 if gathers_only else 2
    return rc, passes, gathers_only


def tp_sm_margin(layer: Layer, s: Strategy, ctx: StageContext, comp: Compute, raw: float) -> float:
    """The part of :func:`tp_exposed` that is not communication: the GEMMs Transformer
    Engine's user buffers run longer while their kernels hold ``TE_COMM_SMS`` SMs (the
    ``pipeline`` pairs of every forward pass, the ``bulk`` pairs of the backward), which
    :func:`tp_exposed` adds to the communication it leaves exposed; 0 under any other
    mechanism. It is the slowdown the overlap charges to compute, stated apart from the
    hidden time (:mod:`autopar_opt.cost.comm_split`)."""
    rt = ctx.training.runtime
    if raw <= 0 or _plain_collectives(rt, s) or rt.tp_overlap == "async_tp":
        return 0.0
    _, passes, gathers_only = _passes(layer, s)
    qkv, proj, fc1, fc2 = (comp.gemm_fwd_s * x for x in _shares(layer))
    margin = te_sm_margin(ctx)
    return margin * (proj + fc2) * (1 if gathers_only else passes - 1) + margin * (qkv + fc1)


def tp_exposed(layer: Layer, s: Strategy, ctx: StageContext, comp: Compute, raw: float) -> float:
    """Exposed tensor-parallel time of one micro-batch under the runtime's
    overlap mechanism (module docstring); ``raw`` is the collectives' time
    (:func:`autopar_opt.cost.comm.tp_comm_time`). No overlap: all of it. A
    recomputed forward (full recomputation) is priced as the forward; op-level
    checkpointing repeats only the forward all-gathers, each paired with its
    forward GEMM as in the forward pass."""
    rt = ctx.training.runtime
    if raw <= 0:
        return raw
    rc, passes, gathers_only = _passes(layer, s)
    c = raw / passes / PAIRS                      # one collective
    g = [comp.gemm_fwd_s * x for x in _shares(layer)]   # forward GEMM of each pair
    if _plain_collectives(rt, s):
        if not rt.async_dgrad:
            return raw
        if layer.kind in (LayerKind.embedding, LayerKind.lm_head):
            return raw - vocab_dgrad_hidden(layer, s, comp, raw,
                                            rc in (Recompute.full, Recompute.op))
        return raw - async_dgrad_hidden(c, g, s.sp)
    n = s.tp
    qkv, proj, fc1, fc2 = g
    gathers = ring_exchange_exposed(c, qkv, n) + ring_exchange_exposed(c, fc1, n)
    if rt.tp_overlap == "async_tp":
        per_pass = sum(ring_exchange_exposed(c, gi, n) for gi in g)
        return per_pass * 2 + (gathers if gathers_only else per_pass * (passes - 2))
    fwd = gathers + pipeline_exposed(c, proj) + pipeline_exposed(c, fc2)
    bwd = (ring_exchange_exposed(c, proj, n) + ring_exchange_exposed(c, fc2, n)
           + bulk_exposed(c, qkv) + bulk_exposed(c, fc1))
    comm = fwd * (passes - 1) + bwd if not gathers_only else fwd + gathers + bwd
    return comm + tp_sm_margin(layer, s, ctx, comp, raw)


#: Bytes of HBM traffic per output element and ring step of the context-parallel
#: partial-output merge: read the step's 16-bit output and read-modify-write the
#: 16-bit accumulator (TransformerEngine ``flash_attn_fwd_out_correction``:
#: ``out.add_(out_per_step * exp(lse_per_step - lse))``, and the log-sum-exp
#: correction ``flash_attn_fwd_softmax_lse_correction``, one fp32 per row:
#: negligible); the backward accumulates dQ and dK/dV the same way.
CP_MERGE_BYTES = 6.0


def cp_ring_exposed(c_fwd: float, c_bwd: float, a_fwd: float, a_bwd: float, cp: int,
                    fwd_passes: int = 1) -> tuple[float, float]:
    """(raw, exposed) K/V exchange of ring context parallelism (TE
    ``AttnFuncWithCPAndKVP2P``; Liu et al. 2023, ring attention) for one
    micro-batch: ``cp`` steps, each computing attention on one K/V chunk while
    the next chunk travels; ``cp - 1`` transfers of ``c_fwd`` (forward, K and V)
    and ``c_bwd`` (backward, K/V and dK/dV) each hide behind one step's
    attention (``a/cp``, the load-balanced split makes steps equal). A full
    recomputation runs the forward ring again (``fwd_passes = 2``)."""
    if cp <= 1:
        return 0.0, 0.0
    raw = (cp - 1) * (fwd_passes * c_fwd + c_bwd)
    exp = (cp - 1) * (fwd_passes * max(0.0, c_fwd - a_fwd / cp) + max(0.0, c_bwd - a_bwd / cp))
    return raw, exp
