"""The family API: each constraint family is written once, as rows (docs/DESIGN.md §3).

A constraint family is a pair of functions registered with :func:`family`:

- ``rows(R, C, key)`` appends the family's rows to ``R`` (:class:`Rows`):
  index arrays into the columns of ``C`` (:class:`~.layout.ColumnLayout`),
  constant coefficients, bounds and the Pyomo component name and index of
  every row. It reads only the :class:`~.layout.StructureKey`, never a cost.
  Entries or row bounds that depend on costs are written as 0 in a block
  registered under a *slot* name;
- ``fill(F)`` (optional) writes those cost-dependent values for one
  configuration into the slots (:class:`Fill`), and any objective term.

Both the HiGHS matrix (:mod:`.direct`: the rows cached per structure, only
``fill`` rerun per configuration) and the Pyomo model for Gurobi, SCIP and
MPS/LP export (:mod:`.pyomo_model`, built from that same matrix) come from
these definitions, so adding a family is one decorated function (plus its
``fill`` when it reads costs). Families run in ``order``; the row order of
the matrix is the order of the families, then of their blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from autopar_opt.formulations.layout import ColumnLayout, StructureKey, index_name

FORMS = frozenset({"milp", "miqp"})


class Rows:
    """Rows accumulated block by block in COO form, with bounds and names."""

    def __init__(self) -> None:
        self.rows: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self.lo: list[np.ndarray] = []
        self.hi: list[np.ndarray] = []
        #: (component, index of each row, row slice) per block, in row order
        self.blocks: list[tuple[str, list[tuple], slice]] = []
        self.slots: dict[str, tuple[slice, slice]] = {}
        self.num_rows = 0
        self.nnz = 0

    def add(self, component: str, index, rows, cols, vals, lo, hi,
            slot: str | None = None) -> tuple[slice, slice]:
        """Append one row per entry of ``index`` (tuples, or ``zip``-able arrays)
        named ``component[index]``; ``rows`` are local (0-based) row indices of the
        entries. Under ``slot``, :meth:`Fill.entries` / :meth:`Fill.rows` find the
        block again. Returns the row slice and the entry slice."""
        index = list(index)          # python ints: the families pass ``.tolist()`` values
        m = len(index)
        cols = np.asarray(cols, dtype=np.int64).ravel()
        self.rows.append(np.asarray(rows, dtype=np.int64).ravel() + self.num_rows)
        self.cols.append(cols)
        self.vals.append(np.broadcast_to(np.asarray(vals, dtype=float), cols.shape).copy())
        self.lo.append(np.broadcast_to(np.asarray(lo, dtype=float), (m,)).copy())
        self.hi.append(np.broadcast_to(np.asarray(hi, dtype=float), (m,)).copy())
        out = slice(self.num_rows, self.num_rows + m), slice(self.nnz, self.nnz + len(cols))
        self.blocks.append((component, index, out[0]))
        if slot is not None:
            self.slots[slot] = out
        self.num_rows += m
        self.nnz += len(cols)
        return out

    def names(self) -> list[str]:
        """Row names in row order (``component[index]``)."""
        return [index_name(comp, ix) for comp, index, _ in self.blocks for ix in index]

    def stack(self) -> tuple[np.ndarray, ...]:
        cat = lambda parts, dt: np.concatenate(parts).astype(dt) if parts else np.zeros(0, dt)
        return (cat(self.rows, np.int64), cat(self.cols, np.int64), cat(self.vals, float),
                cat(self.lo, float), cat(self.hi, float))


class CountingRows(Rows):
    """The same family API that only counts rows and entries (the memory budget: a
    structure's size is known before it is built; :func:`count`). Nothing is stored,
    so the count's peak is one family block's index arrays, not the matrix."""

    def add(self, component: str, index, rows, cols, vals, lo, hi,
            slot: str | None = None) -> tuple[slice, slice]:
        m = len(index) if hasattr(index, "__len__") else sum(1 for _ in index)
        k = int(np.size(cols))
        out = slice(self.num_rows, self.num_rows + m), slice(self.nnz, self.nnz + k)
        self.num_rows += m
        self.nnz += k
        return out


@dataclass
class Fill:
    """One configuration's coefficients, written into a copy of the structure.

    ``mats[e]`` holds edge ``e``'s layout-pair cost matrices (``"in"``,
    ``"intra"``, ``"inter"``); ``data`` are the COO entry values in
    :class:`Rows` order, ``lo``/``hi`` the row bounds, ``c`` and ``offset``
    the objective.
    """

    tables: Any
    key: StructureKey
    C: ColumnLayout
    mats: list[dict[str, np.ndarray]]
    slots: dict[str, tuple[slice, slice]]
    data: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    c: np.ndarray
    offset: float = 0.0

    def has(self, slot: str) -> bool:
        return slot in self.slots

    def rows(self, slot: str) -> slice:
        return self.slots[slot][0]

    def entries(self, slot: str) -> slice:
        return self.slots[slot][1]


@dataclass(frozen=True)
class Family:
    """A registered constraint family (see module doc)."""

    rows: Callable[[Rows, ColumnLayout, StructureKey], None]
    fill: Callable[[Fill], None] | None
    forms: frozenset[str]
    order: int

    @property
    def name(self) -> str:
        return self.rows.__name__


_REGISTRY: list[Family] = []


def family(order: int, forms=FORMS, fill: Callable[[Fill], None] | None = None):
    """Register ``rows`` as a constraint family of ``forms``, run at position
    ``order`` (ascending), with its coefficient step ``fill``."""
    def register(rows: Callable) -> Callable:
        if any(f.order == order for f in _REGISTRY):
            raise ValueError(f"two families at order {order}")
        _REGISTRY.append(Family(rows, fill, frozenset(forms), order))
        return rows
    return register


def families_of(form: str) -> list[Family]:
    """The families of ``form`` in row order."""
    from autopar_opt.formulations import families, milp  # noqa: F401  (they register)
    return sorted((f for f in _REGISTRY if form in f.forms), key=lambda f: f.order)


@dataclass
class RowsResult:
    """What :func:`collect` returns: the stacked COO rows and their metadata."""

    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    blocks: list[tuple[str, list[tuple], slice]] = field(default_factory=list)
    slots: dict[str, tuple[slice, slice]] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)


def collect(C: ColumnLayout, key: StructureKey) -> RowsResult:
    """Run every family of ``key.form`` (the structure step; no cost is read)."""
    R = Rows()
    for fam in families_of(key.form):
        fam.rows(R, C, key)
    rows, cols, vals, lo, hi = R.stack()
    return RowsResult(rows, cols, vals, lo, hi, R.blocks, R.slots, R.names())


def count(C: ColumnLayout, key: StructureKey) -> tuple[int, int]:
    """Rows and structural entries :func:`collect` would make, without making them."""
    R = CountingRows()
    for fam in families_of(key.form):
        fam.rows(R, C, key)
    return R.num_rows, R.nnz


def grid(*sizes: int) -> list[np.ndarray]:
    """Flattened index grids, last index fastest."""
    return [g.ravel() for g in np.meshgrid(*[np.arange(s) for s in sizes], indexing="ij")]
