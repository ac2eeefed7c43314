"""``export`` finds the spec of a plan solved with a relative path from any folder
(found by a new user, session 24: plan.json kept 's1.yaml' as given, and an export run
from another folder said the spec was not readable)."""

from __future__ import annotations

import json
import shutil

from support import paths
from support.cli import run_cli


def test_export_from_another_folder_reads_the_resolved_spec_path(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(paths.REPO / "examples" / "quickstart.yaml", work / "q.yaml")
    monkeypatch.chdir(work)
    code, text = run_cli("solve", "q.yaml", "--out", "o", "--quiet")
    assert code == 0, text
    doc = json.loads((work / "o" / "plan.json").read_text())
    assert doc["spec"]["path"] == "q.yaml"
    assert doc["spec"]["resolved_path"] == str((work / "q.yaml").resolve())
    monkeypatch.chdir(tmp_path)
    code, text = run_cli("export", work / "o" / "plan.json", "--to", "megatron")
    assert code == 0, text
    assert "--tensor-model-parallel-size" in text


def _json(out: str) -> dict:
    """The JSON document of a ``--json`` run (notes echoed on stderr come first)."""
    return json.JSONDecoder().raw_decode(out[out.index("{\n"):])[0]


def _solved(tmp_path, monkeypatch):
    shutil.copy(paths.REPO / "examples" / "quickstart.yaml", tmp_path / "q.yaml")
    monkeypatch.chdir(tmp_path)
    code, text = run_cli("solve", "q.yaml", "--out", "o", "--quiet")
    assert code == 0, text
    return tmp_path / "o" / "plan.json"


def test_export_refuses_a_spec_of_another_model_with_the_same_layer_count(tmp_path, monkeypatch):
    """QA round 5 (M9): a spec whose model has the plan's layer count passed the plan's
    checks, and the launch file carried the other model's dimensions. plan.json records
    the model's parameter count and architecture: a spec that builds another is refused."""
    plan = _solved(tmp_path, monkeypatch)
    text = (tmp_path / "q.yaml").read_text()
    assert "zoo: gpt-1.7b" in text
    # the same 24 blocks, a wider model: the plan's layer names and count still fit it
    (tmp_path / "other.yaml").write_text(text.replace(
        "zoo: gpt-1.7b", "zoo: gpt-1.7b\n  overrides: {hidden: 3072}"))
    code, out = run_cli("export", plan, "--to", "megatron", "--spec", "other.yaml")
    assert code == 2 and "builds another model" in out and "pass the spec it was solved from" in out
    code, out = run_cli("export", plan, "--to", "megatron", "--spec", "q.yaml")
    assert code == 0, out


def test_export_to_a_framework_the_plan_was_not_priced_for_says_so(tmp_path, monkeypatch):
    """QA round 5 (M5): a plan priced with the megatron-core runtime exported to DeepSpeed
    (its own overlaps and reduction: +14% on a Qwen3-4B plan) said nothing of it."""
    plan = _solved(tmp_path, monkeypatch)
    code, out = run_cli("export", plan, "--to", "deepspeed", "--json")
    assert code == 0, out
    notes = _json(out)["notes"]
    assert any("priced with training.runtime megatron-core" in n and "deepspeed's own" in n
               for n in notes)
    code, out = run_cli("export", plan, "--to", "megatron", "--json")
    assert not any("priced with training.runtime" in n for n in _json(out)["notes"])


def test_a_model_the_target_cannot_build_is_not_sent_back_to_solve(tmp_path, monkeypatch):
    """QA round 5 (L5): torchtitan has no flavour for GPT-1.7B, and the refusal's fix said
    'solve again with target: torchtitan', which cannot help: no plan of the model exports
    there. Now it says so and names the way out."""
    plan = _solved(tmp_path, monkeypatch)
    code, out = run_cli("export", plan, "--to", "torchtitan")
    assert code == 2
    assert "torchtitan cannot build this model whatever the plan" in out
    # the model's own reason is in the fix (QA round 7: only the plan's reasons were listed)
    assert "torchtitan registers no model flavour with the architecture of gpt-1.7b" in out
    assert "solve again" not in out


def test_a_plan_priced_with_bf16_weights_says_the_launch_keeps_fp32_masters(tmp_path, monkeypatch):
    """training.optimizer adam_bf16 (bf16 weights and moments, KempnerForge's way) prices
    8 bytes of state per parameter; the exported files set no optimizer, so each framework
    trains its default fp32-master Adam (16 bytes): the export says so."""
    shutil.copy(paths.REPO / "examples" / "quickstart.yaml", tmp_path / "q.yaml")
    text = (tmp_path / "q.yaml").read_text()
    assert "optimizer: adam_mixed" in text
    (tmp_path / "q.yaml").write_text(text.replace("optimizer: adam_mixed", "optimizer: adam_bf16"))
    monkeypatch.chdir(tmp_path)
    code, out = run_cli("solve", "q.yaml", "--out", "o", "--quiet")
    assert code == 0, out
    code, out = run_cli("export", tmp_path / "o" / "plan.json", "--to", "megatron", "--json")
    assert code == 0, out
    assert any("training.optimizer adam_bf16 (2 + 2 + 4 bytes" in n and "fp32 master" in n
               for n in _json(out)["notes"])
    (tmp_path / "mixed").mkdir()
    plan = _solved(tmp_path / "mixed", monkeypatch)
    code, out = run_cli("export", plan, "--to", "megatron", "--json")
    assert not any("training.optimizer" in n for n in _json(out)["notes"])


def test_bf16_weights_refuse_autocast_and_a_dtype_they_do_not_compute_in(tmp_path):
    base = (paths.REPO / "examples" / "quickstart.yaml").read_text()
    cases = {"training.autocast": "optimizer: adam_bf16\n  autocast: true",
             "training.dtype": "optimizer: adam_bf16\n  dtype: fp16"}
    for key, repl in cases.items():
        spec = tmp_path / f"{key}.yaml"
        body = base.replace("optimizer: adam_mixed", repl)
        if "dtype: fp16" in repl:
            body = body.replace("  dtype: bf16\n", "")
        spec.write_text(body)
        code, out = run_cli("estimate", spec)
        assert code == 2 and key in out and "adam_bf16" in out, out
        assert "adam_mixed" in out      # the fix


def test_estimate_json_refuses_a_spec_without_a_plan_as_json(tmp_path):
    """QA round 7: `estimate --json` printed plain text (no JSON document) for a spec with
    no plan and for a fleet spec; the refusal is one JSON error naming file, key and fix."""
    text = (paths.REPO / "examples" / "quickstart.yaml").read_text()
    spec = tmp_path / "noplan.yaml"
    spec.write_text(text[:text.index("\nplan:")] + "\n")
    code, out = run_cli("estimate", spec, "--json")
    err = _json(out)["error"]
    assert code == 2 and err["problems"][0]["key"] == "plan"
    assert "add one" in err["problems"][0]["fix"]


def test_export_refuses_a_spec_edited_after_the_solve(tmp_path, monkeypatch):
    """The export takes the batch, dtype and cluster from the spec read again: an edit
    after the solve is refused, naming the key and both values (QA round 9: the file said
    --global-batch-size 128 for a plan solved at 64, and --fp16 for a bf16 plan)."""
    plan = _solved(tmp_path, monkeypatch)
    spec = tmp_path / "q.yaml"
    original = spec.read_text()
    assert "global_batch_size: 64" in original and "dtype: bf16" in original
    spec.write_text(original.replace("global_batch_size: 64", "global_batch_size: 128")
                    .replace("dtype: bf16", "dtype: fp16"))
    code, text = run_cli("export", plan, "--to", "megatron")
    assert code == 2
    assert "training.global_batch_size is 128" in text and "solved for 64" in text
    assert "training.dtype is 'fp16'" in text and "solved for 'bf16'" in text
    spec.write_text(original)
    code, text = run_cli("export", plan, "--to", "megatron")
    assert code == 0 and "--global-batch-size 64" in text, text


def test_export_reads_the_recorded_absolute_spec_before_a_relative_namesake(tmp_path, monkeypatch):
    plan = _solved(tmp_path, monkeypatch)
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "q.yaml").write_text((tmp_path / "q.yaml").read_text()
                                  .replace("global_batch_size: 64", "global_batch_size: 32"))
    monkeypatch.chdir(other)
    code, text = run_cli("export", plan, "--to", "megatron")
    assert code == 0 and "--global-batch-size 64" in text, text


def test_export_refuses_an_infeasible_status_beside_a_plan(tmp_path, monkeypatch):
    """QA round 9: a plan.json edited to status 'infeasible' still exported."""
    plan = _solved(tmp_path, monkeypatch)
    doc = json.loads(plan.read_text())
    doc["status"] = "infeasible"
    plan.write_text(json.dumps(doc))
    code, text = run_cli("export", plan, "--to", "megatron")
    assert code == 2 and "status 'infeasible' with a plan" in text
