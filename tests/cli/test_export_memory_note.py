"""``export`` of a plan that does not fit device memory says so (found by a new user,
session 24: ``estimate`` warned "stage 0 needs 88.22 GiB of 80.00 GiB", the export of the
same plan was written without a word)."""

from __future__ import annotations

import json

import yaml

from support.cli import run_cli


def _estimate(tmp_path, zero: int, tp: int = 1) -> str:
    spec = tmp_path / f"z{zero}.yaml"
    spec.write_text(yaml.safe_dump({
        "model": {"zoo": "llama3-8b"}, "cluster": {"zoo": "1x8-a100-40"},
        "training": {"global_batch_size": 64, "seq_len": 4096},
        "plan": {"tp": tp, "pp": 1, "microbatches": 8, "zero": zero, "recompute": "full"}}))
    code, text = run_cli("estimate", spec, "--json")
    assert code == 0, text
    out = tmp_path / f"z{zero}.json"
    out.write_text(text[text.index("{"):text.rindex("}") + 1])
    return out


def test_an_export_of_a_plan_over_memory_notes_it(tmp_path):
    # no ZeRO: 8.03 B parameters of weights, gradients and Adam state on each 40 GiB GPU
    code, text = run_cli("export", _estimate(tmp_path, 0), "--to", "megatron", "--json",
                         "--out", tmp_path / "args.txt")
    assert code == 0, text
    notes = json.loads(text[text.index("{"):text.rindex("}") + 1])["notes"]
    assert any(n.startswith("the plan does not fit device memory under the cost model (stage 0 "
                            "needs") and "of 40.00 GiB" in n for n in notes), notes
    assert (tmp_path / "args.txt").is_file()


def test_a_plan_that_fits_gets_no_memory_note(tmp_path):
    code, text = run_cli("export", _estimate(tmp_path, 1, tp=8), "--to", "megatron", "--json",
                         "--out", tmp_path / "args.txt")
    assert code == 0, text
    assert "does not fit" not in text
