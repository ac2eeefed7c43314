"""Solver chatter never reaches stdout: stdout belongs to the command's own output.

HiGHS prints some messages with C ``printf`` whatever its ``output_flag``
(memory allocation failures, some licence and presolve notices), and so may
any native library a backend loads; with ``--json`` they broke the JSON on
stdout (issue 35). :func:`stdout_to_stderr` points file descriptor 1 at
stderr for the duration of a solve, so whatever native code writes there
lands on stderr; Python writes to ``sys.stdout`` in the block go there too.
Where stdout is not a real file (a test runner's capture), nothing is changed.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Inside the block, file descriptor 1 writes to stderr (see the module docstring)."""
    try:
        out_fd, err_fd = sys.stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):     # captured streams: no descriptors
        yield
        return
    sys.stdout.flush()
    saved = os.dup(out_fd)
    try:
        os.dup2(err_fd, out_fd)
        yield
    finally:
        try:
            sys.stdout.flush()
        finally:
            os.dup2(saved, out_fd)
            os.close(saved)
