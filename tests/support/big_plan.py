"""A large plan.json for the report's size tests (issue 33, row 9: a 20 MB plan.json gave
a 21 MB HTML report) and ``benchmarks/robustness/report_size.py``.

:func:`big_certificate_plan` takes a real plan.json (``tests/data/report/plan_feasible.json``)
and replaces its certificate by ``rows`` configurations as a time-limited search of a
large space writes them: one optimal row (the answer), a few left open at the global
bound, most left open (``not_solved`` above it, or ``feasible``: a plan, its gap above the
target), some proven infeasible and some pruned; every row with its solver's message (``message_chars`` long)
and its timings, so that 15,000 rows make a file of about 20 MB.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

from support import paths

SOURCE = paths.REPO / "tests" / "data" / "report" / "plan_feasible.json"

#: Configurations at the global bound besides the answer (all left open: not_solved).
AT_BOUND = 3


def big_certificate_plan(rows: int = 15_000, message_chars: int = 1_100) -> dict:
    """The plan document (see the module's docstring); its global bound is the minimum of
    its rows' bounds and its answer the optimal row's primal (plan_problems-consistent)."""
    doc = copy.deepcopy(json.loads(SOURCE.read_text()))
    cert = doc["certificate"]
    primal, lb = float(cert["primal"]), float(cert["lower_bound"])
    note = ("HiGHS: time limit reached before a feasible point; dual bound from the root "
            "relaxation with cuts; ") * (message_chars // 90 + 1)
    configs = []
    for i in range(rows):
        pp = 2 ** (i % 6)                     # 1 .. 32 stages
        kind = i % 10
        if i == 0:
            status, low, top = "optimal", primal * 0.996, primal
        elif i <= AT_BOUND:
            status, low, top = "not_solved", lb, None
        elif kind < 6:                       # most: open, a bound above the global one
            status, low, top = "not_solved", lb * (1.0 + 0.001 * (1 + i % 997)), None
        elif kind == 6:                      # open: a plan, its gap above the target
            status, low, top = "feasible", lb * 1.002, primal * 1.1
        elif kind in (7, 8):
            status, low, top = "infeasible", math.inf, None
        else:
            status, low, top = "pruned", primal * (1.0 + 0.0001 * (i % 89)), None
        gap = (top - low) / top if top is not None else "inf"
        configs.append({
            "pp": pp, "microbatches": 8 * pp, "schedule": "1f1b" if i % 2 else "interleaved",
            "status": status, "primal": top,
            "lower_bound": "inf" if low == math.inf else low,
            "gap": gap, "time_s": 0.01 * (i % 300),
            "timings": {"build": 0.001, "translate": 0.002, "solve": 0.01 * (i % 300)},
            "pruned_by": "bound >= incumbent" if status == "pruned" else None,
            "model_hash": f"sha256:{i:064x}", "message": note[:message_chars],
        })
    cert["configurations"] = configs
    return doc


def write_big_plan(path: Path, rows: int = 15_000, message_chars: int = 1_100) -> Path:
    """:func:`big_certificate_plan` written to ``path``."""
    path.write_text(json.dumps(big_certificate_plan(rows, message_chars)))
    return path
