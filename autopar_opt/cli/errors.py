"""Errors of a command as one structured object: the text on stderr, the JSON on stdout.

A command's mistake (bad input, an unusable option, a file it cannot write) is a
list of :class:`~autopar_opt.core.errors.SpecProblem` s — file, key, value, rule,
fix — with a kind ("invalid spec", "invalid option", "invalid plan") and an exit
code. The command-line wrapper prints the text form on stderr and, with
``--json``, the same fields as one JSON object on stdout (issue 33: before, an
input error under ``--json`` printed no JSON at all, so a script reading stdout
got nothing to parse)::

    {"error": {"kind": "invalid spec", "exit_code": 2, "message": "...",
               "problems": [{"file": ..., "key": ..., "value": ..., "rule": ..., "fix": ...}]}}
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, NoReturn

from autopar_opt.core.errors import MISSING, SpecError, SpecProblem

#: Exit code of a user mistake.
EXIT_USAGE = 2
#: Exit code of a run that ended without a result within its limits (time, memory).
EXIT_NO_RESULT = 4
#: Exit code of a bug in the tool itself (sysexits.h's EX_SOFTWARE), never of an input.
EXIT_INTERNAL = 70


class CommandError(Exception):
    """A command's refusal: ``problems`` of ``kind``, ending the command with ``exit_code``."""

    def __init__(self, problems: Iterable[SpecProblem], kind: str = "error",
                 exit_code: int = EXIT_USAGE) -> None:
        self.problems = list(problems)
        self.kind = kind
        self.exit_code = exit_code
        super().__init__(self.text())

    @classmethod
    def from_spec_error(cls, exc: SpecError) -> "CommandError":
        """The same problems and text; the kind from the error's headline ("invalid spec")."""
        head = str(exc).split("\n", 1)[0]
        kind = head.split(":", 1)[0] if ":" in head else "invalid input"
        out = cls(exc.problems, kind)
        out.message = str(exc)
        return out

    message: str | None = None

    def text(self) -> str:
        """The message as a person reads it (one problem: one line)."""
        if self.message is not None:
            return self.message
        if len(self.problems) == 1:
            return f"{self.kind}: {self.problems[0].format()}"
        lines = [f"{self.kind}: {len(self.problems)} problems"]
        return "\n".join(lines + [f"  - {p.format()}" for p in self.problems])

    def document(self) -> dict[str, Any]:
        """The JSON form (the same fields as :meth:`text`)."""
        return {"error": {"kind": self.kind, "exit_code": self.exit_code, "message": self.text(),
                          "problems": [{"file": p.file, "key": p.key, "value": _json_value(p.value),
                                        "rule": p.rule, "fix": p.fix} for p in self.problems]}}


def _json_value(value: Any) -> Any:
    """A problem's value as JSON can hold it (the message's own short form otherwise)."""
    if isinstance(value, str) and value == MISSING:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value[:200] if isinstance(value, str) else value
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return repr(value)[:200]
    return value if len(text) <= 400 else repr(value)[:200]


def emit(exc: CommandError, as_json: bool) -> int:
    """Print ``exc`` as :func:`autopar_opt.cli.guard.guarded` does (its text on stderr and,
    with ``--json``, its JSON object on stdout) and return its exit code: for the command
    bodies that return their code instead of raising (``export``, ``report``)."""
    import typer

    typer.echo(exc.text(), err=True)
    if as_json:
        typer.echo(json.dumps(exc.document(), indent=2))
    return exc.exit_code


def fail(file: str, rule: str, fix: str, *, key: str = "", value: Any = None,
         kind: str = "error", exit_code: int = EXIT_USAGE) -> NoReturn:
    """Raise a :class:`CommandError` with one problem."""
    raise CommandError([SpecProblem(file, key, value, rule, fix)], kind, exit_code)


def refuse(text: str, file: str, rule: str, fix: str, *, key: str = "", value: Any = None,
           kind: str = "error", exit_code: int = EXIT_USAGE) -> NoReturn:
    """Raise a :class:`CommandError` whose text is ``text`` (a command's own wording) and
    whose JSON form holds the one problem (file, key, value, rule, fix)."""
    err = CommandError([SpecProblem(file, key, value, rule, fix)], kind, exit_code)
    err.message = text
    raise err


def write_outputs(out, files: list[tuple[str, Any]]) -> None:
    """Write ``files`` (``(name, text or a callable returning it)``) into the folder ``out``,
    each atomically, in order; a file that cannot be written ends the command (exit 2,
    kind ``cannot write``) with a message that names it, the files already written (whole,
    from this run) and those not written (a file of that name already in ``out`` is an
    earlier run's). Before (QA round 34), ``error: cannot write to OUT (...)`` left the
    reader to guess which of plan.json and report.html were this run's: with report.html
    unwritable, a new plan.json stood beside the previous run's report, and ``--json``
    printed no error object."""
    from pathlib import Path

    from autopar_opt.core.files import COMMAND_LINE, write_atomic

    out = Path(out)
    done: list[str] = []
    for i, (name, text) in enumerate(files):
        try:
            write_atomic(out / name, text() if callable(text) else text)
        except OSError as exc:
            rest = [n for n, _ in files[i:]]
            rule = (f"cannot write {name} ({exc.strerror or exc}); "
                    + (f"written whole: {', '.join(done)}; " if done else "")
                    + f"not written: {', '.join(rest)} (a file of that name already in {out} "
                    "is from an earlier run)")
            refuse(f"error: {rule}", COMMAND_LINE, rule, f"free space or permissions in {out}, "
                   "or choose another --out, and run the command again", key="--out",
                   value=str(out), kind="cannot write")
        done.append(name)
