"""A record that states two throughput figures is compared on the first (in the
reader's order of preference) and says when the others give a rate more than 5% away
from it (issue 28 follow-up: a second figure was dropped without a word, and 46 of the
shipped records' MFU or TFLOP/s figures disagree with their measured time under the
FLOP convention the reader assumed for them)."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.build import FIGURES_AGREE, build_run
from autopar_opt.calibration.reading import read_record
from autopar_opt.calibration.reading.measured import stated_throughputs
from support.runs import tiny_record

# the tiny record: global batch 1 of 32 tokens in 1 ms on one GPU = 1000 samples/s,
# 32,000 tokens/s per GPU
AGREEING_TOKENS = 32_000.0


def _notes(tokens_per_gpu: float) -> tuple[float, list[str]]:
    run = build_run(read_record(tiny_record(measured__tokens_per_sec_per_gpu=tokens_per_gpu)))
    return run.measured_samples_per_s, [str(a) for a in run.assumptions if "disagree" in str(a)]


def test_agreeing_figures_say_nothing():
    measured, notes = _notes(AGREEING_TOKENS)
    assert measured == pytest.approx(1000.0) and notes == []


def test_rounding_inside_the_tolerance_says_nothing():
    measured, notes = _notes(AGREEING_TOKENS * (1 + FIGURES_AGREE - 0.01))
    assert notes == []


def test_a_figure_beyond_the_tolerance_is_said_and_the_first_is_compared():
    measured, notes = _notes(AGREEING_TOKENS * 1.10)
    assert measured == pytest.approx(1000.0)                 # iteration_time_s comes first
    assert len(notes) == 1
    assert "tokens_per_sec_per_gpu = 35200 gives 1100 samples/s, +10% from the 1000 of " \
           "iteration_time_s (compared on)" in notes[0]


def test_every_stated_figure_in_the_order_of_preference():
    rec = read_record(tiny_record(measured__mfu_pct=1.0, measured__samples_per_sec=999.0))
    keys = [t.key for t in stated_throughputs(rec.raw.measured)]
    assert keys == ["iteration_time_s", "samples_per_sec", "mfu_pct"]
    assert rec.throughput.key == "iteration_time_s"
