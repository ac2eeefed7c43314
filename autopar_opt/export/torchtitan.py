"""torchtitan: plan → TOML job config, and back.

Keys are torchtitan's ``JobConfig`` sections (``torchtitan/config/job_config.py``):
``[parallelism]`` ``data_parallel_replicate_degree``,
``data_parallel_shard_degree``, ``fsdp_reshard_after_forward``,
``tensor_parallel_degree``, ``context_parallel_degree``,
``pipeline_parallel_degree``, ``pipeline_parallel_schedule``,
``pipeline_parallel_microbatch_size``, ``module_fqns_per_model_part``,
``expert_parallel_degree``, ``expert_tensor_parallel_degree``;
``[training]`` ``local_batch_size``, ``global_batch_size``, ``seq_len``;
``[activation_checkpoint]`` ``mode``, ``selective_ac_option`` (``op``:
op-level selective checkpointing, :attr:`Recompute.op`; an integer ``N``:
full checkpointing on every N-th block of each stage, :func:`layer_sac_pattern`).

Rules (torchtitan ``ParallelDims``): ``dp_replicate · dp_shard · cp · tp · pp``
= world size; with expert TP = TP, ``ep`` divides ``dp_shard · cp``. Data
parallelism is DDP (``dp_replicate``, ZeRO-0) or FSDP2 (``dp_shard``):
parameters resharded after forward = ZeRO-3, kept (``"never"``) = ZeRO-2;
a ZeRO-3 plan carries the policy the cost model priced (``"always"``, or
``"default"`` where the runtime keeps parameters under a pipeline, as
torchtitan's own default does);
optimizer-only sharding (ZeRO-1) has no torchtitan form. Tensor parallelism
always shards the norms' sequence (sequence parallelism on). The pipeline
split is given module by module (``module_fqns_per_model_part``: one list of
module names per stage, ``tok_embeddings``, ``layers.N``, ``norm``,
``output``), so any contiguous split can be expressed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from autopar_opt.export.view import PlanView, common_rules
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Schedule

_SCHEDULES = {Schedule.one_f_one_b: "1F1B", Schedule.gpipe: "GPipe"}


def torchtitan_rules(view: PlanView, chain: bool) -> list[str]:
    """Every reason torchtitan cannot run the plan (empty: it can)."""
    out = common_rules(view, "torchtitan", chain)
    if view.zero == 1 and view.dp * view.cp > 1:
        out.append("ZeRO-1 (optimizer-state sharding only): torchtitan shards with FSDP2 "
                   "(ZeRO-2 or ZeRO-3) or replicates (DDP)")
    if view.tp > 1 and not view.sp:
        out.append("tp > 1 without sequence parallelism: torchtitan's tensor parallelism "
                   "always shards the norms' sequence")
    shard = _shard(view)
    if view.ep > 1 and (shard * view.cp) % view.ep:
        out.append(f"ep={view.ep} must divide dp_shard*cp = {shard * view.cp}")
    if activation_checkpoint(view) is None:
        out.append("this recomputation: torchtitan's activation_checkpoint is 'none', 'full', "
                   "op-level selective ('op') or full on every N-th block of each stage "
                   "(selective_ac_option N); Megatron's selective (attention-core) mode has no "
                   "torchtitan form")
    if view.vp_chunks > 1:
        out.append("interleaved virtual stages")
    if any(k == "?" for kinds in view.stage_kinds for k in kinds):
        out.append("layers other than embedding, transformer blocks and head")
    return out


def _shard(view: PlanView) -> int:
    return view.dp if view.zero >= 2 else 1


def torchtitan_config(view: PlanView) -> dict[str, Any]:
    """The TOML tables of a runnable plan (as nested dicts)."""
    shard = _shard(view)
    par: dict[str, Any] = {
        "data_parallel_replicate_degree": view.dp // shard,
        "data_parallel_shard_degree": shard,
        "tensor_parallel_degree": view.tp,
        "context_parallel_degree": view.cp,
        "pipeline_parallel_degree": view.pp,
    }
    if shard > 1:
        # ZeRO-3 keeps what the cost model priced (Runtime.reshards_after_forward):
        # resharding is "always"; kept under a pipeline is torchtitan's "default"
        # ("not pp_enabled"); kept without one is "never" (read back as ZeRO-2)
        keep = "default" if view.pp > 1 else "never"
        policy = "always" if view.reshard_after_forward else keep
        par["fsdp_reshard_after_forward"] = policy if view.zero >= 3 else "never"
    if view.pp > 1:
        par["pipeline_parallel_schedule"] = _SCHEDULES[view.schedule]
        par["pipeline_parallel_microbatch_size"] = view.micro_batch_size
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
        par["module_fqns_per_model_part"] = parts
    if view.has_moe:
        par["expert_parallel_degree"] = view.ep
        par["expert_tensor_parallel_degree"] = view.tp
    local = view.micro_batch_size * (view.microbatches if view.pp > 1 else 1)
    training: dict[str, Any] = {"global_batch_size": view.global_batch_size,
                                "local_batch_size": local}
    if view.seq_len:
        training["seq_len"] = view.seq_len
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
    """Read a torchtitan job config back into a plan (for round trips)."""
    par, tr = config["parallelism"], config["training"]
    rep, shard = par.get("data_parallel_replicate_degree", 1), par.get("data_parallel_shard_degree", 1)
    tp, cp, pp = (par.get(k, 1) for k in ("tensor_parallel_degree", "context_parallel_degree",
                                          "pipeline_parallel_degree"))
    if rep * shard * tp * cp * pp != world:
        raise ValueError(f"dp_replicate*dp_shard*cp*tp*pp = {rep * shard * tp * cp * pp} "
                         f"!= world size {world}")
    zero = 0 if shard == 1 else (
        3 if par.get("fsdp_reshard_after_forward", "default") in ("always", "default") else 2)
    ac = config.get("activation_checkpoint", {})
    option = str(ac.get("selective_ac_option", "2"))   # torchtitan's default option
    rc = {"full": Recompute.full, "selective": Recompute.op if option == "op" else None}.get(
        ac.get("mode"), Recompute.none)
    base = Strategy(rep * shard, tp, cp, tp > 1, zero)
    mbs = par.get("pipeline_parallel_microbatch_size", tr["local_batch_size"]) if pp > 1 \
        else tr["local_batch_size"]
    c = tr["global_batch_size"] // (mbs * rep * shard)
    parts = par.get("module_fqns_per_model_part") or [
        ["tok_embeddings"] + [f"layers.{i}" for i in range(len(graph) - 2)] + ["norm", "output"]]
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
                s = replace(base, recompute=next(modes),
                            ep=par.get("expert_parallel_degree", 1) if layer.is_moe else 1)
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
