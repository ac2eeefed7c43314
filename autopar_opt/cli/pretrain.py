"""``autopar pretrain SPEC... --out FILE``: pre-train GDP's placement policy once on a set
of graphs (batch training, :func:`autopar_opt.learn.gdp_place.pretrain`) and write it, so
that ``autopar place GRAPH --searcher gdp --policy FILE`` starts from it on new graphs."""

from __future__ import annotations

import json
import math
import time

import typer

from autopar_opt.cli.budget import Budget


#: The training budget when neither --time-limit nor the deprecated --budget-s is given, s.
DEFAULT_TIME_LIMIT_S = 60.0


def training_budget(time_limit_s: float | None, budget_s: float | None,
                    started_at: float | None) -> Budget:
    """The command's wall-clock budget from ``--time-limit`` (or the deprecated ``--budget-s``,
    which says so on stderr), counted from ``started_at`` (the process's start; now if
    unknown). Both given, or a value that is not a positive number of seconds: exit 2."""
    from autopar_opt.cli import options as opt
    from autopar_opt.core.errors import SpecProblem
    from autopar_opt.core.files import COMMAND_LINE

    if time_limit_s is not None and budget_s is not None:
        raise opt.OptionError([SpecProblem(COMMAND_LINE, "--budget-s", budget_s, "is the "
                                           "deprecated spelling of --time-limit, and both are "
                                           "given", "give --time-limit only")])
    key = "--time-limit"
    if budget_s is not None:
        typer.echo("note: pretrain's --budget-s is deprecated; use --time-limit (the same "
                   "budget, the common flag of the commands that search)", err=True)
        key, time_limit_s = "--budget-s", budget_s
    total = DEFAULT_TIME_LIMIT_S if time_limit_s is None else time_limit_s
    if not (math.isfinite(total) and total > 0):
        raise opt.OptionError([SpecProblem(COMMAND_LINE, key, total, "must be a positive "
                                           "number of seconds", "use e.g. --time-limit 60")])
    return Budget(total, time.perf_counter() if started_at is None else started_at)


def unplaceable_graphs(paths: list[str], problems: list) -> list:
    """One problem per graph the policy cannot learn from: more devices than GDP's decoder
    tracks (an internal error before), or no placement fits (its nodes need more memory
    than all its devices hold, or a node runs on none of them; the proofs `place` answers
    "infeasible", exit 3, with): every sample of such a graph earns the infeasibility
    penalty, so it teaches the policy nothing (QA round 12: it was trained on silently)."""
    from autopar_opt.core.errors import SpecProblem
    from autopar_opt.learn.place_graph import MAX_DEVICES
    from autopar_opt.placement.solve import memory_shortfall, unplaceable

    out = []
    for path, problem in zip(paths, problems):
        if problem.num_devices > MAX_DEVICES:      # was an internal error from the decoder
            key = "maxFPGAs + maxCPUs" if problem.meta.get("format") == "public-json" \
                else "placement.devices"
            out.append(SpecProblem(path, key, problem.num_devices, "more devices than "
                                   f"GDP's per-node decoder tracks ({MAX_DEVICES})",
                                   f"give it at most {MAX_DEVICES} devices, or drop it from SPEC..."))
            continue
        why = memory_shortfall(problem) or unplaceable(problem)
        if why:
            out.append(SpecProblem(path, "", None, f"no placement of this graph exists: {why}",
                                   "drop it from SPEC..., or give it more devices or memory "
                                   "(`autopar place` proves the same, exit 3)"))
    return out


def pretrain_command(graphs: list[str], out: str, budget: Budget, iterations: int | None,
                     seed: int, contiguous: bool | None, json_output: bool,
                     quiet: bool = False) -> int:
    """The body of ``autopar pretrain`` (option and spec errors: exit code 2, before any work).
    Training gets what is left of ``budget`` once the specs are read."""
    from autopar_opt.cli import options as opt
    from autopar_opt.core.errors import SpecProblem
    from autopar_opt.core.files import COMMAND_LINE, check_output_file
    from autopar_opt.learn.base import INSTALL_HINT, torch_available

    problems = [*check_output_file(out, "--out", inputs=tuple(graphs))]
    if not torch_available():
        problems.append(SpecProblem(COMMAND_LINE, "pretrain", None, "needs PyTorch", INSTALL_HINT))
    opt.raise_if_any(problems)
    from autopar_opt.placement.importers.spec import load_placement

    loaded = [load_placement(path) for path in graphs]          # every spec read before training
    unfit = unplaceable_graphs(graphs, [p for p, _ in loaded])
    if unfit:
        from autopar_opt.core.errors import SpecError
        raise SpecError(unfit)
    variants = {contiguous if contiguous is not None else bool(o.get("contiguous", True))
                for _, o in loaded}
    if len(variants) > 1:
        raise opt.OptionError([SpecProblem(COMMAND_LINE, "SPEC...", graphs, "mixes contiguous and "
                                           "non-contiguous specs", "give --contiguous or "
                                           "--no-contiguous")])
    from autopar_opt.learn.gdp_place import pretrain
    from autopar_opt.learn.policy_file import save_policy

    from autopar_opt.core.interrupts import InterruptGuard, exit_code

    cont = variants.pop()
    # QA round 12: Ctrl-C (SIGTERM, SIGHUP) ended the command with exit 130, nothing written
    # and not a word, however long it had trained. Now a stop signal ends training after the
    # update in flight, as the time limit does, and the policy trained so far is written.
    with InterruptGuard() as guard:
        guard.defer()                      # record the signal; the loop polls it
        agent, summary = pretrain([p for p, _ in loaded], budget_s=max(0.0, budget.remaining()),
                                  iterations=iterations, seed=seed, contiguous=cont,
                                  stop=guard.should_stop)
        summary["contiguous"] = cont
        if guard.interrupted:
            summary["interrupted"] = f"signal {guard.signum}"
        if summary["iterations"] == 0:     # no update finished: no policy
            from autopar_opt.cli.errors import EXIT_NO_RESULT, fail

            if guard.interrupted:
                fail(COMMAND_LINE, f"stopped by signal {guard.signum} before the first PPO "
                     "update; nothing was written", "let it run past one update",
                     key="pretrain", value=None, kind="interrupted",
                     exit_code=exit_code(guard.signum))
            fail(COMMAND_LINE, f"the time limit ({budget.total_s:g} s from the command's start) "
                 "was spent before the first PPO update; nothing was written", "give a longer "
                 "--time-limit", key="--time-limit", value=budget.total_s, kind="no result",
                 exit_code=EXIT_NO_RESULT)
        try:
            save_policy(agent.policy, out, meta=summary)
        except OSError as exc:
            typer.echo(f"error: cannot write {out} ({exc})", err=True)
            return 2
    if json_output:
        typer.echo(json.dumps({"policy": out, **summary}, indent=2))
    elif not quiet:
        n, it = len(loaded), summary["iterations"]
        typer.echo(f"pre-trained GDP's placement policy on {n} graph{'' if n == 1 else 's'} "
                   f"({', '.join(summary['trained_on'])}): {it} PPO iteration"
                   f"{'' if it == 1 else 's'} in {summary['wall_s']:.1f} s, seed {seed}\nwrote {out}")
    if guard.interrupted:
        typer.echo(f"interrupted: signal {guard.signum} stopped training after "
                   f"{summary['iterations']} PPO update(s); the policy trained so far was "
                   f"written to {out}", err=True)
        return exit_code(guard.signum)
    return 0
