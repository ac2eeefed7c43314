"""The portfolio's method records as report rows: which method found the plan and which
proved the bound.

``autopar solve`` writes ``certificate.methods`` and ``autopar place`` writes
``details.methods`` (one :class:`autopar_opt.core.portfolio.MethodRecord` each: method,
status, primal, lower bound, time, message, stats, version). The terminal names them, but
the HTML report did not (QA round 36: the solve report's "Solver: highs HiGHS 1.15.1" was
the only attribution of a certificate the exact DP proved without loading HiGHS), so an
expert citing the report could not say what proved the bound. The rows keep the records'
order and every figure, times and bounds in the unit of the document.
"""

from __future__ import annotations

from typing import Any, Callable

from autopar_opt.reports.document import ReportInputError, to_float


def _stats_text(stats: Any) -> str:
    """``configurations 1, optimal 1`` from a record's ``stats`` (any JSON values)."""
    if not isinstance(stats, dict):
        return ""
    return ", ".join(f"{k} {v}" for k, v in stats.items())


def method_rows(records: Any, where: str, value_text: Callable[[float | None], str]) -> list[dict]:
    """One row per method record at ``where`` (``certificate.methods``), values written by
    ``value_text`` (the report's time format, or a plain number for unitless objectives).

    A missing list gives no rows; a list of non-objects, or a record without ``method`` or
    ``status``, raises :class:`ReportInputError` naming the key."""
    if records is None:
        return []
    if not isinstance(records, list):
        raise ReportInputError([f"'{where}' must be a list of method records, got "
                                f"{type(records).__name__}"])
    rows = []
    for i, rec in enumerate(records):
        at = f"{where}[{i}]"
        if not isinstance(rec, dict) or "method" not in rec or "status" not in rec:
            raise ReportInputError([f"'{at}' must be an object with 'method' and 'status'"])
        lb = to_float(rec.get("lower_bound"), f"{at}.lower_bound")
        time_s = to_float(rec.get("time_s"), f"{at}.time_s")
        what = "; ".join(t for t in (str(rec.get("message") or ""), _stats_text(rec.get("stats")),
                                     str(rec.get("version") or "")) if t)
        rows.append({"method": str(rec["method"]), "status": str(rec["status"]),
                     "primal": value_text(to_float(rec.get("primal"), f"{at}.primal")),
                     "lower_bound": value_text(lb),
                     "time": "—" if time_s is None else f"{time_s:.3g} s",
                     "what": what})
    return rows
