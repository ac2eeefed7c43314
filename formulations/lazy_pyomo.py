"""Pyomo, imported on first use.

``import pyomo.environ`` costs about 0.7 s of CPU, and once Pyomo is loaded
its dependency hooks also import ``scipy.stats``, ``scipy.integrate`` and
``scipy.spatial`` (about 1.5 s more). The HiGHS search never builds a Pyomo
model (it uses the direct matrix, :mod:`.direct`), so the formulation modules
reach Pyomo through :data:`pyo`, a proxy that imports it on the first
attribute access. A 2-second ``--time-limit`` is otherwise spent on imports.
"""

from __future__ import annotations

import importlib
from typing import Any


class _Lazy:
    """A module proxy: ``_Lazy("pyomo.environ").Var`` imports ``pyomo.environ`` then."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


#: ``pyomo.environ``, imported on first use.
pyo: Any = _Lazy("pyomo.environ")
#: ``pyomo.opt``, imported on first use.
pyomo_opt: Any = _Lazy("pyomo.opt")
#: ``pyomo.core.expr.numeric_expr`` (``LinearExpression``), imported on first use.
numeric_expr: Any = _Lazy("pyomo.core.expr.numeric_expr")
