"""One rule for an interval's two ends (autopar_opt.core.ranges).

Before, the same 80% interval read ``0.864-1.14 s`` in the terminal and plan.json (each
end ``.3g`` on its own: ``1.07-1.4 s``, ``9.23-17 s``), ``1.067-1.404 s`` in solve's
comparison line and ``0.864 – 1.138 s`` in the report. Oracles: hand-rounded strings, and
for many random intervals the rule's own statement checked on the output (one number of
decimals on both ends, each end within half a last digit of its value, three significant
digits on the larger end unless a zero common to both ends was dropped)."""

from __future__ import annotations

import random

import pytest

from autopar_opt.core.ranges import point_text, range_text


@pytest.mark.parametrize("low, high, text", [
    (9.231, 17.02, "9.2-17.0 s"),      # was "9.23-17 s": the upper end one digit short
    (1.067, 1.404, "1.07-1.40 s"),     # was "1.07-1.4 s"
    (0.8644, 1.138, "0.86-1.14 s"),    # was "0.864-1.14 s"
    (0.0412, 0.0553, "0.0412-0.0553 s"),
    (40.0, 90.0, "40-90 s"),           # zeros on both ends dropped together
    (9.9961, 12.0, "10-12 s"),
    (1234.5, 2345.6, "1,234-2,346 s"),
])
def test_hand_rounded(low, high, text):
    assert range_text(low, high, "s") == text


def _decimals(part: str) -> int:
    return len(part.split(".")[1]) if "." in part else 0


def test_the_rule_holds_on_random_intervals():
    rng = random.Random(7)
    for _ in range(2000):
        high = 10 ** rng.uniform(-6, 5)
        low = high * rng.uniform(0.3, 1.0)
        lo_text, hi_text = range_text(low, high).split("-")
        places = _decimals(lo_text)
        assert _decimals(hi_text) == places, (low, high)
        for text, value in ((lo_text, low), (hi_text, high)):
            assert abs(float(text.replace(",", "")) - value) <= 0.5 * 10 ** -places * 1.000001
        digits = len(hi_text.replace(",", "").replace(".", "").lstrip("0"))
        if digits < 3:          # only a zero both ends have at the next decimal was dropped
            assert all(f"{x:.{places + 1}f}".endswith("0") for x in (low, high)), (low, high)
        assert digits <= 3 or places == 0, (low, high, hi_text)


@pytest.mark.parametrize("x", [1.0999, 0.0527435, 123.4, 4.2e-4, 7.77e3])
def test_a_point_shows_more_digits_than_its_interval(x):
    point = point_text(x)
    lo, hi = range_text(0.8 * x, 1.2 * x).split("-")
    assert _decimals(point) > _decimals(hi) and abs(float(point.replace(",", "")) - x) <= 1e-4 * x
