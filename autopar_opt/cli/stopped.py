"""A command stopped by a signal outside its search, and a ``--json`` document printed whole.

Searches install their own :class:`~autopar_opt.core.interrupts.InterruptGuard` and write
their outputs when a signal stops them. Outside one (reading a big spec, ``estimate``,
``export``, ``report``, ``calibrate``, ``model``), SIGINT raised ``KeyboardInterrupt``,
which typer turns into exit 130 without a word, and SIGTERM/SIGHUP
:class:`~autopar_opt.core.interrupts.StoppedBySignal`, which printed a line on stderr; with
``--json`` stdout was empty, or, when the signal came while a large document was being
written to a pipe, cut in the middle (``calibrate --json``: 65,536 of its characters,
exit 130). :func:`autopar_opt.cli.guard.guarded` now says it in the format of every other
refusal (:func:`interrupted_error`: one line on stderr, with ``--json`` the error object
on stdout, kind ``interrupted``, exit 128 + the signal), and holds a ``--json`` command's
stdout (:class:`HeldStdout`) so that the document is printed whole, with stop signals held
while it is written, or not at all.
"""

from __future__ import annotations

import io
import signal
import sys
from typing import Any, TextIO


#: What every "interrupted" message says (the rule after the signal's name, and the fix).
RULE = ("before the command finished; files written before it are whole (each is written "
        "atomically), no other was written")
FIX = "run the command again and let it finish"

#: The signals this process has said it was stopped by (:func:`unsaid_sigint`).
_SAID: list[int] = []


def interrupted_error(signum: int) -> Any:
    """The :class:`~autopar_opt.cli.errors.CommandError` of a command ``signum`` stopped
    before it finished (exit 128 + ``signum``)."""
    from autopar_opt.cli.errors import CommandError
    from autopar_opt.core.errors import SpecProblem
    from autopar_opt.core.files import COMMAND_LINE
    from autopar_opt.core.interrupts import exit_code

    _SAID.append(signum)
    return CommandError([SpecProblem(COMMAND_LINE, "signal", signum,
                                     f"stopped by {signal.Signals(signum).name} {RULE}", FIX)],
                        "interrupted", exit_code(signum))


def say_stopped(signum: int, as_json: bool) -> None:
    """For a signal that stopped the command before any command ran (the application's
    import, its option parsing): the same line and, with ``as_json``, the same error object
    as :func:`interrupted_error`, written with the standard library alone (typer may not be
    imported yet). Stop signals are held meanwhile; a closed stream is let be."""
    import json

    from autopar_opt.core.interrupts import HeldSignals

    _SAID.append(signum)
    name, code = signal.Signals(signum).name, 128 + int(signum)
    rule = f"stopped by {name} {RULE}"
    message = f"interrupted: command line: signal = {int(signum)}: {rule}; {FIX}"
    doc = {"error": {"kind": "interrupted", "exit_code": code, "message": message,
                     "problems": [{"file": "command line", "key": "signal", "value": int(signum),
                                   "rule": rule, "fix": FIX}]}}
    with HeldSignals():
        try:
            print(message, file=sys.stderr, flush=True)
            if as_json:
                write_all(sys.stdout.fileno(), (json.dumps(doc, indent=2) + "\n").encode())
        except (OSError, ValueError):
            pass


def search_stopped_line(signum: int, status: str, result_file: Any, json_output: bool,
                        command: str = "search") -> str:
    """The one line a search stopped by ``signum`` prints on stderr where no summary is
    printed (``--quiet``, ``--json``): the signal, the exit code, the result's status and
    where the result is (``result_file``: the output folder's plan.json or placement.json,
    None without ``--out``). ``autopar solve`` on one cluster said it (QA round 35); the
    fleet solve and ``autopar place`` exited 130/143 with nothing on stderr (QA round 36)."""
    from autopar_opt.core.interrupts import exit_code

    where = (f"in {result_file}" if result_file is not None else
             "the JSON on stdout" if json_output else "not written (--quiet without --out)")
    return (f"autopar: stopped by {signal.Signals(signum).name} (exit {exit_code(signum)}); "
            f"the {command}'s result, status {status}, is {where}")


def mark_said(signum: int) -> None:
    """Record that the command said it was stopped by ``signum`` (:func:`unsaid_sigint`)."""
    _SAID.append(signum)


def unsaid_sigint(code: object) -> bool:
    """Whether exit ``code`` is a Ctrl-C nothing has said: typer turns a
    ``KeyboardInterrupt`` raised while it parses the command line (before any command
    runs) into exit 130 without a word. A command's own search guard records its signal
    (:func:`~autopar_opt.core.interrupts.received_signal`), and this module records what
    it said."""
    from autopar_opt.core.interrupts import received_signal

    return code == 128 + int(signal.SIGINT) and not _SAID and received_signal() is None


class HeldStdout(io.StringIO):
    """``sys.stdout`` of a ``--json`` command: what the command prints is kept until it
    ends, then written at once (:meth:`release`) or dropped (:meth:`drop`, the command was
    stopped: its half-printed document is not valid JSON). ``fileno`` is the real stream's,
    so that :func:`autopar_opt.core.streams.stdout_to_stderr` still moves native solver
    output off file descriptor 1."""

    def __init__(self, real: TextIO) -> None:
        super().__init__()
        self.real = real

    def fileno(self) -> int:
        return self.real.fileno()

    def isatty(self) -> bool:
        return False

    def drop(self) -> None:
        """Forget what was printed so far."""
        self.seek(0)
        self.truncate()

    def release(self) -> int | None:
        """Put the real stream back and write what was printed, stop signals held while it is
        written; the signal that came meanwhile, if any (the document is whole)."""
        from autopar_opt.core.interrupts import HeldSignals

        if sys.stdout is self:
            sys.stdout = self.real
        text = self.getvalue()
        with HeldSignals() as held:
            self.real.flush()
            try:
                fd = self.real.fileno()
            except (AttributeError, OSError, ValueError):    # a test runner's stream
                fd = None
            if fd is None:
                self.real.write(text)
                self.real.flush()
            else:
                write_all(fd, text.encode(getattr(self.real, "encoding", None) or "utf-8",
                                          getattr(self.real, "errors", None) or "strict"))
        return held.signum


def write_all(fd: int, data: bytes) -> None:
    """Write ``data`` to file descriptor ``fd`` to its last byte. Not through
    ``sys.stdout``: a signal arriving while CPython's buffered writer waits on a full pipe
    made it return with part of the data written and the rest dropped, without an error
    (measured: 131,072 of 222,200 bytes reached the reader, the handler only recording the
    signal); ``os.write`` returns the partial count, and the loop writes the rest."""
    import os

    view, done = memoryview(data), 0
    while done < len(data):
        done += os.write(fd, view[done:])
