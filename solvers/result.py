"""Transitional re-export: these types now live in :mod:`autopar_opt.core.result`.

Kept only so that branches written before the move keep importing; new code
imports ``autopar_opt.core.result``. Remove once no branch uses this path.
"""

from autopar_opt.core.result import ProblemClass, SolveResult, Termination, relative_gap  # noqa: F401

__all__ = ["ProblemClass", "SolveResult", "Termination", "relative_gap"]
