"""``autopar estimate SPEC --plan PLAN_JSON``: a plan ``solve`` wrote, priced again.

Before, no command re-priced a written plan.json: ``estimate`` read only the spec's own
``plan:`` section, so a user who edited a solved plan (or wanted it priced on another
batch) had to re-type it stage by stage. Oracles: the solve's own plan.json (the same
plan under the same spec prices to the same figures, interval, breakdown and memory, as
the same ``evaluate`` priced both), and hand-made edits whose broken rule is known."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli

SPEC = """\
model: {zoo: MODEL}
cluster: {zoo: debug-2x4}
training: {global_batch_size: GBS, seq_len: 128, dtype: bf16, runtime: megatron-core}
search: {pp_degrees: [2]}
solver: {name: dp, time_limit_s: 20}
"""


def _spec(folder, name="s.yaml", model="debug", gbs=16):
    path = folder / name
    path.write_text(SPEC.replace("MODEL", model).replace("GBS", str(gbs)))
    return path


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """A two-stage plan.json of the debug model on 2 x 4 GPUs, and its spec."""
    folder = tmp_path_factory.mktemp("solved")
    spec = _spec(folder)
    code, text = run_cli("solve", spec, "--out", folder / "out", "--quiet")
    assert code == 0, text
    return spec, folder / "out" / "plan.json"


def _json(text: str) -> dict:
    return json.JSONDecoder().raw_decode(text[text.index("{\n"):])[0]


def test_a_solved_plan_reprices_to_the_figures_the_solve_wrote(solved):
    spec, plan_json = solved
    doc = json.loads(plan_json.read_text())
    assert doc["plan"]["pp"] == 2
    code, text = run_cli("estimate", spec, "--plan", plan_json, "--json")
    assert code == 0, text
    est = _json(text)
    # the same plan, every metric as the solve wrote it: time, interval, breakdown, memory
    assert est["metrics"] == doc["metrics"]
    assert [st["layers"] for st in est["plan"]["stages"]] == \
        [st["layers"] for st in doc["plan"]["stages"]]
    assert est["plan_file"] == str(plan_json)
    assert est["repriced"]["recorded_iteration_time_s"] == doc["metrics"]["iteration_time_s"]
    code, text = run_cli("estimate", spec, "--plan", plan_json)
    assert code == 0, text
    assert doc["metrics"]["interval"]["text"] in text
    assert f"{doc['metrics']['iteration_time_s']:.6g} s, the same" in text


def test_an_estimate_json_document_is_a_plan_too(tmp_path):
    """The other document autopar writes with a plan: estimate --json of a spec's plan
    (here interleaved, 2 virtual chunks) prices the same when brought back."""
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("MODEL", "debug").replace("GBS", "16")
                    + "plan: {tp: 2, pp: 2, microbatches: 4, schedule: interleaved, "
                      "vp_chunks: 2}\n")
    code, text = run_cli("estimate", spec, "--json")
    assert code == 0, text
    first = _json(text)
    (tmp_path / "est.json").write_text(json.dumps(first))
    code, text = run_cli("estimate", spec, "--plan", tmp_path / "est.json", "--json")
    assert code == 0, text
    again = _json(text)
    assert again["metrics"] == first["metrics"] and again["plan"] == first["plan"]
    assert any("own plan section is not priced" in n for n in again["notices"])


def _edited(plan_json, folder, edit) -> str:
    doc = json.loads(plan_json.read_text())
    edit(doc["plan"])
    path = folder / "edited.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _tp3(plan):
    plan["stages"][0]["strategies"][1]["tp"] = 3


def _drop_layer(plan):
    plan["stages"][1]["layers"].pop(1)
    plan["stages"][1]["strategies"].pop(1)


def _pp(plan):
    plan["pp"] = 4


def _microbatches(plan):
    plan["microbatches"] = 3


def _dp_of_micro_batch(plan):     # 16 samples in 8 micro-batches of 2: dp 4 does not divide 2
    plan["microbatches"] = 8


@pytest.mark.parametrize("edit, key, words", [
    (_tp3, "plan.stages[0].strategies[1]", "dp*tp*cp = 12 but the stage has 4 devices"),
    (_drop_layer, "plan.stages", "layers not placed in any stage: block003"),
    (_pp, "plan", "pp = 4 but the plan lists 2 stage(s)"),
    (_microbatches, "plan.microbatches", "do not divide the global batch (16)"),
    (_dp_of_micro_batch, "plan.stages[0].strategies[0].dp", "does not divide the 2 samples"),
])
def test_an_edited_plan_that_cannot_run_is_refused_naming_file_key_and_rule(
        solved, tmp_path, edit, key, words):
    spec, plan_json = solved
    edited = _edited(plan_json, tmp_path, edit)
    code, text = run_cli("estimate", spec, "--plan", edited, "--json")
    assert code == 2, text
    problems = _json(text)["error"]["problems"]
    assert any(p["file"] == edited and p["key"] == key and words in p["rule"] and p["fix"]
               for p in problems), problems


def test_more_stages_than_devices_is_refused(solved, tmp_path):
    spec, plan_json = solved

    def split(plan):
        names = [n for st in plan["stages"] for n in st["layers"]]
        plan["stages"] = [{"layers": [n], "strategies": [{"dp": 1, "tp": 1}]} for n in names]
        plan["pp"] = len(names)

    edited = _edited(plan_json, tmp_path, split)
    code, text = run_cli("estimate", spec, "--plan", edited)
    assert code == 2 and f"{edited}: plan.stages = 6: pp=6 does not divide the 8 devices" in text


def test_a_plan_of_another_model_is_refused_naming_the_fields(solved, tmp_path):
    _, plan_json = solved
    other = _spec(tmp_path, model="debug-moe")
    code, text = run_cli("estimate", other, "--plan", plan_json, "--json")
    assert code == 2, text
    [problem] = _json(text)["error"]["problems"]
    assert problem["key"] == "spec.model" and problem["file"] == str(plan_json)
    assert "spec.model.params is 3415552 in the plan's file but 13898240 in the spec" in \
        problem["rule"]
    assert "spec.model.name is 'debug'" in problem["rule"]


def test_another_batch_is_priced_and_said_another_cluster_is_refused_and_said(solved, tmp_path):
    _, plan_json = solved
    code, text = run_cli("estimate", _spec(tmp_path, "g.yaml", gbs=32), "--plan", plan_json)
    assert code == 0, text
    assert "re-priced with the spec's training.global_batch_size 16 -> 32" in text
    bigger = tmp_path / "c.yaml"
    bigger.write_text(_spec(tmp_path).read_text().replace("debug-2x4", "2x8-h100"))
    code, text = run_cli("estimate", bigger, "--plan", plan_json)
    assert code == 2 and "cluster.num_devices 8 -> 16" in text and "the stage has 8 devices" in text


def test_more_stages_than_devices_is_said_as_such(tmp_path):
    """26 layers in 16 one-or-two-layer stages on 8 GPUs: "more stages than the 8 devices"
    (it read "pp=16 does not divide the 8 devices")."""
    from support import paths

    spec = paths.REPO / "examples" / "quickstart.yaml"
    code, text = run_cli("estimate", spec, "--json")
    assert code == 0, text
    doc = _json(text)
    names = [n for st in doc["plan"]["stages"] for n in st["layers"]]
    cuts = [len(names) * i // 16 for i in range(17)]
    doc["plan"]["stages"] = [{"layers": names[a:b], "strategies": [{"dp": 1, "tp": 1}] * (b - a)}
                             for a, b in zip(cuts, cuts[1:])]
    doc["plan"]["pp"] = 16
    (tmp_path / "p16.json").write_text(json.dumps(doc))
    code, text = run_cli("estimate", spec, "--plan", tmp_path / "p16.json", "--json")
    assert code == 2, text
    [problem] = _json(text)["error"]["problems"]
    assert problem["key"] == "plan.stages" and problem["value"] == 16
    assert problem["rule"].startswith("pp=16: more stages than the 8 devices"), problem
