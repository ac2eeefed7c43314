"""benchmarks/calibration/RESULTS.md states how many leave-one-family-out fits it made; that
count must be the number of families its own table lists (QA round 12: the generator wrote a
fixed "7" beside a table of 9 families). Oracle: the record's own table."""

from __future__ import annotations

import re

from support import paths


def test_the_stated_number_of_fits_is_the_number_of_families_in_the_table():
    text = (paths.REPO / "benchmarks" / "calibration" / "RESULTS.md").read_text()
    stated = int(re.search(r"full fit \+ (\d+) leave-one-family-out fits", text).group(1))
    table = text.split("## Leave-one-family-out", 1)[1].split("\n## ", 1)[0]
    families = re.findall(r"^\| `([^`]+)` \|", table, flags=re.M)
    assert len(families) == len(set(families)) > 0
    assert stated == len(families), (stated, families)
