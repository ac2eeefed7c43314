"""Spec and plan inputs that were accepted silently (QA round 5, L3), now refused with the
key, the value, the rule and the fix, exit 2 and nothing written: a quoted switch (pydantic's
lax mode read 'yes' as true), an MoE load setting on a dense model, a number YAML leaves a
string that reads as inf (1e400: the spec's limit is 1e30), a plan.json of another
schema_version, and a MIP formulation asked of the dp solver, which builds none."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli
from support.paths import REPO

HF_MODEL = "model: {hf_config: %s%%s}\n" % (REPO / "model_zoo" / "hf" / "qwen3-8b.json")
MODEL = "model: {zoo: gpt-1.7b%s}\n"
REST = ("cluster: {zoo: 2x8-h100}\ntraining: {global_batch_size: 32, seq_len: 2048}\n"
        "search: {pp_degrees: [1], tp_degrees: [1, 2]}\n")
PLAN = "plan: {tp: 2, pp: 1, zero: 1, micro_batch_size: 1}\n"


@pytest.mark.parametrize("hf, model, extra, words", [
    (True, ", flash_attention: 'yes'", "", ["model.flash_attention = 'yes'", "not the text 'yes'"]),
    (True, ", capacity_factor: 1.25", "", ["model.capacity_factor = 1.25",
                                     "is set on a model without experts"]),
    (True, ", load_imbalance: 1.2", "", ["model.load_imbalance = 1.2", "without experts"]),
    (False, "", "solver: {time_limit_s: 1e400}\n", ["solver.time_limit_s = '1e400'",
                                             "not a finite number of at most 1e+30"]),
    (False, "", "solver: {name: dp, form: milp}\n", ["solver.form = 'milp'", "the dp solver builds none"]),
])
def test_the_spec_is_refused(tmp_path, hf, model, extra, words):
    spec = tmp_path / "spec.yaml"
    spec.write_text((HF_MODEL if hf else MODEL) % model + REST + extra + PLAN)
    code, text = run_cli("estimate", spec)
    flat = " ".join(text.split())
    assert code == 2, text
    for word in words:
        assert word in flat, (word, text)


def test_form_with_the_dp_solver_is_refused(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(MODEL % "" + REST)
    code, text = run_cli("solve", spec, "--form", "milp", "--solver", "dp", "--out", tmp_path / "o")
    assert code == 2 and "--form = 'milp'" in text and "the dp solver builds none" in text, text
    assert not (tmp_path / "o").exists()


def test_a_plan_of_another_schema_version_is_not_exported(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(MODEL % "" + REST)
    code, text = run_cli("solve", spec, "--out", tmp_path / "o", "--quiet")
    assert code == 0, text
    doc = json.loads((tmp_path / "o" / "plan.json").read_text())
    doc["schema_version"] = 999
    (tmp_path / "plan999.json").write_text(json.dumps(doc))
    out = tmp_path / "args.sh"
    code, text = run_cli("export", tmp_path / "plan999.json", "--to", "megatron", "--out", out)
    flat = " ".join(text.split())
    assert code == 2 and "schema_version 999 is not the plan.json layout this autopar reads " \
        "(schema_version 1)" in flat, text
    assert not out.exists()
