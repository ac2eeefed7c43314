"""FSDP2's copies between its communication buffers and the parameters' own tensors.

PyTorch's per-parameter FSDP (FSDP2, ``fully_shard``) gathers a unit's parameters
into one flat buffer and reduce-scatters one flat gradient buffer, but each
parameter and each gradient is a tensor of its own, so every collective is
framed by copies (``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``):

* **after each all-gather**, ``foreach_all_gather_copy_out`` copies the gathered
  buffer into the unsharded parameters (``split_with_sizes_copy``: read and write
  the whole unit, **2·w** bytes per parameter, ``w`` the gathered dtype's size). It
  runs in ``wait_for_unshard`` on the current stream, the compute stream, so it is
  serial with the layer's kernels. The copy-in before the gather moves the local
  shard only (``all_gather_copy_in``, on its own stream): not priced.
* **before each reduce-scatter**, ``foreach_reduce_scatter_copy_in`` concatenates
  the unsharded gradients into the reduce-scatter input in the reduce dtype
  (``torch._chunk_cat``: read **g**, write **r** bytes per parameter); it is
  issued before ``reduce_scatter_stream.wait_stream(current_stream)``, on the
  compute stream. The copy of the reduced shard back (``reduce_output``) is a
  shard: not priced.
* **with gradient sync off** (no-sync accumulation across micro-batches, or a
  pipeline schedule that syncs on the last micro-batch only), the post-backward
  keeps each unsharded gradient: cast to the reduce dtype after the first
  micro-batch (``FSDPParam.to_accumulated_grad_if_needed``: read g, write r, in
  ``_fsdp_param.py``), added into that accumulator after each later one
  (``accumulate_unsharded_grad_if_needed``: read r + g, write r), or, where the
  dtypes agree, accumulated by autograd in place (read g + g, write g); the last
  micro-batch's reduce-scatter then reads the accumulator (read r, write r).

The old FlatParameter FSDP (FSDP1: Composer, fms-fsdp, HF with FSDP1) gathers into
the flat parameter that the original parameters view and reduce-scatters the flat
gradient in place on its post-backward stream, so it pays none of these on the
compute stream: runtime capability ``fsdp2_copies``
(:mod:`autopar_opt.ir.runtime`). DeepSpeed's ZeRO-3 gathers a module's parameter
into its own buffer (the single-tensor path): none either.

Priced as HBM traffic at the copy bandwidth measured on an H200
(:data:`~autopar_opt.cost.fp8_casts.COPY_BANDWIDTH_FRACTION` of the datasheet
bandwidth), per micro-batch on average over an iteration, on the compute stream.
Gathers per micro-batch follow the gathers :mod:`autopar_opt.cost.comm` prices:
two under ZeRO-3 with resharding after forward (forward and backward), one when
the gathered parameters are kept from forward to backward, one per iteration
under a pipeline schedule that keeps them; FSDP's ``SHARD_GRAD_OP`` (ZeRO-2)
one per micro-batch where it gathers again each forward, else one per iteration.
"""

from __future__ import annotations

from autopar_opt.cost import comm, moe
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.fp8_casts import COPY_BANDWIDTH_FRACTION
from autopar_opt.cost.state import reduced_grad_bytes
from autopar_opt.ir.graph import Layer
from autopar_opt.ir.strategies import Strategy


def sharded_params(layer: Layer, s: Strategy) -> float:
    """The layer's parameters on one device that FSDP shards over more than one rank:
    its dense ones over ``dp·cp``, its routed experts over ``edp``
    (:func:`autopar_opt.cost.comm.data_parallel_parts`), unsharded counts (what a gather
    rebuilds)."""
    parts = comm.data_parallel_parts(s, *moe.split_params(layer, s))
    return sum(local for local, group, _ in parts if group > 1)


def gathers_per_microbatch(s: Strategy, ctx: StageContext) -> float:
    """All-gathers of a layer's parameters per micro-batch, on average over the
    iteration (module docstring); 0 where FSDP gathers nothing."""
    c = max(ctx.microbatches, 1)
    if s.zero >= 3:
        if comm.reshards_after_forward(ctx):
            return 2.0
        return 1.0 / c if ctx.pipelined else 1.0
    if s.zero == 2 and ctx.training.runtime.zero2_forward_gather:
        return 1.0 if comm.fsdp_zero2_regathers(s, ctx) else 1.0 / c
    return 0.0


def reduces_every_microbatch(s: Strategy, ctx: StageContext) -> bool:
    """Whether the layer's gradients are reduce-scattered after every micro-batch
    (else they are accumulated unsharded and reduced once, on the last)."""
    if ctx.microbatches <= 1:
        return True
    if s.zero >= 3:
        kept = ctx.pipelined and not comm.reshards_after_forward(ctx)
        return not (comm.accumulates_unsharded(s, ctx) or kept)
    return comm.zero2_reduces_per_microbatch(s, ctx)


def reduce_side_bytes(gathered: float, reduced: float, microbatches: int, every: bool) -> float:
    """HBM bytes per parameter per micro-batch (averaged over the iteration) of the
    gradient side: the reduce-scatter's copy-in (read ``gathered``, the unsharded
    gradient's dtype size, write ``reduced``) every micro-batch when ``every``, else
    the accumulation the module docstring describes over ``microbatches`` and one
    copy-in of the accumulator."""
    if every:
        return gathered + reduced
    c = max(microbatches, 1)
    cast = reduced != gathered
    first = gathered + reduced if cast else 0.0
    later = (2 * reduced + gathered) if cast else 3 * gathered
    return (first + (c - 1) * later + 2 * reduced) / c


def copy_bytes(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """HBM bytes one device moves per micro-batch in FSDP2's copies of ``layer``
    (module docstring); 0 off the ``fsdp2_copies`` runtimes, below ZeRO-2, or where
    no parameter is sharded over more than one rank."""
    if not ctx.training.runtime.fsdp2_copies or layer.params <= 0 or s.zero < 2:
        return 0.0
    local = sharded_params(layer, s)
    gathers = gathers_per_microbatch(s, ctx)
    if local <= 0 or gathers <= 0:
        return 0.0
    w, r = comm.zero3_bytes(ctx.training)
    if s.zero == 2:
        r = reduced_grad_bytes(ctx.training, 2)
    per_param = gathers * 2 * w + reduce_side_bytes(w, r, ctx.microbatches,
                                                    reduces_every_microbatch(s, ctx))
    return per_param * local


def copy_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """Seconds per micro-batch of :func:`copy_bytes` at the measured copy bandwidth."""
    nbytes = copy_bytes(layer, s, ctx)
    if nbytes <= 0:
        return 0.0
    return nbytes / (ctx.cluster.device.hbm_gb_per_s * 1e9 * COPY_BANDWIDTH_FRACTION)
