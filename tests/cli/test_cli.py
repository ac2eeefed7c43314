"""The ``autopar`` CLI: schema, zoo list, estimate, and delegation to other modules."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from autopar_opt.cli.commands import app
from autopar_opt.cost.evaluate import PlanError, evaluate
from autopar_opt.spec import SpecError, SpecProblem, load_spec
from autopar_opt.ir.training import Recompute
from support import paths

ROOT = paths.REPO
GPT3 = ROOT / "examples" / "estimate_megatron_gpt3_175b.yaml"


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def test_schema_is_json_with_documented_properties():
    result = _cli("schema")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    # any of the three forms solve reads (QA round 10: problem specs were missing)
    assert [a["$ref"].rsplit("/", 1)[-1] for a in schema["anyOf"]] == [
        "SpecFile", "OpSpecFile", "PeerSpecFile"]
    spec = schema["$defs"]["SpecFile"]
    assert {"model", "cluster", "training", "search", "solver", "cost_model", "plan"} <= set(
        spec["properties"])
    assert spec["required"] == ["model", "cluster", "training"]
    assert "problem" in schema["$defs"]["OpSpecFile"]["properties"]
    undocumented = [f"{name}.{prop}" for name, d in schema["$defs"].items()
                    for prop, body in d.get("properties", {}).items() if not body.get("description")]
    assert undocumented == []
    assert "gpus_per_node" in schema["$defs"]["ExplicitClusterSpec"]["properties"]


def test_every_bundled_solve_example_validates_against_the_schema():
    import jsonschema
    import yaml

    schema = json.loads(_cli("schema").stdout)
    validator = jsonschema.Draft202012Validator(schema)
    examples = ROOT / "examples"
    paths = [p for p in sorted(examples.rglob("*.yaml"))
             if p.parent.name not in ("split", "placement") and not p.name.startswith("capacity")]
    assert len(paths) > 20 and any(p.parent.name == "peers" for p in paths)
    failing = {p.name: next(iter(validator.iter_errors(yaml.safe_load(p.read_text())))).message[:100]
               for p in paths if not validator.is_valid(yaml.safe_load(p.read_text()))}
    assert failing == {}


def test_zoo_list_lists_debug_and_a_cluster():
    result = _cli("zoo", "list")
    assert result.exit_code == 0
    assert re.search(r"\bdebug\b", result.stdout) and "dgx-a100-8" in result.stdout


def test_estimate_json_equals_evaluate_on_the_same_plan():
    result = _cli("estimate", str(GPT3), "--json")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    spec = load_spec(GPT3)
    metrics = evaluate(spec.plan, spec.graph, spec.cluster, spec.training, spec.cost_params)
    assert out["metrics"]["iteration_time_s"] == metrics.iteration_time_s
    assert out["metrics"]["mfu"] == metrics.mfu
    assert out["plan"] == spec.plan.to_dict()


def test_estimate_text_prints_the_evaluated_iteration_time():
    """tp8·pp8·dp1 on 64 GPUs, SP + selective recompute of the transformer blocks (as
    Megatron recomputes: not the embedding or the head), 64 micro-batches of 1 sample."""
    spec = load_spec(GPT3)
    blocks = {layer.name for layer in spec.graph.layers if layer.kind.value.endswith("block")}
    strategies = {s for n, s in spec.plan.strategy_of().items() if n in blocks}
    assert {s.recompute for n, s in spec.plan.strategy_of().items()
            if n not in blocks} == {Recompute.none}
    assert len(strategies) == 1
    (s,) = strategies
    assert (s.tp, s.dp, s.sp, s.recompute) == (8, 1, True, Recompute.selective)
    assert spec.plan.pp == 8 and spec.plan.microbatches == 64
    result = _cli("estimate", str(GPT3))
    assert result.exit_code == 0, result.stderr
    printed = float(re.search(r"iteration time:\s+(\S+) s", result.stdout).group(1))
    expected = evaluate(spec.plan, spec.graph, spec.cluster, spec.training,
                        spec.cost_params).iteration_time_s
    assert printed == pytest.approx(expected, rel=1e-5)
    assert result.stdout.count("stage ") >= 8 and "MFU" in result.stdout


def test_estimate_warns_when_the_plan_does_not_fit(tmp_path):
    """A 1 GiB device with 0.22 GiB reserved and the runtime's ~0.76 GiB leaves ~17 MiB:
    the debug model's weights alone (16 B/param x ~3M params) cannot fit. (A reserve that
    leaves nothing at all, 0.999 GiB, is a spec error: test_spec_errors.)"""
    spec = {"model": {"zoo": "debug"},
            "cluster": {"nodes": 1, "gpus_per_node": 1,
                        "device": {"name": "tiny", "peak_tflops": {"bf16": 10}, "hbm_gib": 1,
                                   "hbm_gb_per_s": 100}},
            "training": {"global_batch_size": 4, "memory_reserve_gib": 0.22},
            "plan": {"microbatches": 1}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    result = _cli("estimate", str(tmp_path / "s.yaml"))
    assert result.exit_code == 0
    assert "DOES NOT FIT" in result.stdout and "warning: the plan does not fit" in result.stderr


def test_estimate_without_plan_exits_2():
    result = _cli("estimate", str(ROOT / "examples" / "bert_huge_1x8_v100.yaml"))
    assert result.exit_code == 2 and "no 'plan' section" in result.stderr


def _fake_module(monkeypatch, name: str, func_name: str, func) -> list:
    calls: list = []

    def record(*args, **kwargs):
        calls.append(args + tuple(sorted(kwargs.items())))
        return func(*args)
    module = types.ModuleType(name)
    setattr(module, func_name, record)
    monkeypatch.setitem(sys.modules, name, module)
    return calls


def test_solve_delegates_and_returns_its_exit_code(monkeypatch):
    calls = _fake_module(monkeypatch, "autopar_opt.cli.solve", "solve_command", lambda *a: 3)
    result = _cli("solve", "s.yaml", "--solver", "dp", "--time-limit", "5", "--gap", "0.01",
                  "--out", "outdir", "--json", "--quiet")
    assert result.exit_code == 3
    assert calls == [("s.yaml", "dp", 5.0, 0.01, "outdir", True, True, ("form", None),
                      ("started_at", None))]
    _cli("solve", "s.yaml", "--form", "milp")
    assert calls[-1] == ("s.yaml", None, None, None, None, False, False, ("form", "milp"),
                         ("started_at", None))


def test_calibrate_and_report_delegate(monkeypatch):
    cal = _fake_module(monkeypatch, "autopar_opt.cli.calibrate", "calibrate_command", lambda *a: 0)
    rep = _fake_module(monkeypatch, "autopar_opt.cli.report", "report_command", lambda *a: 4)
    assert _cli("calibrate", "runs.yaml", "--fit", "--output", "fit.yaml",
                "--cross-validate", "family").exit_code == 0
    assert cal == [("runs.yaml", False, True, "fit.yaml", "family", None, None, False)]
    assert _cli("report", "plan.json", "-o", "out.html").exit_code == 4
    assert rep == [("plan.json", "out.html", False, False)]
    # --out is the common spelling; -o and --output stay as aliases of the same option
    assert _cli("report", "plan.json", "--out", "b.html", "--json").exit_code == 4
    assert _cli("calibrate", "runs.yaml", "--fit", "--out", "f2.yaml").exit_code == 0
    assert rep[-1] == ("plan.json", "b.html", False, True) and cal[-1][3] == "f2.yaml"


@pytest.mark.parametrize("error", [
    SpecError([SpecProblem("s.yaml", "solver.name", "x", "bad", "use highs")]),
    PlanError("stage 0 is empty"),
])
def test_delegate_errors_exit_2_without_traceback(monkeypatch, error):
    def boom(*args):
        raise error
    _fake_module(monkeypatch, "autopar_opt.cli.solve", "solve_command", boom)
    result = _cli("solve", "s.yaml")
    assert result.exit_code == 2
    assert str(error) in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_console_script_exit_codes(tmp_path):
    """The installed ``autopar`` entry point (main) returns 0 / 2 as a process."""
    import subprocess

    exe = Path(sys.executable).parent / "autopar"
    if not exe.exists():
        pytest.skip("console script not installed in this environment")
    ok = subprocess.run([str(exe), "estimate", str(ROOT / "examples" / "quickstart.yaml")],
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "iteration time" in ok.stdout
    bad = subprocess.run([str(exe), "estimate", str(ROOT / "tests" / "data" / "specs" /
                                                     "three_mistakes.yaml")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "3 problems" in bad.stderr
    assert "Traceback" not in bad.stderr and bad.stdout == ""


def test_solve_with_a_searcher_reports_it_against_the_certificate(tmp_path):
    result = _cli("solve", str(ROOT / "examples" / "quickstart.yaml"), "--searcher", "anneal",
                  "--budget-s", "1", "--seed", "2", "--json", "--quiet")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    block = doc["searcher"]
    assert {"name", "value", "wall_time_s", "trace", "lower_bound", "gap", "optimum"} <= set(block)
    assert block["name"] == "anneal" and block["seed"] == 2
    spec = load_spec(ROOT / "examples" / "quickstart.yaml")
    from autopar_opt.ir.plan import Plan
    metrics = evaluate(Plan.from_dict(block["plan"]), spec.graph, spec.cluster, spec.training,
                       spec.cost_params)
    assert block["value"] == pytest.approx(metrics.iteration_time_s, rel=1e-12)
    # the searcher searches the free per-layer space: under the runtime's target it is
    # measured against that space's certificate, not the runnable one
    free = doc["runnability"]
    assert free is not None and block["measured_against"].startswith("the free per-layer space")
    assert block["lower_bound"] == free["free_lower_bound"]
    assert block["value"] >= free["free_lower_bound"] * (1 - 1e-9)
    assert block["optimum"] == free["free_primal"]   # proven optimal here
    assert block["ratio_to_optimum"] >= 1 - 1e-9
    # the summary line says which certificate it is measured against (session 24: it read
    # "x the proven optimum" of the free space under the runnable certificate's "optimal")
    text = _cli("solve", str(ROOT / "examples" / "quickstart.yaml"), "--searcher", "anneal",
                "--budget-s", "1", "--seed", "2").stdout
    line = next(x for x in text.splitlines() if x.strip().startswith("searcher anneal"))
    assert "proven lower bound of the free per-layer space" in line
    assert "x the proven optimum of the free per-layer space" in line


def test_solve_with_a_learned_searcher_but_no_torch_says_how_to_install(monkeypatch):
    monkeypatch.setattr("autopar_opt.learn.base.torch_available", lambda: False)
    result = _cli("solve", str(ROOT / "examples" / "quickstart.yaml"), "--searcher", "gdp",
                  "--json", "--quiet")
    assert result.exit_code == 2
    assert "pip install 'autopar-opt[learn]'" in result.output
    # no plan: under --json the error object only (README; QA round 12: refused up front)
    assert list(json.loads(result.stdout)) == ["error"]


def _says_where_the_prediction_lies(iv, t: float) -> None:
    """An interval holds its prediction, or its text says on which side it lies (as
    it does when every comparable run ran faster, or every one slower, than the
    model predicted it out of sample)."""
    assert iv.value == t
    text = iv.text()
    if iv.low <= t <= iv.high:
        assert "lies" not in text
    else:
        assert ("lies below the prediction" in text) == (t > iv.high)
        assert ("lies above the prediction" in text) == (t < iv.low)


def test_estimate_states_the_parameter_count_and_the_error_bar():
    """Issue 28: the built parameter count (total and active) and the 80%
    interval of the iteration time from comparable published runs, in the text
    and in the JSON (oracle: the interval module on the same plan)."""
    from autopar_opt.cost.interval import plan_interval

    spec = load_spec(GPT3)
    metrics = evaluate(spec.plan, spec.graph, spec.cluster, spec.training, spec.cost_params)
    iv = plan_interval(spec.graph, spec.cluster, spec.training, spec.plan, metrics.iteration_time_s)
    _says_where_the_prediction_lies(iv, metrics.iteration_time_s)
    text = _cli("estimate", str(GPT3)).stdout
    assert f"{spec.graph.total_params() / 1e9:.3f} B parameters (all active)" in text
    assert iv.text() in text and "comparable published runs" in text
    out = json.loads(_cli("estimate", str(GPT3), "--json").stdout)
    assert out["metrics"]["interval"] == iv.to_dict()


def test_solve_summary_and_plan_json_carry_the_error_bar(tmp_path):
    """The summary prints the parameter count and the interval plan.json holds
    (oracle: the interval module on the plan found); the baselines carry theirs."""
    from autopar_opt.cost.interval import plan_interval
    from autopar_opt.ir.plan import Plan

    result = _cli("solve", str(ROOT / "examples" / "quickstart.yaml"), "--out", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    doc = json.loads((tmp_path / "plan.json").read_text())
    spec = load_spec(ROOT / "examples" / "quickstart.yaml")
    plan = Plan.from_dict(doc["plan"])
    t = doc["metrics"]["iteration_time_s"]
    iv = plan_interval(spec.graph, spec.cluster, spec.training, plan, t)
    assert doc["metrics"]["interval"] == iv.to_dict()
    _says_where_the_prediction_lies(iv, t)
    assert doc["spec"]["model"]["params_active"] == spec.graph.active_params()
    assert iv.text() in " ".join(result.stdout.split())
    assert "B parameters" in result.stdout
    assert all(b["metrics"] is None or b["metrics"]["interval"]["value"]
               == b["metrics"]["iteration_time_s"] for b in doc["baselines"])


def test_a_model_without_a_sequence_prints_no_tokens_per_second():
    """Inception-v3 (no training.seq_len): its "tokens" would be samples (QA round 10: it
    printed 3244 tokens/s, the samples/s)."""
    from autopar_opt.reports.formatting import NO_TOKENS, has_sequence, tokens_rate

    result = _cli("estimate", str(ROOT / "examples" / "inception_v3_8gpu.yaml"))
    assert result.exit_code == 0, result.output
    assert "tokens/s:         none (training.seq_len not set" in result.stdout
    assert not has_sequence({"spec": {"training": {"seq_len": None}}})
    assert has_sequence({"spec": {"training": {"seq_len": 4096}}}) and has_sequence({})
    assert tokens_rate(3244.0, False) == NO_TOKENS and tokens_rate(3244.0, True) == "3,244 tokens/s"


@pytest.mark.parametrize("name", ["inception-v3", "vit-huge-32"])
def test_model_seq_len_on_a_vision_zoo_model_is_refused(name):
    """Its token count is its image's: exit 2 naming the option (QA round 10: an internal
    error, exit 70)."""
    from support.cli import run_cli

    code, text = run_cli("model", name, "--seq-len", "100")
    assert code == 2, text
    assert "--seq-len = 100" in text and "drop --seq-len" in text


def test_estimate_says_what_compute_includes():
    """estimate's compute includes the recomputed forward, which solve's comparison lists
    apart: the line says so and gives that part, compute·(1 - MFU/HFU) (QA round 10)."""
    spec = load_spec(GPT3)
    m = evaluate(spec.plan, spec.graph, spec.cluster, spec.training, spec.cost_params)
    out = _cli("estimate", str(GPT3)).stdout
    part = m.breakdown["compute_s"] * (1 - m.mfu / m.hfu)
    assert "compute (recompute incl.)" in out
    assert re.search(rf"of which recomputation\s+{part:.4g}\b", out), out


def test_model_says_where_its_sequence_length_came_from(tmp_path):
    """QA round 10: a spec stating no training.seq_len was labelled "(from the spec)", and
    a name both a zoo model and a bundled config built the config without saying so."""
    out = _cli("model", str(ROOT / "examples" / "llama7b_2x8_a100.yaml")).stdout
    assert "(training.seq_len)" in out.splitlines()[0]
    data = yaml.safe_load((ROOT / "examples" / "llama7b_2x8_a100.yaml").read_text())
    data["training"].pop("seq_len", None)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    out = _cli("model", str(tmp_path / "s.yaml")).stdout
    assert "(the model's own; the spec states no training.seq_len)" in out.splitlines()[0]
    out = _cli("model", "deepseek-v3").stdout
    assert "this is the bundled config" in out and "model: {zoo: deepseek-v3}" in out


def test_a_spec_without_a_sequence_is_not_told_to_use_the_bare_config_option(tmp_path):
    """QA round 10: it advised --seq-len, which a spec refuses."""
    spec = {"model": {"hf_config": "mistral-7b-v0.1"},
            "cluster": {"nodes": 1, "gpus_per_node": 8, "device": "H100-SXM-80GB"},
            "training": {"global_batch_size": 8}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    result = _cli("model", str(tmp_path / "s.yaml"))
    assert result.exit_code == 2 and "set training.seq_len in the spec" in result.output
    assert "--seq-len" not in result.output


def test_model_seq_len_on_a_vision_transformer_config_is_refused():
    """QA round 10: ignored without a word (197 tokens used)."""
    result = _cli("model", "vit-base-patch16-224", "--seq-len", "100")
    assert result.exit_code == 2 and "--seq-len = 100" in result.output
    assert "drop --seq-len" in result.output
