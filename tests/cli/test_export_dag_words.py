"""``export`` of a DAG model's plan says what the graph is, not a guess: it called every
DAG "an encoder-decoder", Inception-v3's branching convolutions included (QA: the
example examples/inception_v3_8gpu.yaml's export refusal)."""

from __future__ import annotations

import yaml

from support.cli import run_cli


def test_the_refusal_of_a_dag_does_not_call_inception_an_encoder_decoder(tmp_path):
    spec = tmp_path / "inception.yaml"
    spec.write_text(yaml.safe_dump({
        "model": {"zoo": "inception-v3"}, "cluster": {"zoo": "1x8-a100-40"},
        "training": {"global_batch_size": 256, "dtype": "bf16"},
        "plan": {"tp": 1, "pp": 1, "dp": 8, "microbatches": 1}}))
    code, text = run_cli("estimate", spec, "--json")
    assert code == 0, text
    plan = tmp_path / "plan.json"
    plan.write_text(text[text.index("{"):text.rindex("}") + 1])
    code, text = run_cli("export", plan, "--to", "megatron")
    words = " ".join(text.split())
    assert code == 2 and "is a DAG" in words, text
    assert "encoder-decoder" not in words
