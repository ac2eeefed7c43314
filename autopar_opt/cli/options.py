"""Command-line options validated like spec keys.

Each checker returns a list of :class:`~autopar_opt.core.errors.SpecProblem`
(empty when the value is fine) naming the option, the value, the rule and the
fix; a command collects the problems of all its options and raises one
:class:`OptionError` (exit code 2 through :func:`autopar_opt.cli.commands.guarded`)
**before** any work starts, so a typo never costs a search.

Reuse in a new command::

    from autopar_opt.cli import options
    problems = [*options.check_time_limit(time_limit_s), *options.check_gap(gap),
                *outputs.check_output_dir(out_dir, "--out")]
    options.raise_if_any(problems)
"""

from __future__ import annotations

import math
from typing import Iterable

from autopar_opt.core.files import COMMAND_LINE
from autopar_opt.core.errors import SpecError, SpecProblem, did_you_mean, one_of

#: Formulations a MIP backend can be asked for (``--form``, ``solver.form``).
FORMS = ("auto", "milp", "miqp")


class OptionError(SpecError):
    """Bad command-line options; carries every problem found (exit code 2)."""

    def _message(self) -> str:
        n = len(self.problems)
        head = "invalid option: 1 problem" if n == 1 else f"invalid options: {n} problems"
        return "\n".join([head, *[f"  - {p.format()}" for p in self.problems]])


def raise_if_any(problems: Iterable[SpecProblem]) -> None:
    """Raise one :class:`OptionError` with all ``problems`` (if there are any)."""
    problems = list(problems)
    if problems:
        raise OptionError(problems)


def _problem(option: str, value: object, rule: str, fix: str) -> list[SpecProblem]:
    return [SpecProblem(COMMAND_LINE, option, value, rule, fix)]


def check_solver(name: str | None, option: str = "--solver") -> list[SpecProblem]:
    """The solver must be a registered backend (with a "did you mean")."""
    if name is None:
        return []
    from autopar_opt.solvers.registry import solver_names

    names = solver_names()
    if name.strip().lower() in names:
        return []
    return _problem(option, name, "unknown solver",
                    f"use one of {one_of(names)}{did_you_mean(name.strip().lower(), names)}")


def check_solver_available(name: str | None, option: str = "--solver") -> list[SpecProblem]:
    """A registered MIP backend must be usable here (its library installed):
    checked before the work by the commands whose solve would otherwise raise
    :class:`~autopar_opt.solvers.base.SolverUnavailable` mid-run. ``auto``,
    ``dp`` and unknown names (reported by :func:`check_solver`) pass."""
    from autopar_opt.solvers.registry import BACKENDS, get_backend

    key = (name or "").strip().lower()
    if key in ("", "auto", "dp") or key not in BACKENDS:
        return []
    ok, why = get_backend(key).available()
    return [] if ok else _problem(option, name, "is not usable here", why)


#: The largest --memory-limit taken, GiB (2^20 GiB = 1 PiB: beyond any machine).
MAX_MEMORY_LIMIT_GIB = float(1 << 20)


def check_memory_limit(gib: float | None, option: str = "--memory-limit") -> list[SpecProblem]:
    """A memory limit must be a positive, finite number of GiB."""
    if gib is None:
        return []
    if not (isinstance(gib, (int, float)) and math.isfinite(gib) and 0 < gib <= MAX_MEMORY_LIMIT_GIB):
        return _problem(option, gib, f"must be a positive number of GiB (at most "
                        f"{MAX_MEMORY_LIMIT_GIB:g})", "give e.g. --memory-limit 8")
    return []


def check_form(form: str | None, option: str = "--form") -> list[SpecProblem]:
    """The formulation must be one of :data:`FORMS`."""
    if form is None or form in FORMS:
        return []
    return _problem(option, form, "unknown formulation",
                    f"use one of {one_of(FORMS)}{did_you_mean(form, FORMS)}")


def check_time_limit(seconds: float | None, option: str = "--time-limit") -> list[SpecProblem]:
    """A time limit must be a positive, finite number of seconds."""
    if seconds is None:
        return []
    if not math.isfinite(seconds) or seconds <= 0:
        return _problem(option, seconds, "must be a positive, finite number of seconds",
                        "give the wall-clock budget of the whole command, e.g. --time-limit 60")
    return []


#: A searcher's budget when ``--budget-s`` is not given: this many seconds, at
#: most :data:`SEARCHER_SHARE` of the command's time limit.
SEARCHER_DEFAULT_S, SEARCHER_SHARE = 10.0, 0.5


def check_budget(budget_s: float | None, time_limit_s: float, limit_source: str = "--time-limit",
                 option: str = "--budget-s") -> list[SpecProblem]:
    """A searcher budget is a positive number of seconds inside the command's
    wall-clock budget (``time_limit_s``, named by ``limit_source``): the
    searcher runs within the time limit, so a larger budget cannot be honoured."""
    if budget_s is None:
        return []
    if not math.isfinite(budget_s) or budget_s <= 0:
        return _problem(option, budget_s, "must be a positive, finite number of seconds",
                        "e.g. --budget-s 10")
    if budget_s > time_limit_s:
        return _problem(option, budget_s, f"exceeds the command's time limit ({limit_source} "
                        f"{time_limit_s:g} s): the searcher runs inside it",
                        f"lower --budget-s to at most {time_limit_s:g}, or raise --time-limit")
    return []


def searcher_budget(budget_s: float | None, time_limit_s: float) -> float:
    """The searcher's budget: the one given (checked by :func:`check_budget`),
    else :data:`SEARCHER_DEFAULT_S` capped at :data:`SEARCHER_SHARE` of the limit."""
    if budget_s is not None:
        return budget_s
    return min(SEARCHER_DEFAULT_S, SEARCHER_SHARE * time_limit_s)


def check_gap(gap: float | None, option: str = "--gap") -> list[SpecProblem]:
    """A relative gap must lie in [0, 1)."""
    if gap is None:
        return []
    if not math.isfinite(gap) or not 0 <= gap < 1:
        return _problem(option, gap, "must be a relative gap in [0, 1)",
                        "e.g. --gap 0.001 for 0.1%, or --gap 0 to prove optimality")
    return []
