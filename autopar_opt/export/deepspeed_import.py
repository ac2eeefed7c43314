"""A DeepSpeed JSON config read back as a plan (``plan: {deepspeed: FILE}``).

The JSON :func:`autopar_opt.export.deepspeed.deepspeed_config` writes does not name the
pipeline degree or which layers are checkpointed: DeepSpeed's ``PipelineModule`` takes
them in code. Both follow from the file under DeepSpeed's own rules, and the reading says
how: DeepSpeed asserts ``train_batch_size = train_micro_batch_size_per_gpu x
gradient_accumulation_steps x dp`` (``runtime/config.py``,
``_batch_assertion``), so ``dp`` is the batch's quotient and the pipeline stages
``world / (autotp_size x dp)``, split uniformly (``partition_method='uniform'``, the only
split the export writes); the ``activation_checkpointing`` section, which the export writes
only for a plan recomputing every block, is read as that. The plan is then built by
:func:`~autopar_opt.export.deepspeed.plan_from_deepspeed`, the inverse of the export,
after the rules DeepSpeed enforces (ZeRO-2/3 refused by its ``PipelineEngine``; AutoTP,
as the export runs it, with one stage only) and the spec's batch and precision are checked,
each problem naming the file's key.

Settings that change what runs but that the plan has no term for are refused rather than
priced as if absent (:func:`unpriced_settings`): ZeRO-Offload (``zero_optimization.
offload_optimizer`` / ``offload_param`` with a ``device`` other than ``"none"``,
``runtime/zero/offload_config.py``), checkpointed activations moved to the CPU or partitioned
over the model-parallel ranks (``activation_checkpointing.cpu_checkpointing`` /
``partition_activations``, ``runtime/activation_checkpointing/config.py``) and DeepSpeed-Ulysses
(``sequence_parallel_size`` above 1, which also shrinks the batch's data-parallel world,
``DeepSpeedConfig.__init__``). A key the reading fills in is said: a missing
``gradient_accumulation_steps`` is DeepSpeed's derived ``train_batch_size / (micro x dp)``
(``_set_batch_related_parameters``), read as 1; a file that enables neither ``bf16`` nor
``fp16`` trains in fp32 under DeepSpeed, and is refused for a spec that trains in 16 bits.
"""

from __future__ import annotations

from typing import Any

from autopar_opt.export.megatron import MegatronArgsError
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import Cluster
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.training import Training


def _whole(config: dict, path: tuple[str, ...], default: int | None, out: list[str]) -> int:
    value: Any = config
    for part in path:                 # a missing key, or section, is DeepSpeed's default
        value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            value = default
            break
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if path[-1] == "stage"
                                                                        else 1):
        out.append(f"{'.'.join(path)} = {value!r}: give a whole number"
                   + (" 0-3" if path[-1] == "stage" else " of at least 1"))
        return 1
    return value


def unpriced_settings(config: dict) -> list[str]:
    """Each setting of ``config`` that changes what DeepSpeed runs but that a plan cannot
    express (empty: none); the rule names the key."""
    out = []
    zero = config.get("zero_optimization")
    for key in ("offload_optimizer", "offload_param"):
        part = zero.get(key) if isinstance(zero, dict) else None
        device = part.get("device", "none") if isinstance(part, dict) else "none"
        if device not in ("none", None):
            out.append(f"zero_optimization.{key}.device = {device!r}: ZeRO-Offload keeps "
                       f"{key[8:]} state in {device} memory, which the plan and its price do not "
                       "model; remove the section (or set device \"none\") to price the file")
    ac = config.get("activation_checkpointing")
    for key in ("cpu_checkpointing", "partition_activations"):
        if isinstance(ac, dict) and ac.get(key):
            out.append(f"activation_checkpointing.{key} = true: "
                       + ("the checkpointed activations move to CPU memory"
                          if key == "cpu_checkpointing" else
                          "the checkpointed activations are split over the model-parallel ranks")
                       + ", which the plan does not price; set it false to price the file")
    sp = config.get("sequence_parallel_size", 1)
    if sp != 1:
        out.append(f"sequence_parallel_size = {sp!r}: DeepSpeed-Ulysses sequence parallelism, "
                   "which the reading does not take (a Ulysses plan, cp_comm_type a2a, exports "
                   "to megatron); remove it to price the file without it")
    return out


def read_deepspeed(config: Any, graph: LayerGraph, cluster: Cluster,
                   training: Training) -> tuple[Plan, list[str]]:
    """The plan of a DeepSpeed JSON config on this cluster, and what its reading assumed;
    raises :class:`MegatronArgsError` (every problem listed) when it is not one of this case."""
    from autopar_opt.export.deepspeed import plan_from_deepspeed

    if isinstance(config, dict) and "train_batch_size" in config \
            and "train_micro_batch_size_per_gpu" not in config:
        # DeepSpeed derives the micro-batch as train_batch_size / (dp x accumulation)
        # (_set_batch_related_parameters), dp set by the pipeline degree in code
        raise MegatronArgsError("train_micro_batch_size_per_gpu is not given: DeepSpeed derives "
                                "it from train_batch_size and the data-parallel size, which the "
                                "file does not fix (the pipeline degree is set in code); add "
                                "train_micro_batch_size_per_gpu to read the file")
    if not isinstance(config, dict) or "train_micro_batch_size_per_gpu" not in config:
        raise MegatronArgsError("not a DeepSpeed config: it needs train_micro_batch_size_per_gpu "
                                "(and train_batch_size), as `autopar export --to deepspeed` "
                                "writes")
    out: list[str] = unpriced_settings(config)
    said: list[str] = []
    if "gradient_accumulation_steps" not in config:
        said.append("gradient_accumulation_steps is not given: DeepSpeed derives it as "
                    "train_batch_size / (micro x dp), dp set by the pipeline degree in code; "
                    "read as 1")
    mbs = _whole(config, ("train_micro_batch_size_per_gpu",), None, out)
    gas = _whole(config, ("gradient_accumulation_steps",), 1, out)
    gbs = _whole(config, ("train_batch_size",), None, out)
    zero = _whole(config, ("zero_optimization", "stage"), 0, out)
    tp = _whole(config, ("tensor_parallel", "autotp_size"), 1, out)
    if zero > 3:
        out.append(f"zero_optimization.stage = {zero}: DeepSpeed's stages are 0-3")
    if out:
        raise MegatronArgsError("", out)
    world = cluster.num_devices
    if gbs != training.global_batch_size:
        out.append(f"train_batch_size = {gbs}, but the spec's training.global_batch_size is "
                   f"{training.global_batch_size}")
    dp, rest = divmod(gbs, mbs * gas)
    if rest or world % (tp * max(dp, 1)) or dp < 1:
        out.append(f"train_batch_size {gbs} / (train_micro_batch_size_per_gpu {mbs} x "
                   f"gradient_accumulation_steps {gas}) = {gbs / (mbs * gas):g} data-parallel "
                   f"ranks, which with autotp_size {tp} do not divide the {world} devices "
                   "(DeepSpeed asserts train_batch_size = micro x accumulation x dp)")
        raise MegatronArgsError("", out)
    pp = world // (tp * dp)
    if pp > len(graph):
        out.append(f"{pp} pipeline stages (world {world} / (autotp_size {tp} x dp {dp})) for "
                   f"the model's {len(graph)} layers")
    if pp > 1 and zero >= 2:
        out.append(f"zero_optimization.stage {zero} with {pp} pipeline stages: DeepSpeed's "
                   "PipelineEngine refuses ZeRO-2/3 with pipelining")
    if pp > 1 and tp > 1:
        out.append(f"tensor_parallel.autotp_size {tp} with {pp} pipeline stages: AutoTP runs "
                   "with one pipeline stage (as the export writes it)")
    for key, dtypes in (("bf16", ("bf16", "fp8")), ("fp16", ("fp16",))):
        part = config.get(key)
        if isinstance(part, dict) and part.get("enabled") and training.dtype not in dtypes:
            out.append(f"{key}.enabled trains in {key}, but training.dtype is {training.dtype} "
                       "(the price is the spec's)")
    if training.dtype != "fp32" and not any(
            isinstance(config.get(k), dict) and config[k].get("enabled") for k in ("bf16", "fp16")):
        out.append(f"neither bf16.enabled nor fp16.enabled: DeepSpeed trains in fp32, but "
                   f"training.dtype is {training.dtype} (add \"bf16\": {{\"enabled\": true}})")
    if out:
        raise MegatronArgsError("", out)
    full = isinstance(config.get("activation_checkpointing"), dict)
    launch: dict[str, Any] = ({"PipelineModule": {"num_stages": pp,
                                                  "activation_checkpoint_interval": int(full)}}
                              if pp > 1 else {"Module": {"checkpoint_every_block": full}})
    ep = config.get("expert_parallel")
    if isinstance(ep, dict) and isinstance(ep.get("autoep_size"), int):
        launch["MoE"] = {"ep_size": ep["autoep_size"]}
    said += [f"the pipeline degree is set in code (PipelineModule num_stages): read as world "
            f"{world} / (autotp_size {tp} x dp {dp}) = {pp}, dp from train_batch_size / "
            "(micro x accumulation) as DeepSpeed asserts it"
            + (", the layers split uniformly (partition_method='uniform')" if pp > 1 else ""),
            "which layers are checkpointed is set in code: read as "
            + ("every transformer block (the file has an activation_checkpointing section)"
               if full else "none (the file has no activation_checkpointing section)")]
    try:
        filled = {**config, "gradient_accumulation_steps": gas}  # the value read, said
        return plan_from_deepspeed(filled, launch, graph, world), said
    except (ValueError, KeyError, TypeError) as exc:
        raise MegatronArgsError(f"cannot read the config as a plan ({exc})") from None
