"""The ``autopar`` command line: thin subcommands over the library.

``zoo list``, ``schema`` and ``estimate`` live here; ``solve``, ``calibrate``,
``capacity`` and ``report`` delegate to their modules (imported lazily, so a broken or
missing optional part never stops the others). A :class:`SpecError` or
:class:`PlanError` anywhere prints its message on stderr and exits with code 2,
without a traceback and without writing anything.
"""

from __future__ import annotations

import json
from typing import Any, Optional

import typer

from autopar_opt.cli.guard import closed_pipe, flush_stdout, guarded, locked_out

#: --seed of solve and place (QA round 12: "runs are reproducible", but a searcher stops at
#: --budget-s: three runs of the same seed drew 16,405, 14,430 and 16,566 samples)
SEED_HELP = ("Searcher seed: the same seed draws the same sequence of plans; how many fit in "
             "--budget-s depends on the machine's speed, so a run's result may differ.")

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Optimal hybrid-parallel training plans with optimality certificates.")


def _version(value: bool) -> None:
    if value:
        from autopar_opt import __version__
        typer.echo(f"autopar-opt {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """Optimal hybrid-parallel training plans with optimality certificates."""


zoo_app = typer.Typer(no_args_is_help=True, help="Models and clusters shipped with autopar-opt.")
app.add_typer(zoo_app, name="zoo")

#: Exit code for user mistakes (bad spec, bad plan).
EXIT_USAGE = 2

#: The common flags, with the same meaning wherever they appear, and the commands that
#: honour them (README "Common flags"; tests/cli check every command declares its own):
#: ``--json`` machine-readable output (errors too, as {"error": ...} on stdout),
#: ``--quiet`` no display or summary, ``--out`` what the command writes (a folder, or the
#: one file of export, report, calibrate --fit and pretrain), ``--time-limit`` a
#: wall-clock budget for the whole command, ``--seed`` the seed of a randomised searcher.
#: A command not listed for a flag has nothing it could do with it (``estimate`` writes
#: no files and has no search to limit; ``capacity`` has no randomised searcher).
COMMON_FLAGS: dict[str, tuple[str, ...]] = {
    "solve": ("--json", "--quiet", "--out", "--time-limit", "--seed"),
    "place": ("--json", "--quiet", "--out", "--time-limit", "--seed"),
    "capacity": ("--json", "--quiet", "--out", "--time-limit"),
    "calibrate": ("--json", "--quiet", "--out", "--time-limit"),   # --out: the fit (--fit)
    "estimate": ("--json",),
    "model": ("--json",),
    "zoo list": ("--json",),
    "report": ("--json", "--quiet", "--out"),                   # --out: the HTML file
    "export": ("--json", "--out"),                              # --out: the configuration file
    "schema": (),
    "pretrain": ("--json", "--quiet", "--out", "--time-limit", "--seed"),   # --out: the policy
}

#: Other spellings of a common flag, by command: ``-o`` is ``--out`` on every command
#: that writes (a folder or a file); the output file of ``export``, ``report`` and
#: ``calibrate`` was ``-o/--output`` (same option, same value);
#: ``pretrain --budget-s`` is a deprecated alias of its ``--time-limit`` (it says so).
FLAG_ALIASES: dict[str, dict[str, tuple[str, ...]]] = {
    "solve": {"--out": ("-o",)},
    "place": {"--out": ("-o",)},
    "capacity": {"--out": ("-o",)},
    "pretrain": {"--out": ("-o",), "--time-limit": ("--budget-s",)},
    "export": {"--out": ("-o", "--output")},
    "report": {"--out": ("-o", "--output")},
    "calibrate": {"--out": ("-o", "--output")},
}


def _option_problem(option: str, value: str, rule: str, names) -> None:
    """Refuse ``option value`` in the common format (file, key, value, rule, fix), with
    the closest of ``names``."""
    from autopar_opt.cli.options import raise_if_any
    from autopar_opt.core.errors import SpecProblem, did_you_mean, one_of
    from autopar_opt.core.files import COMMAND_LINE

    raise_if_any([SpecProblem(COMMAND_LINE, option, value, rule + did_you_mean(value, names),
                              f"use {one_of(names)}")])


def _searcher_needs_torch(name: str) -> None:
    """Refuse, before any work, a searcher whose PyTorch is not installed (QA round 12:
    ``solve --searcher dqn`` read the spec and built the space, then printed "error: ..."
    and exited 2 without the --json error object)."""
    from autopar_opt.learn.base import INSTALL_HINT, SEARCHERS, torch_available

    if SEARCHERS.get(name, ("", "", False))[2] and not torch_available():
        from autopar_opt.cli.options import raise_if_any
        from autopar_opt.core.errors import SpecProblem
        from autopar_opt.core.files import COMMAND_LINE

        raise_if_any([SpecProblem(COMMAND_LINE, "--searcher", name, "needs PyTorch",
                                  INSTALL_HINT)])


def _fail(message: str) -> None:
    """Print ``message`` on stderr and exit with :data:`EXIT_USAGE`."""
    typer.echo(message, err=True)
    raise typer.Exit(EXIT_USAGE)


@zoo_app.command("list")
@guarded
def zoo_list(json_output: bool = typer.Option(False, "--json", help="Print JSON: models, "
                                              "clusters and catalog devices.")) -> int:
    """List the zoo's models, bundled Hugging Face configs and clusters (and, with --json,
    the device catalog)."""
    import dataclasses

    from rich.table import Table

    from autopar_opt.model_zoo import registry
    from autopar_opt.model_zoo.hf_bundled import bundled_summary
    from autopar_opt.cli.solve import console as make_console

    if json_output:
        from autopar_opt.ir.hardware import DEVICE_CATALOG

        typer.echo(json.dumps({
            "models": [dataclasses.asdict(m) for m in registry.list_models()],
            "hf_configs": bundled_summary(),
            "clusters": [dataclasses.asdict(c) for c in registry.list_clusters()],
            "devices": [{"name": name, "hbm_gib": dev.hbm_gib, "hbm_gb_per_s": dev.hbm_gb_per_s,
                         "peak_tflops": dict(dev.peak_tflops), "source": dev.source}
                        for name, dev in DEVICE_CATALOG.items()]}, indent=2))
        return 0

    console = make_console()
    models = Table(title="Models", show_lines=False)
    for col in ("name", "description", "source"):
        models.add_column(col, overflow="fold")
    for info in registry.list_models():
        models.add_row(info.name, info.description, info.source)
    configs = Table(title="Hugging Face configs (model: {hf_config: NAME}, autopar model NAME)")
    for col in ("name", "model_type", "published parameters", "config"):
        configs.add_column(col, overflow="fold")
    for row in bundled_summary():
        total, active = row["params_total"], row["params_active"]
        size = (f"{float(total) / 1e9:.2f} B" if total else "-") + \
            (f" ({float(active) / 1e9:.2f} B active)" if active else "")
        configs.add_row(row["name"], str(row["model_type"]), size, str(row["config"] or ""))
    clusters = Table(title="Clusters")
    for col in ("name", "nodes", "gpus/node", "device", "description"):
        clusters.add_column(col, overflow="fold")
    for c in registry.list_clusters():
        clusters.add_row(c.name, str(c.nodes), str(c.gpus_per_node), c.device, c.description)
    console.print(models)
    console.print(configs)
    console.print(clusters)
    return 0


@app.command("schema")
@guarded
def schema(plan: bool = typer.Option(False, "--plan", help="The JSON Schema of plan.json "
                                     "(autopar solve --out; a plain cluster's or a fleet's) "
                                     "instead of a spec file."),
           estimate: bool = typer.Option(False, "--estimate", help="The JSON Schema of "
                                         "autopar estimate --json."),
           runs: bool = typer.Option(False, "--runs", help="The JSON Schema of a run file "
                                     "(measured runs for autopar calibrate)."),
           sweep: bool = typer.Option(False, "--sweep", help="The JSON Schema of a capacity "
                                      "sweep file (autopar capacity)."),
           placement: bool = typer.Option(False, "--placement", help="The JSON Schema of a "
                                          "placement spec (autopar place SPEC).")) -> int:
    """Print the JSON Schema of a spec file (or of plan.json / estimate's JSON / a run file /
    a capacity sweep / a placement spec).

    Infinite numbers in plan.json are the strings "inf" / "-inf" (JSON has no infinity)."""
    if plan + estimate + runs + sweep + placement > 1:
        _fail("give at most one of --plan, --estimate, --runs, --sweep and --placement")
    if placement:   # the typed form of what place checks by hand (QA round 13: there was none)
        from autopar_opt.placement.importers.spec_schema import placement_json_schema

        typer.echo(json.dumps(placement_json_schema(), indent=2, ensure_ascii=False))
        return 0
    if sweep:       # the schema the sweep's errors point to (QA round 11: there was none)
        from autopar_opt.capacity.schema import SweepFile

        typer.echo(json.dumps(SweepFile.model_json_schema(), indent=2, ensure_ascii=False))
        return 0
    if runs:
        from autopar_opt.calibration.reading.run_schema import run_file_json_schema

        typer.echo(json.dumps(run_file_json_schema(), indent=2, ensure_ascii=False))
        return 0
    if plan or estimate:
        from autopar_opt.core.document import estimate_json_schema, plan_json_schema

        # a plain cluster's plan.json or a fleet's (QA round 9: the fleet form was missing)
        typer.echo(json.dumps(plan_json_schema() if plan else estimate_json_schema(),
                              indent=2))
        return 0
    typer.echo(json.dumps(spec_json_schema(), indent=2))
    return 0


def spec_json_schema() -> dict:
    """The JSON Schema ``autopar schema`` prints: any of the three spec forms ``autopar
    solve`` reads, a model on a cluster (a fleet's included), an operator-sharding problem
    and a peer's instance (``problem:``; the two were missing and their bundled examples
    failed the schema, QA round 10). Built here, at the top layer, which routes them."""
    from typing import Union

    from pydantic import TypeAdapter

    from autopar_opt.opspace.spec import OpSpecFile
    from autopar_opt.peers.spec import PeerSpecFile
    from autopar_opt.spec.schema import SpecFile

    schema = TypeAdapter(Union[SpecFile, OpSpecFile, PeerSpecFile]).json_schema()
    schema["title"] = "autopar-opt spec file"
    schema["description"] = ("A model on a cluster (model, cluster, training, ...), or a "
                             "problem: an operator-sharding problem or a peer's instance "
                             "(piper, pase).")
    return schema


def _estimate_text(spec: Any, metrics: Any) -> list[str]:
    from autopar_opt.cost.interval import plan_interval
    from autopar_opt.ir.graph import params_summary
    from autopar_opt.cost.assumptions import cost_assumptions
    from autopar_opt.ir.arch import describe
    from autopar_opt.ir.window import windows_text
    from autopar_opt.ir.hardware import devices_text, memory_override
    from autopar_opt.ir.recompute_pattern import recompute_text
    from autopar_opt.ir.training import schedule_text
    from autopar_opt.core.result import recomputed_share
    from autopar_opt.reports.formatting import causal_mfu_note, idle_gpus_mfu_note, usable_note

    plan = spec.plan
    labels = list(dict.fromkeys(s.label() for st in plan.stages for s in st.strategies))
    interval = plan_interval(spec.graph, spec.cluster, spec.training, plan,
                             metrics.iteration_time_s, params=spec.cost_params)
    windows = windows_text(spec.graph.attention_windows())
    devices = devices_text(spec.cluster.num_devices, spec.cluster.device.name,
                           memory_override(spec.cluster.device))
    lines = [f"spec:             {spec.path}",
             f"model:            {spec.graph.name} ({len(spec.graph)} layers, "
             f"{params_summary(spec.graph.total_params(), spec.graph.active_params())})",
             *([f"                  {windows}"] if windows else []),
             *([f"                  {describe(spec.graph.arch)}"] if spec.graph.arch else []),
             f"cluster:          {spec.cluster.name} ({devices})",
             f"plan:             pp={plan.pp} microbatches={plan.microbatches} "
             f"schedule={schedule_text(plan.schedule, plan.vp_chunks)} strategy={' | '.join(labels)}",
             f"recomputation:    {recompute_text(plan, spec.graph)}",
             *([f"stage devices:    {' + '.join(map(str, plan.stage_devices))} "
                f"(free stage sizes, of {spec.cluster.num_devices})"] if plan.stage_devices else []),
             f"iteration time:   {metrics.iteration_time_s:.6g} s",
             f"                  {interval.text()}",
             "                  (how far the cost model has been from comparable published runs)",
             f"samples/s:        {metrics.samples_per_s:.6g}",
             f"tokens/s:         {metrics.tokens_per_s:.6g}" if spec.training.seq_len is not None
             else "tokens/s:         none (training.seq_len not set: no sequence)",
             f"MFU:              {100 * metrics.mfu:.2f} %"
             f"{causal_mfu_note(metrics.mfu, metrics.mfu_causal)}"
             f"{idle_gpus_mfu_note(metrics.mfu, plan.stage_devices, spec.cluster.num_devices)}",
             f"HFU:              {100 * metrics.hfu:.2f} %",
             "iteration time, critical path (s):"]
    labels = {"compute_s": "compute", "tp_comm_s": "exposed TP comm", "cp_comm_s": "exposed CP comm",
              "zero_comm_s": "exposed ZeRO-2/3 comm", "ep_comm_s": "MoE all-to-all",
              "offload_comm_s": "exposed CPU offload copies", "reshard_s": "resharding",
              "dp_comm_s": "exposed DP grad reduction", "optimizer_s": "optimizer step",
              "fixed_s": "fixed per iteration", "pipeline_bubble_s": "pipeline bubble + sends"}
    labels["compute_s"] = "compute (recompute incl.)"
    for key, label in labels.items():
        val = metrics.breakdown.get(key, 0.0)
        share = val / metrics.iteration_time_s if metrics.iteration_time_s else 0.0
        lines.append(f"  {label:<27} {val:10.4g}  ({100 * share:5.1f} %)")
        share = recomputed_share(metrics.mfu, metrics.hfu)
        if key == "compute_s" and metrics.mfu > 0 and share > 0:
            part = val * share          # the part solve's comparison lists apart (QA round 10)
            lines.append(f"    {'of which recomputation':<25} {part:10.4g}  "
                         f"({100 * part / metrics.iteration_time_s:5.1f} %)")
    lines += communication_lines(metrics.communication)
    usable = usable_note(metrics.memory_capacity_gib, spec.cluster.device.hbm_gib)
    lines.append("memory per device (GiB), by stage"
                 + (f" (capacity {metrics.memory_capacity_gib:.4g}{usable})" if usable else "") + ":")
    for st in metrics.stages:
        mark = {"fits": "ok", "tight": "TIGHT (headroom below 5%)",
                "over": "DOES NOT FIT"}[st.memory_status]
        lines.append(f"  stage {st.index:>3}: {st.peak_memory_gib:8.2f} / {st.capacity_gib:.2f}  "
                     f"(weights {st.weights_gib:.2f}, grads {st.grads_gib:.2f}, optimizer "
                     f"{st.optimizer_gib:.2f}, activations {st.activation_gib:.2f}, logits "
                     f"{st.logits_gib:.2f}, working set {st.working_gib:.2f}, reserve {st.reserve_gib:.2f})  "
                     f"{mark}")
    lines.append(f"runtime:          {spec.training.runtime.name} ("
                 + ", ".join(k for k, v in spec.training.runtime.capabilities().items() if v) + ")")
    lines.append("assumed:")
    lines += [f"  - {line}" for line in cost_assumptions(spec.graph, spec.cluster, spec.training,
                                                             spec.cost_params)]
    return lines


#: Names of the kinds of communication (plan.json ``metrics.communication``) on the terminal.
COMM_NAMES = {"tp": "TP", "cp": "CP", "zero": "ZeRO-2/3", "ep": "MoE all-to-all",
              "offload": "CPU offload", "reshard": "resharding", "dp": "DP grad sync"}


def communication_lines(communication: dict) -> list[str]:
    """The terminal's table of each kind of communication that moves anything: its transfer
    time on the breakdown's critical path, the part hidden behind compute, the exposed part
    (the breakdown's term) and, of that, the interference slowdown overlap charges to
    compute (:mod:`autopar_opt.cost.comm_split`); none when nothing is communicated."""
    rows = [(COMM_NAMES.get(kind, kind), f) for kind, f in communication.items()
            if f and f.get("total_s", 0.0) > 0]
    if not rows:
        return []
    out = [f"communication, critical path (s):  {'total':>9} {'hidden':>9} {'exposed':>9} "
           f"{'of which interference':>22}"]
    out += [f"  {name:<32} {f['total_s']:9.4g} {f['hidden_s']:9.4g} {f['exposed_s']:9.4g} "
            f"{f['interference_s']:22.4g}" for name, f in rows]
    return out


@app.command("estimate")
@guarded
def estimate(spec_path: str = typer.Argument(..., metavar="SPEC", help="Spec file with a plan."),
             plan_file: Optional[str] = typer.Option(
                 None, "--plan", metavar="PLAN_JSON", help="Price this plan instead of the "
                 "spec's: the plan.json of `autopar solve --out DIR` (or estimate --json's), "
                 "possibly edited, re-priced under the spec's cluster, training and cost "
                 "model; a fleet solve's plan.json under its fleet spec."),
             json_output: bool = typer.Option(False, "--json", help="Print JSON.")) -> int:
    """Evaluate the spec's plan (or --plan's) under the cost model (no solver)."""
    from autopar_opt.cost.assumptions import cost_assumptions
    from autopar_opt.cost.evaluate import evaluate
    from autopar_opt.spec import load_spec

    from autopar_opt.cli.errors import refuse

    if plan_file is None:
        spec, repriced = load_spec(spec_path), None
    else:
        from autopar_opt.cli.reprice import load_repriced
        from autopar_opt.cli.reprice_fleet import estimate_fleet_plan, fleet_plan_document

        fleet_doc = fleet_plan_document(plan_file)
        if fleet_doc is not None:       # a fleet solve's plan.json: priced on its fleet
            said, fits = estimate_fleet_plan(spec_path, plan_file, fleet_doc, json_output)
            typer.echo(json.dumps(said, indent=2) if json_output else "\n".join(said))
            if not fits:
                typer.echo("warning: the plan does not fit device memory (a stage's peak is "
                           "above its group's capacity); try more pipeline stages, ZeRO, or "
                           "recomputation", err=True)
            return 0

        spec, repriced = load_repriced(spec_path, plan_file)
    if spec.fleet is not None:
        rule = ("a cluster of several groups (cluster.groups) has no hand-written plan to "
                "estimate (a plan would name every stage's group)")
        fix = ("`autopar solve` prices every plan it searches (estimate --plan prices a fleet "
               "solve's plan.json), or estimate a plan on one group's cluster")
        refuse(f"{spec_path}: {rule}; {fix}", str(spec_path), rule, fix, key="cluster.groups",
               kind="invalid spec")
    if spec.plan is None:
        rule = "no 'plan' section to estimate"
        fix = ("add one, e.g. plan: {tp: 8, pp: 1, microbatches: 8} (or run `autopar solve` to "
               "find a plan)")
        refuse(f"{spec_path}: {rule}; {fix}", str(spec_path), rule, fix, key="plan",
               kind="invalid spec")
    metrics = evaluate(spec.plan, spec.graph, spec.cluster, spec.training, spec.cost_params)
    if repriced is not None:
        repriced.priced(metrics.iteration_time_s)
    if json_output:
        from autopar_opt.cost.interval import metrics_dict
        from autopar_opt.ir.recompute_pattern import recompute_text

        # the plan as the spec gives it, its recomputation in words beside it
        typer.echo(json.dumps({"spec": str(spec.path), "plan": spec.plan.to_dict(),
                               "recompute": recompute_text(spec.plan, spec.graph),
                               "metrics": metrics_dict(metrics, spec.graph, spec.cluster,
                                                       spec.training, spec.plan,
                                                       params=spec.cost_params),
                               "assumed": cost_assumptions(spec.graph, spec.cluster,
                                                           spec.training, spec.cost_params),
                               **({"notices": list(spec.notices)} if spec.notices else {}),
                               **(repriced.document() if repriced is not None else {})},
                              indent=2))
    else:
        notes = list(spec.notices) + (repriced.notes if repriced is not None else [])
        typer.echo("\n".join(_estimate_text(spec, metrics)
                              + [f"note: {notice}" for notice in notes]))
    if not metrics.feasible:
        worst = max(metrics.stages, key=lambda s: s.peak_memory_gib)
        typer.echo(f"warning: the plan does not fit device memory (stage {worst.index} needs "
                   f"{worst.peak_memory_gib:.2f} GiB of {worst.capacity_gib:.2f} GiB); try more "
                   "pipeline stages, ZeRO, or recomputation", err=True)
    return 0


@app.command("model")
@guarded
def model(path: str = typer.Argument(..., metavar="SPEC_OR_CONFIG",
                                     help="A spec file, a Hugging Face config.json (or its "
                                          "directory), or the name of a bundled config or a "
                                          "zoo model (autopar zoo list)."),
          seq_len: Optional[int] = typer.Option(None, "--seq-len", min=1, max=16_777_216,
                                                help="Sequence length for a bare config.json "
                                                     "or a zoo model (default: the config's "
                                                     "own maximum, max_position_embeddings or "
                                                     "its family's key, 4096 when it states "
                                                     "none; the zoo model's own length); a "
                                                     "spec states training.seq_len."),
          json_output: bool = typer.Option(False, "--json", help="Print JSON.")) -> int:
    """Show the layer graph a model import built: layers, parameters, FLOPs, activations."""
    from autopar_opt.cli.model import load_graph, model_summary, summary_lines
    from autopar_opt.model_zoo.hf_config import HfConfigError

    try:
        graph, note = load_graph(path, seq_len)
    except HfConfigError as exc:
        from autopar_opt.cli.errors import refuse
        from autopar_opt.cli.model import config_error_parts

        key, value, rule, fix = config_error_parts(str(exc), str(path))
        refuse(f"invalid model config: {exc}", str(path), rule, fix, key=key, value=value,
               kind="invalid model config")
    summary = model_summary(graph)
    if seq_len is not None:      # the length came from the option, not a spec's training section
        summary["notices"] = [n.replace("training.seq_len", "--seq-len", 1)
                              for n in summary["notices"]]
    if json_output:
        typer.echo(json.dumps(summary, indent=2))
    else:
        typer.echo("\n".join(summary_lines(summary, note)))
    return 0


@app.command("solve")
@guarded
def solve(ctx: typer.Context,
          spec_path: str = typer.Argument(..., metavar="SPEC", help="Spec file."),
          solver: Optional[str] = typer.Option(None, "--solver", help="auto | highs | gurobi | scip | dp "
                                               "(default: the spec's solver.name)."),
          time_limit_s: Optional[float] = typer.Option(
              None, "--time-limit", help="Wall-clock budget of the whole command (reading the "
              "spec, tables, warm starts, solves, baselines, outputs), s; > 0."),
          gap: Optional[float] = typer.Option(None, "--gap", help="Relative gap to stop at, in [0, 1)."),
          memory_limit_gib: Optional[float] = typer.Option(
              None, "--memory-limit", help="Memory budget of the models the command builds, GiB "
              "(default: half of the machine's memory); a model that would exceed it is not "
              "built and the next method runs."),
          form: Optional[str] = typer.Option(None, "--form", help="auto | milp | miqp: the exact MILP "
                                             "linearisation or the MIQP (default: the spec's "
                                             "solver.form)."),
          out_dir: Optional[str] = typer.Option(None, "--out", "-o", help="Directory for plan/report."),
          json_output: bool = typer.Option(False, "--json", help="Print JSON."),
          quiet: bool = typer.Option(False, "--quiet", help="No progress display and no summary."),
          export_models: bool = typer.Option(False, "--export-models",
                                             help="Write every solved sub-model as MPS under "
                                                  "OUT/models/ and record its sha256 in plan.json."),
          runnable_by: Optional[str] = typer.Option(
              None, "--runnable-by", help="megatron | torchtitan | torchtitan-0.2 | deepspeed | "
              "none: the target that will run the plan, instead of the spec's (target:, default "
              "the framework of training.runtime); the search covers the plans it can run with "
              "one tp/cp/sp/ZeRO/ep/etp/recompute setting for the model, its schedules "
              "(DeepSpeed: its uniform stage partition); Megatron's partial recomputation "
              "(--recompute-method block) in every configuration, 1F1B pipelines of several "
              "stages included. none: the free per-layer space."),
          warm_start: bool = typer.Option(True, "--warm-start/--no-warm-start",
                                          help="Start every MIP from the DP's plan (or the best uniform "
                                               "plan) and use the DP's proven bound; off: the MIP "
                                               "alone, an independent check."),
          searcher: Optional[str] = typer.Option(None, "--searcher",
                                                 help="Also run a searcher first: random | anneal | "
                                                      "dqn | gdp (dqn/gdp need the learn extra). Its plan, "
                                                      "priced by evaluate, warm-starts the exact search and "
                                                      "is reported against the proven bound."),
          budget_s: Optional[float] = typer.Option(
              None, "--budget-s", help="Searcher budget, s, inside the time limit (default: 10, "
              "at most half the time limit; more than the time limit is refused)."),
          seed: Optional[int] = typer.Option(None, "--seed", min=0, help=SEED_HELP)
          ) -> int:
    """Search the spec's space for the best plan and certify its gap.

    Exit codes: 0 plan found, 2 bad input, 3 proven infeasible, 4 no plan
    within the limits, 129/130/143 interrupted (SIGHUP/SIGINT/SIGTERM; outputs written)."""
    from autopar_opt.cli.solve import solve_command

    extra: dict[str, Any] = {"export_models": True} if export_models else {}
    _refuse_unused_options(budget_s if searcher is None else None,
                           export_models and out_dir is None, seed if searcher is None else None)
    if runnable_by is not None:
        from autopar_opt.search.runnable import FRAMEWORKS

        names = FRAMEWORKS + ("torchtitan-0.2", "none")
        if runnable_by not in names:
            _option_problem("--runnable-by", runnable_by, "unknown framework", names)
        extra["runnable_by"] = runnable_by
    if not warm_start:
        extra["warm_start"] = False
    if searcher is not None:
        from autopar_opt.cli.searcher import SearcherHook
        from autopar_opt.learn.base import PLACEMENT_ONLY, SEARCHERS

        names = tuple(n for n in SEARCHERS if n not in PLACEMENT_ONLY)   # hp: place only
        if searcher not in names:
            _option_problem("--searcher", searcher, "unknown searcher of this command"
                            + (" (it places operator graphs: autopar place)"
                               if searcher in PLACEMENT_ONLY else ""), names)
        _searcher_needs_torch(searcher)
        extra["searcher"] = SearcherHook(searcher, budget_s, seed or 0)
    started_at = (ctx.obj or {}).get("started_at") if isinstance(ctx.obj, dict) else None
    if memory_limit_gib is not None:
        extra["memory_limit_gib"] = memory_limit_gib
    with locked_out(out_dir):
        return solve_command(spec_path, solver, time_limit_s, gap, out_dir, json_output, quiet,
                             form=form, started_at=started_at, **extra)


def _refuse_unused_options(budget_s: Optional[float], export_models_without_out: bool,
                           seed: Optional[int] = None) -> None:
    """``solve``/``place`` options that would be silently ignored: ``--budget-s`` or
    ``--seed`` without ``--searcher`` (QA round 34: ``--seed 3`` alone was accepted and did
    nothing), ``--export-models`` without ``--out`` (OptionError, exit 2)."""
    from autopar_opt.cli import options
    from autopar_opt.core.files import COMMAND_LINE
    from autopar_opt.core.errors import SpecProblem

    problems = []
    if budget_s is not None:
        problems.append(SpecProblem(COMMAND_LINE, "--budget-s", budget_s, "is the budget of a "
                                    "searcher, and no --searcher is given", "add --searcher "
                                    "random (or anneal, dqn, gdp), or drop --budget-s"))
    if seed is not None:
        problems.append(SpecProblem(COMMAND_LINE, "--seed", seed, "is the seed of a searcher, "
                                    "and no --searcher is given (the exact search draws no "
                                    "random numbers)", "add --searcher NAME (solve: random, "
                                    "anneal, dqn, gdp; place: random, anneal, gdp, hp), or "
                                    "drop --seed"))
    if export_models_without_out:
        problems.append(SpecProblem(COMMAND_LINE, "--export-models", True, "writes the models "
                                    "under OUT/models/, and no --out is given", "add --out DIR, "
                                    "or drop --export-models"))
    options.raise_if_any(problems)


@app.command("place")
@guarded
def place(ctx: typer.Context,
          spec_path: str = typer.Argument(..., metavar="SPEC",
                                          help="Placement spec, or a public-format JSON graph."),
          solver: Optional[str] = typer.Option(None, "--solver",
                                               help="auto (DP where exact, else MILP) | dp | highs "
                                                    "| gurobi | scip."),
          objective: Optional[str] = typer.Option(None, "--objective", help="max-load | latency."),
          contiguous: Optional[bool] = typer.Option(None, "--contiguous/--no-contiguous",
                                                    help="Each device's nodes contiguous "
                                                         "(default: the spec's, else yes)."),
          time_limit_s: Optional[float] = typer.Option(
              None, "--time-limit", help="Wall-clock budget of the whole command from process "
              "start (reading, coarsening, bounds, solves, outputs), s; > 0 (default: none, run "
              "until the gap is closed)."),
          gap: Optional[float] = typer.Option(None, "--gap",
                                              help="Stop at this relative gap (default: prove "
                                                   "optimality, 1e-6)."),
          memory_limit_gib: Optional[float] = typer.Option(
              None, "--memory-limit", help="Memory budget of the MILP, GiB (default: half of "
              "the machine's memory); a MILP that would exceed it is counted, not built, and "
              "the best placement of the other methods is the answer."),
          out_dir: Optional[str] = typer.Option(None, "--out", "-o",
                                                help="Write placement.json and report.html here."),
          json_output: bool = typer.Option(False, "--json", help="Print JSON."),
          expert: Optional[str] = typer.Option(None, "--expert",
                                               help="A human-expert split to compare with."),
          searcher: Optional[str] = typer.Option(None, "--searcher",
                                                 help="Also run a searcher first: random | anneal | "
                                                      "gdp | hp (gdp and hp, the hierarchical "
                                                      "planner, need the learn extra; max-load only). "
                                                      "Reported against the proven bound; its plan is "
                                                      "kept when the exact side ends worse."),
          budget_s: Optional[float] = typer.Option(
              None, "--budget-s", help="Searcher budget, s (default: 10, at most half of "
              "--time-limit; more than --time-limit is refused)."),
          seed: Optional[int] = typer.Option(None, "--seed", min=0, help=SEED_HELP),
          quiet: bool = typer.Option(False, "--quiet", help="No summary (the outputs and the exit "
                                     "code only; --json still prints its JSON)."),
          policy: Optional[str] = typer.Option(None, "--policy",
                                               help="gdp: start from this pre-trained policy "
                                                    "(written by `autopar pretrain`): its zero-shot "
                                                    "plans, then fine-tuning within --budget-s."),
          decoder: Optional[str] = typer.Option(None, "--decoder",
                                                help="gdp: node (default: a device per node, the "
                                                     "exact search's space) | block (k-1 "
                                                     "boundaries over one order; its best plan is "
                                                     "its ceiling, often above the optimum).")
          ) -> int:
    """Place an operator graph on devices, with a proven lower bound and gap.

    Exit codes: 0 placement found, 2 bad input, 3 proven infeasible, 4 no placement
    within the limits (placement.json still written, with the proven bound), 129/130/143
    interrupted (SIGHUP/SIGINT/SIGTERM; outputs written)."""
    from autopar_opt.cli.place import place_command

    _refuse_unused_options(budget_s if searcher is None else None, False,
                           seed if searcher is None else None)
    hook = None
    if searcher is not None or policy is not None or decoder is not None:
        from autopar_opt.cli.searcher import SearcherHook

        if searcher is None:
            from autopar_opt.cli.options import OptionError
            from autopar_opt.core.errors import SpecProblem
            from autopar_opt.core.files import COMMAND_LINE

            raise OptionError([SpecProblem(COMMAND_LINE, "--policy" if policy else "--decoder",
                                           policy or decoder, "is an option of the gdp searcher",
                                           "add --searcher gdp, or drop it")])
        from autopar_opt.learn.base import PLACEMENT_SEARCHERS

        if searcher not in PLACEMENT_SEARCHERS:
            _option_problem("--searcher", searcher, "not a searcher of operator-graph placement"
                            + (" (it searches the layer-strategy or operator space: autopar "
                               "solve)" if searcher == "dqn" else ""), PLACEMENT_SEARCHERS)
        _searcher_needs_torch(searcher)
        hook = SearcherHook(searcher, budget_s, seed or 0, policy=policy, decoder=decoder)
    started_at = (ctx.obj or {}).get("started_at") if isinstance(ctx.obj, dict) else None
    with locked_out(out_dir):
        return place_command(spec_path, solver, objective, contiguous, time_limit_s, out_dir,
                             json_output, expert, gap, searcher=hook, quiet=quiet,
                             started_at=started_at, memory_limit_gib=memory_limit_gib)


@app.command("capacity")
@guarded
def capacity(ctx: typer.Context,
             sweep_path: str = typer.Argument(..., metavar="SWEEP", help="Sweep file (base spec, "
                                                                         "axes, planning inputs)."),
             engine: str = typer.Option("local", "--engine", help="local (process pool, default) | "
                                        "ray (extra autopar-opt[ray]; RAY_ADDRESS or a local Ray)."),
             workers: Optional[int] = typer.Option(None, "--workers",
                                                   help="Parallel scenarios (default: available cores)."),
             out_dir: Optional[str] = typer.Option(None, "--out", "-o", help="Directory for capacity.html, "
                                                   "capacity.csv/json, per-scenario reports, the store."),
             json_output: bool = typer.Option(False, "--json", help="Print the capacity document as JSON."),
             quiet: bool = typer.Option(False, "--quiet", help="No progress display and no summary."),
             store: Optional[str] = typer.Option(None, "--store", help="SQLite results store (default: "
                                                 "OUT/capacity.sqlite, else ~/.cache/autopar-opt/)."),
             time_limit_s: Optional[float] = typer.Option(
                 None, "--time-limit", help="Wall-clock budget of the whole sweep, s: each "
                 "scenario gets at most what is left; scenarios not reached are listed (exit 4).")
             ) -> int:
    """Sweep clusters, batch sizes, ...: certified plans, time and cost intervals, answers.

    Exit codes: 0 every scenario has a row, 2 bad input, 4 a scenario's search raised
    or the time limit left scenarios unsolved, 129/130/143 interrupted."""
    from autopar_opt.cli.capacity import capacity_command

    started_at = (ctx.obj or {}).get("started_at") if isinstance(ctx.obj, dict) else None
    with locked_out(out_dir):
        return capacity_command(sweep_path, engine, workers, out_dir, json_output, quiet, store,
                                time_limit_s, started_at)


def main() -> None:
    """Console-script entry point (``autopar``): runs the app and exits with its code.

    The command's clock starts when the process started (interpreter start-up
    and imports count against ``--time-limit``). Once the command is done, its
    objects are frozen out of the garbage collector (:func:`_skip_exit_collection`)."""
    import signal
    import sys

    from autopar_opt.core.interrupts import StoppedBySignal

    try:
        import time

        from autopar_opt.cli.budget import process_age_s
        from autopar_opt.core.interrupts import stop_cleanly_outside_guards

        stop_cleanly_outside_guards()
        obj = {"started_at": time.perf_counter() - process_age_s()}
        if "--json" in sys.argv[1:]:
            sys.exit(_run_json(obj))
        app(prog_name="autopar", obj=obj)
    except StoppedBySignal as stop:      # outside any command (option parsing)
        from autopar_opt.cli.stopped import say_stopped

        say_stopped(stop.signum, "--json" in sys.argv[1:])
        raise
    except KeyboardInterrupt:
        # while typer builds the commands from their signatures, outside its own catch
        # (a traceback: QA round 35)
        from autopar_opt.cli.stopped import say_stopped

        say_stopped(signal.SIGINT, "--json" in sys.argv[1:])
        raise SystemExit(128 + signal.SIGINT) from None
    except SystemExit as done:
        from autopar_opt.cli.stopped import say_stopped, unsaid_sigint

        if unsaid_sigint(done.code):      # a Ctrl-C while typer parsed the options
            say_stopped(signal.SIGINT, "--json" in sys.argv[1:])
        flush_stdout()
        raise
    except BrokenPipeError:
        closed_pipe()
    finally:
        _skip_exit_collection()



def given_value(argv: list[str], opts: tuple[str, ...]) -> str | None:
    """The text given to the option spelt ``opts`` on the command line ``argv`` (its last
    occurrence, ``--opt VALUE`` or ``--opt=VALUE``), or None: the parser's error names the
    option and the rule but not the value (QA round 12: ``--seq-len 0 --json`` wrote
    ``"value": null``)."""
    found = None
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        for opt in opts:
            if arg == opt and i + 1 < len(argv):
                found = argv[i + 1]
            elif arg.startswith(opt + "=") and opt.startswith("--"):
                found = arg[len(opt) + 1:]
    return found


def _run_json(obj: dict) -> int:
    """Run the app for a ``--json`` command line: a usage mistake the option parser finds
    (a value of the wrong type, a missing required option) prints its usual message on
    stderr and, as every other input error under ``--json`` does, the error object on
    stdout (QA round 9: ``--gap abc --json`` printed only Typer's box)."""
    import json
    import sys

    try:                 # typer's own click (pinned typer); else the usual usage box only
        from typer._click.exceptions import ClickException
    except ImportError:  # pragma: no cover - another typer layout
        app(prog_name="autopar", obj=obj)
        return 0
    from autopar_opt.cli.errors import CommandError
    from autopar_opt.core.errors import SpecProblem
    from autopar_opt.core.files import COMMAND_LINE

    try:
        code = app(prog_name="autopar", obj=obj, standalone_mode=False)
    except ClickException as exc:
        exc.show()
        param = getattr(exc, "param", None)
        key = (param.opts[0] if getattr(param, "opts", None) else getattr(param, "name", "")) or ""
        key = key or getattr(exc, "option_name", None) or ""      # an unknown option's name
        value = given_value(sys.argv[1:], tuple(getattr(param, "opts", None) or ()))
        err = CommandError([SpecProblem(COMMAND_LINE, key, value, exc.format_message(),
                                        "see the command's --help")], "invalid option",
                           exc.exit_code)
        typer.echo(json.dumps(err.document(), indent=2))
        return exc.exit_code
    except typer.Abort:
        typer.echo("Aborted!", err=True)
        return 1
    return code if isinstance(code, int) else 0


def _skip_exit_collection() -> None:
    """Move every live object to the collector's permanent generation, which the
    interpreter's shutdown collections do not traverse (issue 15).

    Leaving the interpreter after a search spent about 0.3 s in those
    collections, over the objects the run made (matplotlib, cost tables, solver
    models), outside any phase the time limit could price. Nothing is lost:
    the outputs are written, fsynced and renamed before the command returns
    (:func:`autopar_opt.core.files.write_atomic`); atexit handlers, the flush of
    stdout and stderr and module teardown still run; only cyclic garbage left
    over from the run goes unfinalised, and the process is ending.
    ``tests/test_exit.py`` checks a piped ``--json`` and an atexit handler.
    Called from :func:`main` only (a process's last act), never from code that
    tests run in-process: there it would keep every later cycle alive.

    Not when Triton is loaded (PyTorch imports it: the learned searchers): its nanobind
    extension counts the objects still alive at exit and prints some thirty lines of
    "nanobind: leaked ..." on stderr for the frozen ones. Such a run ends at once instead
    (:func:`_end_now`): its teardown took 1.5-2.2 s past ``--time-limit`` (QA round 35:
    ``place --searcher gdp --time-limit 20`` ended at 21.5-22.2 s)."""
    import gc
    import sys

    if "triton" in sys.modules:
        _end_now()
        return
    gc.freeze()


def _end_now() -> None:
    """End the process with the exit status in flight once the atexit handlers have run
    and stdout and stderr are flushed (``os._exit``), skipping the interpreter's teardown:
    with PyTorch loaded it spent about 1.0 s in shutdown collections over the run's
    objects and 0.5 s unloading modules (QA round 35), after the outputs were written,
    fsynced and renamed (:func:`autopar_opt.core.files.write_atomic`). Only a
    ``SystemExit`` with an integer (or no) status, or none in flight, ends here; any other
    exception is left to the interpreter, which prints it."""
    import atexit
    import os
    import sys

    exc = sys.exc_info()[1]
    if exc is not None and not (isinstance(exc, SystemExit)
                                and (exc.code is None or isinstance(exc.code, int))):
        return
    code = 0 if exc is None or exc.code is None else exc.code
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):      # a closed pipe or stream: nothing left to say
            pass
    os._exit(code)


# The commands that write one file (export, report, calibrate --fit, pretrain), in their own
# module (kept apart so that this one stays small), registered on this module's ``app``.
from autopar_opt.cli.file_commands import register as _register_file_commands  # noqa: E402

_register_file_commands(app)


if __name__ == "__main__":
    main()
