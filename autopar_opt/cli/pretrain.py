"""``autopar pretrain SPEC... --out FILE``: pre-train GDP's placement policy once on a set
of graphs (batch training, :func:`autopar_opt.learn.gdp_place.pretrain`) and write it, so
that ``autopar place GRAPH --searcher gdp --policy FILE`` starts from it on new graphs."""

from __future__ import annotations

import json
import math

import typer


def pretrain_command(graphs: list[str], out: str, budget_s: float, iterations: int | None,
                     seed: int, contiguous: bool | None, json_output: bool,
                     quiet: bool = False) -> int:
    """The body of ``autopar pretrain`` (option and spec errors: exit code 2, before any work)."""
    from autopar_opt.cli import options as opt
    from autopar_opt.core.errors import SpecProblem
    from autopar_opt.core.files import COMMAND_LINE, check_output_file
    from autopar_opt.learn.base import INSTALL_HINT, torch_available

    problems = [*check_output_file(out, "--out", inputs=tuple(graphs))]
    if not (math.isfinite(budget_s) and budget_s > 0):
        problems.append(SpecProblem(COMMAND_LINE, "--budget-s", budget_s,
                                    "must be a positive number of seconds", "use e.g. --budget-s 60"))
    if not torch_available():
        problems.append(SpecProblem(COMMAND_LINE, "pretrain", None, "needs PyTorch", INSTALL_HINT))
    opt.raise_if_any(problems)
    from autopar_opt.placement.importers.spec import load_placement

    loaded = [load_placement(path) for path in graphs]          # every spec read before training
    variants = {contiguous if contiguous is not None else bool(o.get("contiguous", True))
                for _, o in loaded}
    if len(variants) > 1:
        raise opt.OptionError([SpecProblem(COMMAND_LINE, "SPEC...", graphs, "mixes contiguous and "
                                           "non-contiguous specs", "give --contiguous or "
                                           "--no-contiguous")])
    from autopar_opt.learn.gdp_place import pretrain
    from autopar_opt.learn.policy_file import save_policy

    cont = variants.pop()
    agent, summary = pretrain([p for p, _ in loaded], budget_s=budget_s, iterations=iterations,
                              seed=seed, contiguous=cont)
    summary["contiguous"] = cont
    try:
        save_policy(agent.policy, out, meta=summary)
    except OSError as exc:
        typer.echo(f"error: cannot write {out} ({exc})", err=True)
        return 2
    if json_output:
        typer.echo(json.dumps({"policy": out, **summary}, indent=2))
    elif not quiet:
        typer.echo(f"pre-trained GDP's placement policy on {len(loaded)} graphs "
                   f"({', '.join(summary['trained_on'])}): {summary['iterations']} PPO iterations "
                   f"in {summary['wall_s']:.1f} s, seed {seed}\nwrote {out}")
    return 0
