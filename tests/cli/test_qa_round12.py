"""QA round 12 (the documentation and the command line as a first-time user meets them):
each case failed before its fix. Oracles: the exit code, the words of the message
(file or option, value, rule, fix) and what is on disk afterwards."""

from __future__ import annotations

import pytest
import yaml
from support.cli import run_cli as _cli
from support.runs import tiny_record


@pytest.mark.parametrize("name", ["fit.json", "fit.toml", "fit.txt", "fit"])
def test_calibrate_fit_out_must_be_named_as_the_yaml_it_writes(tmp_path, name):
    """Before: ``--fit --out fit.json`` wrote YAML into fit.json (exit 0), and a spec's
    ``cost_model: fit.json`` then failed with a JSON syntax error (fit.txt: an
    unsupported extension). Now refused before the fit, nothing written."""
    runs = tmp_path / "runs.yaml"
    runs.write_text(yaml.safe_dump([tiny_record()]))
    code, text = _cli("calibrate", runs, "--fit", "--out", tmp_path / name)
    assert code == 2, text
    suffix = name.partition(".")[2] or "none"
    assert "--out" in text and f"({'.' * (suffix != 'none')}{suffix} here)" in text
    assert "written as YAML" in text and "name the file fit.yaml" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.yaml"]


def _listed_options(text: str, lead: str) -> set[str]:
    """The options the refusal says the problem's solve takes ("... takes --a, --b)")."""
    tail = text.split(lead, 1)[1].split(")", 1)[0]
    return {o.strip() for o in tail.split(",")}


@pytest.mark.parametrize("spec,refused,lead,works", [
    ("examples/peers/piper_gnmt_k8.yaml", ["--form", "milp"], "a peer solve takes",
     ["--memory-limit", "4"]),
    ("examples/operator_sharding/alexnet.yaml", ["--no-warm-start"],
     "an operator-sharding solve takes", ["--searcher", "random", "--budget-s", "1", "--seed", "2"]),
])
def test_the_options_a_refusal_lists_include_those_the_problem_takes(spec, refused, lead, works):
    """A peer or operator-sharding solve refuses the layer search's options and lists the
    ones it takes. Before: the peer list left out --memory-limit and the operator-sharding
    list --searcher/--budget-s/--seed, each of which such a solve takes (oracle: the
    same solve with them exits 0)."""
    from support import paths

    path = paths.REPO / spec
    code, text = _cli("solve", path, *refused, "--time-limit", "20", "--quiet")
    assert code == 2, text
    listed = _listed_options(text, lead)
    code, text = _cli("solve", path, *works, "--time-limit", "20", "--quiet")
    assert code == 0, text
    assert {w for w in works if w.startswith("--")} <= listed, listed


def test_a_run_file_over_the_size_limit_gets_a_run_file_fix(tmp_path):
    """Before: a run file over 1 MiB was told "a spec is a few kilobytes; give large models
    as a zoo entry with overrides", which a list of run records cannot follow. Oracle: the
    limit's own figure in the message, and a fix that names run files and records."""
    from autopar_opt.core.limits import MAX_RUN_FILE_BYTES

    runs = tmp_path / "runs.yaml"
    record = yaml.safe_dump([tiny_record()])
    runs.write_text(record + "#" * (MAX_RUN_FILE_BYTES + 1) + "\n")
    code, text = _cli("calibrate", runs)
    assert code == 2, text
    assert f"over the limit of {MAX_RUN_FILE_BYTES:,} bytes" in text
    assert "a spec is a few kilobytes" not in text
    assert "split the records over several run files" in text


def test_an_unusable_default_capacity_store_names_the_option_that_moves_it(tmp_path,
                                                                          monkeypatch):
    """capacity without --out or --store keeps its results in $XDG_CACHE_HOME/autopar-opt/.
    Before: where that cannot be written, the fix said only "name a path whose folders are
    directories" / "choose a directory you can write to", not how to choose one. Oracle:
    the refusal (exit 2, nothing run) names the default path and --store."""
    from support import paths

    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker / "cache"))
    code, text = _cli("capacity", paths.REPO / "tests" / "data" / "capacity" / "tiny.yaml",
                      "--workers", "1", "--time-limit", "5", "--quiet")
    assert code == 2, text
    assert "is a file, not a directory" in text
    assert "give --store FILE" in text and "results store defaults to" in text
    assert blocker.read_text() == "x"


@pytest.mark.parametrize("command", [["report"], ["export", "--to", "megatron"]])
def test_an_out_file_ending_in_a_separator_is_refused_not_written_as_a_file(tmp_path, command):
    """Before: ``report PLAN --out new/`` (also export, pretrain) wrote a *file* named
    ``new`` and said "wrote new/". Oracle: exit 2 naming --out and the rule, nothing
    created; the same name without the separator inside that directory works."""
    from support import paths

    plan = paths.REPO / "tests" / "data" / "report" / "plan_feasible.json"
    if command[0] == "export":            # a priced plan whose spec is at hand
        code, text = _cli("estimate", paths.REPO / "examples" / "quickstart.yaml", "--json")
        assert code == 0, text
        plan = tmp_path / "estimate.json"
        plan.write_text(text)
    target = tmp_path / "new"
    code, text = _cli(command[0], plan, *command[1:], "--out", f"{target}/")
    assert code == 2, text
    assert "--out" in text and "ends in a path separator" in text
    assert not target.exists()
    code, text = _cli(command[0], plan, *command[1:], "--out", target / "file.out")
    assert code == 0, text
    assert (target / "file.out").is_file()


@pytest.mark.parametrize("command", ["solve", "place", "capacity"])
def test_the_help_lists_the_exit_code_of_every_stop_signal(command):
    """Before: solve's and place's --help listed 130/143 (place: none) while a SIGHUP (a closed
    terminal) ends them with 129, outputs written (tests/cli/test_robustness.py, the
    interrupt tests). Oracle: core.interrupts' own stop signals and exit codes."""
    from autopar_opt.core.interrupts import STOP_SIGNALS, exit_code

    code, text = _cli(command, "--help")
    assert code == 0, text
    flat = " ".join(text.replace("│", " ").split())
    listed = "/".join(str(exit_code(s)) for s in sorted(STOP_SIGNALS))
    assert f"{listed} interrupted" in flat, flat


@pytest.mark.parametrize("args", [["solve", "examples/quickstart.yaml", "--time-limit", "10"],
                                  ["report", "tests/data/report/plan_feasible.json"],
                                  ["calibrate", "tests/data/synthetic_unseen_runs.yaml", "--fit"]])
def test_out_dash_is_refused_not_written_as_a_file_named_dash(tmp_path, monkeypatch, args):
    """Before: ``--out -`` (standard output in most tools) wrote a file, or for solve a folder,
    named "-" in the current directory and exited 0. Oracle: exit 2 naming --out and '-',
    and the current directory left empty."""
    from support import paths

    monkeypatch.chdir(tmp_path)
    first = [args[0], str(paths.REPO / args[1]), *args[2:]]
    code, text = _cli(*first, "--out", "-")
    assert code == 2, text
    assert "--out = '-'" in text and "standard output" in text
    assert list(tmp_path.iterdir()) == []


def test_placement_outputs_say_the_unit_of_their_times(tmp_path):
    """Before: ``place`` printed "value: 2.32686", loads and baselines with no unit anywhere
    (summary, --json, placement.json, report). The zoo/ONNX/torch.fx importers price in ms,
    a public-format file in its own unit. Oracle for "ms": one device holds every node, so
    the value is the sum of the nodes' roofline times, recomputed here in seconds from the
    graph's FLOPs and bytes (model_zoo/op_graphs.py: max(flops / (peak * eff), bytes / bw))."""
    import json

    import numpy as np

    from autopar_opt.cost.params import default_params
    from autopar_opt.ir.hardware import DEVICE_CATALOG
    from autopar_opt.model_zoo.op_graphs import OP_GRAPHS
    from support import paths

    spec = tmp_path / "place.yaml"
    spec.write_text("placement:\n  graph: {zoo: synthetic_transformer, nodes: 40}\n"
                    "  devices: [{type: A100-80GB, count: 1}]\n")
    code, text = _cli("place", spec, "--json", "--out", tmp_path / "out")
    assert code == 0, text
    doc = json.loads(text)
    g, dev = OP_GRAPHS["synthetic_transformer"](nodes=40), DEVICE_CATALOG["A100-80GB"]
    eff = np.where(np.array(g.gemm), default_params().efficiency_for(dev.name), 1.0)
    seconds = np.maximum(np.array(g.flops) / (dev.peak_flops("bf16") * eff),
                         np.array(g.mem_bytes) / (dev.hbm_gb_per_s * 1e9)).sum()
    assert doc["value"] == pytest.approx(seconds * 1e3, rel=1e-9)
    assert doc["time_unit"] == "ms"
    assert json.loads((tmp_path / "out" / "placement.json").read_text())["time_unit"] == "ms"
    assert "Times (value, bound, compute, communication, loads, baselines) in ms." in (
        tmp_path / "out" / "report.html").read_text()
    code, text = _cli("place", spec)
    assert "time unit:    ms" in text
    public = paths.REPO / "tests" / "data" / "placement" / "throughput" / \
        "LayerGraphs_bert24_inference.json"
    code, text = _cli("place", public)
    assert code == 0 and "time unit:    the input file's time unit" in text


@pytest.mark.parametrize("args,key,value", [
    (["model", "llama3-8b", "--seq-len", "0"], "--seq-len", "0"),
    (["solve", "examples/quickstart.yaml", "--time-limit=abc"], "--time-limit", "abc"),
    (["solve", "examples/quickstart.yaml", "--gap", "x", "--gap", "y"], "--gap", "y"),
    (["solve", "examples/quickstart.yaml", "--bogus"], "--bogus", None),
])
def test_a_parse_error_under_json_names_the_option_and_its_value(args, key, value):
    """Before: an option the parser refused gave ``"value": null`` (and an unknown option
    ``"key": ""``) in the --json error object, though the README promises the option, the
    value, the rule and the fix. Oracle: the command line itself. A fresh process: the
    --json route is taken in ``main`` from sys.argv."""
    import json
    import subprocess
    import sys

    from support import paths

    proc = subprocess.run([sys.executable, "-m", "autopar_opt.cli.commands", *args, "--json"],
                          capture_output=True, text=True, timeout=120, cwd=paths.REPO)
    assert proc.returncode == 2, proc.stderr
    (problem,) = json.loads(proc.stdout)["error"]["problems"]
    assert problem["key"] == key and problem["value"] == value, problem


@pytest.mark.parametrize("key,value,words", [
    ("etp", "x", "etp' input should be a valid integer"),
    ("zero_group", -5, "zero_group' input should be greater than or equal to 1"),
    ("zero_group", 3, "zero_group = 3 does not divide dp·cp = 4"),
])
def test_a_plan_strategy_key_export_reads_is_checked(tmp_path, key, value, words):
    """etp, group and zero_group are written by the search and read by export and report,
    but the plan document neither declared nor checked them: ``etp: 'x'`` ended in "internal
    error: ... a bug in the tool", ``zero_group: -5`` was exported as "hybrid-sharding
    replicas=-26". Oracle: exit 2 naming the key, for both commands; and `autopar schema
    --plan` documents the three keys."""
    import json

    from support import paths

    doc = json.loads((paths.REPO / "tests" / "data" / "report" / "plan_feasible.json").read_text())
    strategy = doc["plan"]["stages"][0]["strategies"][0]
    assert strategy["dp"] * strategy.get("cp", 1) == 4
    strategy[key] = value
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    for args in (["report", plan, "--out", tmp_path / "r.html"],
                 ["export", plan, "--to", "megatron"]):
        code, text = _cli(*args)
        assert code == 2, text
        assert "internal error" not in text and words in text, text
    code, text = _cli("schema", "--plan")
    props = json.loads(text)["$defs"]["StrategyDoc"]["properties"]
    assert {"etp", "group", "zero_group"} <= set(props)


def test_every_key_estimate_json_writes_is_in_its_schema():
    """Before: `autopar estimate --json` wrote "notices" (a free-stage or non-chain spec says
    its target fell back to the free space) that `autopar schema --estimate` did not list.
    Oracle: the document written against the schema printed."""
    import json

    from support import paths

    code, text = _cli("schema", "--estimate")
    assert code == 0
    schema = json.loads(text)
    # one cluster's document, beside the fleet's (anyOf, since estimate --plan re-prices fleets)
    assert {"$ref": "#/$defs/EstimateDocument"} in schema["anyOf"]
    props = set(schema["$defs"]["EstimateDocument"]["properties"])
    for name in ("free_stages_lm_head", "quickstart"):
        code, text = _cli("estimate", paths.REPO / "examples" / f"{name}.yaml", "--json")
        assert code == 0, text
        doc = json.loads(text)
        assert set(doc) <= props, set(doc) - props
    assert "notices" in json.loads(_cli("estimate", paths.REPO / "examples" /
                                        "free_stages_lm_head.yaml", "--json")[1])


def test_a_missing_relative_hf_config_says_which_folder_it_was_read_from(tmp_path):
    """Before: ``model: {hf_config: ../cfg/config.json}`` in a spec beside the current
    directory said only "../cfg/config.json: no such file or directory", as if read from the
    current directory. Oracle: the spec file's own folder, named absolute in the fix."""
    sub = tmp_path / "specs"
    sub.mkdir()
    spec = sub / "s.yaml"
    spec.write_text("model: {hf_config: ../cfg/config.json}\ncluster: {zoo: dgx-a100-8}\n"
                    "training: {global_batch_size: 8}\nplan: {tp: 1}\n")
    code, text = _cli("estimate", spec)
    assert code == 2, text
    flat = " ".join(text.split())
    assert f"a relative path is read from the spec file's folder, {sub.resolve()}" in flat


def test_form_miqp_on_a_milp_only_backend_is_refused_with_its_json_error():
    """Before: ``solve SPEC --form miqp --solver highs --json`` ran until HiGHS refused, then
    printed "error: HiGHS cannot solve ..." on stderr and exited 2 with nothing on stdout (the
    README: "With --json, an input error is also one JSON object on stdout"). Oracle: the
    backend's declared problem classes (HiGHS: LP, MILP); the refusal names --form."""
    import json

    from support import paths

    code, text = _cli("solve", paths.REPO / "examples" / "quickstart.yaml", "--form", "miqp",
                      "--solver", "highs", "--time-limit", "20", "--json")
    assert code == 2, text
    doc, _ = json.JSONDecoder().raw_decode(text[text.index("{"):])
    (problem,) = doc["error"]["problems"]
    assert problem["key"] == "--form" and problem["value"] == "miqp"
    assert "--form milp" in problem["fix"]


@pytest.mark.parametrize("args", [["solve", "examples/quickstart.yaml", "--searcher", "dqn"],
                                  ["place", "tests/data/placement/throughput/"
                                   "LayerGraphs_bert24_inference.json", "--searcher", "gdp"]])
def test_a_searcher_without_pytorch_is_refused_before_any_work(monkeypatch, args):
    """Before: without PyTorch, ``solve SPEC --searcher dqn --json`` read the spec, then
    printed "error: searcher 'dqn': ... PyTorch" on stderr and exited 2 with nothing on
    stdout (no --json error object). Oracle: PyTorch made unavailable here; the refusal is
    the --json error object naming --searcher and the install hint."""
    import json

    from autopar_opt.learn import base
    from support import paths

    monkeypatch.setattr(base, "torch_available", lambda: False)
    code, text = _cli(args[0], paths.REPO / args[1], *args[2:], "--time-limit", "20", "--json")
    assert code == 2, text
    doc, _ = json.JSONDecoder().raw_decode(text[text.index("{"):])
    (problem,) = doc["error"]["problems"]
    assert problem["key"] == "--searcher" and problem["rule"] == "needs PyTorch"
    assert "pip install" in problem["fix"]


@pytest.mark.parametrize("args", [["estimate"], ["solve"], ["capacity"], ["calibrate"], ["place"],
                                  ["model"]])
def test_an_empty_input_path_is_named_as_empty(args):
    """Before: ``autopar solve ""`` (an unset shell variable) read Path("") = "." and said
    ".: the file is a directory; give one of its files, e.g. pyproject.toml" (model: "config.json:
    no such file"). Oracle: the argument given, ''."""
    code, text = _cli(*args, "")
    assert code == 2, text
    assert "'': is an empty path" in text and "pyproject.toml" not in text


def test_an_expert_split_that_leaves_nodes_out_says_how_many_were_placed_by_rule():
    """Before: bert24 *inference*'s expert split on the *training* graph named 32 of its 64
    nodes; the other 32 followed their colour class and the baseline said only "violations:
    []". Oracle: the graph's node count minus the ids the split lists, counted here."""
    import json

    from support import paths

    data = paths.REPO / "tests" / "data" / "placement"
    graph = data / "throughput" / "LayerGraphs_bert24_training.json"
    split = data / "experts" / "bert24_inference.json"
    nodes = len(json.loads(graph.read_text())["nodes"])
    listed = {n for key in ("fpgas", "cpus") for g in json.loads(split.read_text()).get(key, [])
              for n in g["nodes"]}
    code, text = _cli("place", graph, "--expert", split, "--json")
    assert code == 0, text
    (row,) = [b for b in json.loads(text)["baselines"] if b["name"].startswith("human expert")]
    assert row["note"].startswith(f"{nodes - len(listed)} of {nodes} nodes are not in the split")
    code, text = _cli("place", data / "throughput" / "LayerGraphs_bert24_inference.json",
                      "--expert", split, "--json")
    (row,) = [b for b in json.loads(text)["baselines"] if b["name"].startswith("human expert")]
    assert "note" not in row          # every node listed: nothing to say


def test_a_run_file_that_is_a_mapping_is_named_in_words_with_a_fix(tmp_path):
    """Before: a TOML (or YAML mapping) run file: "expected a list of run records at the top
    level, got dict", Python's type name and no fix. Oracle: the file written here, a mapping."""
    runs = tmp_path / "runs.toml"
    runs.write_text('id = "x"\n')
    code, text = _cli("calibrate", runs)
    assert code == 2, text
    assert "got a mapping" in text and "got dict" not in text
    assert "write the records as a list" in text
