"""Export a plan to the launcher that will run it: Megatron-LM, torchtitan, DeepSpeed.

Each target checks its own rules first (:mod:`.megatron`, :mod:`.torchtitan`,
:mod:`.deepspeed`) and refuses with :class:`ExportError` naming everything it
cannot express; otherwise :func:`export_plan` returns the text to write and
notes for the settings the framework takes elsewhere (in code).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field

from autopar_opt.export.view import ExportError, PlanView, plan_view
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import Cluster, devices_text, memory_override
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.training import FP32_DTYPES, Recompute, Training

#: Export targets, in the order the CLI lists them.
TARGETS = ("megatron", "megatron-bridge", "torchtitan", "deepspeed")

_NAMES = {"megatron": "Megatron-LM", "megatron-bridge": "Megatron-Bridge",
          "torchtitan": "torchtitan", "deepspeed": "DeepSpeed"}


@dataclass
class Exported:
    """What an exporter produced: the file text and notes for the user."""

    text: str
    notes: list[str] = field(default_factory=list)


def rules_for(target: str, view: PlanView, chain: bool, version: str = "") -> list[str]:
    """Every reason ``target`` cannot run the plan of ``view`` (``version``: torchtitan's,
    0.3 by default)."""
    from autopar_opt.export.deepspeed import deepspeed_rules
    from autopar_opt.export.megatron import megatron_rules
    from autopar_opt.export.torchtitan import torchtitan_rules

    if target == "torchtitan":
        return torchtitan_rules(view, chain, version or "0.3")
    out = {"megatron": megatron_rules, "megatron-bridge": megatron_rules,
           "deepspeed": deepspeed_rules}[target](view, chain)
    if target == "megatron-bridge" and view.dtype in FP32_DTYPES:
        out.append(f"{view.dtype} training: Megatron-Bridge's recipes train in bf16 mixed "
                   "precision (mixed_precision bf16_mixed) and this export writes no fp32 "
                   "override of it; export to megatron (fp32 without --bf16/--fp16) or "
                   "deepspeed")
    return out


def one_line(text: str) -> str:
    """``text`` with each character that is not printable (a newline, a carriage return, a
    tab, a Unicode line or paragraph separator) written as its escape (``\\n``), so that
    it stays on the comment line each export writes it on. The header carries the model's
    name, which a Hugging Face config states itself (``_name_or_path``), and the spec's
    model and cluster names: QA round 34, a name ``"x\\n$(cmd)"`` put the line
    ``$(cmd) on ...`` among the Megatron-LM arguments, which the file's own launch line
    (``eval "... $(grep -v '^#' THIS_FILE)"``) passes to the shell, and a name with a
    newline and ``\"\"\"`` wrote Python code into torchtitan's job module."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
                   for ch in text)


def export_plan(plan: Plan, graph: LayerGraph, cluster: Cluster, training: Training,
                target: str, version: str = "") -> Exported:
    """The launch configuration of ``plan`` for ``target``; raises ExportError.

    ``version``: torchtitan ``0.3`` (its current Python configs, the default) or
    ``0.2`` (the TOML job file)."""
    if target not in TARGETS:
        raise ValueError(f"unknown export target {target!r}; use one of {', '.join(TARGETS)}")
    if plan.stage_devices is not None and len(set(plan.stage_devices)) > 1:
        raise ExportError(_NAMES[target],
                          ["its stages have different device counts "
                           f"({'+'.join(map(str, plan.stage_devices))}); "
                           "the framework gives every pipeline stage the same devices "
                           "(search with stage_devices: congruent)"])
    view = plan_view(plan, graph, cluster, training)
    reasons = rules_for(target, view, graph.is_chain(), version)
    if reasons:
        raise ExportError(_NAMES[target], reasons)
    devices = devices_text(cluster.num_devices, cluster.device.name, memory_override(cluster.device))
    header = one_line(f"autopar-opt plan for {graph.name} on {cluster.name} ({devices}): "
                      f"pp={view.pp} tp={view.tp} cp={view.cp} dp={view.dp}"
                      + (f" ep={view.ep} etp={view.etp}" if view.has_moe else ""))
    notes = [] if view.arch is not None else [
        "the model has no recorded architecture (a layer list, a zoo or Hugging Face model "
        "the exports do not describe: GPT-2, encoders, vision models): the model's own flags "
        "(layers, hidden size, heads, ...) are not written; add them"]
    notes += training_notes(training, target)
    offload = 0
    if target in ("megatron", "megatron-bridge"):
        offload, why = megatron_offload_layers(view, training)
        if why:
            raise ExportError(_NAMES[target], [why])
    if target in ("megatron", "megatron-bridge"):
        from autopar_opt.export.megatron import rope_scaling_note, router_notes
        said = rope_scaling_note(view.arch, bridge=target == "megatron-bridge")
        notes += [said] if said else []
        notes += router_notes(view.arch)
    if target == "megatron":
        from autopar_opt.export.megatron import megatron_args, megatron_env, vocab_comment
        from autopar_opt.ir.arch import positions_notice

        notes += positions_notice(view.arch, view.seq_len) if view.seq_len else []

        args = megatron_args(view)
        if offload:
            args += ["--cpu-offloading-num-layers", str(offload)]
        pairs, i = [], 0
        while i < len(args):
            takes = i + 1 < len(args) and not args[i + 1].startswith("--")
            pairs.append(f"{args[i]} {shlex.quote(args[i + 1])}" if takes else args[i])
            i += 2 if takes else 1
        env = megatron_env(view)
        # eval: the file's lines end in " \" and quote their values for the shell; a bare
        # $(...) would pass each backslash and quote to argparse as written (a blank line
        # would end eval's command: left out with the comments)
        lines = [f"# Megatron-LM arguments, {header}",
                 f"# launch: eval \"{' '.join(f'{k}={v}' for k, v in env.items())}"
                 f"{' ' if env else ''}torchrun --nnodes {cluster.nodes} --nproc-per-node "
                 f"{cluster.gpus_per_node} pretrain_gpt.py $(grep -v -e '^#' -e '^ *$' THIS_FILE) "
                 "--data-path ...\""]
        lines += [f"# env: {k}={v}" for k, v in env.items()]
        if view.arch is not None:
            lines.append(vocab_comment(view))
        return Exported("\n".join(lines) + "\n" + " \\\n".join(pairs) + "\n", notes)
    if target == "megatron-bridge":
        from autopar_opt.export.megatron import (BRIDGE_ACTIVATION_NOTE, BRIDGE_TP_OVERLAP_NOTE,
                                                 bridge_activation, bridge_overrides,
                                                 bridge_vocab_note, overlap_args)

        overrides = bridge_overrides(view)
        if offload:        # TransformerConfig: the switch and its count (Bridge reads both)
            overrides.setdefault("model", {}).update(cpu_offloading=True,
                                                     cpu_offloading_num_layers=offload)
        body = yaml_dump(overrides)
        activation = bridge_activation(view.arch)
        said = [BRIDGE_ACTIVATION_NOTE.format(name=activation)] if activation else []
        said += bridge_vocab_note(view)
        if "--tp-comm-overlap" in overlap_args(view):
            said.append(BRIDGE_TP_OVERLAP_NOTE)
        text = (f"# Megatron-Bridge ConfigContainer overrides, {header}\n"
                "# merge into a recipe: process_config_with_overrides(cfg, config_filepath=THIS_FILE)\n"
                f"# (megatron.bridge.training.utils.omegaconf_utils); world size {cluster.num_devices}\n"
                + "".join(f"# {line}\n" for line in said) + body)
        return Exported(text, notes + said)
    if target == "torchtitan":
        from autopar_opt.export.torchtitan import (FP8_NOTE, flavour_model_notes,
                                                   flavour_router_note, torchtitan_module,
                                                   torchtitan_toml)

        if training.dtype == "fp8":
            notes.append(FP8_NOTE)
        notes += flavour_model_notes(view) + flavour_router_note(view)
        if (version or "0.3") == "0.2":
            return Exported(torchtitan_toml(view, f"torchtitan 0.2 job config, {header}"), notes)
        return Exported(torchtitan_module(view, f"torchtitan job config, {header}"), notes)
    from autopar_opt.export.deepspeed import (FP8_NOTE, deepspeed_config, launch_notes,
                                              pipeline_module_note, router_note)

    if training.dtype == "fp8":
        notes.append(FP8_NOTE)
    config, launch = deepspeed_config(view, training.dtype)
    notes += launch_notes(launch) + router_note(view) + pipeline_module_note(view, launch)
    return Exported(json.dumps(config, indent=2) + "\n", notes)


#: The FP8 recipe each Megatron export writes (the cost model prices FP8's casts with the
#: amax fused into them, as delayed scaling runs them: :mod:`autopar_opt.cost.fp8_casts`).
FP8_RECIPES = {"megatron": ("delayed scaling", "--fp8-recipe delayed, Megatron-LM's default, "
                                                "written out"),
               "megatron-bridge": ("Megatron-Bridge's performance recipe "
                                   "bf16_with_fp8_current_scaling_mixed",
                                   "per-tensor current scaling, first and last blocks in bf16, "
                                   "FP8 weight gathers")}


def megatron_offload_layers(view: PlanView, training: Training) -> tuple[int, str]:
    """``(N, "")``: the ``--cpu-offloading-num-layers N`` (Megatron-Bridge
    ``cpu_offloading_num_layers``) that runs the plan's ``training.activation_offload``
    ``f``, the activations of ``N = f·L`` of the ``L`` transformer layers a pipeline rank
    holds (:class:`~autopar_opt.ir.training.Training`; read back by
    :func:`autopar_opt.export.megatron_import.offload_problems`); ``(0, reason)`` where
    Megatron cannot run it: ``f·L`` not a whole number of layers, or what Megatron-Core
    0.17.1 ``TransformerConfig.__post_init__`` refuses beside ``cpu_offloading`` (pipeline
    parallelism, activation recomputation, ``N >= L``). ``(0, "")`` without offloading.
    QA round 36: the export wrote no flag and a note, a file that launches without
    offloading and so with more activation memory than the plan was priced with."""
    from autopar_opt.export.megatron import cpu_offload_refusals

    f = training.activation_offload
    if f <= 0:
        return 0, ""
    blocks = sum(len(b) for b in view.block_recompute[:1])     # a rank's transformer layers
    n = round(f * blocks)
    whole = f"set it to N / {blocks}" if blocks else "set training.activation_offload: 0"
    recompute = view.recompute.value if view.recompute is not Recompute.none else next(
        (r.value for st in view.block_recompute for r in st if r is not Recompute.none), None)
    refused = cpu_offload_refusals(max(n, 1), blocks, view.pp, recompute) if blocks else []
    if refused:
        return 0, (f"training.activation_offload {f:g} (--cpu-offloading-num-layers {max(n, 1)}): "
                   f"Megatron-Core refuses it: {'; '.join(refused)} "
                   "(TransformerConfig.__post_init__); set training.activation_offload: 0")
    if blocks == 0 or abs(f * blocks - n) > 1e-9 or n < 1:
        return 0, (f"training.activation_offload {f:g} is not a whole number of the {blocks} "
                   "transformer layers a pipeline rank holds (Megatron offloads whole layers: "
                   f"--cpu-offloading-num-layers N offloads N / layers of them); {whole}")
    return n, ""


def training_notes(training: Training, target: str) -> list[str]:
    """What the plan was priced with that the exported file does not set (QA round 9):
    activation offloading (except on Megatron-LM and Megatron-Bridge, whose files set it:
    :func:`megatron_offload_layers`), autocast's fp32 weights, and the FP8 recipe a
    Megatron export chooses."""
    out = []
    if training.activation_offload > 0 and target not in ("megatron", "megatron-bridge"):
        out.append(f"the plan was priced with training.activation_offload "
                   f"{training.activation_offload:g} (that share of the stored activations in "
                   "host memory, copied out and back behind compute); the file sets no "
                   "offloading: set the framework's activation offloading (Megatron-LM "
                   "--cpu-offloading-num-layers, torchtitan or DeepSpeed activation "
                   "checkpointing to CPU) or the run needs the activation memory the plan "
                   "saved")
    if training.autocast:
        out.append("the plan was priced with training.autocast (fp32 weights, 16-bit compute "
                   "under torch.autocast); the file sets the framework's 16-bit mixed precision "
                   "(16-bit weights with an fp32 master copy), whose memory and casts differ: "
                   "estimate it without autocast for what this file runs")
    if training.dtype == "fp8" and target in FP8_RECIPES:
        other = "megatron-bridge" if target == "megatron" else "megatron"
        name, detail = FP8_RECIPES[target]
        out.append(f"FP8 recipe: {name} ({detail}); the {other} export writes "
                   f"{FP8_RECIPES[other][0]}; the cost model prices the casts "
                   "with the amax fused into them (delayed scaling), so current scaling's "
                   "separate amax pass per cast is not priced")
    return out


def yaml_dump(data: dict) -> str:
    """Block-style YAML of nested dicts of scalars and lists (the Bridge overrides)."""
    import yaml

    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None)


__all__ = ["TARGETS", "ExportError", "Exported", "export_plan", "plan_view", "rules_for"]
