"""Backends by name, imported lazily (linopy ``Solver.from_name``).

``get_backend(name)`` returns an instance; ``check_accepts`` refuses a
problem class the backend does not declare, before anything is built, with
the fix in the message.
"""

from __future__ import annotations

import importlib

from autopar_opt.solvers.base import Backend, SolverMismatch
from autopar_opt.core.result import ProblemClass

#: name -> "module:Class"; HiGHS is the default (bundled with highspy).
BACKENDS: dict[str, str] = {
    "highs": "autopar_opt.solvers.highs:HighsBackend",
    "gurobi": "autopar_opt.solvers.gurobi:GurobiBackend",
    "scip": "autopar_opt.solvers.scip:ScipBackend",
    "dp": "autopar_opt.solvers.dp.backend:DPBackend",
}
DEFAULT_BACKEND = "highs"
#: The default solver name: not a backend but the portfolio (issue 35): the exact
#: DP where it is exact, then the MIP backend :func:`resolve_auto` picks by features.
AUTO = "auto"


def backend_names() -> list[str]:
    """Registered backend names (default first)."""
    return [DEFAULT_BACKEND] + sorted(n for n in BACKENDS if n != DEFAULT_BACKEND)


def solver_names() -> list[str]:
    """What ``--solver`` and ``solver.name`` take: ``auto`` (the default), then the backends."""
    return [AUTO] + backend_names()


def resolve_auto(problem_class: ProblemClass = ProblemClass.milp) -> str:
    """The backend ``auto`` runs for ``problem_class``: the first available one, in
    :func:`backend_names` order, that accepts it, a backend solving a matrix
    directly (:attr:`Feature.matrix_input`) before the others. Chosen by the
    backends' declared ``accepts``/``features``, never by name; ValueError
    (with the fix) when no installed backend accepts it."""
    from autopar_opt.solvers.base import Feature

    takers = [n for n in backend_names() if problem_class in backend_class(n).accepts]
    takers.sort(key=lambda n: Feature.matrix_input not in backend_class(n).features)
    for name in takers:
        if get_backend(name).available()[0]:
            return name
    raise ValueError(f"no installed backend solves {problem_class.value} problems; install "
                     f"one of {', '.join(takers) or 'highspy'} (pip install highspy)")


def backend_class(name: str) -> type[Backend]:
    """The class of backend ``name`` (its declared ``accepts`` and ``features``)
    without instantiating it; ValueError listing the names when unknown."""
    key = name.strip().lower()
    if key not in BACKENDS:
        raise ValueError(f"unknown solver {name!r}; choose one of {', '.join(backend_names())}")
    module, cls = BACKENDS[key].split(":")
    try:
        return getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"solver {name!r} is registered but cannot be loaded ({exc}); "
                         f"use --solver highs") from exc


def get_backend(name: str = DEFAULT_BACKEND) -> Backend:
    """An instance of backend ``name``; ValueError listing the names when unknown."""
    return backend_class(name)()


def check_accepts(backend: Backend, problem_class: ProblemClass) -> None:
    """Raise :class:`SolverMismatch` (with the fix) unless ``backend`` accepts it."""
    if problem_class not in backend.accepts:
        raise SolverMismatch(backend.refusal(problem_class))


def default_form(backend: Backend) -> str:
    """``"miqp"`` when the backend solves it natively and not the MILP, else ``"milp"``.

    The MILP is the default everywhere it is accepted: it is exact and its LP
    relaxation is far tighter than the MIQP's continuous relaxation.
    """
    if ProblemClass.milp in backend.accepts:
        return "milp"
    if ProblemClass.miqp in backend.accepts:
        return "miqp"
    raise SolverMismatch(f"solver {backend.name!r} takes no algebraic form (it solves cost tables)")
