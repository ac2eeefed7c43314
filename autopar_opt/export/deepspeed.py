"""DeepSpeed: plan → JSON config (+ the settings DeepSpeed takes in code), and back.

Config keys (DeepSpeed configuration JSON docs): ``train_batch_size``,
``train_micro_batch_size_per_gpu``, ``gradient_accumulation_steps`` (DeepSpeed
asserts ``train_batch_size = micro · gas · dp``), ``bf16``/``fp16``,
``zero_optimization.stage``, ``tensor_parallel.autotp_size`` (AutoTP
training). Pipeline degree, partition and activation checkpointing are
``PipelineModule(num_stages=, partition_method=, activation_checkpoint_interval=)``
arguments and the expert-parallel degree is ``deepspeed.moe.layer.MoE(ep_size=)``:
they come back as ``launch`` notes.

Rules: ZeRO-2/3 cannot be combined with pipeline parallelism (DeepSpeed's
pipeline engine supports ZeRO stage 0/1 only); the stage split must be
``partition_method="uniform"`` (``partition_uniform`` over all layer specs:
the first ``L mod pp`` stages get one layer more); no context parallelism
and no Megatron sequence parallelism (AutoTP shards weights only); experts
are partitioned inside the data-parallel group (``ep`` divides dp);
recomputation all-or-nothing (``activation_checkpoint_interval`` 1 or 0).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from autopar_opt.export.view import PlanView, common_rules
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.plan import Plan, uniform_plan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Schedule


def uniform_partition(num_layers: int, pp: int) -> list[int]:
    """Layers per stage under DeepSpeed's ``partition_uniform``."""
    base, extra = divmod(num_layers, pp)
    return [base + (1 if i < extra else 0) for i in range(pp)]


def deepspeed_rules(view: PlanView, chain: bool) -> list[str]:
    """Every reason DeepSpeed cannot run the plan (empty: it can)."""
    out = common_rules(view, "DeepSpeed", chain)
    if view.pp > 1 and view.zero >= 2:
        out.append(f"ZeRO-{view.zero} with pipeline parallelism (DeepSpeed's pipeline engine "
                   "supports ZeRO-0/1 only)")
    if view.cp > 1:
        out.append("context parallelism (DeepSpeed-Ulysses is a different scheme)")
    if view.sp and view.tp > 1:
        out.append("Megatron-style sequence parallelism (AutoTP shards weights only)")
    if view.ep > 1 and view.dp % view.ep:
        out.append(f"ep={view.ep} must divide dp={view.dp}")
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
    if view.tp > 1:
        config["tensor_parallel"] = {"autotp_size": view.tp}
    launch = {"PipelineModule": {"num_stages": view.pp, "partition_method": "uniform",
                                 "activation_checkpoint_interval":
                                     1 if view.recompute is Recompute.full else 0}}
    if view.has_moe:
        launch["MoE"] = {"ep_size": view.ep}
    return config, launch


def plan_from_deepspeed(config: dict[str, Any], launch: dict[str, Any], graph: LayerGraph,
                        world: int) -> Plan:
    """Read a config and its launch notes back into a plan (for round trips)."""
    pp = launch["PipelineModule"]["num_stages"]
    tp = config.get("tensor_parallel", {}).get("autotp_size", 1)
    dp = world // (tp * pp)
    mbs, gas = config["train_micro_batch_size_per_gpu"], config["gradient_accumulation_steps"]
    if config["train_batch_size"] != mbs * gas * dp:
        raise ValueError(f"train_batch_size {config['train_batch_size']} != micro {mbs} * gas "
                         f"{gas} * dp {dp}")
    rc = Recompute.full if launch["PipelineModule"]["activation_checkpoint_interval"] else \
        Recompute.none
    base = Strategy(dp, tp, zero=config.get("zero_optimization", {}).get("stage", 0))
    names = [layer.name for layer in graph.layers]
    plan = uniform_plan(names, pp, base, gas, Schedule.one_f_one_b,
                        stage_sizes=uniform_partition(len(names), pp))
    ep = launch.get("MoE", {}).get("ep_size", 1)
    layers = {layer.name: layer for layer in graph.layers}
    for st in plan.stages:
        st.strategies = [replace(s, recompute=rc if layers[n].kind.value.endswith("block")
                                 else Recompute.none, ep=ep if layers[n].is_moe else 1)
                         for n, s in zip(st.layers, st.strategies)]
    return plan
