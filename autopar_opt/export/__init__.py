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
from autopar_opt.ir.hardware import Cluster
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.training import Training

#: Export targets, in the order the CLI lists them.
TARGETS = ("megatron", "torchtitan", "deepspeed")


@dataclass
class Exported:
    """What an exporter produced: the file text and notes for the user."""

    text: str
    notes: list[str] = field(default_factory=list)


def rules_for(target: str, view: PlanView, chain: bool) -> list[str]:
    """Every reason ``target`` cannot run the plan of ``view``."""
    from autopar_opt.export.deepspeed import deepspeed_rules
    from autopar_opt.export.megatron import megatron_rules
    from autopar_opt.export.torchtitan import torchtitan_rules

    return {"megatron": megatron_rules, "torchtitan": torchtitan_rules,
            "deepspeed": deepspeed_rules}[target](view, chain)


def export_plan(plan: Plan, graph: LayerGraph, cluster: Cluster, training: Training,
                target: str) -> Exported:
    """The launch configuration of ``plan`` for ``target``; raises ExportError."""
    if target not in TARGETS:
        raise ValueError(f"unknown export target {target!r}; use one of {', '.join(TARGETS)}")
    if plan.stage_devices is not None and len(set(plan.stage_devices)) > 1:
        raise ExportError({"megatron": "Megatron-LM", "torchtitan": "torchtitan",
                           "deepspeed": "DeepSpeed"}[target],
                          [f"its stages have different device counts ({'+'.join(map(str, plan.stage_devices))}); "
                           "the framework gives every pipeline stage the same devices "
                           "(search with stage_devices: congruent)"])
    view = plan_view(plan, graph, cluster, training)
    reasons = rules_for(target, view, graph.is_chain())
    if reasons:
        raise ExportError({"megatron": "Megatron-LM", "torchtitan": "torchtitan",
                           "deepspeed": "DeepSpeed"}[target], reasons)
    header = (f"autopar-opt plan for {graph.name} on {cluster.name} ({cluster.num_devices} "
              f"x {cluster.device.name}): pp={view.pp} tp={view.tp} cp={view.cp} dp={view.dp}"
              + (f" ep={view.ep}" if view.has_moe else ""))
    if target == "megatron":
        from autopar_opt.export.megatron import megatron_args

        args = megatron_args(view)
        pairs, i = [], 0
        while i < len(args):
            takes = i + 1 < len(args) and not args[i + 1].startswith("--")
            pairs.append(f"{args[i]} {shlex.quote(args[i + 1])}" if takes else args[i])
            i += 2 if takes else 1
        body = " \\\n".join(pairs)
        return Exported(f"# Megatron-LM arguments, {header}\n{body}\n")
    if target == "torchtitan":
        from autopar_opt.export.torchtitan import to_toml, torchtitan_config

        return Exported(to_toml(torchtitan_config(view), f"torchtitan job config, {header}"))
    from autopar_opt.export.deepspeed import deepspeed_config

    config, launch = deepspeed_config(view, training.dtype)
    notes = [f"set in code: {name}({', '.join(f'{k}={v!r}' for k, v in kw.items())})"
             for name, kw in launch.items()]
    return Exported(json.dumps(config, indent=2) + "\n", notes)


__all__ = ["TARGETS", "ExportError", "Exported", "export_plan", "plan_view", "rules_for"]
