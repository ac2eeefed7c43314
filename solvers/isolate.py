"""Run a native solver in a forked child, so a crash of its C++ code is a failed
solve, not a dead command.

HiGHS is a C++ library loaded into the Python process; a segmentation fault in
it (HiGHS 1.15.1 on one DeepSeek-V3 configuration MILP of
``examples/deepseek_v3_2048_h800.yaml``, searched with ``--runnable-by none``:
reproducible from the arrays alone, gone when any option or coefficient moves)
killed ``autopar solve`` with no output. :func:`run_forked` runs the solve in a
``fork()``-ed child that shares the model by copy-on-write, sends the result
back pickled through a pipe and exits with ``os._exit`` (no atexit handlers, no
flush of the parent's buffers). The parent waits in Python, so a stop signal
(:class:`~autopar_opt.core.interrupts.SearchInterrupted`) is caught there as
before and relayed through one shared byte the child's interrupt callback polls
(the child ignores the stop signals itself: a Ctrl-C reaches the whole process
group). A child killed by a signal raises :class:`SolverCrashed`, which the
search handles like any failed solve (``search.engine._solve_or_fall_back``).

A solve given a ``deadline_s`` that its child has not answered by then is killed
(``SIGKILL``) and :class:`SolverTimedOut` raised: the caller's time limit holds even
where the solver does not check its own (HiGHS 1.15.1's root cut separation: one
round of 893 cuts on a 111k-column MILP ran 8.4 s past a 20 s ``time_limit`` with
its interrupt callback polled 4 times in the whole solve; benchmarks/runnable).

``AUTOPAR_SOLVER_ISOLATION=0`` solves in-process (as before, without the deadline);
systems without ``fork`` always do.
"""

from __future__ import annotations

import faulthandler
import mmap
import os
import pickle
import select
import signal
import time
from collections.abc import Callable
from typing import Any

#: Environment variable that turns the isolation off (``0``).
ENV = "AUTOPAR_SOLVER_ISOLATION"


class SolverCrashed(RuntimeError):
    """The solver's child process died (a signal, or no result written)."""


class SolverTimedOut(RuntimeError):
    """The solver's child did not answer by its deadline and was killed."""


def isolation_enabled() -> bool:
    """Whether solves run in a forked child (POSIX ``fork`` and not turned off)."""
    return hasattr(os, "fork") and os.environ.get(ENV, "1") != "0"


def run_forked(work: Callable[[Callable[[], bool]], Any], label: str,
               deadline_s: float | None = None) -> tuple[Any, bool]:
    """``work(stop_requested)`` in a forked child: (its return value, whether a stop
    was requested). ``stop_requested()`` is True once the parent caught a stop
    signal or died. An exception inside ``work`` is raised again here (as a
    RuntimeError with its text); a child killed by a signal raises
    :class:`SolverCrashed` naming ``label`` and the signal; a child that has not
    answered ``deadline_s`` seconds after the fork is killed and
    :class:`SolverTimedOut` raised."""
    from autopar_opt.core.interrupts import STOP_SIGNALS, SearchInterrupted

    began = time.monotonic()

    flag = mmap.mmap(-1, 1)             # MAP_SHARED | MAP_ANONYMOUS: seen by both
    parent = os.getpid()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:                        # the child: never returns
        code = 0
        try:
            os.close(read_fd)
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_IGN)
            faulthandler.disable()      # the parent reports a crash; no dump from here

            def stop_requested() -> bool:
                return flag[0] == 1 or os.getppid() != parent

            try:
                payload = pickle.dumps(("ok", work(stop_requested)))
            except BaseException as exc:    # noqa: BLE001 - reported to the parent
                payload = pickle.dumps(("error", f"{type(exc).__name__}: {exc}"))
            view = memoryview(payload)
            while view:
                view = view[os.write(write_fd, view):]
        except BaseException:           # noqa: BLE001 - the child must not unwind
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks: list[bytes] = []
    interrupted = timed_out = False
    try:
        while True:
            try:
                ready, _, _ = select.select([read_fd], [], [], 0.05)
                if not ready:
                    if deadline_s is not None and not chunks \
                            and time.monotonic() - began > deadline_s:
                        timed_out = True
                        os.kill(pid, signal.SIGKILL)
                        break
                    continue
                chunk = os.read(read_fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
            except SearchInterrupted:
                interrupted = True
                flag[0] = 1
    finally:
        os.close(read_fd)
        _, status = _wait(pid)
        flag.close()
    if timed_out:
        raise SolverTimedOut(f"{label} had not answered {deadline_s:.3g} s after it started "
                             "and was stopped")
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        raise SolverCrashed(f"{label} crashed in its child process ({name})")
    if not chunks:
        raise SolverCrashed(f"{label} exited without a result (exit status "
                            f"{os.WEXITSTATUS(status) if os.WIFEXITED(status) else status})")
    kind, value = pickle.loads(b"".join(chunks))
    if kind == "error":
        raise RuntimeError(value)
    return value, interrupted


def _wait(pid: int) -> tuple[int, int]:
    """``waitpid`` that a stop signal does not cut short."""
    from autopar_opt.core.interrupts import SearchInterrupted

    while True:
        try:
            return os.waitpid(pid, 0)
        except (InterruptedError, SearchInterrupted):
            continue
