"""A record whose only throughput figure is hfu_pct, with memory published, is compared on
memory alone and says why (QA round 11: the hfu_pct was set aside without a word)."""

from __future__ import annotations

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.reading import read_record
from support.runs import tiny_record


def _run(**measured):
    rec = tiny_record(measured__iteration_time_s=None, measured__memory_gib_per_gpu=2.0,
                      **{f"measured__{k}": v for k, v in measured.items()})
    return build_run(read_record(rec))


def test_hfu_alone_with_memory_is_memory_only_and_said():
    run = _run(hfu_pct=40.0)
    assert run.memory_only
    said = [a for a in run.assumptions if a.startswith("measured.hfu_pct is stated but not used")]
    assert len(said) == 1 and "compared on memory only" in said[0]
    assert not any("hfu_pct" in a for a in _run().assumptions)
