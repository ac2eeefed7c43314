"""The report's charts say the same numbers as its tables (issue 33).

Oracles: the per-stage peak the search wrote in ``plan.json`` (``metrics.stages[i].
peak_memory_gib``, which the card and the stage table show) against the stacked
memory bar (the sum of its parts, and the value written above it in the SVG); the
time formatter against the values that must not read "−0.0 µs".
"""

from __future__ import annotations

import math
import re

import pytest

from autopar_opt.reports.charts import memory_svg
from autopar_opt.reports.formatting import fmt_time, fmt_time_range
from autopar_opt.reports.sections import CHART_PARTS, chart_parts, memory_section


def test_memory_bars_add_up_to_the_peak_of_the_card_and_table(solved):
    section = memory_section(solved)
    assert section is not None
    stages = solved["metrics"]["stages"]
    assert any(st["reserve_gib"] > 0 for st in stages)       # the part that was missing
    for st, row in zip(stages, section["stages"]):
        assert set(row["bars"]) == set(CHART_PARTS)
        assert sum(row["bars"].values()) == pytest.approx(st["peak_memory_gib"], rel=1e-12)
        assert row["bars"]["other"] == 0.0                     # every part is stated
    svg = memory_svg(section)
    labels = [float(v) for v in re.findall(r">\s*(\d+\.\d\d)\s*<", svg)]
    assert sorted(labels) == sorted(round(st["peak_memory_gib"], 2) for st in stages)


def test_an_older_document_still_stacks_up_to_its_peak():
    """A plan.json without the split parts: what it does not split is drawn as 'other'."""
    stage = {"weight_gib": 10.0, "activation_gib": 3.0, "peak_memory_gib": 15.5}
    bars = chart_parts(stage, 10.0, 3.0, 15.5, 0)
    assert bars == {"state": 10.0, "activations": 3.0, "working": 0.0, "reserve": 0.0,
                    "other": 2.5}


@pytest.mark.parametrize("seconds,text", [(-0.0, "0 µs"), (-4.16e-17, "0 µs"), (0.0, "0 µs"),
                                          (4e-8, "0 µs"), (1e-7, "0.1 µs"), (0.0123, "12.30 ms"),
                                          (2.5, "2.500 s"), (math.inf, "∞")])
def test_times_that_round_to_zero_read_zero(seconds, text):
    assert fmt_time(seconds) == text


@pytest.mark.parametrize("low, high, text", [
    (0.86672, 1.1398, "0.87-1.14 s"),          # was "866.72 ms – 1.140 s" (QA round 10)
    (0.0622, 0.0818, "62.2-81.8 ms"),          # was "62.20 – 81.80 ms": zeros it does not have
    (2e-5, 9e-4, "20-900 µs"),
    (None, 1.0, "—"),
])
def test_an_interval_is_written_in_one_unit(low, high, text):

    assert fmt_time_range(low, high) == text


def test_every_baseline_time_shows_its_interval(solved):
    """plan.json carries each baseline's interval; the report's baseline table shows it
    under its time (QA round 10: only the answer's interval was shown)."""
    from autopar_opt.reports.sections import baselines_section

    doc = solved
    rows = baselines_section(doc)
    priced = [(b, r) for b, r in zip(doc["baselines"], rows) if b["metrics"] is not None]
    assert priced
    for b, r in priced:
        iv = b["metrics"]["interval"]
        assert r["interval"] == f"80% interval {fmt_time_range(iv['low'], iv['high'])}"


def test_one_layer_is_one_layer(solved):
    from autopar_opt.reports.sections import plan_degree_lines

    plan = {"stages": [{"layers": ["head"], "strategies": [solved["plan"]["stages"][0]["strategies"][0]]}]}
    assert plan_degree_lines(plan)[0].startswith("stage 0 (1 layer): ")


def test_a_device_not_full_never_reads_100_percent(solved):
    """75.80 of 76.00 GiB read "(100%)" beside a tight badge (QA round 10): a device that is
    not full reads ">99%"."""
    import copy

    from autopar_opt.reports.context import answer_section

    doc = copy.deepcopy(solved)
    cap = doc["metrics"]["memory_capacity_gib"]
    for st in doc["metrics"]["stages"]:
        st["peak_memory_gib"] = cap - 0.2
    assert answer_section(doc)["memory_share"] == ">99%"
