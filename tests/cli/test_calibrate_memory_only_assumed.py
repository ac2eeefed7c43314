"""The text output says what it assumed for a memory-only record too (QA round 11: the
assumptions of records compared on memory alone were in --json only)."""

from __future__ import annotations

from support.cli import run_cli
from support.runs import tiny_record, write_runs


def test_a_memory_only_records_assumptions_are_printed(tmp_path):
    rec = tiny_record(measured__iteration_time_s=None, measured__memory_gib_per_gpu=2.0)
    code, out = run_cli("calibrate", write_runs(tmp_path, [rec]))
    flat = " ".join(out.split())
    assert code == 0, out
    assert "Memory only" in flat
    # the tiny record states no MLP: the reader's assumption, printed for the record
    assert "assumed r1:" in flat and "mlp not stated" in flat
