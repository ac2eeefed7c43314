"""A spec that lists the interleaved schedule without 1F1B also gets the one-chunk
configuration (search/configs.py ``_interleaved``: ``vp = 1`` only when 1F1B is not
listed), which Megatron runs as plain 1F1B. The outputs printed it as
``schedule=interleaved`` with no chunk count, reading as an interleaved pipeline; they
now say ``interleaved vp=1 (no virtual stages: 1F1B)``, and ``estimate`` prints an
interleaved plan's chunk count (it printed ``schedule=interleaved`` whatever ``vp``).

Oracle: the Megatron-LM export of the same plan.json, which writes no virtual-stage
flag for it (Megatron's plain 1F1B), and the plan's own ``vp_chunks``.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import run_cli

SPEC = """\
model: {zoo: gpt-1.7b, overrides: {num_layers: 8}}
cluster: {nodes: 1, gpus_per_node: 2, device: A100-80GB, device_memory_gib: 12.5}
training: {global_batch_size: 8, seq_len: 2048, dtype: bf16}
search: {pp_degrees: [2], tp_degrees: [1], zero_levels: [0], recompute: [none, full],
         schedules: [interleaved], microbatches: [8], vp_chunks: [1], hybrid_sharding: [false]}
target: megatron
"""


def test_a_one_chunk_interleaved_plan_is_said_as_1f1b(tmp_path: Path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    code, text = run_cli("solve", str(spec), "--out", str(out), "--time-limit", "60")
    assert code == 0, text
    plan = json.loads((out / "plan.json").read_text())["plan"]
    assert (plan["schedule"], plan["vp_chunks"]) == ("interleaved", 1)
    code, args = run_cli("export", str(out / "plan.json"), "--to", "megatron")
    assert code == 0 and "--pipeline-model-parallel-size 2" in args
    assert "virtual" not in args                      # Megatron runs it as plain 1F1B
    assert "schedule=interleaved vp=1 (no virtual stages: 1F1B)" in " ".join(text.split())
    html = (out / "report.html").read_text()
    assert "schedule interleaved vp=1 (no virtual stages: 1F1B)" in html


def test_estimate_prints_an_interleaved_plans_chunk_count(tmp_path: Path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("target: megatron\n", "")
                    + "plan: {tp: 1, pp: 2, microbatches: 8, schedule: interleaved, vp_chunks: 2}\n")
    code, text = run_cli("estimate", str(spec))
    assert code == 0, text
    assert "schedule=interleaved vp=2 " in text
