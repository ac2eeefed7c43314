"""Session 10 sweep: the wrong kind of file, another model's command line, options
that do not apply.

Each was a wall of schema messages (a dozen unknown and missing keys) or a
silent acceptance. Oracle: exit 2, no traceback, the file, key and value, the
words of the rule and of the fix (the command or file to use instead), and
none of the misleading schema messages.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from support.cli import run_cli as _cli
from support import paths

ROOT = paths.REPO
EXAMPLES = ROOT / "examples" / "peers"
QUICKSTART = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())


def _spec(tmp_path: Path, plan: dict, **overrides) -> Path:
    spec = copy.deepcopy(QUICKSTART)
    spec["plan"] = plan
    spec["model"]["overrides"] = overrides
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


PLAN_FEASIBLE = ROOT / "tests" / "data" / "report" / "plan_feasible.json"


@pytest.mark.parametrize("command", [["estimate"], ["model"], ["solve", "--quiet"]])
def test_a_plan_json_given_as_the_spec_is_named_as_such(command):
    """Before: 'unknown key' for spec, status, tool, certificate, ... and 'missing'
    for model, cluster, training."""
    code, text = _cli(command[0], PLAN_FEASIBLE, *command[1:])
    assert code == 2, text
    assert "plan_feasible.json: tool = " in text and "result file autopar wrote" in text
    assert "give the spec it came from (specs/debug.yaml)" in text
    assert "unknown key" not in text and "required key missing" not in text


@pytest.mark.parametrize("command", ["estimate", "model"])
def test_a_peer_spec_given_to_a_model_command_points_to_solve(command):
    spec = EXAMPLES / "piper_gnmt_k8.yaml"
    code, text = _cli(command, spec)
    assert code == 2, text
    assert "problem = 'piper': a peer-problem spec" in text and f"run `autopar solve {spec}`" in text
    assert "unknown key" not in text and "required key missing" not in text


def test_megatron_command_line_of_another_model_is_refused(tmp_path):
    """--num-layers 24 on gpt-1.7b cut to 4 blocks: the command line is another
    model's. Before: --num-layers was parsed and
    ignored, and the plan priced on the spec's model."""
    flags = ("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --num-layers 24 "
             "--micro-batch-size 8 --global-batch-size 64")
    code, text = _cli("estimate", _spec(tmp_path, {"megatron_args": flags}, num_layers=4))
    assert code == 2, text
    assert "plan.megatron_args" in text and "--num-layers 24 but the model has 4 transformer " \
        "layers" in text and "drop --num-layers" in text
    code, text = _cli("estimate", _spec(tmp_path, {"megatron_args": flags.replace("24", "4")},
                                        num_layers=4))
    assert code == 0, text


@pytest.mark.parametrize("option", [["--form", "miqp"], ["--runnable-by", "megatron"],
                                    ["--searcher", "random"], ["--no-warm-start"],
                                    ["--export-models"]])
def test_model_search_options_on_a_peer_problem_are_refused(tmp_path, option):
    """Before: accepted and ignored (exit 0, the peer's DP solved as without them)."""
    out = tmp_path / "out"
    code, text = _cli("solve", EXAMPLES / "piper_gnmt_k8.yaml", *option, "--out", out, "--quiet")
    assert code == 2, text
    assert f"command line: {option[0]} = " in text and "piper peer problem" in text
    assert f"drop {option[0]}" in text
    assert not out.exists()


def test_a_peer_problem_still_takes_its_own_options(tmp_path):
    code, text = _cli("solve", EXAMPLES / "piper_gnmt_k8.yaml", "--solver", "dp", "--gap", "0.01",
                      "--time-limit", "30", "--out", tmp_path / "out", "--quiet")
    assert code == 0, text


# -------------------------------------------- report / export of other commands' JSON
GRAPH = ROOT / "tests" / "data" / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"


def _report_again_and_refuse_export(tmp_path, doc, written_html) -> str:
    """``report doc`` is byte-identical to ``written_html`` (what the command
    that wrote ``doc`` rendered beside it); ``export doc --to megatron`` exits 2.
    Returns export's message for the caller's wording checks."""
    html = Path(doc).parent / "again.html"   # beside the document, as the command wrote it:
    code, text = _cli("report", doc, "-o", html)   # a capacity report's links are relative
    assert code == 0, text
    assert html.read_bytes() == written_html.read_bytes()
    code, text = _cli("export", doc, "--to", "megatron")
    assert code == 2, text
    return text


def test_report_of_a_placement_json_is_the_placement_report(tmp_path):
    """Before: 17 'missing key' messages of the plan format. Oracle: byte-identical
    to the report.html `place --out` wrote from the same document."""
    out = tmp_path / "out"
    code, text = _cli("place", GRAPH, "--out", out)
    assert code == 0, text
    text = _report_again_and_refuse_export(tmp_path, out / "placement.json", out / "report.html")
    assert "placement.json of `autopar place`" in text and "no --to megatron export" in text
    assert "the solve ended" not in text      # before: 'no plan to export: the solve ended ...'


def test_estimate_json_is_exported_and_refused_by_report(tmp_path):
    """export reads the spec path estimate --json records (before: 'the spec it was
    solved from (None) is not readable'). Hand-derived flags of quickstart's plan:
    tp 2, pp 2, cp 1; 8 micro-batches of 64/8 = 8 samples over dp 2 = 4 per replica."""
    code, text = _cli("estimate", ROOT / "examples" / "quickstart.yaml", "--json")
    assert code == 0, text
    est = tmp_path / "est.json"
    est.write_text(text)
    code, text = _cli("export", est, "--to", "megatron")
    assert code == 0, text
    flags = text.replace("\\\n", " ").split()
    pairs = dict(zip(flags[::1], flags[1::1]))
    assert {k: pairs[k] for k in ("--tensor-model-parallel-size", "--pipeline-model-parallel-size",
                                  "--context-parallel-size", "--micro-batch-size",
                                  "--global-batch-size", "--seq-length")} == \
        {"--tensor-model-parallel-size": "2", "--pipeline-model-parallel-size": "2",
         "--context-parallel-size": "1", "--micro-batch-size": "4", "--global-batch-size": "64",
         "--seq-length": "2048"}
    code, text = _cli("report", est, "-o", tmp_path / "r.html")
    assert code == 2, text
    assert "est.json" in text and "JSON of `autopar estimate --json`" in text
    assert "autopar solve SPEC --out DIR" in text and "missing key" not in text
    assert not (tmp_path / "r.html").exists()


# ------------------------------------------ every command given another command's input
SWEEP = ROOT / "examples" / "capacity_llama3_70b.yaml"
PEER = EXAMPLES / "piper_gnmt_k8.yaml"
SPEC = ROOT / "examples" / "quickstart.yaml"
FILES = {"spec": (SPEC, "this is a model spec (model, cluster, training)", "`autopar solve "),
         "sweep": (SWEEP, "this is a capacity sweep (base, axes, planning)", "`autopar capacity "),
         "graph": (GRAPH, "this is a public-format operator graph (nodes, edges)",
                   "`autopar place "),
         "peer": (PEER, "a peer-problem spec (problem: piper)", "`autopar solve "),
         "result": (PLAN_FEASIBLE, "this is a result file autopar wrote", "give the spec it came "
                    "from (specs/debug.yaml)"),
         "hf_config": (ROOT / "model_zoo" / "hf" / "llama-3.1-8b.json",
                       "this is a Hugging Face config.json (model_type)",
                       "model: {hf_config: ")}
COMMANDS = {"estimate": ("spec",), "model": ("spec", "hf_config"), "capacity": ("sweep",),
            "place": ("graph",), "calibrate": (), "solve": ("spec", "peer", "graph")}


@pytest.mark.parametrize("command,kind", [(c, k) for c, ok in COMMANDS.items() for k in FILES
                                          if k not in ok])
def test_a_command_given_another_commands_file_names_it(command, kind):
    """Before: a list of unknown and missing keys of the expected file (or, for
    calibrate, 'expected a list of run records, got dict'). Oracle: the kind of
    the file given and the command (or spec) that takes it."""
    path, what, fix = FILES[kind]
    code, text = _cli(command, path)
    assert code == 2, text
    assert str(path) in text and what in text and fix in text, text
    assert "unknown key" not in text and "required key missing" not in text


def test_model_directory_whose_config_json_is_a_directory(tmp_path):
    """Before: 'DIR/config.json: no such file' for a directory of that name."""
    (tmp_path / "m" / "config.json").mkdir(parents=True)
    code, text = _cli("model", tmp_path / "m")
    assert code == 2, text
    assert "config.json: a directory, not a file" in text and "give a config.json" in text


# ------------------------------------------------------- output onto an input file
def test_an_output_that_is_an_input_file_is_refused_and_the_input_kept(tmp_path):
    """report -o PLAN, export -o PLAN (or -o the spec plan.json names), calibrate
    --fit -o RUNS. Before: each wrote its output over the file it had just read
    (report replaced plan.json with HTML). Oracle: exit 2 naming the input, and
    the input byte-identical afterwards."""
    plan = tmp_path / "plan.json"
    plan.write_bytes(PLAN_FEASIBLE.read_bytes())
    code, text = _cli("estimate", SPEC, "--json")
    est = tmp_path / "est.json"
    est.write_text(text)
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(SPEC.read_bytes())
    est_local = tmp_path / "est_local.json"
    est_local.write_text(text.replace(str(SPEC), str(spec)))
    runs = tmp_path / "runs.yaml"
    runs.write_bytes((ROOT / "tests" / "data" / "published_runs.yaml").read_bytes())
    cases = [(["report", plan, "-o", tmp_path / "." / "plan.json"], plan),
             (["export", est, "--to", "megatron", "-o", est], est),
             (["export", est_local, "--to", "megatron", "-o", spec], spec),
             (["calibrate", runs, "--fit", "-o", runs], runs)]
    for args, victim in cases:
        before = victim.read_bytes()
        code, text = _cli(*args)
        assert code == 2, text
        assert "is the input file" in text and "would overwrite it" in text, text
        assert victim.read_bytes() == before


def test_export_spec_option_that_is_not_a_file(tmp_path):
    """Before: 'the spec it was solved from ('DIR') is not readable' for a --spec
    the user named (a directory, a missing file)."""
    plan = tmp_path / "plan.json"
    plan.write_bytes(PLAN_FEASIBLE.read_bytes())
    for spec, what in ((tmp_path, "a directory"), (tmp_path / "none.yaml", "no such file")):
        code, text = _cli("export", plan, "--to", "megatron", "--spec", spec)
        assert code == 2, text
        assert f"--spec {str(spec)!r}: {what}" in text and "the plan was solved" in text
        assert "is not readable" not in text


def test_report_and_export_of_a_capacity_json(tmp_path):
    """Before: report listed 9 missing keys of a plan.json; export said 'no plan in
    this file (the solve found none ...)'. Oracle: the report is byte-identical
    to the capacity.html `capacity --out` wrote; export names where the
    scenarios' plan.json files are."""
    out = tmp_path / "out"
    code, text = _cli("capacity", ROOT / "tests" / "data" / "capacity" / "tiny.yaml", "--out", out,
                      "--store", tmp_path / "s.sqlite", "--quiet")
    assert code == 0, text
    text = _report_again_and_refuse_export(tmp_path, out / "capacity.json", out / "capacity.html")
    assert "capacity.json of `autopar capacity`" in text and str(out / "scenarios") in text
    assert "the solve found none" not in text


@pytest.mark.parametrize("kind", ["result", "peer", "sweep"])
def test_a_sweep_whose_base_file_is_not_a_model_spec(tmp_path, kind):
    """base: a plan.json, a peer spec or another sweep. Before: 'base.cluster: the
    axes need an explicit base cluster' (the file's cluster key was missing)."""
    path, what, fix = FILES[kind]
    sweep = yaml.safe_load((ROOT / "tests" / "data" / "capacity" / "tiny.yaml").read_text())
    sweep["base"] = str(path)
    file = tmp_path / "sweep.yaml"
    file.write_text(yaml.safe_dump(sweep))
    code, text = _cli("capacity", file, "--store", tmp_path / "s.sqlite", "--quiet")
    assert code == 2, text
    assert f"base = {str(path)!r}" in text and what in text and fix in text, text
    assert "base.cluster" not in text


def test_place_expert_split_of_the_wrong_kind(tmp_path):
    """--expert given place's own placement.json, or the graph itself. Before:
    'nodes = 1: node not placed and no colocated node is' (no group was read)."""
    out = tmp_path / "out"
    code, text = _cli("place", GRAPH, "--out", out)
    assert code == 0, text
    for expert, what in ((out / "placement.json", "a placement.json of `autopar place`"),
                         (GRAPH, "a public-format operator graph (nodes, edges), not an expert "
                                 "split")):
        code, text = _cli("place", GRAPH, "--expert", expert)
        assert code == 2, text
        assert f"{expert}: --expert: {what}" in text and '{"fpgas": [{"nodes"' in text, text
        assert "node not placed" not in text


def test_export_models_with_the_dp_solver_is_refused(tmp_path):
    """--export-models writes the MIP models; the dp solver builds none. Before:
    exit 0 with no OUT/models and model_hash null everywhere. Also when the spec's
    solver.name is dp."""
    out = tmp_path / "out"
    code, text = _cli("solve", SPEC, "--solver", "dp", "--export-models", "--out", out, "--quiet")
    assert code == 2, text
    assert "--export-models = true" in text and "the dp solver builds none" in text
    assert not out.exists()
    spec = yaml.safe_load(SPEC.read_text())
    spec["solver"]["name"] = "dp"
    path = tmp_path / "dp.yaml"
    path.write_text(yaml.safe_dump(spec))
    code, text = _cli("solve", path, "--export-models", "--out", out, "--quiet")
    assert code == 2 and "the dp solver builds none" in text, text
    assert not out.exists()


@pytest.mark.parametrize("args,option", [(["--objective", "nope"], "--objective"),
                                         (["--solver", "nope"], "--solver"),
                                         (["--gap", "1.5"], "--gap"),
                                         (["--objective", "latency", "--no-contiguous"],
                                          "--no-contiguous")])
def test_place_option_mistakes_are_option_errors(args, option):
    """Named like every other command's: 'invalid option', 'command line: OPTION'.
    Before: 'invalid spec' and '<command line>: OPTION'."""
    code, text = _cli("place", GRAPH, *args)
    assert code == 2, text
    assert text.startswith("invalid option: 1 problem") and f"command line: {option} = " in text
    assert "<command line>" not in text and "invalid spec" not in text


def test_an_output_that_is_a_file_the_spec_includes_is_refused_and_kept(tmp_path):
    """export -o SECTION_FILE, where the spec includes that file (``model:
    model.yaml``, examples/split/), by the spec plan.json names or by --spec.
    Before: the check knew only plan.json and the top spec, so the export
    replaced the included section file. Oracle: exit 2 naming that file, and
    every spec file byte-identical afterwards."""
    for part in (ROOT / "examples" / "split").iterdir():
        (tmp_path / part.name).write_bytes(part.read_bytes())
    spec = tmp_path / "spec.yaml"
    code, text = _cli("estimate", spec, "--json")
    assert code == 0, text
    est = tmp_path / "est.json"
    est.write_text(text)
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name != "est.json"}
    cases = [(["export", est, "--to", "megatron", "-o", tmp_path / "model.yaml"], "model.yaml"),
             (["export", est, "--to", "megatron", "-o", tmp_path / "." / "cluster.toml"],
              "cluster.toml"),
             (["export", est, "--to", "megatron", "--spec", spec, "-o",
               tmp_path / "training.json"], "training.json")]
    for args, victim in cases:
        code, text = _cli(*args)
        assert code == 2, text
        assert f"is the input file {tmp_path / victim}" in text, text
        assert "would overwrite it" in text and "Traceback" not in text
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()
                if p.name != "est.json"} == files
    # a new file next to them is still fine
    code, text = _cli("export", est, "--to", "megatron", "-o", tmp_path / "run.sh")
    assert code == 0, text


def test_export_of_an_operator_sharding_plan_says_what_it_is(tmp_path):
    """QA round 9: the plan.json of an operator-sharding solve was called malformed
    ('missing key plan.pp'), although `autopar solve --out` wrote it."""
    out = tmp_path / "o"
    code, text = _cli("solve", ROOT / "examples" / "operator_sharding" / "gpt_blocks.yaml",
                      "--out", out, "--quiet")
    assert code == 0, text
    code, text = _cli("export", out / "plan.json", "--to", "megatron")
    assert code == 2
    assert "the plan.json of an operator-sharding solve" in text and "malformed" not in text
