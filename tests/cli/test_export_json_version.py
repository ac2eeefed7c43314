"""``export --json`` names the framework version it wrote: a torchtitan export without
``--framework-version`` writes torchtitan 0.3's Python config, and its JSON said
``"version": null`` (QA round 11); the other targets have no version."""

from __future__ import annotations

import json

from support.cli import run_cli

SPEC = """\
model: {zoo: llama3-8b}
cluster: {zoo: debug-2x4}
training: {global_batch_size: 16, seq_len: 128, dtype: bf16, runtime: torchtitan}
plan: {tp: 2, pp: 1, zero: 3, microbatches: 2, sequence_parallel: true}
"""


def _json(text: str) -> dict:
    return json.JSONDecoder().raw_decode(text[text.index("{\n"):])[0]


def test_the_version_written_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(SPEC)
    code, text = run_cli("estimate", "s.yaml", "--json")
    assert code == 0, text
    (tmp_path / "est.json").write_text(json.dumps(_json(text)))
    for extra, version, marker in (([], "0.3", "def autopar_plan():"),
                                   (["--framework-version", "0.2"], "0.2", "[parallelism]")):
        code, text = run_cli("export", "est.json", "--to", "torchtitan", "--json", *extra)
        assert code == 0, text
        doc = _json(text)
        assert doc["version"] == version and marker in doc["text"]
    code, text = run_cli("export", "est.json", "--to", "megatron", "--json")
    assert code == 0 and _json(text)["version"] is None, text
