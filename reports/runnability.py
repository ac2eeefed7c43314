"""The price of runnability in the plan report (issue 29).

Under a target (the framework that will launch the plan) ``autopar solve``
searches the space that framework can run and then the free per-layer space
(``target: none``) with the time left, and writes both certificates side by
side in ``plan.json`` as ``runnability``
(:meth:`autopar_opt.search.runnable.Runnability.to_dict`)::

    target: {framework, version, source}
    runnable_primal, runnable_lower_bound      # the runnable optimum and its bound
    free_primal, free_lower_bound, free_status # the free space's plan, bound and status
    free_time_s, price_low, price_high, note

``price = runnable optimum / free optimum − 1`` lies in ``[price_low,
price_high]``: the runnable bound against the free plan, and the runnable plan
against the free bound. The section shows it with the same rule as the console
(``cli/solve.py::runnability_line``): a range when both ends are known, else
"not priced" with the reason. A document written before the block (or without
a target) has no section.
"""

from __future__ import annotations

import math

from autopar_opt.reports.document import ReportInputError, to_float
from autopar_opt.reports.formatting import ROUNDING

#: Where a target came from (``Target.source``), as the report says it.
SOURCES = {"target": "the spec's target key",
           "training.runtime": "the spec's training.runtime",
           "--runnable-by": "the --runnable-by option"}

def _seconds(x: float | None) -> str:
    """Seconds to 6 significant digits (the console's precision): the two optima
    often differ in the fourth digit, which the report's ``fmt_time`` would hide."""
    if x is None or math.isnan(x):
        return "—"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:.6g} s"


def _pct(x: float | None) -> str:
    """A price as a percentage to 3 significant digits (the console's rule)."""
    if not _known(x):
        return "—"
    return "0%" if abs(x) < ROUNDING else f"{100 * x:.3g}%"


#: Relative width under which the two ends of the price are written as one value
#: (the console's rule).
SAME_ENDS = 1e-3


def runnability_section(doc: dict) -> dict | None:
    """Template context of ``doc["runnability"]`` (None when the document has none)."""
    run = doc.get("runnability")
    if not run:
        return None
    if not isinstance(run, dict):
        raise ReportInputError([f"'runnability' must be a mapping, got {run!r}"])
    target = run.get("target")
    if not isinstance(target, dict) or not target.get("framework"):
        raise ReportInputError([f"'runnability.target' must name a framework, got {target!r}"])
    num = {k: to_float(run.get(k), f"runnability.{k}") for k in
           ("runnable_primal", "runnable_lower_bound", "free_primal", "free_lower_bound",
            "free_time_s", "price_low", "price_high")}
    lo, hi = num["price_low"], num["price_high"]
    priced = _known(lo) and _known(hi)
    version = str(target.get("version") or "")
    source = str(target.get("source") or "")
    status = str(run.get("free_status") or "not_solved")
    return {
        "framework": str(target["framework"]),
        "version": version,
        "label": str(target["framework"]) + (f" {version}" if version else ""),
        "source": source,
        "source_text": SOURCES.get(source, source or "not recorded"),
        "runnable_primal": _seconds(num["runnable_primal"]),
        "runnable_lower_bound": _seconds(num["runnable_lower_bound"]),
        "free_primal": _seconds(num["free_primal"]),
        "free_lower_bound": _seconds(num["free_lower_bound"]),
        "free_status": status,
        "free_time": _seconds(num["free_time_s"]),
        "priced": priced,
        "price": price_text(lo, hi) if priced else "not priced",
        "price_low": _pct(lo),
        "price_high": _pct(hi),
        "note": str(run.get("note") or "") or (_why_wide(num, status) if priced
                                                  else _why_not_priced(num, status)),
        "unsearched": str(run.get("unsearched") or ""),     # absent in older documents
    }


def _known(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def price_text(lo: float, hi: float) -> str:
    """``"0.0235%"`` when the ends agree (the console's rule), else ``"0% – 1.23%"``."""
    if abs(hi - lo) <= SAME_ENDS * max(abs(hi), 1e-12) or max(abs(lo), abs(hi)) < ROUNDING:
        return _pct(lo)
    return f"{_pct(lo)} – {_pct(hi)}"


def _why_wide(num: dict, status: str) -> str:
    """Why a priced range is wide when the free search's plan is slower than the
    runnable one (the free space holds every runnable plan, so its search stopped
    before reaching them); empty otherwise."""
    free, runnable = num["free_primal"], num["runnable_primal"]
    if status != "optimal" and _known(free) and _known(runnable) and free > runnable:
        return (f"the free space's search ended {status} with a plan slower than the runnable "
                "one, so the low end is 0; a longer --time-limit narrows the range")
    return ""


def _why_not_priced(num: dict, status: str) -> str:
    """The reason an end of the price is unknown, from the figures themselves (a
    document whose ``note`` is empty)."""
    if not _known(num["runnable_primal"]):
        return "the runnable search found no plan"
    if not _known(num["free_primal"]):
        return f"the free space's search ended {status} without a plan"
    return f"the free space's search ended {status} without a finite positive lower bound"


__all__ = ["runnability_section"]
