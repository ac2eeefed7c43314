"""The ``dp`` backend: exact dynamic programming on cost tables, no MIP solver.

Registered as ``"dp"`` -> ``autopar_opt.solvers.dp:DPBackend``. The algorithms
live in :mod:`autopar_opt.solvers.dp`; this file only adapts them to :class:`Backend`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from autopar_opt.cost.tables import CostTables
from autopar_opt.solvers.base import Backend, SolverMismatch
from autopar_opt.core.result import ProblemClass, SolveResult


class DPBackend(Backend):
    """Exact for chains (any pp) and for DAGs with pp == 1; heuristic for DAGs with pp > 1."""

    name: ClassVar[str] = "dp"
    accepts: ClassVar[frozenset[ProblemClass]] = frozenset({ProblemClass.tables})

    def available(self) -> tuple[bool, str]:
        return True, ""

    def version(self) -> str:
        from autopar_opt import __version__
        return f"autopar-dp {__version__}"

    def solve_tables(self, tables: Any, *, time_limit_s: float | None = None,
                     rel_gap: float = 0.0) -> SolveResult:
        """Solve ``tables`` (``rel_gap`` is ignored: the DP is exact or says it is not)."""
        if not isinstance(tables, CostTables):
            raise SolverMismatch(f"the dp solver needs CostTables (from autopar_opt.cost.build_cost_tables), "
                                 f"got {type(tables).__name__}")
        if time_limit_s is not None and time_limit_s <= 0:
            raise ValueError(f"time_limit_s must be positive, got {time_limit_s}")
        from autopar_opt.solvers.dp import solve_dp
        return solve_dp(tables, time_limit_s)
