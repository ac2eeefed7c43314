"""Reading the ``plan.json`` document written by ``autopar solve --out DIR``.

The report is built from this document only, never from solver objects, so
that a plan can be re-rendered years later from the JSON alone. This module
checks that the keys the report needs are present (reporting every problem in
one pass) and converts JSON's spellings of infinity (``"inf"``, ``"-inf"``)
to floats.
"""

from __future__ import annotations

import math
from typing import Any

#: Top-level keys every document must have.
REQUIRED_TOP = ("schema_version", "spec", "search_space", "cost_model", "status",
                "plan", "metrics", "certificate", "solver", "baselines")

#: Dotted paths required in every document.
REQUIRED_PATHS = (
    "spec.model.name", "spec.cluster.name", "spec.cluster.nodes", "spec.cluster.gpus_per_node",
    "spec.cluster.num_devices", "spec.cluster.device", "spec.cluster.hbm_gib",
    "spec.training.global_batch_size", "cost_model.assumptions", "certificate.primal",
    "certificate.lower_bound", "certificate.gap", "certificate.exact",
    "certificate.configurations", "solver.name", "solver.version", "solver.form",
    "solver.time_limit_s", "solver.rel_gap",
)

#: Paths required when ``plan`` is not null.
PLAN_PATHS = ("plan.pp", "plan.microbatches", "plan.schedule", "plan.stages")

#: Paths required when ``metrics`` is not null.
METRIC_PATHS = ("metrics.iteration_time_s", "metrics.samples_per_s", "metrics.tokens_per_s",
                "metrics.mfu", "metrics.memory_capacity_gib", "metrics.stages")

#: Keys of each ``metrics.stages[i]`` entry.
STAGE_METRIC_KEYS = ("time_s", "transfer_s", "sync_s", "weight_gib", "activation_gib",
                     "peak_memory_gib", "capacity_gib")

#: Keys of each ``plan.stages[i]`` entry.
PLAN_STAGE_KEYS = ("layers", "strategies", "first_rank", "last_rank")

#: Keys of each certificate configuration row.
CONFIG_KEYS = ("pp", "microbatches", "schedule", "status", "primal", "lower_bound", "gap",
               "time_s", "pruned_by")

STATUSES = ("optimal", "feasible", "infeasible", "no_plan", "interrupted")


class ReportInputError(ValueError):
    """The plan document is missing keys or has values of the wrong kind.

    ``problems`` lists every problem found (each names the dotted key).
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


_MISSING = object()


def lookup(doc: Any, path: str) -> Any:
    """Value at dotted ``path`` (``a.b.c``) or a sentinel when any part is missing."""
    node = doc
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _missing(doc: dict, paths: tuple[str, ...]) -> list[str]:
    return [f"missing key '{p}'" for p in paths if lookup(doc, p) is _MISSING]


def _missing_in_rows(rows: Any, where: str, keys: tuple[str, ...]) -> list[str]:
    if not isinstance(rows, list):
        return [f"'{where}' must be a list"]
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            out.append(f"'{where}[{i}]' must be an object")
            continue
        out += [f"missing key '{where}[{i}].{k}'" for k in keys if k not in row]
    return out


def validate_document(doc: Any) -> list[str]:
    """Every problem that stops the report from being rendered (empty when none).

    Checks presence of keys and the shape of lists; numeric conversion errors
    are reported by :func:`to_float` when the value is used.
    """
    if not isinstance(doc, dict):
        return ["the document must be a JSON object"]
    problems = [f"missing key '{k}'" for k in REQUIRED_TOP if k not in doc]
    if problems:
        return problems
    problems += _missing(doc, REQUIRED_PATHS)
    if doc["status"] not in STATUSES:
        problems.append(f"'status' is {doc['status']!r}; expected one of {', '.join(STATUSES)}")
    if doc["plan"] is not None:
        problems += _missing(doc, PLAN_PATHS)
        problems += _missing_in_rows(lookup(doc, "plan.stages"), "plan.stages", PLAN_STAGE_KEYS)
    if doc["metrics"] is not None:
        problems += _missing(doc, METRIC_PATHS)
        problems += _missing_in_rows(lookup(doc, "metrics.stages"), "metrics.stages",
                                     STAGE_METRIC_KEYS)
    configs = lookup(doc, "certificate.configurations")
    if configs is not _MISSING:
        problems += _missing_in_rows(configs, "certificate.configurations", CONFIG_KEYS)
    problems += _missing_in_rows(doc["baselines"], "baselines", ("name", "metrics", "note"))
    if doc["status"] == "infeasible" and doc["plan"] is None:
        problems += _missing(doc, ("infeasibility.reason", "infeasibility.least_memory_gib",
                                   "infeasibility.capacity_gib", "infeasibility.advice"))
    if doc["plan"] is not None and doc["metrics"] is None:
        problems.append("'metrics' is null but 'plan' is set: a plan needs its metrics")
    return problems


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
