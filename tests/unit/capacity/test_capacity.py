"""``autopar capacity``: validation, the JSON document, intervals against evaluate(), the store.

Oracles: every scenario's plan is re-priced by :func:`evaluate` (its
iteration time must equal the primal the intervals come from); the interval
ends are recomputed from their definitions (steps x bound, x GPUs x price);
a second run of the same sweep must solve nothing (the store's keys).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil

import pytest
import yaml
from typer.testing import CliRunner

from autopar_opt.capacity import load_sweep
from autopar_opt.capacity.sweep import SweepError, scenario_key
from autopar_opt.cli.commands import app
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.ir.plan import Plan
from autopar_opt.spec import build_spec
from support import paths
from support.sweeps import only_problem

DATA = paths.DATA / "capacity"
TINY = DATA / "tiny.yaml"


def _cli(*args: str):
    return CliRunner().invoke(app, ["capacity", *args])


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The tiny sweep solved once (2 workers) with --out and --json."""
    out = tmp_path_factory.mktemp("capacity")
    result = _cli(str(TINY), "--out", str(out / "run"), "--json", "--workers", "2")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), out / "run"


def test_bad_sweep_lists_every_problem_once_and_exits_2(tmp_path):
    result = _cli(str(DATA / "bad.yaml"), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    text = result.output
    assert text.startswith("invalid sweep: 4 problems")
    assert "axes.device[2] = 'H100-SXM': unknown device (did you mean 'H100-SXM-80GB'?)" in text
    assert "axes.gpus[1] = 6: not whole nodes of 4 GPUs" in text
    assert "no price for device 'H100-SXM-80GB'" in text
    assert text.count("base.training.dtype = 'bf17'") == 1      # once, not once per scenario
    assert "Traceback" not in text
    assert not (tmp_path / "out").exists()                       # nothing half-written


def test_schema_problems_name_key_value_rule_and_fix():
    with pytest.raises(SweepError) as exc:
        load_sweep(DATA / "bad_schema.yaml")
    keys = {p.key for p in exc.value.problems}
    assert keys == {"axes.gpu", "planning.token_budget", "planning.deadline_days"}
    gpu = next(p for p in exc.value.problems if p.key == "axes.gpu")
    assert "did you mean 'gpus'" in gpu.fix


def test_base_spec_problem_is_reported_at_the_base_key():
    with pytest.raises(SweepError, match=r"base\.search\.zero_levls = \[0\]: unknown key"):
        load_sweep(DATA / "bad_base.yaml")


def test_axis_value_breaking_a_spec_rule_is_reported_at_the_axis(tmp_path):
    data = yaml.safe_load(TINY.read_text())
    data["axes"]["global_batch_size"] = [16, 0]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SweepError) as exc:
        load_sweep(path)
    assert [p.key for p in exc.value.problems] == ["axes.global_batch_size[1]"]


def test_a_dtype_axis_the_base_optimizer_cannot_train_is_named_at_the_axis(tmp_path):
    """QA round 7: adam_bf16 in the base with dtype fp16 on an axis was reported at
    base.training.optimizer, with a fix to the base; the value that breaks it is the axis's."""
    data = yaml.safe_load(TINY.read_text())
    data["base"].setdefault("training", {})["optimizer"] = "adam_bf16"
    data["axes"]["dtype"] = ["bf16", "fp16"]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SweepError) as exc:
        load_sweep(path)
    assert [p.key for p in exc.value.problems] == ["axes.dtype[1]"]
    assert "adam_bf16" in exc.value.problems[0].rule


def test_zoo_base_cluster_with_cluster_axes_is_refused(tmp_path):
    data = yaml.safe_load(TINY.read_text())
    data["base"]["cluster"] = {"zoo": "debug-2x4"}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SweepError, match="need an explicit base cluster"):
        load_sweep(path)


def test_expansion_ids_and_axis_order():
    sweep = load_sweep(TINY)
    assert [s.id for s in sweep.scenarios] == [
        f"{d}_{g}gpu" for d in ("A100-80GB", "H100-SXM-80GB") for g in (2, 4, 8)]
    s = sweep.scenarios[0]
    assert (s.gpus, s.spec.cluster.nodes, s.spec.cluster.gpus_per_node) == (2, 1, 2)
    s = sweep.scenarios[2]
    assert (s.gpus, s.spec.cluster.nodes, s.spec.cluster.gpus_per_node) == (8, 2, 4)
    assert len({s.key for s in sweep.scenarios}) == 6


def test_key_is_content_hash_of_normalised_scenario_and_cost_model():
    sweep = load_sweep(TINY)
    s = sweep.scenarios[1]
    reordered = {k: s.data[k] for k in reversed(list(s.data))}        # same content, other order
    reordered["description"] = "same scenario, other words"
    assert scenario_key(build_spec(reordered, TINY)) == s.key
    changed = dict(s.data, cost_model={"comm_efficiency": 0.5})
    assert scenario_key(build_spec(changed, TINY)) != s.key


def test_json_document_has_the_promised_fields(tiny_run):
    doc, _ = tiny_run
    assert {"scenarios", "answers", "wall_time_s"} <= set(doc)
    for e in doc["scenarios"]:
        assert {"id", "device", "gpus", "status", "primal", "lower_bound", "gap",
                "time_to_train_days", "cost"} <= set(e)
        assert len(e["time_to_train_days"]) == 2 and len(e["cost"]) == 2
    assert {"cheapest_meeting_requirement", "fewest_gpus_per_device", "pareto_time_cost"} <= set(
        doc["answers"])
    assert doc["run"] == {"engine": "local", "workers": 2, "store": str(tiny_run[1] / "capacity.sqlite"),
                          "reused": 0, "computed": 6, "not_run": []}


def test_intervals_follow_from_the_certified_bounds(tiny_run):
    doc, out = tiny_run
    budget = doc["planning"]["token_budget"]
    sweep = load_sweep(TINY)
    by_id = {s.id: s for s in sweep.scenarios}
    solved = 0
    for e in doc["scenarios"]:
        if e["primal"] is None:
            continue
        solved += 1
        spec = by_id[e["id"]].spec
        plan_doc = json.loads((out / e["report"]).with_name("plan.json").read_text())
        metrics = evaluate(Plan.from_dict(plan_doc["plan"]), spec.graph, spec.cluster, spec.training,
                           spec.cost_params)
        assert metrics.iteration_time_s == pytest.approx(e["primal"], rel=1e-9)
        assert 0 < e["lower_bound"] <= e["primal"] * (1 + 1e-9)
        steps = math.ceil(budget / (spec.training.global_batch_size * spec.training.seq_len))
        lo, hi = e["time_to_train_days"]
        assert hi == pytest.approx(steps * e["primal"] / 86400)
        assert lo == pytest.approx(steps * e["lower_bound"] / 86400)
        price = doc["planning"]["prices"]["per_gpu_hour"][e["device"]]
        assert e["cost"][1] == pytest.approx(hi * 24 * e["gpus"] * price)
        assert e["cost"][0] == pytest.approx(lo * 24 * e["gpus"] * price)
        assert e["gap"] <= 1e-3 + 1e-12 and e["status"] == "optimal"
    assert solved == 6


def test_each_plan_carries_the_error_bar_of_the_cost_model(tiny_run):
    """Issue 28: the plan held, with the 80% interval of its iteration time from
    comparable published runs (oracle: the interval module on the scenario's
    plan) turned into time to train and cost; the answers quote their pick's."""
    from autopar_opt.cost.interval import plan_interval

    doc, out = tiny_run
    budget = doc["planning"]["token_budget"]
    by_id = {s.id: s for s in load_sweep(TINY).scenarios}
    for e in doc["scenarios"]:
        spec = by_id[e["id"]].spec
        plan_doc = json.loads((out / e["report"]).with_name("plan.json").read_text())
        iv = plan_interval(spec.graph, spec.cluster, spec.training, Plan.from_dict(plan_doc["plan"]),
                           e["primal"])
        steps = math.ceil(budget / (spec.training.global_batch_size * spec.training.seq_len))
        err = e["model_error"]
        assert err["iteration_time_s"] == pytest.approx([iv.low, iv.high])
        assert err["time_to_train_days"] == pytest.approx([steps * iv.low / 86400,
                                                           steps * iv.high / 86400])
        price = doc["planning"]["prices"]["per_gpu_hour"][e["device"]]
        assert err["cost"][1] == pytest.approx(err["time_to_train_days"][1] * 24 * e["gpus"] * price)
        assert err["comparable_runs"] == iv.n and "comparable published runs" in err["text"]
    ans = doc["answers"]["cheapest_meeting_requirement"]
    pick = next(e for e in doc["scenarios"] if e["id"] == ans["scenario"])
    assert ans["model_error"] == pick["model_error"] and pick["model_error"]["text"] in ans["statement"]
    rows = list(csv.DictReader(io.StringIO((out / "capacity.csv").read_text())))
    assert float(rows[0]["model_error_days_hi"]) == pytest.approx(
        doc["scenarios"][0]["model_error"]["time_to_train_days"][1])
    assert "80% interval vs published runs" in (out / "capacity.html").read_text()


def test_cheapest_answer_is_consistent_with_the_scenarios(tiny_run):
    doc, _ = tiny_run
    ans = doc["answers"]["cheapest_meeting_requirement"]
    meeting = [e for e in doc["scenarios"] if e["meets"] == "yes"]
    assert meeting, "the tiny sweep has scenarios meeting its deadline"
    assert ans["scenario"] == min(meeting, key=lambda e: (e["cost"][1], e["gpus"], e["id"]))["id"]
    best_hi = min(e["cost"][1] for e in meeting)
    rivals = {e["id"] for e in meeting if e["id"] != ans["scenario"] and e["cost"][0] < best_hi}
    assert set(ans["within_gap"]) == rivals and ans["proven"] == (not rivals)


def test_outputs_csv_html_and_scenario_reports(tiny_run):
    doc, out = tiny_run
    rows = list(csv.DictReader(io.StringIO((out / "capacity.csv").read_text())))
    assert [r["id"] for r in rows] == [e["id"] for e in doc["scenarios"]]
    assert float(rows[0]["cost_hi"]) == pytest.approx(doc["scenarios"][0]["cost"][1])
    html = (out / "capacity.html").read_text()
    assert html.count("<svg") == 2 and "<script" not in html
    for e in doc["scenarios"]:
        assert f'href="{e["report"]}"' in html
        assert (out / e["report"]).read_text().startswith("<!DOCTYPE html>")
    assert json.loads((out / "capacity.json").read_text())["scenarios"] == doc["scenarios"]


def test_second_run_reuses_every_stored_scenario(tiny_run, tmp_path):
    doc, out = tiny_run
    shutil.copy(out / "capacity.sqlite", tmp_path / "store.sqlite")
    result = _cli(str(TINY), "--store", str(tmp_path / "store.sqlite"), "--json")
    assert result.exit_code == 0, result.output
    again = json.loads(result.stdout)
    assert again["run"]["computed"] == 0 and again["run"]["reused"] == 6
    strip = lambda e: {k: v for k, v in e.items() if k != "report"}
    assert [strip(e) for e in again["scenarios"]] == [strip(e) for e in doc["scenarios"]]
    assert again["answers"] == doc["answers"]


def test_missing_ray_says_how_to_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    result = _cli(str(TINY), "--engine", "ray", "--store", ":memory:")
    assert result.exit_code == 2
    assert "pip install 'autopar-opt[ray]'" in result.output


@pytest.mark.parametrize("args,match", [(["--engine", "spark"], "--engine 'spark' is not one of"),
                                        (["--workers", "0"], "--workers 0 must be at least 1")])
def test_bad_options_exit_2(args, match):
    result = _cli(str(TINY), *args)
    assert result.exit_code == 2 and match in result.output


def test_nodes_interconnect_and_dtype_axes_set_the_spec(tmp_path):
    data = yaml.safe_load(TINY.read_text())
    data["axes"] = {"nodes": [1, 2], "dtype": ["bf16", "fp16"],
                    "interconnect": [{"name": "ib-100g", "inter_node": {"bandwidth_gb_per_s": 12.5,
                                                                        "latency_us": 12.0}},
                                     {"name": "default"}]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    sweep = load_sweep(path)
    assert sweep.axis_names == ["nodes", "interconnect", "dtype"]
    assert [s.id for s in sweep.scenarios][:3] == ["1node_ib-100g_bf16", "1node_ib-100g_fp16",
                                                   "1node_default_bf16"]
    by_id = {s.id: s.spec for s in sweep.scenarios}
    slow = by_id["2node_ib-100g_fp16"]
    assert (slow.cluster.nodes, slow.cluster.inter_node.bandwidth_gb_per_s,
            slow.cluster.inter_node.latency_us, slow.training.dtype) == (2, 12.5, 12.0, "fp16")
    default = by_id["2node_default_bf16"].cluster.inter_node
    assert default.bandwidth_gb_per_s == 25.0          # A100's catalog default (HDR, 200 Gb/s)
    assert len({s.key for s in sweep.scenarios}) == 8


def test_a_scenario_whose_search_raises_becomes_an_error_row():
    from autopar_opt.capacity.worker import solve_scenario

    row = solve_scenario({"id": "broken", "key": "k", "path": str(TINY),
                          "data": {"model": {"zoo": "debug"}, "cluster": {"zoo": "no-such-cluster"},
                                   "training": {"global_batch_size": 8}}})
    assert row["status"] == "error" and row["document"] is None
    assert row["reason"].startswith("SpecError:") and "no-such-cluster" in row["reason"]


def test_runtime_axis_sets_training_runtime_and_reports_bad_values_at_the_axis(tmp_path):
    data = yaml.safe_load(TINY.read_text())
    data["axes"] = {"runtime": ["megatron-core", "pytorch-fsdp"]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    sweep = load_sweep(path)
    assert [s.spec.training.runtime.name for s in sweep.scenarios] == ["megatron-core", "pytorch-fsdp"]
    assert sweep.scenarios[0].key != sweep.scenarios[1].key
    data["axes"]["runtime"].append("nosuch")
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SweepError) as exc:
        load_sweep(path)
    assert [p.key for p in exc.value.problems] == ["axes.runtime[2]"]


def test_one_worker_runs_in_this_process_without_a_pool(monkeypatch):
    """--workers 1 (or one scenario) solves in this process, in order: no fork
    server importing the solver stack a second time (issue 15, 4.4 s wall for
    1.6 s CPU); more workers still use the pool."""
    from autopar_opt.capacity import engines

    class NoPool:
        def __init__(self, *args, **kwargs):
            raise AssertionError("a process pool was started")

    monkeypatch.setattr(engines, "ProcessPoolExecutor", NoPool)
    monkeypatch.setattr(engines, "solve_scenario", lambda task: {"id": task["id"], "pid": os.getpid()})
    tasks = [{"id": f"s{k}"} for k in range(3)]
    rows = list(engines.run_local(tasks, 1))
    assert [r["id"] for r in rows] == ["s0", "s1", "s2"] and {r["pid"] for r in rows} == {os.getpid()}
    assert [r["id"] for r in engines.run_local(tasks[:1], 4)] == ["s0"]
    with pytest.raises(AssertionError, match="process pool"):
        list(engines.run_local(tasks, 2))


def test_the_axes_examples_name_values_the_sweep_accepts():
    """Each axis' example feeds the "fix" of an error message ("expected at least 1 item(s),
    e.g. [...]"); the runtime axis suggested ['megatron'], itself refused as an unknown
    runtime (QA round 11). Oracle: the device catalog and the runtime catalog."""
    from autopar_opt.capacity.schema import AxesSection
    from autopar_opt.ir.hardware import DEVICE_CATALOG
    from autopar_opt.ir.runtime import runtime_named

    fields = AxesSection.model_fields
    for name in fields["runtime"].examples[0]:
        runtime_named(name)                  # KeyError for an unknown runtime
    assert all(d in DEVICE_CATALOG for d in fields["device"].examples[0])


def test_a_base_path_naming_no_file_is_reported_at_the_sweep_key(tmp_path, monkeypatch):
    """`base: missing.yaml` was reported at the missing file (not the sweep that holds the
    key) with the spec loader's fix "relative paths are from the current directory", while
    a sweep reads its base from its own folder (QA round 11). Oracle: a base that exists
    beside the sweep loads from any working directory."""
    sweep_dir = tmp_path / "sweeps"
    sweep_dir.mkdir()
    data = yaml.safe_load((DATA / "two.yaml").read_text())
    data["base"] = "base.yaml"
    path = sweep_dir / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SweepError) as exc:
        load_sweep(path)
    (p,) = exc.value.problems
    assert (p.file, p.key, p.value) == (str(path), "base", "base.yaml")
    assert "sweep file's folder" in p.rule and str(sweep_dir) in p.fix
    shutil.copy(DATA / "tiny_base.yaml", sweep_dir / "base.yaml")
    assert len(load_sweep(path).scenarios) == 2


def test_a_model_without_a_sequence_says_its_samples_count_as_tokens(tmp_path):
    """Inception-v3 has no sequence length: the sweep priced each image as one token
    ("train 1.28e+08 tokens", "tokens/s") and never said so (QA round 11). Oracle: the
    tokens per step equal the global batch, and every scenario's notes say it; an LM
    sweep gets no such note."""
    from autopar_opt.capacity.sweep import NO_SEQUENCE_NOTE

    data = yaml.safe_load((DATA / "two.yaml").read_text())
    data["base"] = {"model": {"zoo": "inception-v3"},
                    "cluster": {"nodes": 1, "gpus_per_node": 4, "device": "A100-80GB"},
                    "training": {"global_batch_size": 256, "optimizer": "sgd_momentum_mixed"},
                    "search": {"pp_degrees": [1], "tp_degrees": [1], "microbatches": [1]}}
    path = tmp_path / "cnn.yaml"
    path.write_text(yaml.safe_dump(data))
    sweep = load_sweep(path)
    assert len(sweep.scenarios) == 2
    for s in sweep.scenarios:
        assert s.tokens_per_iteration == 256 and NO_SEQUENCE_NOTE in s.notes
        assert "count samples" in NO_SEQUENCE_NOTE
    assert not any(NO_SEQUENCE_NOTE in s.notes for s in load_sweep(DATA / "two.yaml").scenarios)


@pytest.mark.parametrize("cluster, device", [
    ({"zoo": "1x8-a100-40"}, "A100-40GB"),
    ({"nodes": 1, "gpus_per_node": 4, "device": {"name": "my-gpu", "peak_tflops": {"bf16": 400.0},
                                                 "hbm_gib": 96.0, "hbm_gb_per_s": 3000.0}},
     "my-gpu")])
def test_a_device_the_sweep_does_not_name_still_needs_a_price(tmp_path, cluster, device):
    """A base on a zoo cluster or a custom device: the price check read device names from
    the sweep file only, so every scenario was solved and the command then died pricing
    them (KeyError, exit 70; QA round 11). Oracle: the device the built scenario runs on."""
    data = yaml.safe_load(TINY.read_text())
    data["base"]["cluster"] = cluster
    data["axes"] = {"global_batch_size": [64]}
    data["planning"]["prices"]["per_gpu_hour"] = {"A100-80GB": 1.5}
    p, path = only_problem(tmp_path, data)
    assert p.key == "planning.prices.per_gpu_hour" and f"no price for device {device!r}" in p.rule
    data["planning"]["prices"]["per_gpu_hour"] = {device: 2.0}
    path.write_text(yaml.safe_dump(data))
    (s,) = load_sweep(path).scenarios
    assert s.device == device


@pytest.mark.parametrize("name", [".", ".."])
def test_an_interconnect_name_of_dots_is_refused(tmp_path, name):
    """A scenario id '..' wrote its plan.json and report.html into the --out folder itself,
    '.' into the scenarios folder (QA round 11: `scenarios/<id>/` with id '..'). Oracle: the
    same option under a name with a letter loads."""
    data = yaml.safe_load(TINY.read_text())
    data["axes"] = {"interconnect": [{"name": name, "inter_node": {"bandwidth_gb_per_s": 50.0,
                                                                    "latency_us": 10.0}}]}
    p, path = only_problem(tmp_path, data)
    assert (p.key, p.value) == ("axes.interconnect[0].name", name) and "dots only" in p.rule
    data["axes"]["interconnect"][0]["name"] = "ib"
    path.write_text(yaml.safe_dump(data))
    assert [s.id for s in load_sweep(path).scenarios] == ["ib"]


@pytest.mark.parametrize("gpn", ["four", None, [4], 0, -4, True])
def test_a_base_gpus_per_node_the_axes_cannot_use_is_one_problem(tmp_path, gpn):
    """With a gpus axis, the base's gpus_per_node went through int() and % before any check:
    'four', null, [4] and 0 ended in an internal error (exit 70), -4 in problems at every
    gpus value (QA round 11). Oracle: the same sweep with gpus_per_node 4 loads."""
    data = yaml.safe_load(TINY.read_text())
    data["base"]["cluster"]["gpus_per_node"] = gpn
    p, path = only_problem(tmp_path, data)
    assert p.key == "base.cluster.gpus_per_node" and "positive whole number" in p.rule
    data["base"]["cluster"]["gpus_per_node"] = 4
    path.write_text(yaml.safe_dump(data))
    assert len(load_sweep(path).scenarios) == 6


def test_a_problem_of_an_inline_base_section_is_keyed_under_base(tmp_path):
    """`base: {training: x}` written in the sweep was reported as "sweep.yaml: training = 'x'",
    a key the sweep file does not have (QA round 11). Oracle: the key path in the file; a base
    in a file of its own keeps that file's own keys."""
    data = yaml.safe_load(TINY.read_text())
    data["base"]["training"] = "x"
    p, path = only_problem(tmp_path, data)
    assert (p.file, p.key, p.value) == (str(path), "base.training", "x")
    base = yaml.safe_load((DATA / "tiny_base.yaml").read_text())
    base["training"] = "x"
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(base))
    data["base"] = "b.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SweepError) as exc:
        load_sweep(path)
    (p,) = exc.value.problems
    assert (p.file, p.key) == (str(tmp_path / "b.yaml"), "training")


@pytest.mark.parametrize("axes, key, first", [
    ({"runtime": ["megatron-core", "megatron_core"]}, "axes.runtime[1]", "rt-megatron-core"),
    ({"interconnect": [{"name": n, "inter_node": {"bandwidth_gb_per_s": 50.0, "latency_us": 10.0}}
                       for n in ("a", "b")]}, "axes.interconnect[1]", "a")])
def test_two_values_giving_one_scenario_are_refused(tmp_path, axes, key, first):
    """Two spellings of one runtime, or two interconnect options with the same links, built
    the same scenario (same store key) twice and listed it as two, both on the frontier
    (QA round 11). Oracle: the scenario keys of the built specs are equal."""
    data = yaml.safe_load(TINY.read_text())
    data["axes"] = axes
    p, path = only_problem(tmp_path, data)
    assert p.key == key and f"gives the same scenario as {first}" in p.rule
    data["axes"] = {k: v[:1] for k, v in axes.items()}
    path.write_text(yaml.safe_dump(data))
    assert len(load_sweep(path).scenarios) == 1


def test_the_sweep_schema_is_printed_and_validates_the_bundled_sweeps(tmp_path):
    """The sweep schema's docstring sent users to `autopar capacity --schema` ("No such
    option") and a sweep error's fix to `autopar schema`, the spec's schema, which refuses
    every sweep (QA round 11). Oracle: the sweeps `autopar capacity` accepts validate
    against `autopar schema --sweep` (jsonschema), and an unknown axis does not."""
    import jsonschema

    result = CliRunner().invoke(app, ["schema", "--sweep"])
    assert result.exit_code == 0, result.output
    validator = jsonschema.Draft202012Validator(json.loads(result.stdout))
    sweeps = [paths.REPO / "examples" / "capacity_llama3_70b.yaml", TINY, DATA / "two.yaml",
              DATA / "fleet.yaml"]
    import re

    class Yaml12(yaml.SafeLoader):
        """YAML as an editor's YAML 1.2 schema reads it: 15.0e12 is a number (PyYAML's
        YAML 1.1 leaves it a string, which the command reads as a number too)."""

    Yaml12.add_implicit_resolver("tag:yaml.org,2002:float",
                                 re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$"),
                                 list("-+0123456789."))
    for path in sweeps:
        assert validator.is_valid(yaml.load(path.read_text(), Loader=Yaml12)), path
        load_sweep(path)
    data = yaml.safe_load(TINY.read_text())
    data["axes"]["gpu"] = [2]
    assert not validator.is_valid(data)
    data = yaml.safe_load(TINY.read_text())
    data["planning"]["prices"]["source"] = ""
    bad = tmp_path / "s.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(SweepError) as exc:
        load_sweep(bad)
    assert "see `autopar schema --sweep`" in exc.value.problems[0].fix


def test_a_row_reused_from_another_sweep_names_this_sweep_and_scenario(tmp_path):
    """The store is keyed by the built scenario: sweep B (`device: [A100-80GB], gpus: [4]`)
    reuses the row sweep A (`gpus: [4]`) computed, and B's plan.json named A's file and id
    ('4gpu'), so `autopar export` of B's plan rebuilt it from A and failed once A moved; its
    report showed A as the spec file (QA round 11). Oracle: the sweep B's command was given."""
    data = yaml.safe_load(TINY.read_text())
    data["axes"] = {"gpus": [4]}
    a = tmp_path / "a.yaml"
    a.write_text(yaml.safe_dump(data))
    data["axes"] = {"device": ["A100-80GB"], "gpus": [4]}
    b = tmp_path / "b.yaml"
    b.write_text(yaml.safe_dump(data))
    store = tmp_path / "s.sqlite"
    for sweep, out in ((a, "oa"), (b, "ob")):
        result = CliRunner().invoke(app, ["capacity", str(sweep), "--store", str(store), "--out",
                                          str(tmp_path / out), "--workers", "1", "--quiet"])
        assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "ob" / "capacity.json").read_text())
    assert doc["run"]["reused"] == 1 and doc["scenarios"][0]["id"] == "A100-80GB_4gpu"
    folder = tmp_path / "ob" / "scenarios" / "A100-80GB_4gpu"
    spec = json.loads((folder / "plan.json").read_text())["spec"]
    assert (spec["path"], spec["scenario"]) == (str(b), "A100-80GB_4gpu")
    assert spec["resolved_path"] == str(b.resolve())
    assert f"<code>{b}</code>" in (folder / "report.html").read_text()
    a.unlink()                                   # B's plan exports from B alone
    result = CliRunner().invoke(app, ["export", str(folder / "plan.json"), "--to", "megatron"])
    assert result.exit_code == 0, result.output


def test_a_gpu_count_over_the_node_limit_is_named_at_the_gpus_axis(tmp_path):
    """QA round 11: axes.gpus [4194304] on 4-GPU nodes was refused at cluster.nodes with the
    node count's limit (100,000) and example, for a GPU count the user wrote."""
    from autopar_opt.core.limits import MAX_NODES

    data = yaml.safe_load(TINY.read_text())
    gpn = data["base"]["cluster"]["gpus_per_node"]
    data["axes"] = {"gpus": [gpn * MAX_NODES + gpn]}
    p, path = only_problem(tmp_path, data)
    assert p.key == "axes.gpus[0]" and f"use at most {gpn * MAX_NODES:,} GPUs" in p.fix
    data["axes"] = {"gpus": [gpn * MAX_NODES]}
    path.write_text(yaml.safe_dump(data))
    assert not any(p.key.startswith("axes.gpus") for p in _problems(path))


def _problems(path) -> list:
    """The sweep's problems (none when it loads)."""
    try:
        load_sweep(path)
    except SweepError as exc:
        return list(exc.problems)
    return []
