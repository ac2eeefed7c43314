"""One set of common flags (issue 33, point 5): ``--out`` for every command that writes a
file (``-o``/``--output`` kept as aliases), ``--json`` on ``export`` and ``report``
(success: what was written; errors: the JSON error object of the other commands, with
the fields of the text message), ``pretrain --time-limit`` (``--budget-s`` a deprecated
alias that says so)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autopar_opt.cli.commands import FLAG_ALIASES, app

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart.yaml"
FEASIBLE_PLAN = ROOT / "tests" / "data" / "report" / "plan_feasible.json"
ERROR_FIELDS = {"file", "key", "value", "rule", "fix"}


def _invoke(*args) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def estimate_json(tmp_path_factory) -> Path:
    """``estimate --json`` of quickstart's plan: a plan export reads (with its spec's path)."""
    code, out, err = _invoke("estimate", QUICKSTART, "--json")
    assert code == 0, err
    path = tmp_path_factory.mktemp("est") / "est.json"
    path.write_text(out)
    return path


def test_aliases_are_the_same_option_as_the_common_flag():
    """FLAG_ALIASES against the typer app: -o and --output are spellings of --out's own
    option (one parameter); pretrain's --budget-s exists but is hidden (deprecated)."""
    import typer.main

    group = typer.main.get_command(app)
    for name, aliases in FLAG_ALIASES.items():
        cmd = group.commands[name]
        for flag, olds in aliases.items():
            owner = {opt: p for p in cmd.params for opt in getattr(p, "opts", [])}
            assert flag in owner, (name, flag)
            for old in olds:
                if flag == "--out":
                    assert owner[old] is owner[flag], (name, old)
                else:
                    assert owner[old] is not owner[flag] and owner[old].hidden, (name, old)


@pytest.mark.parametrize("spelling", ["--out", "-o", "--output"])
def test_export_writes_with_every_spelling_and_json_names_the_file(tmp_path, estimate_json,
                                                                   spelling):
    target = tmp_path / "args.txt"
    code, out, err = _invoke("export", estimate_json, "--to", "megatron", spelling, target,
                             "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["wrote"] == str(target) and doc["target"] == "megatron"
    assert "--tensor-model-parallel-size 2" in target.read_text().replace("\\\n", " ")
    assert "text" not in doc               # the configuration is in the file, not repeated


def test_export_json_without_out_carries_the_configuration(estimate_json):
    code, plain, _ = _invoke("export", estimate_json, "--to", "megatron")
    assert code == 0
    code, out, _ = _invoke("export", estimate_json, "--to", "megatron", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["wrote"] is None and doc["text"] == plain


@pytest.mark.parametrize("args, key", [
    (["--to", "megatorn"], "--to"),                       # an option
    (["--to", "megatron", "--spec", "nope.yaml"], "--spec"),
])
def test_export_json_errors_are_the_error_object(estimate_json, args, key):
    code, out, err = _invoke("export", estimate_json, *args, "--json")
    doc = json.loads(out)["error"]
    assert code == 2 and doc["exit_code"] == 2
    assert doc["message"] == err.strip()                 # the same text as on stderr
    assert set(doc["problems"][0]) == ERROR_FIELDS and doc["problems"][0]["key"] == key


def test_export_json_error_of_a_malformed_plan_names_the_file_and_key(tmp_path):
    doc = json.loads(FEASIBLE_PLAN.read_text())
    doc["plan"]["pp"] = "two"
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    code, out, err = _invoke("export", plan, "--to", "megatron", "--json")
    problem = json.loads(out)["error"]["problems"][0]
    assert code == 2 and problem["file"] == str(plan) and problem["key"] == "plan.pp"
    assert "plan.pp" in problem["rule"] and "autopar solve" in problem["fix"]


@pytest.mark.parametrize("spelling", ["--out", "-o", "--output"])
def test_report_json_names_the_file_written(tmp_path, spelling):
    target = tmp_path / "r.html"
    code, out, err = _invoke("report", FEASIBLE_PLAN, spelling, target, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc == {"wrote": str(target), "kind": "plan", "input": str(FEASIBLE_PLAN),
                   "bytes": target.stat().st_size}


def test_report_json_error_is_the_error_object(tmp_path):
    missing = tmp_path / "none.json"
    code, out, err = _invoke("report", missing, "--out", tmp_path / "r.html", "--json")
    doc = json.loads(out)["error"]
    assert code == 2 and doc["message"] == err.strip() and str(missing) in doc["message"]
    assert set(doc["problems"][0]) == ERROR_FIELDS and doc["problems"][0]["file"]
    assert not (tmp_path / "r.html").exists()


def test_pretrain_budget_s_is_a_deprecated_alias_that_says_so(tmp_path):
    code, out, err = _invoke("pretrain", QUICKSTART, "--out", tmp_path / "p.pt",
                             "--budget-s", "-1")
    assert code == 2 and "deprecated" in err and "--time-limit" in err
    assert "--budget-s = -1" in err                 # the value refused, under the name given
    code, _, err = _invoke("pretrain", QUICKSTART, "--out", tmp_path / "p.pt",
                           "--budget-s", "5", "--time-limit", "5")
    assert code == 2 and "both are given" in err
    code, _, err = _invoke("pretrain", QUICKSTART, "--out", tmp_path / "p.pt",
                           "--time-limit", "0")
    assert code == 2 and "--time-limit = 0" in err and not (tmp_path / "p.pt").exists()


def test_pretrain_time_limit_counts_from_the_command_start():
    from autopar_opt.cli.pretrain import DEFAULT_TIME_LIMIT_S, training_budget

    started = time.perf_counter() - 10.0            # the process started 10 s ago
    assert training_budget(5.0, None, started).remaining() < 0
    assert 4.0 < training_budget(15.0, None, started).remaining() <= 5.0
    assert training_budget(None, None, None).total_s == DEFAULT_TIME_LIMIT_S


def test_pretrain_with_its_time_spent_writes_no_policy(tmp_path):
    """A limit spent before the first PPO update: exit 4, nothing written (an untrained
    policy is not a pre-trained one)."""
    from autopar_opt.learn.base import torch_available

    if not torch_available():
        pytest.skip("needs PyTorch (the learn extra)")
    from autopar_opt.cli.budget import Budget
    from autopar_opt.cli.errors import CommandError
    from autopar_opt.cli.pretrain import pretrain_command

    graph = ROOT / "tests" / "data" / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"
    out = tmp_path / "p.pt"
    with pytest.raises(CommandError) as refused:
        pretrain_command([str(graph)], str(out), Budget(1.0, time.perf_counter() - 5.0), None,
                         0, None, False)
    assert refused.value.exit_code == 4 and "before the first PPO update" in str(refused.value)
    assert not out.exists()


def test_short_o_is_solves_out_folder(tmp_path):
    """``-o`` is ``--out`` on every command that writes: solve's folder gets plan.json
    and the report (before, ``solve SPEC -o DIR`` was "No such option")."""
    out = tmp_path / "run"
    code, _, err = _invoke("solve", QUICKSTART, "-o", out, "--quiet")
    assert code == 0, err
    assert json.loads((out / "plan.json").read_text())["plan"]
    assert (out / "report.html").is_file()
