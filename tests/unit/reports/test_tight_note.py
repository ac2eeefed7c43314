"""A plan that fits with under 5% of its memory free is said to be tight in the solve
summary, as the report's badge says (it was only in the report). Oracle: the headroom by
hand."""

from __future__ import annotations

from autopar_opt.reports.formatting import TIGHT_HEADROOM, tight_note


def test_tight_below_five_percent_headroom_only():
    assert TIGHT_HEADROOM == 0.05
    assert tight_note(75.8, 76.0) == " (tight: 0.2 GiB free, under 5% headroom)"
    assert tight_note(72.3, 76.0) == " (tight: 3.7 GiB free, under 5% headroom)"   # 4.87% free
    assert tight_note(72.0, 76.0) == ""            # 5.26% free
    assert tight_note(80.0, 76.0) == ""            # over: the summary says it does not fit
    assert tight_note(1.0, 0.0) == ""
