"""The wrapper every command runs in: mistakes become messages and exit codes, never
tracebacks; and the output lock a run holds on the folder it writes (issue 33).

A :class:`~autopar_opt.core.errors.SpecError`, a plan error or a
:class:`~autopar_opt.cli.errors.CommandError` prints its message on stderr and, when
the command was given ``--json``, the same fields as one JSON object on stdout; a
``RecursionError`` is exit 2 and a ``MemoryError`` exit 4 (no result within the
limits). Anything else is a bug in the tool, not in the input: one message naming
the exception and where it was raised, exit 70 (``EX_SOFTWARE``), the traceback only
with ``AUTOPAR_TRACEBACK=1``; outputs are written atomically, so nothing half-written
is left (:func:`_internal_error`). :func:`locked_out` holds :class:`~autopar_opt.cli.lock.OutputLock` for a
command that writes into ``--out`` or ``-o``.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Callable, Optional

import typer


#: Exit status of a command whose reader closed its output early (``| head``): the
#: shell's status of a process SIGPIPE ended (128 + 13), as ``cat`` or ``git`` give.
EXIT_PIPE = 141


def flush_stdout() -> None:
    """Flush stdout now, so that a reader that closed the pipe (``autopar ... | head``)
    ends the command with :data:`EXIT_PIPE` and no traceback, not the interpreter's
    exit-time flush error (status 1 or 120, no message)."""
    import sys

    try:
        sys.stdout.flush()
    except BrokenPipeError:
        closed_pipe()


def closed_pipe() -> None:
    """Point stdout at /dev/null (nothing left to write to) and exit with
    :data:`EXIT_PIPE`: the files the command writes are complete (written atomically
    before its summary), only the printed text was cut, as its reader asked."""
    import os
    import sys

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    raise SystemExit(EXIT_PIPE)


def guarded(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a user's mistake into its message and exit code 2, never a traceback:
    :class:`SpecError` / :class:`PlanError` / :class:`CommandError` print their text on
    stderr (and, when the command was given ``--json``, the same fields as one JSON
    object on stdout, :mod:`autopar_opt.cli.errors`). An input nested or recursive
    beyond what Python can follow (``RecursionError``) is exit 2; running out of memory
    (``MemoryError``) is exit 4, "no result within the limits". An int returned by
    the command becomes the exit code.

    A stop signal the command's own search does not catch (SIGINT, SIGTERM, SIGHUP while
    the spec is read, during ``estimate``, ``export``, ``report``, ...) is said like a
    refusal, kind ``interrupted``, exit 128 + the signal (:mod:`autopar_opt.cli.stopped`);
    with ``--json`` stdout is held and printed whole at the end, so it is one valid JSON
    document: the command's, or the error object saying it was interrupted."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        import sys

        if not kwargs.get("json_output"):
            return _call(func, args, kwargs, None)
        from autopar_opt.cli.stopped import HeldStdout

        held = HeldStdout(sys.stdout)
        sys.stdout = held
        try:
            _call(func, args, kwargs, held)
        except BaseException:
            _release(held)
            raise
        _release(held)
    return wrapper


def _release(held: Any) -> None:
    """Print what a ``--json`` command printed (whole: stop signals are held meanwhile); a
    signal that came while it was printed ends the command with 128 + the signal, saying
    that the document is whole."""
    import signal

    from autopar_opt.core.interrupts import exit_code

    try:
        late = held.release()
    except BrokenPipeError:
        closed_pipe()
    if late is not None:
        from autopar_opt.cli.stopped import mark_said

        mark_said(late)
        typer.echo(f"autopar: {signal.Signals(late).name} arrived while the output was "
                   f"printed; it was printed whole (exit {exit_code(late)})", err=True)
        raise typer.Exit(exit_code(late))


def _call(func: Callable[..., Any], args: tuple, kwargs: dict, held: Any) -> None:
    """Run the command with :func:`guarded`'s handling (``held``: its held ``--json``
    stdout, or None)."""
    import signal
    import sys

    from autopar_opt.cli.errors import EXIT_NO_RESULT, CommandError
    from autopar_opt.cli.stopped import interrupted_error
    from autopar_opt.core.errors import SpecError, SpecProblem
    from autopar_opt.core.interrupts import (HeldSignals, StoppedBySignal,
                                             forget_received_signal)

    as_json = held is not None
    forget_received_signal()
    try:
        code = func(*args, **kwargs)
    except (KeyboardInterrupt, StoppedBySignal) as exc:
        # outside any search's guard: typer made SIGINT a silent exit 130, and --json
        # printed nothing (or, into a full pipe, half a document)
        signum = exc.signum if isinstance(exc, StoppedBySignal) else int(signal.SIGINT)
        with HeldSignals():       # a second Ctrl-C does not cut the message short
            if held is not None:
                held.drop()
            _fail_with(interrupted_error(signum), as_json)
    except BrokenPipeError:
        closed_pipe()          # before click's own EPIPE handling: exit 1, no word
    except CommandError as exc:
        _fail_with(exc, as_json)
    except SpecError as exc:
        _fail_with(CommandError.from_spec_error(exc), as_json)
    except RecursionError:
        _fail_with(CommandError([SpecProblem("input", "", None, "nested or linked too deeply "
                                             "to be processed", "give a file as the tool "
                                             "writes or documents it (a few levels of nesting)")],
                                "invalid input"), as_json)
    except MemoryError:
        # solve checks every model's size against --memory-limit before
        # building it (core/memory_budget.py); this is what is left (numpy tables, a
        # solver's own allocation)
        _fail_with(CommandError([SpecProblem("input", "", None, "the command ran out of "
                                             "memory; nothing was written", "give a smaller "
                                             "input or more memory, or (solve) a "
                                             "lower --memory-limit so larger models are "
                                             "refused before they are built; see the limits "
                                             "in the README ('Limits, interrupts and bad "
                                             "input')")],
                                "out of memory", EXIT_NO_RESULT), as_json)
    except Exception as exc:
        # a PlanError exists only if its module (autopar_opt.ir.pipeline, which
        # autopar_opt.cost.evaluate re-exports) was imported: not importing it up front
        # keeps the cost model out of commands that do not use it (start-up).
        # ``export`` reaches validate_plan without importing evaluate.
        import click

        if isinstance(exc, (click.exceptions.Exit, click.exceptions.ClickException,
                            click.exceptions.Abort, typer.Exit, typer.Abort)):
            raise            # a command's own exit code or click's usage message
        pipeline = sys.modules.get("autopar_opt.ir.pipeline")
        if pipeline is None or not isinstance(exc, pipeline.PlanError):
            _stopped_mid_step(exc, as_json, held)
            _internal_error(exc, as_json)
        _fail_with(CommandError([SpecProblem("plan", "", None, str(exc), "give a plan the "
                                             "spec's model and cluster can run")],
                                "invalid plan"), as_json, f"invalid plan: {exc}")
    if code:
        raise typer.Exit(int(code))


def _stopped_mid_step(exc: BaseException, as_json: bool, held: Any = None) -> None:
    """After a stop signal, an exception no part of the command expected is the signal's
    doing (its exception, raised mid-line, replaced by the C code running that line:
    :func:`autopar_opt.core.interrupts.received_signal`): exit 128 + the signal with a
    message saying so, not exit 70 "a bug in the tool". Returns when no signal came."""
    import signal

    from autopar_opt.cli.errors import CommandError
    from autopar_opt.core.errors import SpecProblem
    from autopar_opt.core.interrupts import exit_code, received_signal, signal_outside_guards

    signum = received_signal() or signal_outside_guards()
    if signum is None:
        return
    from autopar_opt.cli.stopped import mark_said

    mark_said(signum)
    name = signal.Signals(signum).name
    if held is not None:
        held.drop()           # what the step printed before it broke is not a document
    _fail_with(CommandError([SpecProblem(
        "command line", "signal", signum, f"stopped by {name}; the signal broke the step in "
        f"progress ({type(exc).__name__}: {str(exc)[:120]}); files written before it are "
        "whole (each is written atomically), no other was written", "run the command again "
        "and let it finish, or stop it once its search runs (a signal there writes the best "
        "plan found so far)")],
        "interrupted", exit_code(signum)), as_json)


def _internal_error(exc: BaseException, as_json: bool) -> None:
    """A bug in the tool reached the top of a command: say so in one message (the
    exception, the innermost frame of the tool's own code) and exit 70, not a traceback
    a user must read (``AUTOPAR_TRACEBACK=1`` re-raises it for whoever fixes it)."""
    import os
    import traceback

    from autopar_opt.cli.errors import EXIT_INTERNAL, CommandError
    from autopar_opt.core.errors import SpecProblem

    if os.environ.get("AUTOPAR_TRACEBACK"):
        raise exc
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "autopar_opt" in f.filename]
    where = ""
    if frames:
        last = frames[-1]
        where = f" (raised in {last.filename.rsplit('autopar_opt', 1)[-1].lstrip('/')}:" \
                f"{last.lineno}, {last.name})"
    detail = f"{type(exc).__name__}: {str(exc)[:300]}{where}"
    _fail_with(CommandError([SpecProblem("autopar-opt", "", None,
                                         f"a bug in the tool, not in the input: {detail}; "
                                         "outputs are written whole or not at all, so nothing "
                                         "half-written is left",
                                         "report it with the command and its input files; "
                                         "AUTOPAR_TRACEBACK=1 prints the traceback")],
                            "internal error", EXIT_INTERNAL), as_json)


def _fail_with(exc: Any, as_json: bool, text: str | None = None) -> None:
    """Print a :class:`CommandError` (text on stderr; with ``--json`` also on stdout as
    JSON) and exit with its code."""
    typer.echo(text or exc.text(), err=True)
    if as_json:
        typer.echo(json.dumps(exc.document(), indent=2))
    raise typer.Exit(exc.exit_code)


def locked_out(out_dir: Optional[str], option: str = "--out", single_file: bool = False) -> Any:
    """The output lock of a run writing into ``out_dir`` (:class:`autopar_opt.cli.lock.OutputLock`),
    taken after the option checks of :func:`autopar_opt.core.files.check_output_dir` pass."""
    import contextlib

    from autopar_opt.cli.lock import output_lock
    from autopar_opt.core.files import check_output_dir, check_output_file

    if out_dir and (check_output_file(out_dir, option) if single_file
                    else check_output_dir(out_dir, option)):
        return contextlib.nullcontext()     # the command reports it with its other options
    return output_lock(out_dir, option, single_file)
