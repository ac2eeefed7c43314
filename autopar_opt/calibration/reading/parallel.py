"""The published layout of a record: degrees, sharding, sequence parallelism.

:func:`read_parallelism` reads the ``parallelism`` section once into
:class:`ParallelFacts` (``tp·pp·dp·cp`` = the GPUs of the run), with the
framework's defaults for what is not stated written into the notes;
:func:`map_zero` reads the ZeRO/FSDP level from ``zero_stage`` and the
``fsdp`` text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autopar_opt.calibration.reading.errors import Unmodelable
from autopar_opt.calibration.reading.schema import Parallelism, flag_value, integer_problem
from autopar_opt.ir.runtime import Runtime


@dataclass(frozen=True)
class ParallelFacts:
    """Degrees of the published plan; ``zero`` is the ZeRO level (0-3) of its
    data parallelism, ``sp`` sequence parallelism (only with ``tp > 1``),
    ``vp`` model chunks per pipeline rank (interleaving when > 1), ``ep``
    expert parallelism (carved out of ``dp·cp``)."""

    tp: int
    pp: int
    dp: int
    cp: int
    sp: bool
    vp: int
    zero: int
    ep: int = 1
    #: the experts' tensor-parallel degree when it differs from ``tp`` (0: equal)
    etp: int = 0
    #: hybrid sharding's shard group (``Strategy.zero_group``; 0: the whole dp·cp group)
    zero_group: int = 0


#: Runtimes whose data parallelism shards everything unless told otherwise.
_SHARDING_BY_DEFAULT = {
    "torchtitan": "torchtitan shards data parallelism with FSDP2 by default "
                  "(data_parallel_shard_degree = -1)",
    "pytorch-fsdp": "FSDP's default sharding strategy is FULL_SHARD",
    "fairscale-fsdp": "fairscale FullyShardedDataParallel reshards after forward by default "
                      "(reshard_after_forward=True)",
}


def map_zero(par: Parallelism, runtime: Runtime | None = None,
             notes: list[str] | None = None) -> int:
    """ZeRO stage of a record's ``parallelism`` section.

    PyTorch FSDP ``FULL_SHARD`` and Megatron-FSDP (Megatron-Bridge tables:
    "FSDP (sharding group N)") shard weights, gradients and optimizer state:
    stage 3. Megatron-Bridge turns ``use_megatron_fsdp`` into
    ``ddp.data_parallel_sharding_strategy = "optim_grads_params"``
    (``scripts/performance/utils/helpers.py::set_mcore_fsdp_configs``);
    ``SHARD_GRAD_OP``: stage 2. Any other FSDP text that is not a negation
    (``FSDP2``, ``fully_shard``, ``yes``, ``HYBRID_SHARD``) is full sharding, FSDP's default
    (``ShardingStrategy.FULL_SHARD``; FSDP2 ``fully_shard``); hybrid sharding's
    group is read by :func:`read_zero_group`. A stated ``zero_stage`` decides over the
    ``fsdp`` text (an explicit field beats free text; a disagreement is
    noted). With nothing stated, a runtime whose data
    parallelism is FSDP by default (torchtitan: ``data_parallel_shard_degree
    = -1``; PyTorch FSDP: ``FULL_SHARD``; fairscale: ``reshard_after_forward``)
    gives stage 3.
    """
    notes = [] if notes is None else notes
    fsdp = par.text("fsdp").lower()
    from_text = _zero_of_text(fsdp)
    stated = par.zero_stage
    if stated is not None:
        z = 0
        if stated not in (0, False):
            bad = integer_problem(stated, "parallelism", "zero_stage")
            if bad:
                raise Unmodelable(bad)
            z = int(stated)
        if z > 3:
            raise Unmodelable(f"parallelism.zero_stage = {z} (0-3 expected)")
        if from_text is not None and from_text != z:
            notes.append(f"parallelism.zero_stage = {z} stated; the fsdp text "
                         f"{par.text('fsdp')!r} reads as ZeRO-{from_text}: the stated field is used")
        return z
    if from_text is not None:
        if from_text == 3 and not _NAMED_FULL_SHARD.search(fsdp):
            notes.append(f"parallelism.fsdp = {par.text('fsdp')!r}: full sharding (ZeRO-3, "
                         "FSDP's default FULL_SHARD / FSDP2 fully_shard)")
        return from_text
    if runtime is not None and runtime.name in _SHARDING_BY_DEFAULT and not fsdp:
        notes.append(f"ZeRO/FSDP not stated: {_SHARDING_BY_DEFAULT[runtime.name]}: ZeRO-3")
        return 3
    return 0


#: FSDP texts naming full sharding (no note needed: the text says it).
_NAMED_FULL_SHARD = re.compile(r"full_shard|zero-3|optim_grads_params|^fsdp \(sharding group"
                               r"|hybrid|hsdp|mics")


def _zero_of_text(fsdp: str) -> int | None:
    """The ZeRO stage an ``fsdp`` text names (lower case), ``None`` when it
    names none (empty, or a negation: none / no / false / off / 0 / ddp / NO_SHARD)."""
    if "full_shard" in fsdp or "zero-3" in fsdp or "optim_grads_params" in fsdp \
            or fsdp.startswith("fsdp (sharding group"):
        return 3
    if "shard_grad_op" in fsdp or "zero-2" in fsdp or "zero2" in fsdp:
        return 2
    if "zero-1" in fsdp or "zero1" in fsdp:
        return 1
    if fsdp and "no_shard" not in fsdp and not re.match(r"\s*(none|no\b|false|off|0\b|ddp)", fsdp):
        return 3
    return None


def default_sequence_parallel(runtime: Runtime) -> bool:
    """Sequence parallelism of a TP run whose record does not say: on where the
    runtime's TP requires it (Megatron-Core TP communication overlap works on
    sequence-parallel activations; torchtitan's TP plan always shards the
    norms' sequence, ``SequenceParallel`` in ``parallelize_llama``)."""
    return runtime.tp_comm_overlap or runtime.name == "torchtitan"


#: Why an unstated interleaving is non-interleaved 1F1B, per runtime: each
#: framework's default schedule (issue 28 point 5).
_INTERLEAVING_DEFAULT = {
    "megatron": "Megatron-Core's default virtual_pipeline_model_parallel_size is None "
                "(megatron/core/model_parallel_config.py), interleaving only when given",
    "deepspeed": "DeepSpeed's PipelineEngine trains with TrainSchedule by default, one model "
                 "chunk per stage (deepspeed/runtime/pipe/schedule.py)",
    "torchtitan": "torchtitan's default pipeline_parallel_schedule is '1F1B' "
                  "(torchtitan/config/configs.py)",
}


def interleaving_default(runtime: Runtime) -> str:
    """The documented default schedule of ``runtime`` (or that none is read)."""
    key = "megatron" if runtime.name.startswith("megatron") else runtime.name
    return _INTERLEAVING_DEFAULT.get(key, f"assumed: no documented default of {runtime.name} "
                                          "read")


def read_parallelism(par: Parallelism, n: int, runtime: Runtime, notes: list[str],
                     dp_stated: int | None = None, ep: int = 1) -> ParallelFacts:
    """The record's layout on ``n`` GPUs. ``dp_stated`` replaces
    ``parallelism.dp`` where the MoE reading found that it counts expert
    replicas (:func:`autopar_opt.calibration.reading.moe.expert_parallel`)."""
    tp, pp = par.tp, par.pp
    if tp is None or pp is None:
        missing = [k for k, val in (("tp", tp), ("pp", pp)) if val is None]
        raise Unmodelable(f"parallelism.{'/'.join(missing)} not stated (null): the manual plan "
                          "is unknown")
    cp = par.cp or 1
    dp = dp_stated if dp_stated is not None else par.dp
    if dp is None:
        if n % (tp * pp * cp):
            raise Unmodelable(f"parallelism.dp is null and tp*pp*cp = {tp * pp * cp} does not "
                              f"divide {n} GPUs")
        dp = n // (tp * pp * cp)
        notes.append(f"dp not stated: num_gpus/(tp·pp·cp) = {dp}")
    if tp * pp * dp * cp != n:
        # QA round 11: the message named neither the section of the keys nor a fix
        raise Unmodelable(f"parallelism tp*pp*dp*cp = {tp}*{pp}*{dp}*{cp} = {tp * pp * dp * cp} "
                          f"!= hardware.num_gpus = {n}: the layout must use every GPU of the job "
                          "(fix: correct parallelism.dp, tp, pp, cp or hardware.num_gpus; ep is "
                          "carved out of dp·cp, not multiplied in)")
    sp = flag_value(par.sequence_parallel, "parallelism.sequence_parallel")
    if sp is None:
        sp = tp > 1 and default_sequence_parallel(runtime)
        notes.append(f"sequence_parallel not stated: {sp} "
                     + ("(framework default off)" if not sp else
                        "(TP communication overlap needs it)" if runtime.tp_comm_overlap else
                        f"({runtime.name} TP always shards the sequence)"))
    elif not sp and tp > 1 and runtime.name == "torchtitan":
        # QA round 11: priced as stated without a word, while torchtitan's TP plan always
        # shards the norms' sequence (SequenceParallel in parallelize_llama)
        notes.append("sequence_parallel: false as stated, although torchtitan's tensor "
                     "parallelism always shards the norms' sequence (SequenceParallel): priced "
                     "as stated; drop the key to price torchtitan's own plan")
    vp = par.vp_chunks
    if vp is not None and vp > 1 and pp == 1:
        # QA round 11: priced as an interleaved schedule of one stage (Megatron-LM refuses
        # --num-layers-per-virtual-pipeline-stage without pipeline parallelism)
        raise Unmodelable(f"parallelism.vp_chunks = {vp} with pp = 1: virtual pipeline chunks "
                          "interleave the stages of a pipeline, and there is none (fix: "
                          "vp_chunks 1, or the run's pp)")
    if vp is None:
        vp = 1
        if pp > 1:
            notes.append(f"vp_chunks not stated: 1 (non-interleaved 1F1B; "
                         f"{interleaving_default(runtime)})")
    zero = map_zero(par, runtime, notes)
    # the runtime's distributed optimizer where the record states no ZeRO stage; a stated
    # zero_stage 0 is the record's (QA round 9: it was overridden to ZeRO-1)
    if zero == 0 and par.zero_stage is None and dp * cp > 1 and runtime.distributed_optimizer:
        zero = 1
        notes.append(f"distributed optimizer of {runtime.name}: optimizer state sharded (ZeRO-1)")
    zero_group = read_zero_group(par, dp, cp, zero)
    if zero_group:
        notes.append(f"hybrid sharding: ZeRO-{zero} over groups of {zero_group} of the "
                     f"{dp * cp} data-parallel ranks, {dp * cp // zero_group} replicas "
                     f"(parallelism.dp_replicate), the gradient shard all-reduced across them")
    return ParallelFacts(tp, pp, dp, cp, bool(sp) and tp > 1, vp, zero, ep, zero_group=zero_group)


def read_zero_group(par: Parallelism, dp: int, cp: int, zero: int) -> int:
    """Hybrid sharding's shard group of a record (``Strategy.zero_group``; 0: ZeRO
    over the whole ``dp·cp`` group): ``dp·cp / dp_replicate`` where
    ``parallelism.dp_replicate`` > 1 states the replicas (torchtitan
    ``data_parallel_replicate_degree``, FSDP ``HYBRID_SHARD``, MiCS); ZeRO-0 with
    replicas is plain data parallelism. An ``fsdp`` text naming hybrid sharding
    (``hybrid``, ``HSDP``, ``MiCS``) without ``dp_replicate`` is unmodelable: the
    group size is not stated."""
    fsdp = par.text("fsdp").lower()
    replicas = par.dp_replicate or 1
    if replicas <= 1:
        if any(word in fsdp for word in ("hybrid", "hsdp", "mics")):
            raise Unmodelable(f"parallelism.fsdp = {par.text('fsdp')!r} names hybrid sharding "
                              "but parallelism.dp_replicate (the replicas) is not stated: the "
                              "shard group is unknown")
        return 0
    if (dp * cp) % replicas:
        raise Unmodelable(f"parallelism.dp_replicate = {replicas} does not divide dp*cp = "
                          f"{dp * cp}")
    return dp * cp // replicas if zero else 0
