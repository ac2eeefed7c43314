"""One way to write an interval's two ends, for every output that prints one.

The 80% interval of an iteration time was written three ways: ``.3g`` per end in the
terminal and plan.json (``9.23-17 s``, ``1.07-1.4 s``: each end rounded on its own, the
upper end losing its trailing zero and so showing fewer digits than the lower), ``.4g``
in solve's comparison line (``1.067-1.404 s`` for the interval estimate printed as
``1.07-1.4 s``) and fixed decimals in the report (``0.864 – 1.138 s``, ``62.20 – 81.80
ms``: trailing zeros the figure does not have). :func:`range_text` is the one rule:

* both ends with the same number of decimals, as many as give the larger end three
  significant digits (the precision the model's error bar supports: its ends come from
  a few dozen residuals), so the two ends are read at one precision;
* decimals that are zero on both ends are dropped together (``40-90 days``, not
  ``40.0-90.0``), never on one end alone;
* thousands grouped (``1,234-2,345``) from 1,000 up.

:func:`point_text` writes the estimate an interval sits beside with five significant
digits in fixed decimals, so it always shows more digits than its interval's ends.
"""

from __future__ import annotations

import math

#: Significant digits of an interval's larger end.
RANGE_DIGITS = 3
#: Significant digits of a point estimate printed beside an interval.
POINT_DIGITS = 5


def _decimals(top: float, digits: int) -> int:
    """Decimals that give ``top`` (> 0) ``digits`` significant digits after rounding."""
    places = max(0, digits - 1 - math.floor(math.log10(top)))
    if places and round(top, places) >= 10 ** (digits - places):   # 9.996 -> 10.00: one less
        places -= 1
    return places


def _fixed(x: float, places: int) -> str:
    return f"{x:,.{places}f}" if abs(x) >= 1000 else f"{x:.{places}f}"


def range_text(low: float, high: float, unit: str = "", sep: str = "-") -> str:
    """``low`` and ``high`` at one precision: ``range_text(9.231, 17.02, "s")`` is
    ``"9.2-17.0 s"``; ``range_text(0.8644, 1.138, "s")`` is ``"0.86-1.14 s"``;
    ``range_text(40, 90, "days")`` is ``"40-90 days"``. A non-finite end is written as
    Python writes it."""
    tail = f" {unit}" if unit else ""
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{low}{sep}{high}{tail}"
    top = max(abs(low), abs(high))
    places = _decimals(top, RANGE_DIGITS) if top > 0 else 0
    while places and all(float(_fixed(x, places - 1).replace(",", "")) ==
                         float(_fixed(x, places).replace(",", "")) for x in (low, high)):
        places -= 1                 # a zero on both ends, dropped from both
    return f"{_fixed(low, places)}{sep}{_fixed(high, places)}{tail}"


def point_text(x: float) -> str:
    """A point estimate in fixed decimals with :data:`POINT_DIGITS` significant digits
    (``1.0999``, ``0.052744``, ``123.40``): more digits than :func:`range_text` gives
    the interval around it."""
    if not math.isfinite(x) or x == 0:
        return f"{x:g}"
    return _fixed(x, _decimals(abs(x), POINT_DIGITS))
