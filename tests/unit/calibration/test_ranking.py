"""Layout ranking (``autopar_opt.calibration.ranking``; ``benchmarks/calibration/RANKING.md``).

Oracles: a hand-ranked group; the published measurements of every group of both record
files, each run priced out of sample (the fit that left its source family out): a
planner's first choice within 5% of the measured fastest layout (the groups that miss are
marked with their figure); the recorded ``RANKING.md`` summaries, which must be the ones
the current model, fits and records give.
"""

from __future__ import annotations

import re

import pytest

from autopar_opt.calibration.ranking import (Entry, Group, family_leave_out_params, groups_of,
                                             summary)
from support.paths import REPO

FILES = {"published_runs.yaml": REPO / "tests" / "data" / "published_runs.yaml",
         "holdout_runs.yaml": REPO / "benchmarks" / "calibration" / "holdout_runs.yaml"}
GROUPS = [g for source, path in FILES.items() for g in groups_of(source, path)]
OUT_OF_SAMPLE = [g for source, path in FILES.items()
                 for g in groups_of(source, path, params_of=family_leave_out_params())]
#: Regret allowed per group: a planner whose first choice loses more than this against the
#: fastest published layout of the job has chosen wrongly.
MAX_REGRET = 0.05
#: Groups that miss it today (RANKING.md): first run id -> figure. None since session 35:
#: InternEvo's 1,024-GPU group (regret 18.5% before: its per-rank parameter broadcasts,
#: whose cost grows with the rank count, were priced as one all-gather) now ranks its
#: tp2 layout first, as measured.
MISSED: dict[str, str] = {}


def test_a_hand_ranked_group():
    """Measured B 110 > C 101 > A 100; predicted C 95 > A 90 > B 80. First choice C:
    regret 1 - 101/110; A-C are 1% apart (a tie), A-B and B-C decisive and both reversed."""
    g = Group("k", "f", (Entry(("A",), "tp1", 8, 100.0, 90.0), Entry(("B",), "tp2", 8, 110.0, 80.0),
                         Entry(("C",), "tp4", 8, 101.0, 95.0)))
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
            if _first(g) in MISSED else pytest.param(g, id=_first(g)) for g in OUT_OF_SAMPLE]


@pytest.mark.parametrize("group", _marked())
def test_the_first_choice_is_within_five_percent_of_the_fastest_layout(group):
    assert group.regret <= MAX_REGRET


def test_the_recorded_summaries_are_the_current_ones():
    """RANKING.md's two 'both' rows: out of sample first, then the shipped parameters."""
    text = (REPO / "benchmarks" / "calibration" / "RANKING.md").read_text()
    rows = re.findall(r"\| both \| (\d+) \| (\d+) \| (\d+) of \d+ \| ([\d.]+)% \| ([\d.]+)% \| "
                      r"(\d+) of (\d+) \|", text)
    assert len(rows) == 2, "RANKING.md lacks its summaries: run benchmarks/calibration/ranking.py"
    for row, groups in zip(rows, (OUT_OF_SAMPLE, GROUPS)):
        s = summary(groups)
        assert [int(row[i]) for i in (0, 1, 2, 5, 6)] == \
            [s["groups"], s["runs"], s["top1"], s["pairs_agree"], s["pairs"]]
        assert float(row[3]) == pytest.approx(100 * s["mean_regret"], abs=0.05)
        assert float(row[4]) == pytest.approx(100 * s["max_regret"], abs=0.05)


def test_calibrate_ranks_a_users_layouts_from_its_own_comparisons(tmp_path):
    """``autopar calibrate`` on a file of FlagPerf's seven A800 layouts and KempnerForge's
    three 4-GPU layouts reports the two jobs; each job's figures follow from the comparison
    records the same JSON lists (oracle: the measured and predicted samples/s per id)."""
    import json

    import yaml

    from support.cli import run_cli

    records = [r for r in yaml.safe_load(FILES["holdout_runs.yaml"].read_text())
               if r["id"].startswith(("flagperf_llama3_8b_a800", "kfmfu2026_7b_4gpu"))]
    assert len(records) == 10
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump(records, sort_keys=False))
    code, out = run_cli("calibrate", path, "--json")
    assert code == 0, out
    doc = json.loads(out)
    rates = {r["id"]: (r["measured"], r["predicted"]) for r in doc["records"]}
    jobs = doc["ranking"]["groups"]
    assert sorted(len(j["layouts"]) for j in jobs) == [7]   # KempnerForge's three: 3 batches
    for job in jobs:
        assert all(len(lay["ids"]) == 1 for lay in job["layouts"])
        ids = [lay["ids"][0] for lay in job["layouts"]]
        fastest = max(ids, key=lambda i: rates[i][0])
        first = max(ids, key=lambda i: rates[i][1])
        assert job["top1"] == (first == fastest)
        assert job["regret"] == pytest.approx(1 - rates[first][0] / rates[fastest][0])
        assert [lay["measured_rank"] for lay in job["layouts"]] == list(range(1, len(ids) + 1))
    assert doc["ranking"]["summary"]["groups"] == 1
    code, out = run_cli("calibrate", path)
    assert code == 0 and "Layout ranking, with these parameters: 1 job(s)" in out


def test_cross_validation_ranks_out_of_sample(tmp_path):
    """With ``--cross-validate family`` each job is ranked again with the predictions of
    the fit that left its family out: the same jobs, the measured order unchanged, each
    layout's predicted rate the cross-validation record's own (oracle: the JSON's
    ``cross_validation`` records)."""
    import json

    import yaml

    from support.cli import run_cli

    records = [r for r in yaml.safe_load(FILES["holdout_runs.yaml"].read_text())
               if r["id"].startswith(("flagperf_llama3_8b_a800", "kfmfu2026_7b_4gpu"))]
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump(records, sort_keys=False))
    code, out = run_cli("calibrate", path, "--json", "--cross-validate", "family")
    assert code == 0, out
    doc = json.loads(out)
    held = {r["id"]: r["predicted"] for f in doc["cross_validation"]["families"]
            for r in f["records"]}
    shipped, oos = doc["ranking"]["groups"], doc["ranking_out_of_sample"]["groups"]
    assert [g["job"] for g in oos] == [g["job"] for g in shipped]
    for a, b in zip(shipped, oos):
        assert [x["ids"] for x in a["layouts"]] == [x["ids"] for x in b["layouts"]]
        assert all(x["predicted"] == pytest.approx(held[x["ids"][0]]) for x in b["layouts"])


def test_cross_validating_one_family_says_nothing_was_left_out(tmp_path):
    import yaml

    from support.cli import run_cli

    records = [r for r in yaml.safe_load(FILES["holdout_runs.yaml"].read_text())
               if r["id"].startswith("flagperf_llama3_8b_a800")]
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump(records, sort_keys=False))
    code, out = run_cli("calibrate", path, "--cross-validate", "family")
    assert code == 0 and "one source family only" in out and "nothing was cross-validated" in out
