"""The commands that write one file: ``export``, ``report``, ``calibrate`` (``--fit``) and
``pretrain``, registered on the ``autopar`` app of :mod:`autopar_opt.cli.commands`.

Their output file is ``--out FILE`` like the output folder of ``solve``, ``place`` and
``capacity`` (issue 33, one set of common flags); the older spellings ``-o`` and
``--output`` stay as aliases of the same option. ``export`` and ``report`` take ``--json``
(success: one JSON object naming what was written; a refusal: the JSON error object of
the other commands). ``pretrain`` takes ``--time-limit`` like the other commands that
run a search; its older ``--budget-s`` is a deprecated alias that says so.
They are registered by :func:`register`, which ``commands`` calls on its own app (so
``python -m autopar_opt.cli.commands``, whose app is ``__main__``'s, has them too).
"""

from __future__ import annotations

from typing import Optional

import typer

from autopar_opt.cli.guard import guarded, locked_out

#: The spellings of a command's output file: ``--out`` first (the common flag), then the
#: older ``-o`` / ``--output``, kept as aliases.
OUT_FILE = ("--out", "-o", "--output")


@guarded
def export(plan_json: str = typer.Argument(..., metavar="PLAN_JSON", help="plan.json of `autopar solve` "
                                           "(or the JSON of `autopar estimate --json`)."),
           target: str = typer.Option(..., "--to", help="megatron | megatron-bridge | torchtitan "
                                      "| deepspeed"),
           output: Optional[str] = typer.Option(None, *OUT_FILE, help="File to write (default: "
                                                "stdout); -o and --output are aliases."),
           spec_path: Optional[str] = typer.Option(None, "--spec", help="The spec the plan was "
                                                   "solved from (default: the path in plan.json)."),
           version: Optional[str] = typer.Option(None, "--framework-version", help="torchtitan: "
                                                 "0.3 (Python config module, default) or 0.2 "
                                                 "(TOML job file); default: the plan's target"),
           json_output: bool = typer.Option(False, "--json", help="Print JSON: the file written "
                                            "(or the configuration, without --out), or the error.")
           ) -> int:
    """Write the plan as Megatron-LM arguments, Megatron-Bridge overrides, a torchtitan
    job config or a DeepSpeed JSON config."""
    from autopar_opt.cli.export import export_command

    with locked_out(output, "--out", single_file=True):
        return export_command(plan_json, target, output, spec_path, version, json_output)


@guarded
def calibrate(ctx: typer.Context,
              runs_path: str = typer.Argument(..., metavar="RUNS.yaml",
                                              help="Measured runs to compare with."),
              json_output: bool = typer.Option(False, "--json", help="Print JSON."),
              fit: bool = typer.Option(False, "--fit", help="Fit the cost-model parameters "
                                       "(needs --out)."),
              output: Optional[str] = typer.Option(None, *OUT_FILE,
                                                   help="YAML file (*.yaml, *.yml) the fitted "
                                                        "parameters are written to (a spec's "
                                                        "cost_model: can name it); "
                                                        "-o and --output are aliases."),
              cross_validate: Optional[str] = typer.Option(
                  None, "--cross-validate", metavar="family",
                  help="Leave one source family out: fit on the others, predict it, for every "
                       "family. A record's family is its id's first '_'-separated token "
                       "(two for megatron_* ids; every bloom* id is one family)."),
              time_limit_s: Optional[float] = typer.Option(
                  None, "--time-limit", help="Wall-clock budget of the whole command, s; a fit it "
                  "stops writes nothing, a cross-validation it cuts lists the families left out "
                  "(exit 4)."),
              quiet: bool = typer.Option(False, "--quiet", help="No table (messages and the exit "
                                         "code only; --json still prints its JSON).")) -> int:
    """Compare the cost model with measured runs (optionally fit it, validate out of sample).

    Exit codes: 0 done, 2 bad input, 4 the time limit stopped the fit or the
    cross-validation."""
    from autopar_opt.cli.calibrate import calibrate_command

    started_at = (ctx.obj or {}).get("started_at") if isinstance(ctx.obj, dict) else None
    with locked_out(output if fit else None, "--out", single_file=True):
        return calibrate_command(runs_path, json_output, fit, output, cross_validate,
                                 time_limit_s, started_at, quiet)


@guarded
def pretrain(ctx: typer.Context,
             graphs: list[str] = typer.Argument(..., metavar="SPEC...",
                                                 help="Placement specs or public-format JSON "
                                                      "graphs to train on."),
             out: str = typer.Option(..., "--out", "-o", help="Policy file to write."),
             time_limit_s: Optional[float] = typer.Option(
                 None, "--time-limit", help="Wall-clock budget of the whole command, s (default "
                 "60): no PPO update starts after it; the update in flight and the policy's "
                 "write follow."),
             budget_s: Optional[float] = typer.Option(None, "--budget-s", hidden=True,
                                                      help="Deprecated alias of --time-limit."),
             iterations: Optional[int] = typer.Option(None, "--iterations", min=1,
                                                      help="Stop after this many PPO updates."),
             seed: int = typer.Option(0, "--seed", min=0, help="Seed (runs are reproducible "
                                      "with --iterations)."),
             contiguous: Optional[bool] = typer.Option(None, "--contiguous/--no-contiguous",
                                                       help="Placement variant (default: each "
                                                            "spec's, else contiguous)."),
             json_output: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
             quiet: bool = typer.Option(False, "--quiet", help="No summary (the policy file and "
                                        "the exit code only; --json still prints its JSON).")
             ) -> int:
    """Pre-train GDP's placement policy on several graphs (batch training) and write it,
    for `autopar place --searcher gdp --policy FILE` (needs the learn extra).

    Exit codes: 0 written, 2 bad input, 4 no update within the time limit, 129/130/143
    stopped by SIGHUP/SIGINT/SIGTERM (the policy trained so far written)."""
    from autopar_opt.cli.pretrain import pretrain_command, training_budget

    started_at = (ctx.obj or {}).get("started_at") if isinstance(ctx.obj, dict) else None
    budget = training_budget(time_limit_s, budget_s, started_at)
    with locked_out(out, "--out", single_file=True):
        return pretrain_command(graphs, out, budget, iterations, seed, contiguous, json_output,
                                quiet)


@guarded
def report(plan_json: str = typer.Argument(..., metavar="PLAN_JSON", help="plan.json of solve, "
                                           "placement.json of place or capacity.json of capacity."),
           output: str = typer.Option(..., *OUT_FILE, help="HTML file to write (-o and --output "
                                      "are aliases)."),
           quiet: bool = typer.Option(False, "--quiet", help="No 'wrote ...' line."),
           json_output: bool = typer.Option(False, "--json", help="Print JSON: the file written "
                                            "(its kind and size), or the error.")) -> int:
    """Render a solve result as an HTML report (an operator-sharding or peer problem's
    plan.json, a placement.json or a capacity.json: their own report)."""
    from autopar_opt.cli.report import report_command

    with locked_out(output, "--out", single_file=True):
        return report_command(plan_json, output, quiet, json_output)


def register(app: typer.Typer) -> None:
    """Add the commands of this module to ``app``."""
    for name, command in (("export", export), ("calibrate", calibrate),
                          ("pretrain", pretrain), ("report", report)):
        app.command(name)(command)
