"""Spec files: loading, validation with every problem reported at once, and building.

>>> from autopar_opt.spec import load_spec           # doctest: +SKIP
>>> spec = load_spec("examples/quickstart.yaml")     # doctest: +SKIP
>>> spec.graph, spec.cluster, spec.training, spec.plan  # doctest: +SKIP
"""

from autopar_opt.spec.build_run import SolverOptions
from autopar_opt.spec.errors import SpecError, SpecProblem
from autopar_opt.spec.schema import SpecFile, json_schema
from autopar_opt.spec.spec import Spec, build_spec, load_spec

__all__ = ["SolverOptions", "Spec", "SpecError", "SpecFile", "SpecProblem", "build_spec",
           "json_schema", "load_spec"]
