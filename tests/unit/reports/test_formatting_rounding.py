"""Percentages below the rounding of two separately computed times are 0 (QA round 5, L4:
the report printed a certificate gap of "2.4e-14%" and a price of runnability of
"0% – 4.8e-11%" where the summary said 0.000%); a real small gap keeps its digits."""

from __future__ import annotations

from autopar_opt.reports.formatting import fmt_pct
from autopar_opt.reports.runnability import price_text


def test_rounding_noise_is_zero_and_small_gaps_keep_their_digits():
    assert fmt_pct(2.4e-16) == "0.00%" and fmt_pct(-1e-12) == "0.00%"
    assert fmt_pct(3e-7) == "3e-05%" and fmt_pct(0.0123) == "1.23%"
    assert price_text(0.0, 4.8e-13) == "0%"
    assert price_text(0.0, 0.0123) == "0% – 1.23%"
