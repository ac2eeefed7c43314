"""A training sequence longer than the model's max_position_embeddings is said (QA round 5,
L6), not refused: users extend a model's context. Solve and estimate say it, and the
Megatron-LM export, which writes --max-position-embeddings as the sequence length, says it
with the file. At or below the config's length nothing is said."""

from __future__ import annotations

import json

from support.cli import run_cli
from support.paths import REPO

HF = REPO / "model_zoo" / "hf"
SAID = ("training.seq_len 65536 exceeds the model's max_position_embeddings 40960: priced at "
        "65536 as asked")


def _spec(tmp_path, seq: int, plan: bool = True):
    config = json.loads((HF / "qwen3-8b.json").read_text())      # max_position_embeddings 40960
    config.update(num_hidden_layers=4)
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = tmp_path / f"spec{seq}.yaml"
    spec.write_text("model: {hf_config: config.json}\ncluster: {zoo: 2x8-h100}\n"
                    f"training: {{global_batch_size: 16, seq_len: {seq}}}\n"
                    + ("plan: {tp: 8, pp: 1, cp: 2, zero: 1, recompute: full, micro_batch_size: 1}\n"
                       if plan else "search: {pp_degrees: [1], tp_degrees: [8]}\n"))
    return spec


def test_estimate_and_the_megatron_export_say_it(tmp_path):
    code, text = run_cli("estimate", _spec(tmp_path, 65536))
    assert code == 0, text
    assert "note: " + SAID in " ".join(text.split())
    code, text = run_cli("estimate", _spec(tmp_path, 65536), "--json")
    assert code == 0, text
    doc = json.loads(text)
    assert any(n.startswith(SAID) for n in doc["notices"])
    (tmp_path / "est.json").write_text(text)
    out = tmp_path / "args.sh"
    code, said = run_cli("export", tmp_path / "est.json", "--to", "megatron", "--out", out)
    assert code == 0, said
    assert SAID in " ".join(said.split())
    assert "--max-position-embeddings 65536" in out.read_text()


def test_solve_says_it(tmp_path):
    code, text = run_cli("solve", _spec(tmp_path, 65536, plan=False), "--out", tmp_path / "out",
                         "--time-limit", "60")
    assert code == 0, text
    assert SAID in " ".join(text.split())
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert any(n.startswith(SAID) for n in plan["notices"])


def test_nothing_is_said_within_the_configs_length(tmp_path):
    code, text = run_cli("estimate", _spec(tmp_path, 32768))
    assert code == 0, text
    assert "exceeds the model's max_position_embeddings" not in text
    code, text = run_cli("estimate", _spec(tmp_path, 32768), "--json")
    assert "notices" not in json.loads(text)
