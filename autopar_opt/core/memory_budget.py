"""Memory as a budget: the size of a model before it is built, and the budget it must fit.

Every model build estimates its size first (rows, columns and non-zeros of
the matrix, :class:`ModelSize`) and is refused, or another method chosen,
when it would exceed the :class:`MemoryBudget`: a stated fraction of the
machine's memory (:data:`DEFAULT_RAM_FRACTION`), or ``--memory-limit``.

:meth:`ModelSize.bytes` prices a MILP as it goes through the matrix path
(numpy COO triplets -> CSR -> the CSC copy handed to HiGHS -> HiGHS's model
and its presolved copy): :data:`BYTES_PER_NONZERO` per non-zero and
:data:`BYTES_PER_LINE` per row or column. Both are measured, not fitted to
the cases they guard: ``benchmarks/memory/run.py`` builds random sparse
MILPs of 1-4 million non-zeros and 0.2-0.8 million rows plus columns and
reads the process's peak resident memory after a short HiGHS run (results
in ``benchmarks/memory/RESULTS.md``). Branch and bound may grow HiGHS's node
queue beyond that; the estimate covers building, loading and presolve.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

GIB = float(1 << 30)

#: Measured bytes per non-zero and per row or column of a MILP on the matrix path
#: (benchmarks/memory/RESULTS.md: least squares over four random MILPs of 1-4 million
#: non-zeros, peak RSS of build + highspy passModel + 3 s of HiGHS; residuals -2% to +9%).
BYTES_PER_NONZERO = 70.0
BYTES_PER_LINE = 408.0

#: Share of the machine's memory a command may use by default (``--memory-limit`` overrides).
DEFAULT_RAM_FRACTION = 0.5


@dataclass(frozen=True)
class ModelSize:
    """Rows, columns and non-zeros of a matrix model, known before it is built."""

    rows: int
    cols: int
    nonzeros: int

    def bytes(self) -> float:
        """Memory the model takes through the matrix path (see the module docstring)."""
        return BYTES_PER_NONZERO * self.nonzeros + BYTES_PER_LINE * (self.rows + self.cols)

    def describe(self) -> str:
        return f"{self.rows:,} rows, {self.cols:,} columns, {self.nonzeros:,} non-zeros"


def machine_memory_bytes() -> float | None:
    """Total memory of the machine (``/proc/meminfo`` MemTotal, else sysconf); None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return float(line.split()[1]) * 1024.0
    except (OSError, ValueError, IndexError):
        pass
    try:
        return float(os.sysconf("SC_PAGE_SIZE")) * float(os.sysconf("SC_PHYS_PAGES"))
    except (OSError, ValueError, AttributeError):
        return None


@dataclass(frozen=True)
class MemoryBudget:
    """The bytes one command's models may take, and where that figure comes from."""

    bytes: float
    source: str

    @classmethod
    def default(cls) -> "MemoryBudget":
        """:data:`DEFAULT_RAM_FRACTION` of the machine's memory (8 GiB when it is unknown)."""
        total = machine_memory_bytes()
        if total is None:
            return cls(8 * GIB, "8 GiB (the machine's memory is unknown; set --memory-limit)")
        return cls(DEFAULT_RAM_FRACTION * total,
                   f"{DEFAULT_RAM_FRACTION:.0%} of the machine's {total / GIB:.1f} GiB")

    @classmethod
    def of(cls, limit_gib: float | None) -> "MemoryBudget":
        """``--memory-limit`` in GiB, or the default when None."""
        if limit_gib is None:
            return cls.default()
        return cls(float(limit_gib) * GIB, f"--memory-limit {limit_gib:g} GiB")

    def admits(self, need_bytes: float) -> bool:
        return need_bytes <= self.bytes

    def describe(self) -> str:
        return f"{_size(self.bytes)} ({self.source})"

    def refuses(self, size: ModelSize, what: str) -> str | None:
        """The refusal of the model ``what`` (e.g. "the MILP") of counted ``size`` when it
        would exceed this budget (:meth:`refusal`, naming its rows, columns and non-zeros);
        None when it fits. Every route's check before a build."""
        if self.admits(size.bytes()):
            return None
        return self.refusal(f"{what} ({size.describe()})", size.bytes())

    def refusal(self, what: str, need_bytes: float) -> str:
        """Why a model is not built, with the fix."""
        return (f"not built: {what} would take about {_size(need_bytes)}, over the memory "
                f"budget of {self.describe()}; raise --memory-limit if the machine has the memory")


def _size(nbytes: float) -> str:
    """GiB with two decimals; MiB below 0.01 GiB (a tiny --memory-limit still reads)."""
    return f"{nbytes / GIB:.2f} GiB" if nbytes >= 0.01 * GIB else f"{nbytes / 2**20:.3g} MiB"


class OverBudget(Exception):
    """A model was counted and not built: it would exceed the memory budget.
    ``size`` is the count, ``str(exc)`` the refusal (:meth:`MemoryBudget.refusal`)."""

    def __init__(self, size: ModelSize, message: str) -> None:
        super().__init__(message)
        self.size = size
