"""spec_input_files lists every file a spec reads (the top file, included
sections, a Hugging Face config, a cost-model file), each resolved as the
loader resolves it; export -o checks its output against all of them."""

from __future__ import annotations


from autopar_opt.spec.inputs import spec_input_files
from support.cli import run_cli as _cli
from support import paths

ROOT = paths.REPO


def test_every_file_a_spec_reads_is_listed_by_hand(tmp_path):
    """model.yaml sits in sub/; its hf_config is relative to sub/ (the model
    section's file), the cost-model file relative to the top file."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "model.yaml").write_text("model:\n  hf_config: hf\n")
    (tmp_path / "spec.yaml").write_text("model: sub/model.yaml\ncluster: c.toml\n"
                                        "cost_model:\n  file: params.yaml\n")
    top = tmp_path / "spec.yaml"
    assert spec_input_files(top) == (str(top), str(tmp_path / "sub" / "model.yaml"),
                                     str(tmp_path / "sub" / "hf"),
                                     str(tmp_path / "sub" / "hf" / "config.json"),
                                     str(tmp_path / "params.yaml"))
    # the string form of cost_model, a missing include (reported by the loader) left out
    (tmp_path / "s2.yaml").write_text("model: none.yaml\ncost_model: p.yaml\n")
    assert spec_input_files(tmp_path / "s2.yaml") == (str(tmp_path / "s2.yaml"),
                                                      str(tmp_path / "p.yaml"))
    # an unreadable spec is only itself
    assert spec_input_files(tmp_path / "missing.yaml") == (str(tmp_path / "missing.yaml"),)


def test_export_refuses_to_overwrite_the_cost_model_file(tmp_path):
    """``cost_model: params.yaml`` (a file of `calibrate --fit -o`): export -o
    params.yaml exits 2 and leaves it byte-identical."""
    for part in (ROOT / "examples" / "split").iterdir():
        (tmp_path / part.name).write_bytes(part.read_bytes())
    params = tmp_path / "params.yaml"
    params.write_bytes((ROOT / "autopar_opt" / "cost" / "calibrated.yaml").read_bytes())
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec.read_text() + "cost_model: params.yaml\n")
    code, text = _cli("estimate", spec, "--json")
    assert code == 0, text
    est = tmp_path / "est.json"
    est.write_text(text)
    before = params.read_bytes()
    code, text = _cli("export", est, "--to", "megatron", "-o", params)
    assert code == 2, text
    assert f"is the input file {params}" in text and "would overwrite it" in text, text
    assert params.read_bytes() == before
