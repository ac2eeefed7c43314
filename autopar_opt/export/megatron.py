"""Megatron-LM: plan → command-line arguments, and arguments → plan.

Argument names and rules are Megatron-LM's (``megatron/training/arguments.py``
and the Megatron-Core user guide):

* ``--tensor-model-parallel-size``, ``--pipeline-model-parallel-size``,
  ``--context-parallel-size``, ``--expert-model-parallel-size`` (expert TP
  defaults to TP, ``--expert-tensor-parallel-size``); data parallelism is the
  rest of the world size: ``world = tp·pp·cp·dp``.
* ``--sequence-parallel``; with MoE and ``tp > 1`` it is required ("When using
  MoE and tensor parallelism, sequence parallelism must be used").
* ``--micro-batch-size`` (per data-parallel replica), ``--global-batch-size``:
  ``global = micro · dp · num_microbatches``; ``--seq-length`` divisible by
  ``2·cp`` (load-balanced context parallelism splits it in ``2·cp`` chunks).
* ZeRO: ``--use-distributed-optimizer`` (optimizer state sharded over the
  data-parallel ranks, ZeRO-1); ZeRO-2/3 through Megatron FSDP
  ``--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads`` /
  ``optim_grads_params``.
* Recomputation: ``--recompute-granularity full|selective``,
  ``--recompute-method uniform|block``, ``--recompute-num-layers N`` (block:
  the first N layers of every pipeline stage are recomputed).
* Pipeline split: even by default (``num_layers`` divisible by ``pp``), else
  ``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers``
  (the middle stages even), else ``--pipeline-model-parallel-layout`` (stages
  separated by ``|``: ``E`` embedding, ``t`` transformer layer, ``L`` loss/head,
  ``x*N`` repeats; Megatron-Core custom pipeline layout, MCore 0.13).
* Schedules: 1F1B, or interleaved with
  ``--num-virtual-stages-per-pipeline-rank``; no GPipe.
"""

from __future__ import annotations

import argparse
import re
import shlex

from autopar_opt.export.view import PlanView, common_rules
from autopar_opt.ir.training import Recompute, Schedule

_FSDP = {2: "optim_grads", 3: "optim_grads_params"}


def megatron_rules(view: PlanView, chain: bool) -> list[str]:
    """Every reason Megatron-LM cannot run the plan (empty: it can)."""
    out = common_rules(view, "Megatron-LM", chain)
    if view.schedule is Schedule.gpipe:
        out.append("the GPipe schedule: Megatron-LM runs 1F1B or interleaved 1F1B")
    if view.has_moe and view.tp > 1 and not view.sp:
        out.append("MoE with tp > 1 needs sequence parallelism (Megatron-LM asserts it)")
    if view.cp > 1 and view.seq_len and view.seq_len % (2 * view.cp):
        out.append(f"seq_len {view.seq_len} must be divisible by 2*cp = {2 * view.cp}")
    odd = sorted({k for kinds in view.stage_kinds for k in kinds if k == "?"})
    if odd:
        out.append("layers other than embedding, transformer blocks and head have no place "
                   "in a Megatron-LM pipeline layout")
    if any(m is Recompute.op for stage in view.block_recompute for m in stage):
        out.append("op-level selective checkpointing (torchtitan's save list): Megatron-LM's "
                   "--recompute-granularity selective recomputes the attention core only")
    elif _recompute_args(view) is None:
        out.append("per-layer recomputation other than 'the first N blocks of every stage' "
                   "(--recompute-method block)")
    if view.vp_chunks > 1 and _split_args(view):
        out.append("interleaving (virtual stages) with an uneven stage split")
    return out


def _recompute_args(view: PlanView) -> list[str] | None:
    """Recompute flags, or None when the per-block pattern is not expressible."""
    modes = {m for stage in view.block_recompute for m in stage}
    if modes == {Recompute.none} or not modes:
        return []
    if modes == {Recompute.selective}:
        return ["--recompute-granularity", "selective"]
    if modes == {Recompute.full}:
        return ["--recompute-granularity", "full", "--recompute-method", "uniform",
                "--recompute-num-layers", "1"]
    if modes != {Recompute.full, Recompute.none}:
        return None
    firsts = set()
    for stage in view.block_recompute:
        n = sum(1 for m in stage if m is Recompute.full)
        if stage[:n] != [Recompute.full] * n:
            return None
        firsts.add(n)
    if len(firsts) != 1:
        return None
    return ["--recompute-granularity", "full", "--recompute-method", "block",
            "--recompute-num-layers", str(firsts.pop())]


def _layout(view: PlanView) -> str:
    parts = []
    for kinds in view.stage_kinds:
        text, t = "", kinds.count("t")
        if kinds and kinds[0] == "E":
            text += "E"
        if t:
            text += "t" if t == 1 else f"t*{t}"
        if kinds and kinds[-1] == "L":
            text += "L"
        parts.append(text)
    return "|".join(parts)


def _even_default(view: PlanView) -> bool:
    """Megatron's default split: blocks even over stages, E first, L last."""
    blocks = view.blocks_per_stage
    return len(set(blocks)) == 1 and _edges_ok(view)


def _edges_ok(view: PlanView) -> bool:
    kinds = view.stage_kinds
    return kinds[0][:1] == ["E"] and kinds[-1][-1:] == ["L"] and \
        all(k in ("t",) for stage in kinds for k in stage if k not in ("E", "L"))


def _split_args(view: PlanView) -> list[str]:
    """Stage-split flags (empty for Megatron's default even split)."""
    if _even_default(view):
        return []
    blocks = view.blocks_per_stage
    if view.pp >= 3 and len(set(blocks[1:-1])) == 1 and _edges_ok(view) and min(blocks) > 0:
        return ["--decoder-first-pipeline-num-layers", str(blocks[0]),
                "--decoder-last-pipeline-num-layers", str(blocks[-1])]
    return ["--pipeline-model-parallel-layout", _layout(view)]


def megatron_args(view: PlanView) -> list[str]:
    """The Megatron-LM parallelism/batch arguments of a runnable plan."""
    args = ["--tensor-model-parallel-size", str(view.tp),
            "--pipeline-model-parallel-size", str(view.pp),
            "--context-parallel-size", str(view.cp)]
    if view.has_moe:
        args += ["--expert-model-parallel-size", str(view.ep),
                 "--expert-tensor-parallel-size", str(view.tp)]
    if view.sp and view.tp > 1:
        args.append("--sequence-parallel")
    args += ["--micro-batch-size", str(view.micro_batch_size),
             "--global-batch-size", str(view.global_batch_size)]
    if view.seq_len:
        args += ["--seq-length", str(view.seq_len)]
    if view.zero == 1:
        args.append("--use-distributed-optimizer")
    elif view.zero >= 2:
        args += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", _FSDP[view.zero]]
    args += _recompute_args(view) or []
    args += _split_args(view)
    if view.vp_chunks > 1:
        args += ["--num-virtual-stages-per-pipeline-rank", str(view.vp_chunks)]
    return args


# --------------------------------------------------------------------- import
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for flag, default in (("--tensor-model-parallel-size", 1), ("--pipeline-model-parallel-size", 1),
                          ("--context-parallel-size", 1), ("--expert-model-parallel-size", 1),
                          ("--expert-tensor-parallel-size", None), ("--micro-batch-size", None),
                          ("--global-batch-size", None), ("--seq-length", None),
                          ("--recompute-num-layers", None),
                          ("--num-virtual-stages-per-pipeline-rank", None),
                          ("--num-layers-per-virtual-pipeline-stage", None),
                          ("--decoder-first-pipeline-num-layers", None),
                          ("--decoder-last-pipeline-num-layers", None), ("--num-layers", None)):
        p.add_argument(flag, type=int, default=default)
    for flag in ("--sequence-parallel", "--use-distributed-optimizer", "--use-megatron-fsdp"):
        p.add_argument(flag, action="store_true")
    p.add_argument("--recompute-granularity", choices=["full", "selective"], default=None)
    p.add_argument("--recompute-method", choices=["uniform", "block"], default=None)
    p.add_argument("--data-parallel-sharding-strategy", default="no_shard")
    p.add_argument("--pipeline-model-parallel-layout", default=None)
    return p


class MegatronArgsError(ValueError):
    """Arguments that cannot be read (an unparsable value or layout)."""


def parse_megatron_args(text: str | list[str]) -> argparse.Namespace:
    """Read the parallelism/batch flags of a Megatron-LM command line; other
    flags (model dimensions, data, optimizer, ...) are ignored."""
    try:
        argv = shlex.split(text.replace("\\\n", " "), comments=True) if isinstance(text, str) \
            else list(text)
    except ValueError as exc:        # shlex: "No closing quotation", "No escaped character"
        raise MegatronArgsError(f"cannot split the command line into arguments ({exc}); close "
                                "every quote") from None
    argv = [a.replace("_", "-") if a.startswith("--") else a for a in argv]
    try:
        args, _ = _parser().parse_known_args(argv)
    except SystemExit:
        raise MegatronArgsError("cannot parse the Megatron-LM arguments (a flag has an invalid "
                                "value)") from None
    return args


def expand_layout(layout: str) -> list[list[str]]:
    """``--pipeline-model-parallel-layout`` → per-stage lists of E/t/L/m codes.

    Repeats ``x*N`` and ``(group)*N`` are expanded; ``,`` is ignored.
    """
    text = layout.replace(",", "").replace(" ", "")
    group = re.compile(r"\(([^()]*)\)\*(\d+)")
    while group.search(text):
        text = group.sub(lambda m: m.group(1) * int(m.group(2)), text)
    text = re.sub(r"([EtLm])\*(\d+)", lambda m: m.group(1) * int(m.group(2)), text)
    if re.search(r"[^EtLm|]", text):
        raise MegatronArgsError(f"pipeline layout {layout!r}: unknown symbols (expected E, t, "
                                "L, m, '|', 'x*N' and '(...)*N')")
    return [list(stage) for stage in text.split("|")]
