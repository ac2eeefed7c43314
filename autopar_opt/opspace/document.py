"""plan.json of an operator-sharding solve."""

from __future__ import annotations

import math


def json_float(x: float | None) -> float | str | None:
    """JSON has no infinity: ±inf as the strings "inf"/"-inf" (as in every plan.json)."""
    if x is None:
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x)
