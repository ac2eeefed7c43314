"""The time limit of a command as one wall-clock budget.

``autopar solve --time-limit S`` promises an answer within ``S`` seconds of
wall clock for the *whole command* (issue 15): reading the spec, building cost
tables, the warm starts, the MIP solves, the baselines and writing the
outputs. A :class:`Budget` starts when the process started (read from
``/proc/self/stat`` on Linux, so interpreter start-up and imports are
counted) or, when that is unknown, when the command started; each phase is
given a deadline from it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass


def process_age_s() -> float:
    """Seconds since this process started (0.0 where ``/proc`` is unavailable)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as handle:
            uptime = float(handle.read().split()[0])
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")   # field 22: starttime
        return max(0.0, uptime - started)
    except (OSError, ValueError, IndexError):
        return 0.0


@dataclass(frozen=True)
class Budget:
    """``total_s`` seconds of wall clock from ``started_at`` (a ``time.perf_counter()`` value)."""

    total_s: float
    started_at: float

    @classmethod
    def from_now(cls, total_s: float, already_spent_s: float = 0.0) -> "Budget":
        """A budget of which ``already_spent_s`` seconds are already gone."""
        return cls(total_s, time.perf_counter() - already_spent_s)

    @property
    def deadline(self) -> float:
        """The ``time.perf_counter()`` value at which the budget is spent."""
        return self.started_at + self.total_s

    def elapsed(self) -> float:
        return time.perf_counter() - self.started_at

    def remaining(self) -> float:
        """Seconds left (negative once overrun)."""
        return self.deadline - time.perf_counter()
