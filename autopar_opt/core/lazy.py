"""PEP 562 lazy exports, shared by the packages that re-export names.

A package lists ``public name -> defining submodule`` and gets a module-level
``__getattr__``/``__dir__`` that import the submodule on first use and cache the
value in the package's namespace, so ``import autopar_opt.<sub>`` does not pay
for what a command never touches (start-up is what its user waits for).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


def lazy_exports(package: str, table: dict[str, str]) -> tuple[Callable[[str], Any],
                                                               Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for ``package`` serving ``table``'s names."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        vars(sys.modules[package])[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__
