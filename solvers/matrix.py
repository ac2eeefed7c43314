"""Transitional re-export: the matrix form now lives in :mod:`autopar_opt.core.matrix`.

Kept only so that branches written before the move keep importing; new code
imports ``autopar_opt.core.matrix``. Remove once no branch uses this path.
"""

from autopar_opt.core.matrix import MatrixForm, compile_matrix, load_values  # noqa: F401

__all__ = ["MatrixForm", "compile_matrix", "load_values"]
