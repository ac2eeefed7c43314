"""Spec files: loading, validation with every problem reported at once, and building.

>>> from autopar_opt.spec import load_spec           # doctest: +SKIP
>>> spec = load_spec("examples/quickstart.yaml")     # doctest: +SKIP
>>> spec.graph, spec.cluster, spec.training, spec.plan  # doctest: +SKIP

The error types are imported eagerly (cheap, used everywhere); the loaders and
the pydantic schema on first use (PEP 562), so that a command that only needs
``SpecError`` (``autopar place``) does not import pydantic at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autopar_opt.core.lazy import lazy_exports

from autopar_opt.core.errors import SpecError, SpecProblem

_LAZY = {"SolverOptions": "autopar_opt.spec.build_run", "SpecFile": "autopar_opt.spec.schema",
         "json_schema": "autopar_opt.spec.schema", "Spec": "autopar_opt.spec.spec",
         "build_spec": "autopar_opt.spec.spec", "load_spec": "autopar_opt.spec.spec"}

__all__ = ["SolverOptions", "Spec", "SpecError", "SpecFile", "SpecProblem", "build_spec",
           "json_schema", "load_spec"]

if TYPE_CHECKING:  # pragma: no cover
    from autopar_opt.spec.build_run import SolverOptions  # noqa: F401
    from autopar_opt.spec.schema import SpecFile, json_schema  # noqa: F401
    from autopar_opt.spec.spec import Spec, build_spec, load_spec  # noqa: F401


__getattr__ = lazy_exports(__name__, _LAZY)[0]
