"""A record's architecture: stated or known, never guessed (issue 28, point 3).

Oracles: the published Llama-3-8B count (8,030,261,248, ``model_zoo/families.yaml``),
counts written out by hand, and the precedence the issue sets (explicit fields,
then the known family, then the text, then a stated assumption).
"""

from __future__ import annotations

import pytest

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.reading import RawRecord, read_record
from autopar_opt.calibration.reading.architecture import read_architecture
from autopar_opt.calibration.reading.parallel import map_zero
from autopar_opt.calibration.reading.schema import Parallelism
from autopar_opt.ir.runtime import RUNTIMES


def _record(name: str, arch: str, **model) -> dict:
    """A Llama-3-8B-shaped record on 8 H100 with Megatron-Core (iteration time 1 s)."""
    return {"id": "r", "record_type": "end_to_end_training_throughput",
            "model": {"name": name, "arch": arch, "num_layers": 32, "hidden_size": 4096,
                      "num_attention_heads": 32, "num_kv_heads": 8, "ffn_hidden_size": 14336,
                      "vocab_size": 128256, "seq_len": 8192, **model},
            "hardware": {"gpu_type": "H100 SXM", "gpu_memory_gb": 80, "num_gpus": 8,
                         "gpus_per_node": 8},
            "parallelism": {"tp": 1, "pp": 1, "dp": 8, "cp": 1, "sequence_parallel": False,
                            "vp_chunks": 1, "zero_stage": 1, "fsdp": "none"},
            "training": {"precision": "bf16", "micro_batch_size": 1, "global_batch_size": 8,
                         "recompute": "full", "framework": "Megatron-Core r0.8.0"},
            "measured": {"iteration_time_s": 1.0}}


# 32 x (2·4096² + 2·4096·1024 + 3·4096·14336) + 2 x 128256·4096 = 8,030,261,248 with the
# norms (65 x 4096): the published Llama-3-8B count.
LLAMA3_8B = 8_030_261_248


def test_a_family_name_alone_gives_the_llama3_architecture():
    """Before: "LLAMA3_8B" with no "SwiGLU" in the text was built with a
    two-matrix MLP and tied embeddings (Megatron-Bridge records: 7.51 B)."""
    run = build_run(read_record(_record("LLAMA3_8B", "")))
    # the dense block counts a norm's bias too (65 x 4096 more: 3e-5)
    assert run.params_total == pytest.approx(LLAMA3_8B, rel=1e-4)
    assert run.published_params == LLAMA3_8B
    assert "mlp" not in run.architecture_assumed and "tied" not in run.architecture_assumed


def test_explicit_fields_beat_the_family_and_the_text():
    """A record that states a plain MLP and tied embeddings for a "Llama 3"
    model gets them: 32 x (2·4096² + 2·4096·1024 + 2·4096·14336) + 128256·4096 +
    the norms."""
    rec = _record("LLAMA3_8B", "SwiGLU, untied", mlp="plain", tie_word_embeddings=True)
    run = build_run(read_record(rec))
    by_hand = 32 * (2 * 4096 ** 2 + 2 * 4096 * 1024 + 2 * 4096 * 14336) + 128256 * 4096
    assert run.params_total == pytest.approx(by_hand, rel=1e-4)


def test_a_text_contradicting_the_family_is_noted_and_loses():
    rec = read_record(_record("Llama-3 8B", "GeLU MLP, biased linear layers"))
    assert rec.model.gated and not rec.model.biases
    notes = rec.notes()
    assert any(n.startswith("mlp: the arch text says a two-matrix MLP") for n in notes)
    assert any(n.startswith("biases: the arch text says biases all") for n in notes)


def test_nothing_known_is_assumed_and_said():
    """A generic "GPT" with no text: the MLP, biases, dropout, positions and
    tying are each assumed (Megatron-LM's defaults), and each is in the notes."""
    rec = read_record(_record("GPT 8B", "decoder"))
    assert set(rec.model.architecture.assumed) == {"mlp", "biases", "dropout", "positions"}
    assert sum("not stated and no known family" in n for n in rec.notes()) == 4
    run = build_run(rec)
    assert "tied" in run.architecture_assumed
    assert any(n.startswith("embedding tying not stated") for n in run.assumptions)


def test_dropout_on_megatron_follows_megatron_not_the_family():
    """Megatron builds its own GPT with dropout 0.1 unless told: a Llama-3
    family name does not switch it off on Megatron-Core; the text can."""
    arch = read_architecture(RawRecord.read(_record("Llama 3 8B", "")).model,
                             RUNTIMES["megatron-core"], [])
    assert arch.dropout and arch.sources["dropout"] == "assumed"
    arch = read_architecture(RawRecord.read(_record("Llama 3 8B", "")).model,
                             RUNTIMES["pytorch-fsdp"], [])
    assert not arch.dropout and arch.sources["dropout"].startswith("family llama3")
    arch = read_architecture(RawRecord.read(_record("Llama 3 8B", "no dropout")).model,
                             RUNTIMES["megatron-core"], [])
    assert not arch.dropout and arch.sources["dropout"] == "arch text"


def test_a_stated_zero_stage_beats_the_fsdp_text():
    notes: list[str] = []
    assert map_zero(Parallelism(fsdp="FULL_SHARD", zero_stage=1), None, notes) == 1
    assert "stated field is used" in notes[0]
    assert map_zero(Parallelism(fsdp="FULL_SHARD")) == 3
    assert map_zero(Parallelism(fsdp="none", zero_stage=2)) == 2


def test_calibrate_prints_the_built_parameters_and_what_was_assumed(tmp_path, capsys):
    """``autopar calibrate`` shows every record's built parameter count and the
    architecture facts it assumed (JSON and table)."""
    import json

    import yaml

    from autopar_opt.cli.calibrate import calibrate_command

    runs = tmp_path / "runs.yaml"
    runs.write_text(yaml.safe_dump([_record("LLAMA3_8B", ""), {**_record("GPT 8B", "decoder"),
                                                                 "id": "r2"}]))
    assert calibrate_command(str(runs), json_output=True) == 0
    records = {r["id"]: r for r in json.loads(capsys.readouterr().out)["records"]}
    assert records["r"]["params_total"] == pytest.approx(LLAMA3_8B, rel=1e-4)
    assert records["r"]["params_active"] == records["r"]["params_total"]
    assert records["r"]["architecture_assumed"] == ["dropout"]
    assert set(records["r2"]["architecture_assumed"]) == {"mlp", "biases", "dropout",
                                                          "positions", "tied"}
    assert calibrate_command(str(runs), json_output=False) == 0
    text = capsys.readouterr().out
    assert "params B" in text and "arch assumed" in text and "8.03" in text
