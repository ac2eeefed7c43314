"""Stopping a search on SIGINT (Ctrl-C), SIGTERM or SIGHUP without losing its incumbent.

While a :class:`InterruptGuard` is active, the first SIGINT, SIGTERM or SIGHUP
(the terminal hung up: an ssh session closed, a ``nohup``-less job's shell exited)
is recorded and raised as :class:`SearchInterrupted` in the main thread. The
search catches it between (or inside) configurations and returns what it has:
the incumbent, every configuration's record and the bounds proven so far. A
MIP solver running in C code is asked to stop through its interrupt callback
(see ``solvers/highs.py``) and returns its own incumbent and bound.

After the first signal the guard only records further signals, so writing
``plan.json`` and the report is not cut short; the command then exits with
128 + the signal number (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP), as a shell does.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType

#: Signals that stop a search (SIGHUP like SIGTERM: before, a closed terminal killed the
#: run with no output at all).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class SearchInterrupted(BaseException):
    """Raised by the guard's handler; a BaseException so no ``except Exception`` swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: The first stop signal a guard received in this command (:func:`received_signal`).
_RECEIVED: list[int] = []


def received_signal() -> int | None:
    """The first stop signal an :class:`InterruptGuard` received since
    :func:`forget_received_signal`, or None. The guard raises its exception at whatever
    line runs when the signal comes; C code on that line may replace it with its own (numpy
    comparing structured arrays turned it into "TypeError: Cannot compare structured arrays":
    exit 70, QA round 34). The command's wrapper reads an unexpected exception after a
    signal as the signal's doing (:mod:`autopar_opt.cli.guard`)."""
    return _RECEIVED[0] if _RECEIVED else None


def forget_received_signal() -> None:
    """Start a command with no signal recorded (commands run one after another in tests)."""
    _RECEIVED.clear()
    _OUTSIDE.clear()


def exit_code(signum: int) -> int:
    """The shell's exit code for a process stopped by ``signum`` (128 + number)."""
    return 128 + int(signum)


class StoppedBySignal(SystemExit):
    """SIGTERM or SIGHUP outside any :class:`InterruptGuard` (the command's start-up: reading
    the spec, after its output lock was taken; or after its search): a ``SystemExit`` with
    the shell's code (143, 129), so that every ``with`` block on the way out runs (the
    output lock releases its file and the folder it created) instead of the default action
    killing the process on the spot. ``signum``: the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(exit_code(signum))
        self.signum = signum


#: The first stop signal that came outside any guard (:func:`signal_outside_guards`).
_OUTSIDE: list[int] = []


def signal_outside_guards() -> int | None:
    """The first stop signal the handlers of :func:`stop_cleanly_outside_guards` received
    (outside any :class:`InterruptGuard`), or None. Like :func:`received_signal`, for the
    command's wrapper: C code running when the signal came may replace its exception with
    its own (pydantic building a schema turned a Ctrl-C into "SchemaError: ...
    KeyboardInterrupt": exit 70, "a bug in the tool", QA round 35)."""
    return _OUTSIDE[0] if _OUTSIDE else None


def _stop_outside_guards(signum: int, frame: FrameType | None) -> None:
    if not _OUTSIDE:
        _OUTSIDE.append(signum)
    raise StoppedBySignal(signum)


def _interrupt_outside_guards(signum: int, frame: FrameType | None) -> None:
    """SIGINT outside any guard: Python's own ``KeyboardInterrupt``, recorded."""
    if not _OUTSIDE:
        _OUTSIDE.append(signum)
    raise KeyboardInterrupt


def stop_cleanly_outside_guards() -> None:
    """For a command-line process: SIGTERM and SIGHUP left at their default action raise
    :class:`StoppedBySignal` from now on (SIGINT already raises ``KeyboardInterrupt``; it
    is recorded too, :func:`signal_outside_guards`).

    Without it, a SIGTERM in the second a command spends before its
    :class:`InterruptGuard` is installed (imports, the spec, cost tables) ended the
    process at once: exit status -15 and ``OUT/.autopar.lock`` left behind in an output
    folder the run had just created (QA round 34). A signal the process ignores (``nohup``
    sets SIGHUP to SIG_IGN) stays ignored. A guard replaces this handler while it is
    active and restores it on exit."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _stop_outside_guards)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt_outside_guards)


def _install(previous: dict[int, object], handler) -> None:
    """Install ``handler`` for every stop signal, keeping the handlers it replaces in
    ``previous`` (only in the main thread: signal handlers cannot be set elsewhere)."""
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, handler)


def _restore(previous: dict[int, object]) -> None:
    """Put back the handlers :func:`_install` replaced, and forget them."""
    for sig, handler in previous.items():
        signal.signal(sig, handler)  # type: ignore[arg-type]
    previous.clear()


class InterruptGuard:
    """Context manager installing the SIGINT/SIGTERM handlers for one command.

    Attributes
    ----------
    signum : the first signal received, or None.
    """

    def __init__(self, raise_as: type[BaseException] | None = None) -> None:
        """``raise_as``: the exception the first signal raises instead of
        :class:`SearchInterrupted` (a capacity sweep raises ``KeyboardInterrupt``,
        which the searches it runs do not catch, so no cut-short result is stored)."""
        self.signum: int | None = None
        self._raise_as = raise_as
        self._raise = True
        self._previous: dict[int, object] = {}

    @property
    def interrupted(self) -> bool:
        """True once a stop signal was received."""
        return self.signum is not None

    def should_stop(self) -> bool:
        """For polling loops (same as :attr:`interrupted`)."""
        return self.signum is not None

    def defer(self) -> None:
        """From now on only record signals (used while the outputs are written)."""
        self._raise = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
            if not _RECEIVED:
                _RECEIVED.append(signum)
        if first and self._raise:
            self._raise = False
            raise self._raise_as() if self._raise_as else SearchInterrupted(signum)

    def __enter__(self) -> "InterruptGuard":
        _install(self._previous, self._handle)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        _restore(self._previous)


class HeldSignals:
    """Context manager: while active, a stop signal is recorded (:attr:`signum`, the first)
    and not acted on, so that the step inside (printing a command's whole ``--json``
    document, or the message saying it was interrupted) is never cut in the middle; the
    caller acts on :attr:`signum` afterwards. Handlers are restored on exit; outside the
    main thread (no signal handlers there) it does nothing."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, object] = {}

    def _hold(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum

    def __enter__(self) -> "HeldSignals":
        _install(self._previous, self._hold)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        _restore(self._previous)
