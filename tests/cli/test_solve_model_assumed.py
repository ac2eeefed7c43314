"""``autopar solve`` says what the model's import assumed, as ``autopar model``,
``estimate`` and the report do: a Hugging Face config's absent keys whose class defaults
were taken, DeepSeek-V3's multi-token prediction left out. QA round 34: Gemma 3's
text_config (no vocab_size: 262,208 taken) was solved with nothing at the terminal
saying so; plan.json kept the sentences only among the cost model's case assumptions."""

from __future__ import annotations

import json

from autopar_opt.model_zoo.hf_config import build_hf_graph
from support.cli import run_cli

#: Gemma-3-12B's published text_config, cut to 2 layers (no vocab_size, tie_word_embeddings,
#: hidden_activation or head_dim: Gemma3TextConfig's defaults).
CONFIG = {"hidden_size": 3840, "intermediate_size": 15360, "model_type": "gemma3_text",
          "num_attention_heads": 16, "num_hidden_layers": 2, "num_key_value_heads": 8,
          "sliding_window": 1024}


def test_solve_summary_and_plan_json_say_the_import_assumptions(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    spec = tmp_path / "s.yaml"
    spec.write_text("model: {hf_config: config.json}\ncluster: {zoo: 1x8-a100-40}\n"
                    "training: {global_batch_size: 8, seq_len: 2048}\n"
                    "search: {pp_degrees: [1]}\nsolver: {time_limit_s: 20}\n")
    code, text = run_cli("solve", spec, "--out", tmp_path / "out")
    assert code == 0, text
    flat = " ".join(text.split())
    expected = build_hf_graph(CONFIG, 2048, origin="config.json").assumed
    assert len(expected) == 3           # vocab_size; tying and activation; head_dim
    for sentence in expected:
        assert f"assumed: {' '.join(sentence.split())}" in flat, (sentence, text)
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert doc["spec"]["model"]["assumed"] == list(expected)
