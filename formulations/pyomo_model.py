"""The Pyomo model of a formulation, written from its rows (Gurobi, SCIP, MPS/LP export).

:func:`pyomo_model` turns a :class:`~.direct.DirectFormulation` (the matrix
the families produced) into a ``ConcreteModel``: one indexed ``Var`` per
column block of :class:`~.layout.ColumnLayout` (``a`` also holds the fixed
``a[u,P-1] = 1`` that the rows fold), one indexed ``Constraint`` per row
block (the family's component name and index: ``stage_monotone[u,i]``), and
the objective ``c·x + T0``. No constraint is written here a second time: a
family added in :mod:`.families` or :mod:`.milp` reaches this model and the
HiGHS matrix alike. The MIQP's quadratic families (:mod:`.miqp`) are added
on top by :func:`~.formulation.build_formulation`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autopar_opt.formulations.base import FormulationError
from autopar_opt.formulations.layout import BINARY, DIMS, ColumnLayout
from autopar_opt.formulations.lazy_pyomo import numeric_expr, pyo


def _as_key(ix: tuple):
    """Pyomo's key of an index tuple (a plain value for one dimension)."""
    return ix[0] if len(ix) == 1 else ix


def _add_vars(m: Any, C: ColumnLayout, col_lo: np.ndarray, col_hi: np.ndarray) -> list:
    """One Var per block (``a[u,P-1]`` fixed to 1); the column-ordered var list."""
    refs: list = []
    for name in C.sizes:
        index, sl = C.index(name), C.block(name)
        lo, hi = col_lo[sl], col_hi[sl]
        domain = pyo.Binary if name in BINARY else pyo.Reals
        if DIMS[name] == 0:
            setattr(m, name, pyo.Var(domain=domain, bounds=(float(lo[0]), _ub(hi[0]))))
            refs.append(getattr(m, name))
            continue
        keys = [_as_key(ix) for ix in index]
        members = keys
        if name == "a":
            members = [(u, i) for u in range(C.n) for i in range(C.pp)]
        bounds = None if name in BINARY else _bounds_rule(keys, lo, hi)
        var = pyo.Var(pyo.Set(initialize=members, dimen=DIMS[name], ordered=True),
                      domain=domain, bounds=bounds)
        setattr(m, name, var)
        if name == "a":
            for u in range(C.n):
                var[u, C.pp - 1].fix(1)
        refs += [var[k] for k in keys]
    return refs


def _ub(value: float) -> float | None:
    return None if np.isinf(value) else float(value)


def _bounds_rule(keys: list, lo: np.ndarray, hi: np.ndarray):
    """Bounds of a block: one pair when uniform, else a per-index rule."""
    if len(keys) == 0 or (np.all(lo == lo[0]) and np.all(hi == hi[0])):
        return (float(lo[0]), _ub(hi[0])) if len(keys) else (0.0, None)
    table = {k: (float(a), _ub(b)) for k, a, b in zip(keys, lo, hi)}
    return lambda m, *ix: table[_as_key(ix)]


def _row(refs: list, cols: np.ndarray, vals: np.ndarray, lo: float, hi: float, name: str):
    """One row as a Pyomo relational expression (``Constraint.Skip`` for an empty,
    satisfied row)."""
    if len(cols) == 0:
        if lo <= 0.0 <= hi:
            return pyo.Constraint.Skip
        raise FormulationError(f"row {name} has no variable and cannot hold")
    body = numeric_expr.LinearExpression(constant=0.0, linear_coefs=vals.tolist(),
                                linear_vars=[refs[j] for j in cols])
    if lo == hi:
        return body == float(lo)
    return (None if np.isinf(lo) else float(lo), body, None if np.isinf(hi) else float(hi))


def pyomo_model(direct, name: str) -> Any:
    """The Pyomo ``ConcreteModel`` of ``direct`` (see module doc). Sets
    ``direct.matrix.var_refs`` to the model's variables in column order, so a
    backend that solves the matrix loads its answer into the model."""
    struct, mat = direct.structure, direct.matrix
    m = pyo.ConcreteModel(name=name)
    refs = _add_vars(m, struct.cols, mat.col_lo, mat.col_hi)
    vals, cols, ptr = direct.entries, struct.csr_cols, struct.indptr
    for component, index, rows in struct.blocks:
        exprs = {}
        for ix, r in zip(index, range(rows.start, rows.stop)):
            sl = slice(ptr[r], ptr[r + 1])
            exprs[_as_key(ix)] = _row(refs, cols[sl], vals[sl], mat.row_lo[r], mat.row_hi[r],
                                      struct.row_names[r])
        if index == [()]:                     # a scalar row: ``component``
            setattr(m, component, pyo.Constraint(rule=lambda m: exprs[()]))
            continue
        setattr(m, component, pyo.Constraint(
            pyo.Set(initialize=list(exprs), dimen=len(index[0]) if index else 1, ordered=True),
            rule=lambda m, *ix: exprs[_as_key(ix)]))
    nz = np.flatnonzero(mat.c)
    m.objective_constant = float(mat.offset)
    m.obj = pyo.Objective(expr=numeric_expr.LinearExpression(
        constant=m.objective_constant, linear_coefs=mat.c[nz].tolist(),
        linear_vars=[refs[j] for j in nz]), sense=pyo.minimize)
    mat.var_refs = refs
    return m
