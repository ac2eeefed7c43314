"""Layout ranking (``autopar_opt.calibration.ranking``; ``benchmarks/calibration/RANKING.md``).

Oracles: a hand-ranked group; the published measurements of every group of both record
files (a planner's first choice within 5% of the measured fastest layout; the groups that
miss are marked with their figure); the recorded ``RANKING.md`` summary, which must be the
one the current model and records give.
"""

from __future__ import annotations

import re

import pytest

from autopar_opt.calibration.ranking import Entry, Group, groups_of, summary
from support.paths import REPO

FILES = {"published_runs.yaml": REPO / "tests" / "data" / "published_runs.yaml",
         "holdout_runs.yaml": REPO / "benchmarks" / "calibration" / "holdout_runs.yaml"}
GROUPS = [g for source, path in FILES.items() for g in groups_of(source, path)]
#: Regret allowed per group: a planner whose first choice loses more than this against the
#: fastest published layout of the job has chosen wrongly.
MAX_REGRET = 0.05
#: Groups that miss it today (RANKING.md): first run id -> figure.
MISSED = {
    "internevo_7b_tp1_zero1all_1024gpu": "regret 18.5%: InternEvo's loss of throughput with "
                                         "scale is not modelled (REGIMES.md)",
}


def test_a_hand_ranked_group():
    """Measured B 110 > C 101 > A 100; predicted C 95 > A 90 > B 80. First choice C:
    regret 1 - 101/110; A-C are 1% apart (a tie), A-B and B-C decisive and both reversed."""
    g = Group("k", "f", (Entry("A", "tp1", 8, 100.0, 90.0), Entry("B", "tp2", 8, 110.0, 80.0),
                         Entry("C", "tp4", 8, 101.0, 95.0)))
    assert [e.id for e in g.measured_order()] == ["B", "C", "A"]
    assert not g.top1
    assert g.regret == pytest.approx(1 - 101 / 110)
    assert g.decisive_pairs() == (2, 0)
    s = summary([g])
    assert (s["groups"], s["runs"], s["top1"], s["pairs"], s["pairs_agree"]) == (1, 3, 0, 2, 0)


def _first(g: Group) -> str:
    return sorted(e.id for e in g.entries)[0]


def _marked():
    return [pytest.param(g, id=_first(g),
                         marks=pytest.mark.xfail(strict=True, reason=MISSED[_first(g)]))
            if _first(g) in MISSED else pytest.param(g, id=_first(g)) for g in GROUPS]


@pytest.mark.parametrize("group", _marked())
def test_the_first_choice_is_within_five_percent_of_the_fastest_layout(group):
    assert group.regret <= MAX_REGRET


def test_the_recorded_summary_is_the_current_one():
    text = (REPO / "benchmarks" / "calibration" / "RANKING.md").read_text()
    row = re.search(r"\| both \| (\d+) \| (\d+) \| (\d+) of \d+ \| ([\d.]+)% \| ([\d.]+)% \| "
                    r"(\d+) of (\d+) \|", text)
    s = summary(GROUPS)
    assert row, "RANKING.md has no summary row: run benchmarks/calibration/ranking.py"
    assert [int(row.group(i)) for i in (1, 2, 3, 6, 7)] == \
        [s["groups"], s["runs"], s["top1"], s["pairs_agree"], s["pairs"]]
    assert float(row.group(4)) == pytest.approx(100 * s["mean_regret"], abs=0.05)
    assert float(row.group(5)) == pytest.approx(100 * s["max_regret"], abs=0.05)
