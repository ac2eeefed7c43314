"""Deadlines inside long phases: one exception and one cheap check.

A phase that may run long on a large input (condensing a placement graph,
coarsening it, a heuristic's bisection, reading a million-node file) takes a
``check`` callable and calls it between steps; the check raises
:class:`PhaseDeadline` once ``time.perf_counter()`` passes the deadline. The
caller catches it and answers with what it has (issue 33: every phase of
``place`` honours the command's time limit).
"""

from __future__ import annotations

import time
from typing import Callable


class PhaseDeadline(Exception):
    """The deadline passed inside a phase; the caller keeps what was done before it."""


def deadline_check(deadline: float | None) -> Callable[[], None]:
    """A check raising :class:`PhaseDeadline` after ``deadline`` (a ``perf_counter``
    value); a no-op when ``deadline`` is None."""
    if deadline is None:
        return lambda: None
    clock = time.perf_counter

    def check() -> None:
        if clock() > deadline:
            raise PhaseDeadline()
    return check
