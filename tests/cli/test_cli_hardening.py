"""Session 9 hardening sweep: user mistakes that gave a traceback, a hang, a
silent acceptance or a half-written file before their fix.

Each case runs the CLI in a fresh process (``python -m autopar_opt.cli.commands``), so
the modules a command imports are exactly the ones a user's run imports (the
PlanError guard depended on that). Oracle: exit code 2, no ``Traceback``, the
file / key / value / fix words of the message, and no output left behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support import paths
from support.cli import run_cli as _cli
from support.runs import tiny_record

ROOT = paths.REPO
FEASIBLE_PLAN = ROOT / "tests" / "data" / "report" / "plan_feasible.json"
QUICKSTART = ROOT / "examples" / "quickstart.yaml"
DEEP = "[" * 100_000 + "]" * 100_000           # deeper than json's recursion limit


def _autopar(tmp_path: Path, *args: str) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "autopar_opt.cli.commands", *map(str, args)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text, text[-2000:]
    return proc.returncode, text


# ------------------------------------------------------------------ export
def test_export_of_a_plan_from_another_spec_is_a_clear_error(tmp_path):
    """plan_feasible.json was solved from an 18-layer model; quickstart has 26
    layers. Before: a PlanError traceback (the guard looked for PlanError in
    autopar_opt.cost.evaluate, which ``export`` never imports)."""
    out = tmp_path / "args.txt"
    code, text = _autopar(tmp_path, "export", FEASIBLE_PLAN, "--to", "megatron",
                          "--spec", QUICKSTART, "-o", out)
    assert code == 2
    assert "invalid plan" in text and str(FEASIBLE_PLAN) in text and str(QUICKSTART) in text
    assert "every layer exactly once" in text and "--spec SPEC" in text
    assert not out.exists()


def test_export_with_a_spec_entry_that_is_not_a_mapping(tmp_path):
    """``"spec": "x"`` in plan.json. Before: AttributeError traceback."""
    doc = json.loads(FEASIBLE_PLAN.read_text())
    doc["spec"] = "x"
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    code, text = _autopar(tmp_path, "export", plan, "--to", "megatron")
    assert code == 2 and "plan.json" in text and "--spec SPEC" in text


# ------------------------------------------------------------------ deep JSON
def test_report_of_a_deeply_nested_file(tmp_path):
    """Before: RecursionError traceback from json.load."""
    plan = tmp_path / "plan.json"
    plan.write_text(DEEP)
    code, text = _autopar(tmp_path, "report", plan, "-o", tmp_path / "r.html")
    assert code == 2 and "plan.json" in text and "nested too deeply" in text
    assert not (tmp_path / "r.html").exists()


def test_place_graph_and_expert_split_deeply_nested(tmp_path):
    """A graph, and an --expert split, nested past json's recursion limit.
    Before: RecursionError tracebacks."""
    graph = tmp_path / "g.json"
    graph.write_text(DEEP)
    code, text = _autopar(tmp_path, "place", graph)
    assert code == 2 and "g.json" in text and "nested too deeply" in text
    good = ROOT / "tests" / "data" / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"
    expert = tmp_path / "e.json"
    expert.write_text(DEEP)
    code, text = _autopar(tmp_path, "place", good, "--expert", expert, "--out", tmp_path / "o")
    assert code == 2 and "e.json" in text and "nested too deeply" in text
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ place inputs
BERT = ROOT / "tests" / "data" / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"
_ZOO = {"zoo": "synthetic_transformer", "nodes": 100}
_A100 = [{"type": "A100-80GB", "count": 2}]


def _place_spec(tmp_path: Path, graph, devices=_A100, **extra) -> Path:
    spec = tmp_path / "p.yaml"
    spec.write_text(yaml.safe_dump({"placement": {"graph": graph, "devices": devices, **extra}}))
    return spec


#: (id, graph, devices, extra placement keys, key in the message, words of the rule/fix).
#: Before each fix: a traceback (nodes 0: OverflowError; every count 0: ValueError
#: from numpy; a list as type: TypeError; corrupt/empty ONNX: DecodeError /
#: OverflowError), a hang or memory exhaustion (nodes 10^12, count 10^9), or a
#: silent acceptance (nodes -5 built 14 nodes; contiguous "no" meant true; an
#: unknown key was ignored).
PLACE_CASES = [
    ("zoo_nodes_zero", {**_ZOO, "nodes": 0}, _A100, {}, "placement.graph.nodes", "from 1 to 1,000,000"),
    ("zoo_nodes_negative", {**_ZOO, "nodes": -5}, _A100, {}, "placement.graph.nodes", "from 1 to"),
    ("zoo_nodes_huge", {**_ZOO, "nodes": 10**12}, _A100, {}, "placement.graph.nodes", "from 1 to"),
    ("zoo_argument_typo", {"zoo": "synthetic_transformer", "node": 10}, _A100, {},
     "placement.graph.node", "did you mean 'nodes'"),
    ("all_counts_zero", _ZOO, [{"type": "A100-80GB", "count": 0}], {}, "placement.devices",
     "no device to place"),
    ("count_huge", _ZOO, [{"type": "A100-80GB", "count": 10**9}], {},
     "placement.devices[0].count", "from 0 to 65,536"),
    ("type_is_a_list", _ZOO, [{"type": ["A100-80GB"], "count": 1}], {},
     "placement.devices[0].type", "must be a device name"),
    ("memory_nan", {"file": str(BERT)}, [{"type": "accelerator", "count": 2,
                                          "memory_bytes": float("nan")}], {},
     "placement.devices[0].memory_bytes", "finite"),
    ("device_key_typo", _ZOO, [{"type": "A100-80GB", "cuont": 2}], {},
     "placement.devices[0].cuont", "did you mean 'count'"),
    ("contiguous_text", {"file": str(BERT)}, None, {"contiguous": "no"}, "placement.contiguous",
     "true or false"),
    ("placement_key_typo", {"file": str(BERT)}, None, {"objectve": "latency"},
     "placement.objectve", "did you mean 'objective'"),
]


@pytest.mark.parametrize("graph,devices,extra,key,words", [c[1:] for c in PLACE_CASES],
                         ids=[c[0] for c in PLACE_CASES])
def test_place_spec_mistakes(tmp_path, graph, devices, extra, key, words):
    spec = tmp_path / "p.yaml"
    body = {"graph": graph, **({"devices": devices} if devices is not None else {}), **extra}
    spec.write_text(yaml.safe_dump({"placement": body}))
    code, text = _cli("place", spec, "--out", tmp_path / "o")
    assert code == 2, text
    assert "p.yaml" in text and key in text and words in text
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("content,words", [(b"garbage", "not a readable ONNX model"),
                                           (b"", "holds no operator nodes")],
                         ids=["corrupt", "empty"])
def test_place_onnx_file_that_is_not_a_model(tmp_path, content, words):
    pytest.importorskip("onnx")
    (tmp_path / "m.onnx").write_bytes(content)
    code, text = _cli("place", _place_spec(tmp_path, {"onnx": "m.onnx"}))
    assert code == 2 and "placement.graph.onnx" in text and words in text


@pytest.mark.parametrize("change,key,words", [
    ({"maxFPGAs": 10**9}, "maxFPGAs", "from 0 to 65,536"),
    ({"maxFPGAs": 2.5}, "maxFPGAs", "whole number"),
    ({"maxFPGAs": 0, "maxCPUs": 0}, "maxFPGAs", "no device to place"),
    ({"node_nan": True}, "nodes[1].fpgaLatency", "finite number"),
], ids=["fpgas_huge", "fpgas_fraction", "no_devices", "nan_latency"])
def test_place_public_graph_numbers(tmp_path, change, key, words):
    """Before: 10^9 accelerators exhausted memory; 2.5 became 2; no device at all
    was a numpy error; a NaN latency was accepted (NaN < 0 is false)."""
    data = json.loads(BERT.read_text())
    if change.pop("node_nan", False):
        data["nodes"][1]["fpgaLatency"] = float("nan")
    data.update(change)
    graph = tmp_path / "g.json"
    graph.write_text(json.dumps(data))
    code, text = _cli("place", graph)
    assert code == 2 and "g.json" in text and key in text and words in text


# ------------------------------------------------------------------ calibrate
def test_calibrate_fit_output_is_checked_before_the_fit_and_leaves_nothing(tmp_path):
    """--output naming a directory. Before: the fit ran, then the write failed
    and left 'd.tmp' behind."""
    runs = tmp_path / "runs.yaml"
    runs.write_text(yaml.safe_dump([tiny_record()]))
    (tmp_path / "d").mkdir()
    code, text = _cli("calibrate", runs, "--fit", "--output", tmp_path / "d")
    assert code == 2 and "--out = " in text and "is a directory" in text and "name a file" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "runs.yaml"]
    assert list((tmp_path / "d").iterdir()) == []


def test_calibrate_output_without_fit_is_refused(tmp_path):
    """Before: --output without --fit was ignored (exit 0, no file)."""
    runs = tmp_path / "runs.yaml"
    runs.write_text(yaml.safe_dump([tiny_record()]))
    code, text = _cli("calibrate", runs, "--output", tmp_path / "fit.yaml")
    assert code == 2 and "--out " in text and "add --fit" in text
    assert not (tmp_path / "fit.yaml").exists()


def test_calibrate_record_with_a_billion_layers_is_skipped_with_its_reason(tmp_path):
    """Before: the run built 10^9 layers (a hang); now the record is skipped
    naming the key, the value and the limit, the others are compared."""
    runs = tmp_path / "runs.yaml"
    runs.write_text(yaml.safe_dump([tiny_record(model__num_layers=10**9),
                                    {**tiny_record(), "id": "r2"}]))
    proc = subprocess.run([sys.executable, "-m", "autopar_opt.cli.commands", "calibrate", str(runs),
                           "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = {r["id"]: r for r in json.loads(proc.stdout)["records"]}
    assert "model.num_layers = 1000000000 exceeds the limit of 2,048" in records["r1"]["skipped"]
    assert records["r2"]["predicted"] > 0


# ------------------------------------------------------------------ solve on a peer instance
GNMT = ROOT / "tests" / "data" / "peers" / "piper" / "gnmt.json"


@pytest.mark.parametrize("problem,key,words", [
    ({"format": "pasee", "file": "x.json"}, "problem.format", "did you mean 'pase'"),
    ({"format": "piper", "file": str(GNMT), "devices": 8,
      "plan": {"stages": [{"nodes": [0], "d": 7}]}}, "problem.plan", "d = 7 must be >= 1 and divide N = 256"),
    ({"format": "piper", "file": str(GNMT), "devices": 8,
      "plan": {"stages": [{"nodes": [0, 1], "d": 1}]}}, "problem.plan", "node id 2 is in no stage"),
    ({"format": "pase", "file": "d"}, "problem.file", "is a directory"),
], ids=["format_typo", "piper_plan_d", "piper_plan_cover", "file_is_a_directory"])
def test_peer_spec_mistakes(tmp_path, problem, key, words):
    """Before: a misspelt format was reported as "must be 'piper'" plus a missing
    'devices'; an invalid Piper plan was solved anyway and reported as
    {"valid": false} with exit 0; a directory "did not exist"."""
    (tmp_path / "d").mkdir()
    spec = tmp_path / "p.yaml"
    spec.write_text(yaml.safe_dump({"problem": problem, "solver": {"name": "dp"}}))
    code, text = _cli("solve", spec, "--out", tmp_path / "o")
    assert code == 2 and "p.yaml" in text and key in text and words in text
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ Hugging Face configs
HF = ROOT / "model_zoo" / "hf"


@pytest.mark.parametrize("config,key,value,words", [
    ("llama-3.1-8b", "num_key_value_heads", 3, "does not divide num_attention_heads = 32"),
    ("mixtral-8x7b-v0.1", "num_local_experts", 0, "must be a positive integer"),
    ("deepseek-v3", "moe_layer_freq", 0, "must be a positive integer"),
    ("deepseek-v3", "kv_lora_rank", 0, "must be a positive integer"),
    ("t5-large", "num_layers", 0, "must be a positive integer"),
    ("vit-base-patch16-224", "image_size", 0, "must be a positive integer"),
], ids=["gqa_remainder", "mixtral_no_experts", "deepseek_moe_freq_0", "deepseek_kv_rank_0",
        "t5_no_encoder_layers", "vit_image_0"])
def test_hf_config_values_that_build_no_valid_model(tmp_path, config, key, value, words):
    """Before: each built a model silently (32 query heads over 3 KV heads; a
    Mixtral without experts priced as a dense model; a T5 without an encoder;
    a ViT with no patches); transformers itself cannot build these."""
    data = json.loads((HF / f"{config}.json").read_text())
    data[key] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    code, text = _cli("model", path, "--seq-len", "128")
    assert code == 2 and "config.json" in text and key in text and words in text


# ------------------------------------------------------------------ empty paths, stray options
TINY = ROOT / "tests" / "data" / "capacity" / "tiny.yaml"


@pytest.mark.parametrize("args,option", [
    (["solve", QUICKSTART, "--out", ""], "--out"),
    (["place", BERT, "--out", ""], "--out"),
    (["capacity", TINY, "--out", ""], "--out"),
    (["capacity", TINY, "--store", ""], "--store"),
    (["export", FEASIBLE_PLAN, "--to", "megatron", "-o", ""], "--out"),
], ids=["solve_out", "place_out", "capacity_out", "capacity_store", "export_output"])
def test_empty_output_path_is_refused_before_any_work(args, option, monkeypatch):
    """Before: an empty --out / --store / -o was taken for "not given": the
    command ran and wrote nothing (export printed to stdout)."""
    from autopar_opt.cli import place as place_cli
    from autopar_opt.cli import solve as search_cli

    def refuse(*a, **k):
        raise AssertionError("the work started before the bad option was reported")

    monkeypatch.setattr(place_cli, "solve_placement", refuse)
    monkeypatch.setattr(search_cli, "_search", refuse)
    code, text = _cli(*args)
    assert code == 2 and f"{option} = ''" in text and "is an empty path" in text


def test_solve_budget_without_a_searcher_is_refused():
    """Before: --budget-s without --searcher was ignored."""
    code, text = _cli("solve", QUICKSTART, "--budget-s", "5")
    assert code == 2 and "--budget-s" in text and "no --searcher" in text


# ------------------------------------------------------------------ true/false is not a number
@pytest.mark.parametrize("section,key,value", [
    ("training", "global_batch_size", True),
    ("cluster", "nodes", True),          # YAML 1.1 reads `nodes: yes` as true
    ("plan", "tp", True),
    ("search", "pp_degrees", [1, True]),
], ids=["global_batch", "nodes_yes", "plan_tp", "pp_degrees_item"])
def test_true_false_is_not_accepted_as_a_number(tmp_path, section, key, value):
    """Before: pydantic's lax mode read true as 1 (plan tp: true ran as tp 1;
    global_batch_size: true was reported as micro-batches not dividing 1)."""
    spec = {"model": {"zoo": "debug"},
            "cluster": {"name": "c4", "nodes": 1, "gpus_per_node": 4, "device": "A100-40GB"},
            "training": {"global_batch_size": 16},
            "search": {"pp_degrees": [1, 2]},
            "plan": {"tp": 2, "pp": 2, "microbatches": 4}}
    spec[section][key] = value
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    code, text = _cli("estimate", path)
    assert code == 2
    assert f"spec.yaml: {section}.{key} = " in text and "not true/false" in text
    # a list field's fix names a list of them (QA round 8)
    assert ("expected a list of integers" if isinstance(value, list) else "expected an integer") in text
    assert "True" not in text.split(" = ", 1)[1]                       # the value reads as YAML


def test_export_of_an_infeasible_solve_says_why(tmp_path):
    """plan_infeasible.json: the solve proved no plan fits. Before: "no 'plan' in
    this file (the solve found none, or it is not a plan.json ...)"; now the
    status, the solve's own reason and its first advice."""
    doc = json.loads((ROOT / "tests" / "data" / "report" / "plan_infeasible.json").read_text())
    assert doc["plan"] is None and doc["status"] == "infeasible"
    out = tmp_path / "args.txt"
    code, text = _cli("export", ROOT / "tests" / "data" / "report" / "plan_infeasible.json",
                      "--to", "megatron", "-o", out)
    assert code == 2 and "no plan to export" in text and "'infeasible'" in text
    assert doc["infeasibility"]["reason"] in text and doc["infeasibility"]["advice"][0] in text
    assert not out.exists()


# ------------------------------------------------------------------ what an empty file should hold
def test_empty_included_section_and_empty_sweep_name_what_belongs_there(tmp_path):
    """Before: both said "write at least the model, cluster and training
    sections, e.g. start from examples/quickstart.yaml", which is wrong for a
    file holding only the cluster section, and for a sweep file."""
    (tmp_path / "c.yaml").write_text("")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"model": {"zoo": "debug"}, "cluster": "c.yaml",
                                    "training": {"global_batch_size": 16}}))
    code, text = _cli("estimate", spec)
    assert code == 2 and "c.yaml: cluster: the file is empty" in text
    assert "the keys of the cluster section" in text and "quickstart" not in text
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("")
    code, text = _cli("capacity", sweep, "--out", tmp_path / "o")
    assert code == 2 and "sweep.yaml: the file is empty" in text
    assert "base:, axes: and planning:" in text and "quickstart" not in text
    assert not (tmp_path / "o").exists()


def test_solve_export_models_without_out_is_refused():
    """Before: --export-models without --out wrote nothing, silently."""
    code, text = _cli("solve", QUICKSTART, "--export-models")
    assert code == 2 and "--export-models" in text and "no --out" in text


def test_capacity_axis_value_given_twice(tmp_path):
    """Before: gpus: [4, 4] ran one scenario and dropped the other (same id)."""
    sweep = yaml.safe_load(TINY.read_text())
    sweep["axes"] = {"device": ["A100-80GB"], "gpus": [4, 4]}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    code, text = _cli("capacity", path, "--out", tmp_path / "o")
    assert code == 2 and "axes.gpus[1] = 4" in text and "same scenario id" in text
    assert "give each value once" in text and not (tmp_path / "o").exists()


def test_model_seq_len_with_a_spec_is_refused():
    """Before: --seq-len was ignored for a spec (the summary used the spec's
    2048 while the user asked for another length)."""
    code, text = _cli("model", QUICKSTART, "--seq-len", "8")
    assert code == 2 and "--seq-len = 8" in text and "training.seq_len" in text
    assert "is a spec (its sequence length is 2048)" in text


# ------------------------------------------------------------------ cost_model file, megatron_args
@pytest.mark.parametrize("content,key,words", [
    ("params: {comm_efficiency: fast}\n", "params.comm_efficiency", "must be a valid number"),
    ("params: {comm_efficiency: .nan}\n", "params.comm_efficiency", "not a finite number"),
    ("params: {comm_efficiency: -1}\n", "params.comm_efficiency", "greater than 0"),
    ("params: {comm_eff: 0.5}\n", "params.comm_eff", "did you mean 'comm_efficiency'"),
    ("", "cost_model.file", "the file is empty"),
    ("params: " + "[" * 3000 + "]" * 3000 + "\n", "cost_model.file", "nesting deeper than the limit"),
], ids=["text_value", "nan", "negative", "misspelt_key", "empty", "deep"])
def test_cost_model_parameters_file_is_validated_like_the_spec_overrides(tmp_path, content, key,
                                                                        words):
    """A cost_model: file with bad values. Before: a text value was a TypeError
    traceback inside the cost model, deep nesting a RecursionError traceback;
    NaN, a negative efficiency or a misspelt key were used as they were; an
    empty file silently stood for the uncalibrated priors."""
    (tmp_path / "p.yaml").write_text(content)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"model": {"zoo": "debug"},
                                    "cluster": {"nodes": 1, "gpus_per_node": 4,
                                                "device": "A100-40GB"},
                                    "training": {"global_batch_size": 16},
                                    "plan": {"tp": 2, "pp": 2, "microbatches": 4},
                                    "cost_model": {"file": "p.yaml"}}))
    code, text = _cli("estimate", spec)
    assert code == 2 and "p.yaml" in text and key in text and words in text


def test_megatron_args_with_an_unclosed_quote(tmp_path):
    """Before: shlex's ValueError ("No closing quotation") as a traceback."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"model": {"zoo": "debug"},
                                    "cluster": {"nodes": 1, "gpus_per_node": 4,
                                                "device": "A100-40GB"},
                                    "training": {"global_batch_size": 16},
                                    "plan": {"megatron_args": "--tensor-model-parallel-size '2"}}))
    code, text = _cli("estimate", spec)
    assert code == 2 and "plan.megatron_args" in text and "No closing quotation" in text
    assert "close every quote" in text


# ------------------------------------------------------------------ MoE settings
def _debug_spec(tmp_path: Path, **sections) -> Path:
    spec = {"model": {"zoo": "debug"},
            "cluster": {"nodes": 1, "gpus_per_node": 4, "device": "A100-40GB"},
            "training": {"global_batch_size": 16}, **sections}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.parametrize("layer,words", [
    ({"name": "a", "flops_fwd": 1e9, "params": 10, "num_experts": 2, "top_k": 4},
     "must be from 1 to num_experts (2)"),
    ({"name": "a", "flops_fwd": 1e9, "params": 10, "num_experts": 2, "top_k": 0},
     "must be from 1 to num_experts (2)"),
    ({"name": "a", "flops_fwd": 1e9, "params": 10, "top_k": 2}, "without experts"),
], ids=["top_k_above_experts", "top_k_zero", "top_k_without_experts"])
def test_explicit_moe_layer_routing(tmp_path, layer, words):
    """Before: each was priced as written (4 of 2 experts active per token)."""
    path = _debug_spec(tmp_path, model={"name": "m", "layers": [layer]},
                       plan={"tp": 1, "pp": 1, "microbatches": 4})
    code, text = _cli("estimate", path)
    assert code == 2 and "model.layers[0].top_k" in text and words in text


def test_search_expert_parallelism_on_a_dense_model(tmp_path):
    """Before: search.ep_degrees [2] on a model without MoE layers was dropped
    silently (plan.ep: 2 was already refused)."""
    path = _debug_spec(tmp_path, search={"ep_degrees": [1, 2]})
    code, text = _cli("solve", path, "--out", tmp_path / "o")
    assert code == 2 and "search.ep_degrees[1] = 2" in text and "needs MoE layers" in text
    assert not (tmp_path / "o").exists()


def test_search_expert_degree_that_does_not_divide_the_experts(tmp_path):
    """QA round 5 (L2): search.ep_degrees [3] on debug-moe's experts ended as 'proven
    infeasible whatever the memory' with plan.json and report.html written."""
    path = _debug_spec(tmp_path, model={"zoo": "debug-moe"}, search={"ep_degrees": [1, 3]})
    code, text = _cli("solve", path, "--out", tmp_path / "o")
    assert code == 2 and "search.ep_degrees[1] = 3" in text and "does not divide" in text
    assert "list degrees that divide them: 1, 2, 4, 8" in text
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ a solver that is not installed
PASE = ROOT / "tests" / "data" / "peers" / "pase" / "pase_alexnet_p4.json.gz"


@pytest.fixture
def no_mip_libraries(monkeypatch):
    """Gurobi and SCIP as on a machine without gurobipy / pyscipopt (their
    ``available()`` is what every caller consults)."""
    from autopar_opt.solvers.gurobi import GurobiBackend
    from autopar_opt.solvers.scip import ScipBackend

    monkeypatch.setattr(GurobiBackend, "available", lambda self: (
        False, "gurobipy is not installed (pip install gurobipy); use --solver highs or scip"))
    monkeypatch.setattr(ScipBackend, "available", lambda self: (
        False, "pyscipopt is not installed (pip install pyscipopt); use --solver highs"))


@pytest.mark.parametrize("solver,package", [("gurobi", "gurobipy"), ("scip", "pyscipopt")])
def test_place_and_peer_solve_with_a_solver_that_is_not_installed(tmp_path, no_mip_libraries,
                                                                  solver, package):
    """Before: SolverUnavailable raised mid-run as a traceback (``solve`` on a
    model spec already turned it into exit 2)."""
    code, text = _cli("place", BERT, "--solver", solver, "--out", tmp_path / "o")
    assert code == 2 and f"--solver = '{solver}'" in text and f"pip install {package}" in text
    peer = tmp_path / "p.yaml"
    peer.write_text(yaml.safe_dump({"problem": {"format": "pase", "file": str(PASE)}}))
    code, text = _cli("solve", peer, "--solver", solver, "--out", tmp_path / "o")
    assert code == 2 and f"--solver = '{solver}'" in text and f"pip install {package}" in text
    peer.write_text(yaml.safe_dump({"problem": {"format": "pase", "file": str(PASE)},
                                    "solver": {"name": solver}}))
    code, text = _cli("solve", peer, "--out", tmp_path / "o")
    assert code == 2 and f"p.yaml: solver.name = '{solver}'" in text and package in text
    assert not (tmp_path / "o").exists()


def test_place_onnx_graph_without_the_onnx_package_names_the_spec(tmp_path, monkeypatch):
    """Before: the problem's file was the placeholder '<onnx>' instead of the spec."""
    import sys as _sys

    monkeypatch.setitem(_sys.modules, "onnx", None)      # `import onnx` raises ImportError
    (tmp_path / "m.onnx").write_bytes(b"x")
    code, text = _cli("place", _place_spec(tmp_path, {"onnx": "m.onnx"}))
    assert code == 2 and "p.yaml: placement.graph.onnx = 'm.onnx'" in text
    assert "pip install 'autopar-opt[onnx]'" in text and "<onnx>" not in text


def test_place_searcher_budget_is_inside_the_time_limit(monkeypatch):
    """Before: place --searcher random --budget-s 100 --time-limit 5 ran the
    searcher for 100 s (the budget was checked against no limit), and
    --budget-s without --searcher was ignored. Now as for solve: refused above
    the limit; the default is min(10 s, half the limit)."""
    code, text = _cli("place", BERT, "--searcher", "random", "--budget-s", "100",
                      "--time-limit", "5")
    assert code == 2 and "--budget-s = 100.0" in text and "exceeds the command's time limit" in text
    code, text = _cli("place", BERT, "--budget-s", "3")
    assert code == 2 and "--budget-s" in text and "no --searcher" in text
    from autopar_opt.cli import searcher as harness

    seen = {}

    def record(self, problem, contiguous, console):
        seen["budget_s"] = self.budget_s
        return None                        # as a searcher that found nothing: exit 2

    monkeypatch.setattr(harness.SearcherHook, "run_placement", record)
    _cli("place", BERT, "--searcher", "random", "--time-limit", "4")
    assert seen["budget_s"] == 2.0         # min(10, 4 / 2)


def test_capacity_sweep_with_too_many_scenarios_is_refused_before_building_them(tmp_path):
    """Before: 1,999 GPU counts x 199 batch sizes (397,801 scenarios) hung while
    every scenario's spec was built. Run in a fresh process with a timeout so
    the old behaviour fails rather than hangs the suite."""
    sweep = yaml.safe_load(TINY.read_text())
    sweep["axes"] = {"device": ["A100-80GB"], "gpus": list(range(4, 4 * 2000, 4)),
                     "global_batch_size": list(range(1, 200))}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    proc = subprocess.run([sys.executable, "-m", "autopar_opt.cli.commands", "capacity", str(path),
                           "--out", str(tmp_path / "o")], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "sweep.yaml: axes" in proc.stderr and "397,801 scenarios exceed the limit of 4,096" \
        in proc.stderr
    assert not (tmp_path / "o").exists()


def test_calibrate_on_an_empty_list_of_runs(tmp_path):
    """Before: `[]` printed an empty table and 'modeled 0/0' with exit 0."""
    runs = tmp_path / "runs.yaml"
    runs.write_text("[]\n")
    code, text = _cli("calibrate", runs)
    assert code == 2 and "runs.yaml" in text and "the list of run records is empty" in text


@pytest.mark.parametrize("section,value,key", [
    ("cost_model", {"gemm_efficiency": {"A100-40GB": True}}, "cost_model.gemm_efficiency"),
    ("cluster", {"name": "c4", "nodes": 1, "gpus_per_node": 4,
                 "device": {"name": "my-gpu", "peak_tflops": {"bf16": True}, "hbm_gib": 40,
                            "hbm_gb_per_s": 1555}}, "cluster.device.peak_tflops"),
], ids=["gemm_efficiency_value", "custom_device_peak"])
def test_true_false_is_not_a_number_inside_a_mapping(tmp_path, section, value, key):
    """A dict-valued number field (``gemm_efficiency: {chip: float}``,
    ``peak_tflops: {dtype: float}``). Before (review of 84d3d86): the check
    unwrapped only Annotated/Union/list, so ``{A100-40GB: true}`` ran with an
    efficiency of 1.0 and a custom device's ``{bf16: true}`` loaded as 1 TFLOP/s."""
    spec = {"model": {"zoo": "debug"},
            "cluster": {"name": "c4", "nodes": 1, "gpus_per_node": 4, "device": "A100-40GB"},
            "training": {"global_batch_size": 16},
            "plan": {"tp": 2, "pp": 2, "microbatches": 4}}
    spec[section] = value
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    code, text = _cli("estimate", path)
    assert code == 2
    assert f"spec.yaml: {key}" in text and "not true/false" in text


def test_place_transformer_xl_without_memory(tmp_path):
    """``mem_len: 0`` (Transformer-XL with no memory segment) is a valid
    argument. Before (review of f66f0e1): every integer argument had to be at
    least 1, so a file that placed at d6b8c92 was refused; a negative length
    is still refused with the rule."""
    graph = {"zoo": "transformer_xl", "layers": 2, "mem_len": 0}
    code, text = _cli("place", _place_spec(tmp_path, graph), "--time-limit", "20")
    assert code == 0, text
    code, text = _cli("place", _place_spec(tmp_path, {**graph, "mem_len": -1}))
    assert code == 2 and "placement.graph.mem_len" in text and "from 0 to" in text


def test_hybrid_zero_levels_without_hybrid_sharding(tmp_path):
    """QA round 5 (W4): search.hybrid_zero_levels was accepted silently with
    hybrid_sharding [false], while hybrid_shard_nodes is refused in the same case."""
    path = _debug_spec(tmp_path, search={"hybrid_sharding": [False], "hybrid_zero_levels": [1, 3]})
    code, text = _cli("solve", path, "--out", tmp_path / "o")
    assert code == 2 and "search.hybrid_zero_levels" in text and "hybrid_sharding" in text
    assert not (tmp_path / "o").exists()
