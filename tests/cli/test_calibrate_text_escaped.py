"""``autopar calibrate``'s text output prints the records' own texts as written: rich markup
read "[formula not stated: assumed]" in an assumption, and a record id such as "[red]r1", as
style tags and dropped them (QA round 11)."""

from __future__ import annotations

from support.cli import run_cli
from support.runs import tiny_record, write_runs


def test_bracketed_texts_survive_the_text_output(tmp_path):
    rec = tiny_record(training__framework="DeepSpeed", measured__iteration_time_s=None,
                      measured__tflops_per_gpu=1.0)
    rec["id"] = "[red]r1"
    bad = dict(tiny_record(hardware__num_gpus=2), id="[bold]r2")
    code, out = run_cli("calibrate", write_runs(tmp_path, [rec, bad]))
    flat = " ".join(out.split())
    assert code == 0, out
    assert "[formula not stated: assumed]" in flat
    assert "assumed [red]r1:" in flat and "skipped [bold]r2:" in flat
