"""torchtitan: plan → job configuration (current Python configs, or the 0.2 TOML), and back.

torchtitan 0.3 (its current configuration system, ``torchtitan/config/manager.py``)
takes ``--module M --config F``: ``F`` a function of module ``M`` returning a
``Trainer.Config`` (the ``config_registry`` functions), with command-line
overrides. The export is such a module (:func:`torchtitan_module`): it starts
from the family's registered config function, sets the model flavour
(``model_registry(flavor)``), and the ``parallelism``, ``training`` and
``activation_checkpoint`` sections. torchtitan 0.2 read a TOML job file
(``--job.config_file``, ``torchtitan/config/job_config.py``) with
``[model] name, flavor`` (:func:`torchtitan_toml`).

Rules (``ParallelDims._validate``: ``dp_replicate·dp_shard·cp·tp·pp`` = world
size): data parallelism is DDP (``data_parallel_replicate_degree``, ZeRO-0) or
FSDP2 (``data_parallel_shard_degree``; parameters resharded after forward =
ZeRO-3, kept, ``fsdp_reshard_after_forward = "never"``, = ZeRO-2; both degrees
above 1: hybrid sharding, HSDP, the shard group ``dp_shard × cp``); no ZeRO-1
form; activation checkpointing full or none per model. Experts: 0.3 builds the
expert mesh ``(pp, dp_replicate, efsdp, ep)`` with ``efsdp = fsdp·tp/ep`` (no
expert TP, ``ep`` divides ``dp_shard·cp·tp``); 0.2 ``(pp, dp_replicate, efsdp,
ep, etp)`` with ``etp`` 1 or ``tp``. A tied output layer cannot be pipelined
(decoder ``update_from_config``: "Weight tying is not supported with Pipeline
Parallel"). Models: the flavours torchtitan registers (:data:`FLAVOURS`); the
pipeline split is given module by module (``module_fqns_per_model_part``).

Recomputation (``activation_checkpoint``): ``none``, ``full``, op-level selective
checkpointing (:attr:`Recompute.op`: 0.3 ``SelectiveAC``, 0.2 ``mode = "selective"``,
``selective_ac_option = "op"``) and, in 0.2 only, full checkpointing on every N-th
block of each stage (``selective_ac_option = N``, :func:`layer_sac_pattern`; 0.3's
``SelectiveAC`` is per-op only, ``torchtitan/distributed/activation_checkpoint.py``).
Attention: torchtitan's ``varlen`` backend (the flash-attention kernel the plan was
priced with) where its decoder takes it, without context parallelism; FlexAttention,
torchtitan's default, otherwise (:func:`varlen_attention`).
Context parallelism keeps every head (a plan priced with Ulysses' head split,
``cp_comm_type`` ``a2a``, is refused; the spec refuses that runtime for a torchtitan
target, ``spec/build_run.py``); a plan priced with DeepEP dispatch
sets the model registry's ``moe_comm_backend="deepep"`` (0.3; refused for 0.2).
A ZeRO-3 plan carries the resharding policy the cost model priced
(``fsdp_reshard_after_forward``: ``"always"``, or ``"default"`` where the runtime
keeps parameters under a pipeline, as torchtitan's own default does).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from autopar_opt.export.view import ExportError, PlanView, common_rules
from autopar_opt.ir.arch import ModelArch, Router, router_text
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.target import (CP_SHARDS, Target, dp_shard_degree,
                                   sequence_split_problem, torchtitan_window_problem)
from autopar_opt.ir.training import FP32_DTYPES
from autopar_opt.ir.training import Recompute, Schedule

_SCHEDULES = {Schedule.one_f_one_b: "1F1B", Schedule.gpipe: "GPipe"}

#: torchtitan model flavours: (HF family, hidden, heads, kv heads, vocab, experts) ->
#: (module, flavour, its registered config function, layers). The test suite checks
#: every entry against torchtitan's own model configs (test_framework_validation.py).
FLAVOURS: dict[tuple, tuple[str, str, str, int]] = {
    ("llama", 4096, 32, 8, 128256, 0): ("llama3", "8B", "llama3_8b", 32),
    ("llama", 8192, 64, 8, 128256, 0): ("llama3", "70B", "llama3_70b", 80),
    ("llama", 16384, 128, 8, 128256, 0): ("llama3", "405B", "llama3_405b", 126),
    # Qwen3 dense (torchtitan 0.2.0 and 0.3.0 register 0.6B-32B; 4B and 8B have no job
    # config of their own: the 14B's is the template, its model replaced by the flavour)
    ("qwen3", 1024, 16, 8, 151936, 0): ("qwen3", "0.6B", "qwen3_0_6b", 28),
    ("qwen3", 2048, 16, 8, 151936, 0): ("qwen3", "1.7B", "qwen3_1_7b", 28),
    ("qwen3", 2560, 32, 8, 151936, 0): ("qwen3", "4B", "qwen3_14b", 36),
    ("qwen3", 4096, 32, 8, 151936, 0): ("qwen3", "8B", "qwen3_14b", 36),
    ("qwen3", 5120, 40, 8, 151936, 0): ("qwen3", "14B", "qwen3_14b", 40),
    ("qwen3", 5120, 64, 8, 151936, 0): ("qwen3", "32B", "qwen3_32b", 64),
    ("qwen3_moe", 2048, 32, 4, 151936, 128): ("qwen3", "30B-A3B", "qwen3_30b_a3b", 48),
    ("qwen3_moe", 4096, 64, 4, 151936, 128): ("qwen3", "235B-A22B", "qwen3_30b_a3b", 94),
    ("deepseek_v3", 7168, 128, 128, 129280, 256): ("deepseek_v3", "671B", "deepseek_v3_671b", 61),
}


#: The shapes each flavour fixes beyond :data:`FLAVOURS`' key, which the job file cannot
#: change (torchtitan 0.3.0 ``models/llama3/__init__.py``, ``models/qwen3/__init__.py``,
#: ``models/deepseek_v3/__init__.py``; the test suite reads them back from its registry):
#: dense MLP width (0: no dense MLP), head dimension, tied embeddings, routed experts'
#: top-k and width, shared experts' width.
FLAVOUR_SHAPES: dict[tuple[str, str], tuple[int, int, bool, int, int, int]] = {
    ("llama3", "8B"): (14336, 128, False, 0, 0, 0),
    ("llama3", "70B"): (28672, 128, False, 0, 0, 0),
    ("llama3", "405B"): (53248, 128, False, 0, 0, 0),
    ("qwen3", "0.6B"): (3072, 128, True, 0, 0, 0),
    ("qwen3", "1.7B"): (6144, 128, True, 0, 0, 0),
    ("qwen3", "4B"): (9728, 128, True, 0, 0, 0),
    ("qwen3", "8B"): (12288, 128, False, 0, 0, 0),
    ("qwen3", "14B"): (17408, 128, False, 0, 0, 0),
    ("qwen3", "32B"): (25600, 128, False, 0, 0, 0),
    ("qwen3", "30B-A3B"): (0, 128, False, 8, 768, 0),
    ("qwen3", "235B-A22B"): (0, 128, False, 8, 1536, 0),
    ("deepseek_v3", "671B"): (18432, 0, False, 8, 2048, 2048),
}
#: Each flavour's RoPE base (the same files): the job file cannot change it either.
FLAVOUR_THETA = {"llama3": 500000.0, "qwen3": 1000000.0, ("qwen3", "235B-A22B"): 5000000.0,
                 "deepseek_v3": 10000.0}


def _candidate(arch: ModelArch) -> tuple[str, str, str, int] | None:
    key = ("llama" if arch.family in ("llama", "mistral") else arch.family, arch.hidden,
           arch.heads, arch.kv_heads, arch.vocab, arch.num_experts)
    return FLAVOURS.get(key)


def flavour_differences(arch: ModelArch | None) -> list[str]:
    """How ``arch`` differs from the torchtitan flavour its family, width, heads, vocabulary
    and expert count name (:data:`FLAVOUR_SHAPES`, layer count): each difference builds
    another model than the one priced (QA round 5: a Qwen3-14B config with an 8,192-wide
    MLP, 9.1 B parameters, was exported as the stock 14B flavour, 14.8 B). Empty: it
    is that flavour (or its first layers), or no flavour has its key."""
    found = _candidate(arch) if arch is not None else None
    if found is None:
        return []
    module, flav, _, layers = found
    ffn, head_dim, tied, top_k, expert, shared = FLAVOUR_SHAPES[(module, flav)]
    out = []
    if arch.num_layers > layers:
        out.append(f"{arch.num_layers} layers (the flavour has {layers})")
    dense = arch.ffn_hidden if (not arch.is_moe or arch.moe_layers != tuple(
        range(arch.num_layers))) else 0
    if ffn and dense and dense != ffn:
        out.append(f"MLP width {dense} (the flavour's: {ffn})")
    if head_dim and arch.mla is None and arch.head_dim != head_dim:
        out.append(f"head dimension {arch.head_dim} (the flavour's: {head_dim})")
    if arch.biases or arch.qkv_bias or arch.attn_bias or arch.mlp_bias:
        out.append("linear biases (the flavour has none)")
    if arch.tied != tied:
        out.append(f"{'tied' if arch.tied else 'untied'} embeddings (the flavour's are "
                   f"{'tied' if tied else 'untied'})")
    if arch.is_moe:
        if arch.top_k != top_k:
            out.append(f"top-{arch.top_k} routing (the flavour's: top-{top_k})")
        if arch.moe_ffn_hidden != expert:
            out.append(f"expert width {arch.moe_ffn_hidden} (the flavour's: {expert})")
        if arch.shared_ffn != shared:
            out.append(f"shared-expert width {arch.shared_ffn} (the flavour's: {shared})")
    return out


def flavour_mismatch(arch: ModelArch | None, name: str) -> str:
    """``torchtitan's qwen3 14B flavour is not NAME, which has ...`` where the flavour
    ``arch``'s key names differs from it (:func:`flavour_differences`); empty otherwise.
    The export's refusal and the search's notice both say it."""
    differs = flavour_differences(arch)
    if not differs:
        return ""
    module, flav = _candidate(arch)[:2]
    return f"torchtitan's {module} {flav} flavour is not {name}, which has {'; '.join(differs)}"


def flavour(arch: ModelArch | None) -> tuple[str, str, str, int] | None:
    """torchtitan's (module, flavour, config function, layers) for ``arch``, or None.
    A model with fewer layers than the flavour is that flavour's first layers; any
    other difference in shape (:func:`flavour_differences`) is another model: None."""
    if arch is None:
        return None
    found = _candidate(arch)
    if found is None or flavour_differences(arch):
        return None
    return found


def torchtitan_rules(view: PlanView, chain: bool, version: str = "0.3") -> list[str]:
    """Every reason torchtitan (``version`` 0.3 or 0.2) cannot run the plan (empty: it can)."""
    out = common_rules(view, "torchtitan", chain)
    if view.zero == 1 and view.dp * view.cp > 1:
        out.append("ZeRO-1 (optimizer-state sharding only): torchtitan shards with FSDP2 "
                   "(ZeRO-2 or ZeRO-3) or replicates (DDP)")
    if view.cp > 1 and view.zero == 0:
        out.append(f"ZeRO-0 with cp={view.cp}: {CP_SHARDS}; price the plan with zero 2 or 3")
    split = sequence_split_problem("torchtitan", view.tp, view.cp, view.sp, view.seq_len,
                                   version)
    if split:
        out.append(split)
    if view.replicas > 1 and view.zero_group % view.cp:
        out.append(f"hybrid sharding over {view.zero_group} ranks with cp={view.cp}: torchtitan's "
                   "FSDP mesh is dp_shard x cp, so a shard group holds whole cp groups")
    if version == "0.2" and view.tp > 1 and not view.sp:
        out.append("tp > 1 without sequence parallelism: torchtitan 0.2's tensor parallelism "
                   "always shards the norms' sequence")
    shard = dp_shard_degree(view)
    if view.has_moe and view.ep > 1:
        if version == "0.2":
            if view.etp not in (1, view.tp):
                out.append(f"etp={view.etp}: torchtitan 0.2 supports ETP = TP or ETP = 1")
            elif (shard * view.cp * view.tp) % (view.etp * view.ep):
                out.append(f"etp*ep = {view.etp * view.ep} must divide dp_shard*cp*tp = "
                           f"{shard * view.cp * view.tp}")
        else:
            if view.etp != 1:
                out.append(f"etp={view.etp}: torchtitan 0.3 does not shard experts by tensor "
                           "parallelism (expert mesh pp, dp_replicate, efsdp, ep)")
            if (shard * view.cp * view.tp) % view.ep:
                out.append(f"ep={view.ep} must divide dp_shard*cp*tp = {shard * view.cp * view.tp}")
    elif view.has_moe and view.etp != view.tp:
        out.append(f"etp={view.etp} with ep = 1: the experts take the model's tp={view.tp}")
    ac = activation_checkpoint(view)
    if ac is None:
        modes = {m for stage in view.block_recompute for m in stage}
        # name what the plan does (QA round 9: a plan recomputing only some blocks in full
        # was told about Megatron's selective mode, which it does not use)
        what = ("Megatron's selective (attention-core) recomputation has no torchtitan form"
                if Recompute.selective in modes else
                "op-level and other recomputation mixed in one plan has none"
                if Recompute.op in modes else
                "this plan's full recomputation of some blocks of a stage, not on every N-th "
                "block alike in every stage, has none")
        out.append("this recomputation: torchtitan's activation_checkpoint is 'none', 'full', "
                   "op-level selective ('op') or, in 0.2, full on every N-th block of each "
                   f"stage (selective_ac_option N); {what}")
    elif version != "0.2" and ac.get("selective_ac_option", "op") != "op":
        out.append(f"full recomputation on every {ac['selective_ac_option']}-th block: torchtitan "
                   "0.3's SelectiveAC is per-op only (export with --framework-version 0.2)")
    if view.vp_chunks > 1:
        out.append("interleaved virtual stages")
    few = Target("torchtitan", version).microbatch_problem(view.pp, view.microbatches,
                                                           view.schedule)
    if few:
        out.append(few + " (fix: more micro-batches, or the GPipe schedule)")
    if view.dtype == "fp16":
        out.append("fp16 training: torchtitan's mixed_precision_param is 'bfloat16' or "
                   "'float32' (torchtitan/config/configs.py); price the plan with dtype bf16 or "
                   "export to megatron or deepspeed")
    if view.cp > 1 and view.cp_comm_type == "a2a":
        out.append("Ulysses context parallelism (cp_comm_type a2a, heads split over cp): "
                   "torchtitan's context parallelism keeps every head and exchanges K/V; "
                   "price the plan with cp_comm_type all_gather (the torchtitan runtime's) or "
                   "export to megatron")
    if view.has_moe and view.moe_dispatcher == "deepep" and version == "0.2":
        out.append("DeepEP token dispatch (moe_dispatcher deepep): the torchtitan 0.2 export "
                   "writes the standard all-to-all; export for 0.3 (moe_comm_backend "
                   "'deepep') or to megatron")
    windowed = torchtitan_window_problem(view.arch.windows) if view.arch is not None else None
    if windowed:
        out.append(windowed)
    if view.tied_pipeline:
        out.append("an output layer tied to the embedding cannot be pipelined (torchtitan: "
                   "'Weight tying is not supported with Pipeline Parallel')")
    if any(k == "?" for kinds in view.stage_kinds for k in kinds):
        out.append("layers other than embedding, transformer blocks and head")
    return out


def _parts(view: PlanView) -> list[list[str]]:
    """``module_fqns_per_model_part``: module names per pipeline stage."""
    parts, block = [], 0
    for kinds in view.stage_kinds:
        names = []
        for k in kinds:
            if k == "E":
                names.append("tok_embeddings")
            elif k == "t":
                names.append(f"layers.{block}")
                block += 1
            else:
                names += ["norm", "output"]
        parts.append(names)
    return parts


def torchtitan_config(view: PlanView) -> dict[str, Any]:
    """The sections of a runnable plan (as nested dicts, torchtitan's key names)."""
    shard = dp_shard_degree(view)
    par: dict[str, Any] = {
        "data_parallel_replicate_degree": view.dp // shard,
        "data_parallel_shard_degree": shard,
        "tensor_parallel_degree": view.tp,
        "context_parallel_degree": view.cp,
        "pipeline_parallel_degree": view.pp,
    }
    if view.zero >= 2 and shard * view.cp > 1:
        # FSDP2 shards over the fsdp mesh dp_shard x cp, so a shard group of cp ranks
        # (dp_shard 1 under hybrid sharding) is sharded too and takes the policy.
        # ZeRO-3 keeps what the cost model priced (Runtime.reshards_after_forward):
        # resharding is "always"; kept under a pipeline is torchtitan's "default"
        # ("not pp_enabled"); kept without one is "never" (read back as ZeRO-2)
        keep = "default" if view.pp > 1 else "never"
        policy = "always" if view.reshard_after_forward else keep
        par["fsdp_reshard_after_forward"] = policy if view.zero >= 3 else "never"
    if view.pp > 1:
        par["pipeline_parallel_schedule"] = _SCHEDULES[view.schedule]
        par["pipeline_parallel_microbatch_size"] = view.micro_batch_size
        par["module_fqns_per_model_part"] = _parts(view)
    if view.has_moe:
        par["expert_parallel_degree"] = view.ep
    # per data-parallel rank and accumulation step; with pp > 1 it is split into the
    # pipeline's micro-batches, with pp = 1 the micro-batches are accumulation steps
    local = view.micro_batch_size * (view.microbatches if view.pp > 1 else 1)
    training: dict[str, Any] = {"global_batch_size": view.global_batch_size,
                                "local_batch_size": local}
    if view.seq_len:
        training["seq_len"] = view.seq_len
    if view.dtype in FP32_DTYPES:      # FSDP2's parameter dtype; the default gathers bf16
        training["mixed_precision_param"] = "float32"
    return {"training": training, "parallelism": par,
            "activation_checkpoint": activation_checkpoint(view) or {"mode": "none"}}


def layer_sac_pattern(blocks: int, every: int) -> list[Recompute]:
    """The blocks of one stage torchtitan checkpoints under ``selective_ac_option
    = every`` (an integer): ``_apply_ac_to_transformer_block`` counts the
    blocks it wraps (``ptd_checkpoint_wrapper._count``, from 1 in each
    process, i.e. per pipeline stage) and wraps those with ``_count % every ==
    0`` in full checkpointing, leaving the others without
    (``torchtitan/models/llama3/infra/parallelize.py`` at 9a8cb98)."""
    return [Recompute.full if (i + 1) % every == 0 else Recompute.none for i in range(blocks)]


def activation_checkpoint(view: PlanView) -> dict[str, Any] | None:
    """torchtitan's ``[activation_checkpoint]`` table for the plan's block
    recomputation, or None when torchtitan has no form for it: ``none``,
    ``full``, ``selective`` with ``selective_ac_option = "op"``
    (:attr:`Recompute.op` on every block) or with an integer ``N`` (full on
    every N-th block of each stage: :func:`layer_sac_pattern`)."""
    modes = {m for stage in view.block_recompute for m in stage}
    if not modes or modes == {Recompute.none}:
        return {"mode": "none"}
    if modes == {Recompute.full}:
        return {"mode": "full"}
    if modes == {Recompute.op}:
        return {"mode": "selective", "selective_ac_option": "op"}
    if modes != {Recompute.full, Recompute.none}:
        return None
    firsts = [stage.index(Recompute.full) + 1 for stage in view.block_recompute
              if Recompute.full in stage]
    every = min(firsts)
    if every < 2 or any(stage != layer_sac_pattern(len(stage), every)
                        for stage in view.block_recompute):
        return None
    return {"mode": "selective", "selective_ac_option": str(every)}


def flavour_notice(graph, who: str) -> str:
    """What a torchtitan target or ``--runnable-by torchtitan`` (``who``) says of a model
    none of the export's flavours (:data:`FLAVOURS`) builds: the plans follow torchtitan's
    parallelism rules, the model itself is the user's to build (torchtitan's models are
    code), and the export is refused; empty otherwise, and for a layer list (no
    architecture)."""
    if graph is None or graph.arch is None or flavour(graph.arch) is not None:
        return ""
    mismatch = flavour_mismatch(graph.arch, graph.name)
    if mismatch:
        return (f"{who}: the plans follow torchtitan's parallelism rules, but {mismatch}; the "
                "export is refused and the model is yours to add to torchtitan's registry")
    known = ", ".join(sorted({f"{m} {f}" for m, f, _, _ in FLAVOURS.values()}))
    return (f"{who}: the plans follow torchtitan's parallelism rules, but autopar's "
            f"torchtitan export has no model for {graph.name} ({graph.arch.family}, hidden size "
            f"{graph.arch.hidden}; it builds {known}, or their first layers): the export is "
            "refused and the model is yours to write in torchtitan")


def _model_of(view: PlanView) -> tuple[str, str, str, int]:
    found = flavour(view.arch)
    mismatch = flavour_mismatch(view.arch, "this model") if found is None else ""
    if mismatch:
        raise ExportError("torchtitan", [
            f"{mismatch}, and a torchtitan job file cannot change a flavour's shapes (they are "
            "the model registry's code); add a flavour with them to torchtitan's model "
            "registry, or export to megatron or deepspeed"])
    if found is None:
        what = view.arch.family if view.arch is not None else "this model"
        raise ExportError("torchtitan", [
            f"torchtitan registers no model flavour with the architecture of {what} "
            f"(its flavours: {', '.join(sorted({f'{m} {f}' for m, f, _, _ in FLAVOURS.values()}))}); "
            "add one to its model registry, or export to megatron or deepspeed"])
    return found


def torchtitan_module(view: PlanView, header: str) -> str:
    """torchtitan 0.3: a Python config module (``--module autopar_job --config autopar_plan``)."""
    module, flav, base, layers = _model_of(view)
    cfg = torchtitan_config(view)
    par, tr = cfg["parallelism"], cfg["training"]
    if view.tp > 1:
        par["enable_sequence_parallel"] = bool(view.sp)
    # the docstring holds the header as text: a backslash or a quote in a name (a Windows
    # path's "\\U", a closing triple quote) would end it or fail to parse
    lines = ['"""' + header.replace("\\", "\\\\").replace('"', '\\"'), "",
             "torchtitan 0.3 job configuration written by autopar-opt. Run it from the folder of",
             "this file (on PYTHONPATH) as",
             "    torchrun ... -m torchtitan.train --module autopar_job --config autopar_plan",
             f"(the file saved as autopar_job.py). Model: torchtitan's {module} {flav} flavour.",
             '"""', "",
             f"from torchtitan.models.{module} import model_registry",
             f"from torchtitan.models.{module}.config_registry import {base} as _base"]
    ac_mode = cfg["activation_checkpoint"]["mode"]
    if ac_mode == "full":
        lines.append("from torchtitan.distributed.activation_checkpoint import FullAC")
    elif ac_mode == "selective":
        lines.append("from torchtitan.distributed.activation_checkpoint import SelectiveAC")
    # the attention kernel the plan was priced with (FlashAttention-2 class): torchtitan's
    # varlen backend (torch.nn.attention.varlen, the flash-attention kernels) where it runs,
    # FlexAttention (its default) with context parallelism or where varlen is not offered
    extra = ', attn_backend="varlen"' if varlen_attention(module, view) else ""
    # the token dispatcher the plan was priced with: DeepEP is the registry's
    # moe_comm_backend 'deepep' (models/common/config_utils.py make_token_dispatcher_config)
    if view.has_moe and view.moe_dispatcher == "deepep":
        extra += ', moe_comm_backend="deepep"'
    if view.dtype == "fp8":
        lines.append("from torchtitan.components.quantization import "
                     + ", ".join(fp8_converters(view)))
        extra += ", converters=[" + ", ".join(
            f"{name}.Config({args})" for name, args in fp8_converters(view).items()) + "]"
    lines += ["", "", "def autopar_plan():", "    config = _base()",
              f"    config.model_spec = model_registry({flav!r}{extra})"]
    if view.arch is not None and view.arch.num_layers < layers:
        lines.append(f"    config.model_spec.model.layers = config.model_spec.model.layers"
                     f"[:{view.arch.num_layers}]   # the model's first {view.arch.num_layers} layers")
    for k, v in par.items():
        lines.append(f"    config.parallelism.{k} = {v!r}")
    for k, v in tr.items():
        lines.append(f"    config.training.{k} = {v!r}")
    # Trainer.Config: "CUDA graphs do not support pipeline parallelism yet"; with expert
    # parallelism they need a dispatcher without CPU synchronization (HybridEP, MinimalAsyncEP)
    if view.pp > 1 or (view.has_moe and view.ep > 1):
        lines.append("    config.training.disable_cuda_graphs = True")
    if view.dtype in ("bf16", "fp8"):         # FP8 GEMMs on bf16 parameters
        lines.append('    config.training.mixed_precision_param = "bfloat16"')
    if view.dtype == "fp8":                   # the converters' casts want it (float8.md)
        lines.append("    config.compile.enable = True")
    if ac_mode == "full":
        lines.append("    config.activation_checkpoint = FullAC.Config()")
    elif ac_mode == "selective":          # op-level (the rules refuse every-N-th in 0.3)
        lines.append("    config.activation_checkpoint = SelectiveAC.Config()")
    else:
        lines.append("    config.activation_checkpoint = None")
    lines.append("    return config")
    return "\n".join(lines) + "\n"


#: torchtitan modules whose decoder takes ``attn_backend="varlen"`` (llama3, qwen3 0.3.0:
#: their ``update_from_config`` refuses it only with context parallelism).
VARLEN_MODULES = ("llama3", "qwen3")


def varlen_attention(module: str, view: PlanView) -> bool:
    """Whether the 0.3 export asks for torchtitan's varlen attention: the flash-attention
    kernel the plan was priced with (``torch.nn.attention.varlen``), instead of
    FlexAttention, torchtitan's default for language models. Not with context parallelism
    ("Varlen attention is not supported with CP", ``models/llama3/model.py``) nor for a
    module without it (DeepSeek-V3's MLA): there FlexAttention runs, stated with the plan."""
    return module in VARLEN_MODULES and view.cp == 1


def fp8_converters(view: PlanView) -> dict[str, str]:
    """torchtitan 0.3's FP8 converters for an FP8 plan, with their ``Config``
    arguments: every linear layer but the output layer, which the cost model keeps
    in 16 bits (``filter_fqns=["output"]``, as torchtitan's float8.md shows), and the
    grouped experts of a MoE model; ``model_compile_enabled`` with ``compile.enable``
    ("torch.compile fuses the float8 scaling/casting kernels", float8.md). The
    recipe is torchtitan 0.3's only kind, rowwise scaling; the cost model prices
    FP8 GEMMs from per-tensor-scaled measurements (said with the export)."""
    out = {"Float8LinearConverter": 'filter_fqns=["output"], model_compile_enabled=True'}
    if view.has_moe:
        out["Float8GroupedExpertsConverter"] = "model_compile_enabled=True"
    return out


#: What each torchtitan model family's flavours fix that a config may state otherwise:
#: (norm epsilon, RoPE scaling as :attr:`~autopar_opt.ir.arch.ModelArch.rope_scaling`'s
#: (type, factor) and, for Llama 3's, its other constants). torchtitan v0.2.0:
#: ``models/llama3/model/args.py`` ``norm_eps = 1e-5``, ``RoPEScalingArgs`` (8, 1, 4, 8192),
#: applied to every flavour; ``models/qwen3/model/args.py`` ``norm_eps = 1e-6``, no scaling;
#: ``models/deepseek_v3/model/args.py`` ``norm_eps = 1e-5``, YaRN ``rope_factor = 40``.
FLAVOUR_FIXED = {"llama3": (1e-5, ("llama3", 8.0, 1.0, 4.0, 8192)),
                 "qwen3": (1e-6, None),
                 "deepseek_v3": (1e-5, ("yarn", 40.0))}


def flavour_model_notes(view: PlanView) -> list[str]:
    """What the torchtitan model the export names runs differently from the config: its
    flavour's norm epsilon and RoPE scaling (:data:`FLAVOUR_FIXED`), which the job file
    does not override; said so the user sets them in the model's args (empty where they
    match, or without a flavour)."""
    a = view.arch
    found = flavour(a) if a is not None else None
    if found is None or found[0] not in FLAVOUR_FIXED:
        return []
    module = found[0]
    eps, scaling = FLAVOUR_FIXED[module]
    out = []
    if a.norm_eps is not None and abs(a.norm_eps - eps) > 1e-12:
        out.append(f"torchtitan's {module} flavours use norm_eps {eps:g}; the config states "
                   f"{a.norm_eps:g}: set norm_eps in the model's args to match it")
    theta = FLAVOUR_THETA.get((module, found[1]), FLAVOUR_THETA.get(module))
    if a.rope_theta is not None and theta is not None and abs(a.rope_theta - theta) > 1e-6 * theta:
        out.append(f"torchtitan's {module} {found[1]} flavour uses RoPE base {theta:g}; the "
                   f"config states {a.rope_theta:g}: set the RoPE theta in the model's args "
                   "to match it")
    stated = a.rope_scaling
    same = (stated is None and scaling is None) or (
        stated is not None and scaling is not None and stated[:len(scaling)] == scaling)
    if not same:
        def words(r):
            return "none" if r is None else "longrope" if r[0] == "longrope" \
                else f"{r[0]}, factor {r[1]:g}"       # LongRoPE has no single factor
        out.append(f"torchtitan's {module} flavours apply RoPE scaling {words(scaling)}; the "
                   f"config states {words(stated)}: the run's positions differ from the "
                   "config's unless the model's RoPE args are changed to match")
    return out


#: The router of each torchtitan model family's MoE flavours (torchtitan 0.3.0
#: ``models/qwen3/__init__.py``: ``score_func="softmax", route_norm=True``;
#: ``models/deepseek_v3/__init__.py`` 671B: sigmoid, 8 groups of which 4, ``route_scale``
#: 2.5, ``route_norm=True``; both with ``make_moe_config``'s ``load_balance_coeff`` 1e-3, an
#: expert bias added for the choice and updated each step, ``models/common/moe.py``; groups
#: ranked by their top-2 sum, ``_get_node_limited_routing_scores``).
FLAVOUR_ROUTER = {"qwen3": Router(expert_bias=True),
                  "deepseek_v3": Router(score="sigmoid", expert_bias=True, scaling=2.5,
                                        groups=8, group_topk=4)}


def flavour_router_note(view: PlanView) -> list[str]:
    """What the named torchtitan flavour's MoE router (:data:`FLAVOUR_ROUTER`) does that
    the config's does not, or the other way round; the job file cannot change it (it is
    the model's config, set in the model registry's code)."""
    a = view.arch
    found = flavour(a) if a is not None and a.is_moe else None
    if found is None or found[0] not in FLAVOUR_ROUTER:
        return []
    theirs, ours = FLAVOUR_ROUTER[found[0]], a.router or Router()
    if theirs == ours:
        return []
    return [f"torchtitan's {found[0]} MoE flavours route as: {router_text(theirs)} (its "
            f"load_balance_coeff 1e-3 updates the bias); the config's router: "
            f"{router_text(ours) or 'softmax of the top-k logits, no expert bias'}: the run's "
            "routing differs from the config's unless the flavour's router config is changed "
            "to match"]


#: Said with an FP8 export: torchtitan's FP8 is not the per-tensor Transformer Engine
#: recipe the FP8 GEMM efficiency was measured with.
FP8_NOTE = ("FP8: torchtitan's float8 converters (torchao; rowwise scaling in 0.3, tensorwise "
            "in the 0.2 file) with torch.compile; the plan's FP8 GEMMs were priced from "
            "per-tensor-scaled kernels (Transformer Engine's recipe, benchmarks/kernels): "
            "rowwise GEMMs are not measured here")


def torchtitan_toml(view: PlanView, header: str) -> str:
    """torchtitan 0.2: the TOML job file, ``[model]`` included."""
    module, flav, _, layers = _model_of(view)
    if view.arch is not None and view.arch.num_layers < layers:
        raise ExportError("torchtitan", [f"torchtitan 0.2's {module} {flav} has {layers} layers; "
                                         "a TOML job file cannot cut it to "
                                         f"{view.arch.num_layers}"])
    cfg = torchtitan_config(view)
    cfg["parallelism"]["expert_tensor_parallel_degree"] = view.etp if view.has_moe else 1
    if not view.has_moe:
        del cfg["parallelism"]["expert_tensor_parallel_degree"]
    out: dict[str, Any] = {"model": {"name": module, "flavor": flav}}
    out.update(cfg)
    if view.dtype == "fp8":
        # torchtitan 0.2's registered converters (components/quantization/float8.py:
        # register_model_converter(..., "quantize.linear.float8"), "quantize.grouped_mm.float8")
        out["model"]["converters"] = ["quantize.linear.float8"] + (
            ["quantize.grouped_mm.float8"] if view.has_moe else [])
        out["quantize.linear.float8"] = {"recipe_name": "tensorwise", "filter_fqns": ["output"]}
        if view.has_moe:
            out["quantize.grouped_mm.float8"] = {"fqns": ["experts"]}
        out["compile"] = {"enable": True}
    return to_toml(out, header)


def to_toml(config: dict[str, Any], header: str) -> str:
    """Minimal TOML writer for flat tables of ints, strings, bools and (nested) string lists."""
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return str(v)
    lines = [f"# {line}" for line in header.splitlines()]
    for table, entries in config.items():
        lines += ["", f"[{table}]"] + [f"{k} = {value(v)}" for k, v in entries.items()]
    return "\n".join(lines) + "\n"


def plan_from_torchtitan(config: dict[str, Any], graph: LayerGraph, world: int) -> Plan:
    """Read a torchtitan job config (the sections as dicts) back into a plan (round trips)."""
    par, tr = config["parallelism"], config["training"]
    rep, shard = par.get("data_parallel_replicate_degree", 1), par.get("data_parallel_shard_degree", 1)
    tp, cp, pp = (par.get(k, 1) for k in ("tensor_parallel_degree", "context_parallel_degree",
                                          "pipeline_parallel_degree"))
    if rep * shard * tp * cp * pp != world:
        raise ValueError(f"dp_replicate*dp_shard*cp*tp*pp = {rep * shard * tp * cp * pp} "
                         f"!= world size {world}")
    zero = 0 if shard * cp == 1 else (      # FSDP2's mesh is dp_shard x cp
        3 if par.get("fsdp_reshard_after_forward", "default") in ("always", "default") else 2)
    # HSDP: dp_replicate copies of a dp_shard x cp shard group (0: the whole dp·cp group)
    zero_group = shard * cp if zero and rep > 1 else 0
    ac = config.get("activation_checkpoint", {})
    option = str(ac.get("selective_ac_option", "2"))   # torchtitan's default option
    rc = {"full": Recompute.full, "selective": Recompute.op if option == "op" else None}.get(
        ac.get("mode"), Recompute.none)
    base = Strategy(rep * shard, tp, cp, tp > 1 and par.get("enable_sequence_parallel", True), zero,
                    zero_group=zero_group)
    mbs = par.get("pipeline_parallel_microbatch_size", tr["local_batch_size"]) if pp > 1 \
        else tr["local_batch_size"]
    c = tr["global_batch_size"] // (mbs * rep * shard)
    parts = par.get("module_fqns_per_model_part") or [
        ["tok_embeddings"] + [f"layers.{i}" for i in range(len(graph) - 2)] + ["norm", "output"]]
    ep, etp = par.get("expert_parallel_degree", 1), par.get("expert_tensor_parallel_degree", 1)
    stages = []
    for fqns in parts:
        names, strats = [], []
        blocks = sum(1 for fqn in fqns if fqn.startswith("layers."))
        modes = iter([rc] * blocks if rc is not None else layer_sac_pattern(blocks, int(option)))
        for fqn in fqns:
            if fqn == "tok_embeddings":
                layer, s = graph.layers[0], base
            elif fqn.startswith("layers."):
                layer = graph.layers[1 + int(fqn.split(".")[1])]
                s = replace(base, recompute=next(modes), ep=ep if layer.is_moe else 1,
                            etp=etp if layer.is_moe and ep > 1 else 0)
            elif fqn == "output":
                layer, s = graph.layers[-1], base
            else:
                continue        # "norm" belongs to the head layer
            names.append(layer.name)
            strats.append(s)
        stages.append(StagePlan(names, strats))
    schedule = {v: k for k, v in _SCHEDULES.items()}.get(par.get("pipeline_parallel_schedule",
                                                                 "1F1B"), Schedule.one_f_one_b)
    return Plan(stages, c, schedule)
