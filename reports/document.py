"""Reading the ``plan.json`` document written by ``autopar solve --out DIR``.

The report is built from this document only, never from solver objects, so
that a plan can be re-rendered years later from the JSON alone. This module
reads the document through its typed model
(:class:`autopar_opt.core.document.PlanDocument`: every problem in one pass)
and converts the one spelling of infinity (``"inf"``, ``"-inf"``) to floats.
"""

from __future__ import annotations

import math
from typing import Any

from autopar_opt.core.document import PlanDocument, document_problems

class ReportInputError(ValueError):
    """The plan document is missing keys or has values of the wrong kind.

    ``problems`` lists every problem found (each names the dotted key).
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def validate_document(doc: Any) -> list[str]:
    """Every problem that stops the report from being rendered (empty when none):
    ``doc`` read through the typed model of ``plan.json``
    (:class:`autopar_opt.core.document.PlanDocument`, the model the
    search's documents are checked against and ``autopar schema --plan`` prints).
    """
    return document_problems(doc, PlanDocument)


def to_float(value: Any, where: str) -> float | None:
    """A JSON number or ``"inf"``/``"-inf"``/``"nan"`` as float; None stays None.

    Raises :class:`ReportInputError` naming ``where`` for anything else.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ReportInputError([f"'{where}' must be a number, got {value!r}"])
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in ("inf", "+inf", "-inf", "infinity",
                                                             "-infinity", "nan"):
        return float(value.strip().lower().replace("infinity", "inf"))
    raise ReportInputError([f"'{where}' must be a number or \"inf\"/\"-inf\", got {value!r}"])


def is_finite(x: float | None) -> bool:
    """True for a real, finite number."""
    return x is not None and math.isfinite(x)
