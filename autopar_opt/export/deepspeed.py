"""DeepSpeed: plan → JSON config (+ the settings DeepSpeed takes in code), and back.

Config keys (DeepSpeed 0.19 configuration JSON): ``train_batch_size``,
``train_micro_batch_size_per_gpu``, ``gradient_accumulation_steps``
(``DeepSpeedConfig._batch_assertion``: ``train_batch_size = micro · gas · dp``),
``bf16``/``fp16``, ``zero_optimization.stage``, ``tensor_parallel.autotp_size``
(AutoTP), ``expert_parallel`` (AutoEP, ``deepspeed/module_inject/auto_ep_config.py``:
``enabled``, ``autoep_size``, ``expert_tensor_parallel_size``, ``preset_model``),
``activation_checkpointing``. The pipeline degree, partition and checkpointed
layers are ``PipelineModule(num_stages=, partition_method=,
activation_checkpoint_interval=)`` arguments in the user's code: they come back as
``launch`` notes. A one-stage plan is a plain module (a ``PipelineModule`` builds the
``PipelineEngine`` even for one stage, and it refuses ZeRO-2/3), its recomputation
the model's own checkpointing.

Rules: ZeRO-2/3 cannot be combined with pipeline parallelism (the pipeline engine
supports ZeRO stage 0/1); the stage split is ``partition_method="uniform"``
(``partition_uniform`` over the layer specs: the first ``L mod pp`` stages get
one layer more); no context parallelism and no Megatron sequence parallelism
(AutoTP shards weights only); no hybrid sharding (MiCS, ``mics_shard_size``, was
removed in 0.19); AutoEP: ``expert_tensor_parallel_size`` 1
(``validate_folding_global``), with AutoTP folding only ``pp = 1``, the expert
width ``ep`` tiling a stage's ``dp·tp`` ranks; recomputation all or nothing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from autopar_opt.export.view import PlanView, common_rules
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.plan import Plan, uniform_plan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.target import AUTOTP_PIPELINE
from autopar_opt.ir.training import Recompute, Schedule


def uniform_partition(num_layers: int, pp: int) -> list[int]:
    """Layers per stage under DeepSpeed's ``partition_uniform``."""
    base, extra = divmod(num_layers, pp)
    return [base + (1 if i < extra else 0) for i in range(pp)]


#: AutoEP presets (``deepspeed/module_inject/auto_ep_presets``) by HF model_type.
AUTOEP_PRESETS = {"mixtral": "mixtral", "qwen3_moe": "qwen3_moe", "deepseek_v3": "deepseek_v3",
                  "deepseek_v2": "deepseek_v2"}


def deepspeed_rules(view: PlanView, chain: bool) -> list[str]:
    """Every reason DeepSpeed cannot run the plan (empty: it can)."""
    out = common_rules(view, "DeepSpeed", chain)
    if view.pp > 1 and view.zero >= 2:
        out.append(f"ZeRO-{view.zero} with pipeline parallelism (DeepSpeed's pipeline engine "
                   "supports ZeRO-0/1 only)")
    if view.pp > 1 and view.tp > 1:
        out.append(f"tp={view.tp} with pp={view.pp}: {AUTOTP_PIPELINE}")
    if view.replicas > 1:
        # DeepSpeed 0.19 removed MiCS (runtime/config.py _REMOVED_ZERO_CONFIG_KEYS,
        # deepspeedai/DeepSpeed#8489); ZeRO++'s hpZ keeps a secondary copy of the
        # gathered weights only, not hybrid sharding's replicated shards
        out.append(f"hybrid sharding (ZeRO-{view.zero} over {view.zero_group} ranks, "
                   f"{view.replicas} replicas): DeepSpeed 0.19 removed MiCS, its hybrid "
                   "sharding; export to megatron or torchtitan, or search with "
                   "hybrid_sharding: [false]")
    if view.cp > 1:
        out.append("context parallelism: the DeepSpeed export writes no sequence-parallel "
                   "group (DeepSpeed-Ulysses' sequence_parallel_size is not exported; a "
                   "Ulysses plan, cp_comm_type a2a, exports to megatron)")
    if view.has_moe and view.ep > 1 and view.moe_dispatcher == "deepep":
        out.append("DeepEP token dispatch (moe_dispatcher deepep): DeepSpeed's MoE layer "
                   "dispatches with its own all-to-all; price the plan with moe_dispatcher "
                   "alltoall or export to megatron")
    if view.sp and view.tp > 1:
        out.append("Megatron-style sequence parallelism (AutoTP shards weights only)")
    if view.has_moe and view.ep == 1 and view.etp != view.tp:
        out.append(f"etp={view.etp} without AutoEP: the experts are sharded like the dense "
                   f"layers (tp={view.tp})")
    elif view.has_moe and view.ep > 1:
        if view.etp != 1:
            out.append(f"etp={view.etp}: AutoEP runs experts without tensor parallelism "
                       "(expert_tensor_parallel_size = 1)")
        if view.ep > 1 and view.tp > 1 and view.pp > 1:
            out.append("AutoEP with AutoTP folding supports pp = 1 only")
        if view.ep > 1 and (view.dp * view.tp) % view.ep:
            out.append(f"ep={view.ep} must divide dp*tp = {view.dp * view.tp}")
    if view.pp > 1 and view.schedule is not Schedule.one_f_one_b:
        out.append(f"the {view.schedule.value} schedule (DeepSpeed's pipeline engine runs 1F1B)")
    sizes = [len(s) for s in view.stage_layers]
    if sizes != uniform_partition(sum(sizes), view.pp):
        out.append(f"stage sizes {sizes}: PipelineModule's partition_method='uniform' gives "
                   f"{uniform_partition(sum(sizes), view.pp)}")
    modes = {m for stage in view.block_recompute for m in stage}
    if len(modes) > 1 or Recompute.selective in modes or Recompute.op in modes:
        out.append("per-layer or selective recomputation (activation_checkpoint_interval is 0 "
                   "or 1 for every layer here)")
    return out


#: Said with an FP8 export: DeepSpeed's config has no FP8 switch.
FP8_NOTE = ("FP8: DeepSpeed's config has no FP8 switch (bf16 is enabled); the plan was priced "
            "with FP8 GEMMs, which come from Transformer Engine modules in the model code "
            "(te.Linear under te.fp8_autocast): without them it runs in bf16 and the plan's "
            "time does not hold")


def deepspeed_config(view: PlanView, dtype: str = "bf16") -> tuple[dict[str, Any], dict[str, Any]]:
    """(DeepSpeed JSON config, launch notes for the settings given in code)."""
    config: dict[str, Any] = {
        "train_batch_size": view.global_batch_size,
        "train_micro_batch_size_per_gpu": view.micro_batch_size,
        "gradient_accumulation_steps": view.microbatches,
        "zero_optimization": {"stage": view.zero},
    }
    if dtype in ("bf16", "fp16"):
        config[dtype] = {"enabled": True}
    elif dtype == "fp8":      # FP8 GEMMs come from Transformer Engine modules in the model code
        config["bf16"] = {"enabled": True}
    if view.tp > 1:
        config["tensor_parallel"] = {"autotp_size": view.tp}
    if view.has_moe:
        ep: dict[str, Any] = {"enabled": view.ep > 1, "autoep_size": view.ep,
                              "expert_tensor_parallel_size": 1}   # AutoEP: 1 only
        preset = AUTOEP_PRESETS.get(view.arch.family) if view.arch is not None else None
        if preset:
            ep["preset_model"] = preset
        config["expert_parallel"] = ep
    if view.recompute is Recompute.full:
        config["activation_checkpointing"] = {"partition_activations": False,
                                              "contiguous_memory_optimization": False}
    full = view.recompute is Recompute.full
    if view.pp == 1:     # a PipelineModule, even of one stage, builds the PipelineEngine
        launch = {"Module": {"checkpoint_every_block": full}}
    else:
        launch = {"PipelineModule": {"num_stages": view.pp, "partition_method": "uniform",
                                     "activation_checkpoint_interval": 1 if full else 0}}
    return config, launch


#: Why a one-stage plan is not a PipelineModule: DeepSpeed 0.19.8's PipelineEngine asserts
#: ``zero_optimization_stage() < ZeroStageEnum.gradients`` ("ZeRO-2 and ZeRO-3 are
#: incompatible with pipeline parallelism", deepspeed/runtime/pipe/engine.py) for any
#: PipelineModule, one stage included; a plain module runs on DeepSpeedEngine.
ONE_STAGE_NOTE = ("set in code: pass your plain torch.nn.Module to deepspeed.initialize, not a "
                  "PipelineModule (one pipeline stage: a PipelineModule builds DeepSpeed's "
                  "PipelineEngine, which refuses ZeRO-2/3)")
CHECKPOINT_NOTE = ("set in code: recompute every transformer block "
                   "(deepspeed.checkpointing.checkpoint around each block's forward, or the "
                   "model's own gradient checkpointing, e.g. Hugging Face's "
                   "gradient_checkpointing_enable())")


def router_note(view: PlanView) -> list[str]:
    """What DeepSpeed's MoE runs of a router with DeepSeek-V3's expert bias (DeepSpeed
    0.19.8): the model's own Hugging Face module routes with its ``e_score_correction_bias``
    but nothing updates it (``DeepseekV3TopkRouter`` keeps it as a buffer), and AutoEP's
    ``deepseek_v3`` preset copies it into its router with ``supports_expert_bias=False``
    ("expert-bias auxiliary-loss-free load balancing is not currently supported",
    ``module_inject/auto_ep_presets/deepseek_v3.py``). The rest of such a router (sigmoid
    scores, ``norm_topk_prob``, ``routed_scaling_factor``, ``n_group`` / ``topk_group``) is
    read from the model's config by both."""
    a = view.arch
    if a is None or not view.has_moe or a.router is None or not a.router.expert_bias:
        return []
    return ["the config's router balances its experts with a bias updated during training "
            "(DeepSeek-V3's auxiliary-loss-free balancing, topk_method noaux_tc); DeepSpeed "
            "routes with the checkpoint's e_score_correction_bias but never updates it (the "
            "Hugging Face module keeps it as a buffer; AutoEP's deepseek_v3 preset has "
            "supports_expert_bias=False): the run trains without that balancing"]


def pipeline_module_note(view: PlanView, launch: dict[str, Any]) -> list[str]:
    """What the PipelineModule arguments assume of the user's layer list (QA round 9):
    ``partition_method='uniform'`` splits the module's entries, so the plan's stage sizes
    hold only when those entries are the plan's layers in order; and
    ``activation_checkpoint_interval=1`` checkpoints every entry, the embedding and head
    included, unless ``checkpointable_layers`` names the block class (DeepSpeed
    ``PipelineModule``, ``deepspeed/runtime/pipe/module.py``)."""
    pipe = launch.get("PipelineModule")
    if not pipe:
        return []
    sizes = [len(s) for s in view.stage_layers]
    n = sum(sizes)
    out = [f"the PipelineModule's layer list must be the plan's {n} layers in order (the "
           f"embedding, the transformer blocks, the head) for partition_method='uniform' to "
           f"give the plan's stages {sizes}; an extra entry (a separate final norm or loss) "
           "shifts the split"]
    if pipe.get("activation_checkpoint_interval"):
        out.append("activation_checkpoint_interval=1 checkpoints every entry, the embedding and "
                   "head too, which the plan does not recompute: pass checkpointable_layers="
                   "['<your transformer block class>'] to the PipelineModule")
    return out


def launch_notes(launch: dict[str, Any]) -> list[str]:
    """The settings of ``launch`` (:func:`deepspeed_config`) as notes a user acts on."""
    if "Module" in launch:
        return [ONE_STAGE_NOTE] + ([CHECKPOINT_NOTE] if launch["Module"]["checkpoint_every_block"]
                                   else [])
    return [f"set in code: {name}({', '.join(f'{k}={v!r}' for k, v in kw.items())})"
            for name, kw in launch.items()]


def plan_from_deepspeed(config: dict[str, Any], launch: dict[str, Any], graph: LayerGraph,
                        world: int) -> Plan:
    """Read a config and its launch notes back into a plan (for round trips)."""
    pipeline = launch.get("PipelineModule")
    pp = pipeline["num_stages"] if pipeline else 1
    tp = config.get("tensor_parallel", {}).get("autotp_size", 1)
    dp = world // (tp * pp)
    mbs, gas = config["train_micro_batch_size_per_gpu"], config["gradient_accumulation_steps"]
    if config["train_batch_size"] != mbs * gas * dp:
        raise ValueError(f"train_batch_size {config['train_batch_size']} != micro {mbs} * gas "
                         f"{gas} * dp {dp}")
    full = pipeline["activation_checkpoint_interval"] if pipeline else \
        launch["Module"]["checkpoint_every_block"]
    rc = Recompute.full if full else Recompute.none
    base = Strategy(dp, tp, zero=config.get("zero_optimization", {}).get("stage", 0))
    names = [layer.name for layer in graph.layers]
    plan = uniform_plan(names, pp, base, gas, Schedule.one_f_one_b,
                        stage_sizes=uniform_partition(len(names), pp))
    ep = config.get("expert_parallel", {}).get("autoep_size", 1) or \
        launch.get("MoE", {}).get("ep_size", 1)
    layers = {layer.name: layer for layer in graph.layers}
    for st in plan.stages:
        st.strategies = [replace(s, recompute=rc if layers[n].kind.value.endswith("block")
                                 else Recompute.none, ep=ep if layers[n].is_moe else 1,
                                 etp=1 if layers[n].is_moe else 0)
                         for n, s in zip(st.layers, st.strategies)]
    return plan
