"""The memory capacity a plan is held against is the HBM less the spec's
``training.memory_reserve_gib``; the terminal says so, as the report does ("GiB usable").
Found on examples/capacity_llama3_70b.yaml's base (4 GiB reserve): solve printed
``peak memory 74.4/76.0 GiB`` for an 80 GiB H100, estimate ``72.65 / 76.00``, with no word
that 76 is not the device's memory."""

from __future__ import annotations

import yaml

from support.cli import run_cli

SPEC = {"model": {"zoo": "gpt-1.7b"}, "cluster": {"zoo": "dgx-a100-8"},       # A100-80GB
        "training": {"global_batch_size": 64, "seq_len": 2048, "memory_reserve_gib": 4.0},
        "search": {"pp_degrees": [1], "tp_degrees": [1], "zero_levels": [1],
                   "recompute": ["none"], "microbatches": [4]},
        "solver": {"name": "dp", "time_limit_s": 30},
        "plan": {"tp": 1, "pp": 1, "zero": 1, "microbatches": 4}}
WORDS = "/76.0 GiB usable (80 GiB less the 4 GiB of training.memory_reserve_gib)"


def test_solve_and_estimate_say_the_capacity_is_the_hbm_less_the_reserve(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    code, text = run_cli("solve", spec)
    assert code == 0, text
    assert WORDS in " ".join(text.split())
    code, text = run_cli("estimate", spec)
    assert code == 0, text
    assert ("memory per device (GiB), by stage (capacity 76 usable (80 GiB less the 4 GiB of "
            "training.memory_reserve_gib)):") in text
    assert "/ 76.00" in text


def test_no_reserve_no_words(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "training": {**SPEC["training"],
                                                         "memory_reserve_gib": 0.0}}))
    code, text = run_cli("solve", spec)
    assert code == 0 and "/80.0 GiB" in text and "usable" not in text, text
