"""``export`` of an ``estimate --json`` document whose spec changed since (QA round 11):
such a document records only the spec's path, so the batch checks of a solve's plan.json
do not apply, and an edited spec (here its global batch doubled) was exported with its
own ``--global-batch-size`` and ``--micro-batch-size`` (128 and 2 for a plan priced at 64
and 1) without a word. Oracle: the plan's recorded price against its price under the
spec read again (the same cost model: equal, unless the spec is another)."""

from __future__ import annotations

import json

from support.cli import run_cli

SPEC = """\
model: {zoo: debug}
cluster: {zoo: debug-2x4}
training: {global_batch_size: GBS, seq_len: 128, dtype: bf16, runtime: megatron-core}
plan: {tp: 2, pp: 2, microbatches: 4, sequence_parallel: true}
"""


def test_an_edited_spec_is_refused_and_the_same_one_exports(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(SPEC.replace("GBS", "16"))
    code, text = run_cli("estimate", "s.yaml", "--json")
    assert code == 0, text
    doc = json.JSONDecoder().raw_decode(text[text.index("{\n"):])[0]
    (tmp_path / "est.json").write_text(json.dumps(doc))
    code, text = run_cli("export", "est.json", "--to", "megatron")
    assert code == 0 and "--global-batch-size 16" in text and "--micro-batch-size 2" in text
    (tmp_path / "s.yaml").write_text(SPEC.replace("GBS", "32"))        # edited after
    code, text = run_cli("export", "est.json", "--to", "megatron", "--out", "args.txt")
    assert code == 2, text
    assert "is not the one it was estimated from" in text and "--global-batch-size 32" not in text
    assert not (tmp_path / "args.txt").exists()
