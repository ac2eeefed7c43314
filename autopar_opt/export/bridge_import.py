"""A Megatron-Bridge overrides file read back as a plan (``plan: {megatron_bridge: FILE}``).

Megatron-Bridge's ``ConfigContainer`` carries Megatron-Core's settings under their
``TransformerConfig`` / ``DistributedDataParallelConfig`` names (``model.tensor_model_
parallel_size`` is Megatron-LM's ``--tensor-model-parallel-size``; Bridge's
``training/config.py`` hands them to the same parallel state), so the file
:func:`autopar_opt.export.megatron.bridge_overrides` writes is read by translating each
setting that decides the price into its Megatron-LM flag and reading that command line
with the Megatron-LM importer (:mod:`autopar_opt.export.megatron_import`): the same rules,
the same checks against the spec's model and training, the same notes. The translation is
the inverse of ``bridge_overrides``, key by key; the precision is read as Bridge decides
it (``mixed_precision`` over the model's fields: :mod:`autopar_opt.export.bridge_precision`),
and checked whole against the spec's ``training.dtype`` (:func:`bridge_precision_problems`).
A key of the sections read that the price
does not depend on (the optimizer's learning rate, the dataset's paths, logging) is not
read; a value that is not a setting Megatron-Core takes is refused naming the key.
"""

from __future__ import annotations

from typing import Any

from autopar_opt.export.bridge_precision import precision_flags, stated_dtype
from autopar_opt.export.megatron import MegatronArgsError

#: ``model.<key>`` -> the Megatron-LM flag taking the same value (bridge_overrides' keys).
MODEL_VALUES = {
    "num_layers": "--num-layers", "hidden_size": "--hidden-size",
    "ffn_hidden_size": "--ffn-hidden-size", "num_attention_heads": "--num-attention-heads",
    "num_moe_experts": "--num-experts", "kv_channels": "--kv-channels",
    "seq_length": "--seq-length",
    "tensor_model_parallel_size": "--tensor-model-parallel-size",
    "pipeline_model_parallel_size": "--pipeline-model-parallel-size",
    "context_parallel_size": "--context-parallel-size",
    "expert_model_parallel_size": "--expert-model-parallel-size",
    "expert_tensor_parallel_size": "--expert-tensor-parallel-size",
    "virtual_pipeline_model_parallel_size": "--num-virtual-stages-per-pipeline-rank",
    "recompute_granularity": "--recompute-granularity",
    "recompute_method": "--recompute-method", "recompute_num_layers": "--recompute-num-layers",
    "pipeline_model_parallel_layout": "--pipeline-model-parallel-layout",
    "num_layers_in_first_pipeline_stage": "--decoder-first-pipeline-num-layers",
    "num_layers_in_last_pipeline_stage": "--decoder-last-pipeline-num-layers",
    "cp_comm_type": "--cp-comm-type",
    "moe_token_dispatcher_type": "--moe-token-dispatcher-type",
    "moe_flex_dispatcher_backend": "--moe-flex-dispatcher-backend",
}
#: ``model.<key>`` true -> the Megatron-LM switch.
MODEL_SWITCHES = {"sequence_parallel": "--sequence-parallel",
                  "moe_grouped_gemm": "--moe-grouped-gemm",
                  # TransformerConfig's split switches (Bridge's Llama 3 405B recipe sets both)
                  "account_for_embedding_in_pipeline_split":
                      "--account-for-embedding-in-pipeline-split",
                  "account_for_loss_in_pipeline_split": "--account-for-loss-in-pipeline-split",
                  "fine_grained_activation_offloading": "--fine-grained-activation-offloading"}
#: ``<section>.<key>`` -> the Megatron-LM flag (value) or switch (``True`` values).
OTHER_VALUES = {("train", "micro_batch_size"): "--micro-batch-size",
                ("train", "global_batch_size"): "--global-batch-size",
                ("ddp", "data_parallel_sharding_strategy"): "--data-parallel-sharding-strategy",
                ("ddp", "num_distributed_optimizer_instances"):
                    "--num-distributed-optimizer-instances"}
OTHER_SWITCHES = {("ddp", "use_distributed_optimizer"): "--use-distributed-optimizer",
                  ("optimizer", "use_distributed_optimizer"): "--use-distributed-optimizer",
                  ("ddp", "use_megatron_fsdp"): "--use-megatron-fsdp",
                  ("dist", "use_megatron_fsdp"): "--use-megatron-fsdp",
                  ("ddp", "overlap_grad_reduce"): "--overlap-grad-reduce",
                  ("ddp", "overlap_param_gather"): "--overlap-param-gather",
                  # CommOverlapConfig (the recipe's comm_overlap section; the export leaves
                  # it to the recipe and says so)
                  ("comm_overlap", "tp_comm_overlap"): "--tp-comm-overlap",
                  ("optimizer", "optimizer_cpu_offload"): "--optimizer-cpu-offload"}
#: Megatron-LM's precision flags -> the Bridge field that set them
#: (:func:`~autopar_opt.export.bridge_precision.precision_flags`).
PRECISION_FIELDS = {"--bf16": "bf16", "--fp16": "fp16", "--fp8-format": "fp8",
                    "--fp8-recipe": "fp8_recipe"}


def _scalar(section: str, key: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise MegatronArgsError(f"{section}.{key} = {value!r}: Megatron-Core takes a whole "
                                "number or a name there")
    return str(value)


def bridge_argv(overrides: Any) -> list[str]:
    """The Megatron-LM command line that sets what ``overrides`` (a Bridge overrides
    mapping) sets; raises :class:`MegatronArgsError` naming each key it cannot read."""
    if not isinstance(overrides, dict) or not isinstance(overrides.get("model"), dict):
        raise MegatronArgsError("not a Megatron-Bridge overrides file: it needs a 'model' "
                                "section (ConfigContainer's model provider settings), as "
                                "`autopar export --to megatron-bridge` writes")
    argv: list[str] = []
    problems: list[str] = []
    model = overrides["model"]
    for key, flag in MODEL_VALUES.items():
        value = model.get(key)
        try:
            if isinstance(value, list) and key == "cp_comm_type":
                argv += [flag, *(_scalar("model", key, v) for v in value)]
            elif value is not None:
                argv += [flag, _scalar("model", key, value)]
        except MegatronArgsError as exc:
            problems += exc.problems
    for key, flag in MODEL_SWITCHES.items():
        if model.get(key) is True:
            argv.append(flag)
    if model.get("cpu_offloading") is True:    # TransformerConfig: the switch and its count
        argv += ["--cpu-offloading-num-layers",
                 _scalar("model", "cpu_offloading_num_layers", model.get("cpu_offloading_num_layers", 0))]
    modules = model.get("recompute_modules")
    if isinstance(modules, list) and modules:
        argv += ["--recompute-modules", *map(str, modules)]
    groups, heads = model.get("num_query_groups"), model.get("num_attention_heads")
    if groups is not None and groups != heads:
        argv += ["--group-query-attention", "--num-query-groups", str(groups)]
    for (section, key), flag in OTHER_VALUES.items():
        part = overrides.get(section)
        if isinstance(part, dict) and part.get(key) is not None:
            try:
                argv += [flag, _scalar(section, key, part[key])]
            except MegatronArgsError as exc:
                problems += exc.problems
    for (section, key), flag in OTHER_SWITCHES.items():
        part = overrides.get(section)
        if isinstance(part, dict) and part.get(key) is True and flag not in argv:
            argv.append(flag)
    flags, wrong, _ = precision_flags(overrides)
    argv += flags
    problems += wrong
    if problems:
        raise MegatronArgsError("", problems)
    return argv


def bridge_precision_problems(overrides: Any, dtype: str) -> list[str]:
    """The file's stated precision against the spec's ``training.dtype`` (a recipe states
    it whole: ``bf16_mixed`` under an FP8 spec trains without FP8, which the Megatron-LM
    reading, where an absent flag is no contradiction, would price as FP8)."""
    model = overrides.get("model") if isinstance(overrides, dict) else None
    if isinstance(model, dict) and "mixed_precision" in overrides \
            and overrides["mixed_precision"] is None and model.get("bf16") is True \
            and model.get("fp16") is True:
        # stated as bf16 (the first of the two), while the flags' check named --fp16: under
        # bf16 the file was told to train in fp16, under fp16 in bf16 (QA round 36)
        return ["mixed_precision null with model.bf16 and model.fp16 both true: Megatron-LM "
                "refuses the pair (validate_args asserts not args.bf16 under --fp16), so no "
                f"dtype prices it (keep the one training.dtype {dtype} trains in: bf16 for "
                "bf16 or fp8, fp16 for fp16, and set the other false)"]
    stated = stated_dtype(overrides) if isinstance(overrides, dict) else None
    if stated is None or stated[0] == dtype or {stated[0], dtype} == {"fp32", "tf32"}:
        return []
    return [f"{stated[1]} trains in {stated[0]}, but training.dtype is {dtype} (the price is "
            f"the spec's: set training.dtype: {stated[0]}, or give the file the precision the "
            "spec trains in)"]


def bridge_notes(overrides: Any) -> list[str]:
    """What reading the file's precision assumed (its recipe's, or the one it is merged into:
    :func:`~autopar_opt.export.bridge_precision.precision_flags`)."""
    return precision_flags(overrides)[2] if isinstance(overrides, dict) else []


def bridge_words(problem: str, overrides: Any = None) -> str:
    """A problem the Megatron-LM importer found, in the file's terms: each flag named with
    the Bridge key that set it (``--num-layers 8`` -> ``model.num_layers (--num-layers) 8``;
    a precision flag: ``mixed_precision``'s field, or the model's under ``mixed_precision:
    null``)."""
    import re

    keys = {flag: f"model.{key}" for key, flag in {**MODEL_VALUES, **MODEL_SWITCHES}.items()}
    null = isinstance(overrides, dict) and "mixed_precision" in overrides \
        and overrides["mixed_precision"] is None
    recipe = overrides.get("mixed_precision") if isinstance(overrides, dict) else None
    keys.update({flag: f"model.{field}" if null else f"mixed_precision {recipe}'s {field}"
                 for flag, field in PRECISION_FIELDS.items()})
    keys.update({flag: f"{section}.{key}" for (section, key), flag in
                 {**OTHER_VALUES, **OTHER_SWITCHES}.items() if flag not in keys})
    return re.sub(r"--[a-z0-9-]+", lambda m: f"{keys[m.group(0)]} ({m.group(0)})"
                  if m.group(0) in keys else m.group(0), problem)
