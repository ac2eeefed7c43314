"""A tiny numpy builder for :class:`~autopar_opt.core.matrix.MatrixForm` models.

Variables are added in named blocks (index arrays come back), constraints in
vectorised blocks of COO triplets, so a 100k-row placement MILP is assembled in
numpy without Pyomo (the direct path is 50-100x faster, docs/DESIGN.md §5).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import scipy.sparse as sp

from autopar_opt.core.matrix import MatrixForm


class MatrixBuilder:
    """Accumulates columns and rows; :meth:`build` returns the ``MatrixForm``."""

    #: True for :class:`MatrixCounter`: a build function may skip work that only sets
    #: coefficients or bounds (never rows or columns) when only the size is wanted
    counting = False

    def __init__(self, check: Callable[[], None] | None = None) -> None:
        """``check`` (e.g. :func:`autopar_opt.core.deadline.deadline_check`) is called at
        every block of rows and before :meth:`build`, so a build that runs past a time
        limit stops there (it raises) instead of finishing first (QA round 13: the
        placement MILP on 2 x 8,192 devices took 6.8 s to build against a 5 s limit)."""
        self.check: Callable[[], None] = check or (lambda: None)
        self.lo: list[np.ndarray] = []
        self.hi: list[np.ndarray] = []
        self.integer: list[np.ndarray] = []
        self.names: list[str] = []
        self.ncols = 0
        self.rows: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self.row_lo: list[np.ndarray] = []
        self.row_hi: list[np.ndarray] = []
        self.nrows = 0
        self.cost: dict[int, float] = {}

    def add_vars(self, name: str, shape: tuple[int, ...], lo: float = 0.0, hi: float = 1.0,
                 integer: bool = False) -> np.ndarray:
        """A block of variables; returns their column indices with ``shape``."""
        idx = self._columns(shape, lo, hi)
        self.integer.append(np.full(idx.size, integer, dtype=bool))
        self.names.extend(f"{name}[{i}]" for i in range(idx.size))
        return idx

    def _columns(self, shape: tuple[int, ...], lo: float, hi: float) -> np.ndarray:
        """Columns and their bounds (what the builder and the counter both keep)."""
        count = int(np.prod(shape)) if shape else 1
        idx = np.arange(self.ncols, self.ncols + count).reshape(shape)
        self.lo.append(np.full(count, lo, dtype=float))
        self.hi.append(np.full(count, hi, dtype=float))
        self.ncols += count
        return idx

    def add_rows(self, row: np.ndarray, col: np.ndarray, val: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray) -> None:
        """Rows ``lo <= Σ val·x[col] <= hi``; ``row`` indexes within this block (0..len(lo)-1)."""
        self.check()
        lo = np.atleast_1d(np.asarray(lo, dtype=float))
        hi = np.atleast_1d(np.asarray(hi, dtype=float))
        self.rows.append(np.asarray(row, dtype=np.int64).ravel() + self.nrows)
        self.cols.append(np.asarray(col, dtype=np.int64).ravel())
        self.vals.append(np.asarray(val, dtype=float).ravel())
        self.row_lo.append(lo)
        self.row_hi.append(hi)
        self.nrows += lo.size

    def pairwise_le(self, left: np.ndarray, right: np.ndarray, rhs: float = 0.0) -> None:
        """Rows ``x[left_i] - x[right_i] <= rhs`` (elementwise)."""
        left, right = np.ravel(left), np.ravel(right)
        k = left.size
        r = np.arange(k)
        self.add_rows(np.concatenate([r, r]), np.concatenate([left, right]),
                      np.concatenate([np.ones(k), -np.ones(k)]), np.full(k, -np.inf),
                      np.full(k, rhs))

    def set_cost(self, col: int, value: float) -> None:
        self.cost[int(col)] = float(value)

    def build(self, start: np.ndarray | None = None) -> MatrixForm:
        self.check()
        c = np.zeros(self.ncols)
        for k, v in self.cost.items():
            c[k] = v
        a = sp.csr_array((np.concatenate(self.vals) if self.vals else np.zeros(0),
                          (np.concatenate(self.rows) if self.rows else np.zeros(0, np.int64),
                           np.concatenate(self.cols) if self.cols else np.zeros(0, np.int64))),
                         shape=(self.nrows, self.ncols))
        a.sum_duplicates()
        return MatrixForm(c=c, A=a, row_lo=np.concatenate(self.row_lo) if self.row_lo else np.zeros(0),
                          row_hi=np.concatenate(self.row_hi) if self.row_hi else np.zeros(0),
                          col_lo=np.concatenate(self.lo), col_hi=np.concatenate(self.hi),
                          integrality=np.concatenate(self.integer), offset=0.0,
                          columns=self.names, start=start)


class MatrixCounter(MatrixBuilder):
    """The same builder API that only counts: rows, columns and entries of the model a
    build function would make, known before the matrix exists (the memory budget,
    :mod:`autopar_opt.core.memory_budget`).

    Column bounds are kept (build functions write into ``lo``/``hi`` blocks and they are
    one number per column); entries and column names are not stored, so the count's
    peak is the largest single :meth:`add_rows` call, not the model. The entry count is
    exact when no ``(row, column)`` pair repeats and never below the built matrix's
    ``nnz`` (:meth:`MatrixBuilder.build` merges repeats)."""

    counting = True

    def __init__(self, check: Callable[[], None] | None = None) -> None:
        super().__init__(check)
        self.entries = 0

    def add_vars(self, name: str, shape: tuple[int, ...], lo: float = 0.0, hi: float = 1.0,
                 integer: bool = False) -> np.ndarray:
        return self._columns(shape, lo, hi)        # no names or integrality: counted only

    def add_rows(self, row: np.ndarray, col: np.ndarray, val: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray) -> None:
        self.check()
        self.entries += int(np.size(col))
        self.nrows += int(np.atleast_1d(np.asarray(lo)).size)

    def build(self, start: np.ndarray | None = None) -> None:  # type: ignore[override]
        """Nothing is built: read :meth:`size`."""
        return None

    def size(self):
        """The counted :class:`~autopar_opt.core.memory_budget.ModelSize`."""
        from autopar_opt.core.memory_budget import ModelSize
        return ModelSize(self.nrows, self.ncols, self.entries)
