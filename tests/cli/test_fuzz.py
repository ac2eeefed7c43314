"""Fuzzing the spec reader and the commands with malformed and extreme specs.

Every generated spec (tests/support/fuzz_specs.py) goes through ``autopar estimate``
and, for one case in :data:`SOLVE_EVERY` and every third valid one, through
``autopar solve --time-limit 2``. The oracle for every run: exit code 0 (a valid result) or 2 with a
message naming the file; for ``solve`` also 3 or 4; never a traceback (the
runner's exception is only ever ``SystemExit``). Runs over
:data:`SLOW_RUN_S` seconds are counted (their target is 0; the count is
recorded by the long profile in benchmarks/robustness/, not asserted here,
because timings are not test assertions).

Fast profile (CI): :data:`FAST_EXAMPLES` cases, fixed seed (``derandomize``).
Long profile: ``pytest -m fuzz --fuzz-examples 10000 --fuzz-report FILE``.
"""

from __future__ import annotations

import collections
import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from typer.testing import CliRunner

from autopar_opt.cli.commands import app
from support.fuzz_specs import hf_config_case, spec_case
from support import paths

FAST_EXAMPLES = 200
HF_FAST_EXAMPLES = 60
HF_DIR = paths.REPO / "model_zoo" / "hf"
SOLVE_EVERY = 40
SLOW_RUN_S = 10.0
ESTIMATE_CODES = {0, 2}
SOLVE_CODES = {0, 2, 3, 4}


def _invoke(args: list[str]) -> tuple[int, str, BaseException | None, float]:
    start = time.perf_counter()
    result = CliRunner().invoke(app, args)
    elapsed = time.perf_counter() - start
    exc = result.exception if not isinstance(result.exception, SystemExit) else None
    return result.exit_code, result.stderr, exc, elapsed


@pytest.mark.fuzz
def test_fuzzed_specs_give_a_result_or_exit_2_never_a_traceback(request, tmp_path_factory):
    examples = request.config.getoption("--fuzz-examples") or FAST_EXAMPLES
    report_path = request.config.getoption("--fuzz-report")
    stats = {"runs": 0, "estimate_exit_codes": collections.Counter(),
             "solve_exit_codes": collections.Counter(), "tracebacks": 0, "bad_exit_codes": 0,
             "exit_2_without_file_name": 0, f"runs_over_{SLOW_RUN_S:g}_s": 0, "max_run_s": 0.0,
             "formats": collections.Counter(), "slow_runs": []}
    failures: list[str] = []
    counter = [0]

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=spec_case())
    def run(case):
        name, text, include = case
        counter[0] += 1
        folder = tmp_path_factory.mktemp("fuzz")
        (folder / "sub.yaml").mkdir()
        (folder / "model.json").write_text('{"model": {"zoo": "debug"}}')
        path = folder / name
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        stats["formats"][name.rsplit(".", 1)[1]] += 1
        if report_path and counter[0] % 50 == 0:
            write_report(False)     # a long run stopped early still leaves its counts
        commands = [("estimate", ["estimate", str(path)], ESTIMATE_CODES),
                    ("solve", ["solve", str(path), "--time-limit", "2", "--quiet"], SOLVE_CODES)]
        valid = False
        for label, args, allowed in commands:
            if label == "solve" and not (counter[0] % SOLVE_EVERY == 0
                                         or (valid and counter[0] % 3 == 0)):
                continue
            code, err, exc, elapsed = _invoke(args)
            valid = valid or code == 0
            stats["runs"] += 1
            stats[f"{label}_exit_codes"][code] += 1
            stats["max_run_s"] = max(stats["max_run_s"], elapsed)
            if elapsed > SLOW_RUN_S:
                stats[f"runs_over_{SLOW_RUN_S:g}_s"] += 1
                stats["slow_runs"].append(f"{label} {name} exit {code} {elapsed:.1f} s: "
                                          f"{text[:400]!r}")
            if exc is not None:
                stats["tracebacks"] += 1
                failures.append(f"{label} {name} ({include}): {type(exc).__name__}: {exc}\n"
                                f"{text[:300]!r}")
            elif code not in allowed:
                stats["bad_exit_codes"] += 1
                failures.append(f"{label} {name}: exit {code}: {err[-300:]}")
            elif code == 2 and path.name not in err and "included by" not in err:
                stats["exit_2_without_file_name"] += 1
                failures.append(f"{label} {name}: exit 2 without naming the file: {err[-300:]}")

    def write_report(done: bool) -> None:
        summary = {k: (dict(v) if isinstance(v, collections.Counter) else v) for k, v in stats.items()}
        summary.update(examples=examples, cases_run=counter[0], finished=done,
                       failures=failures[:20])
        Path(report_path).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")

    run()
    if report_path:
        write_report(True)
    assert not failures, f"{len(failures)} failing runs; first:\n" + "\n\n".join(failures[:5])
    assert stats["runs"] >= examples


@pytest.mark.fuzz
def test_fuzzed_hf_configs_through_autopar_model(request, tmp_path):
    """Bundled Hugging Face configs with extreme values (``autopar model``, issue 12's
    command): exit 0 or 2, never a traceback."""
    configs = {p.name: json.loads(p.read_text()) for p in sorted(HF_DIR.glob("*.json"))}
    examples = max(HF_FAST_EXAMPLES, (request.config.getoption("--fuzz-examples") or 0) // 10)
    failures: list[str] = []

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(text=hf_config_case(configs))
    def run(text):
        path = tmp_path / "config.json"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        code, err, exc, _ = _invoke(["model", str(path), "--seq-len", "512"])
        if exc is not None or code not in (0, 2):
            failures.append(f"exit {code} {type(exc).__name__ if exc else ''}: {exc or err[-300:]}"
                            f"\n{text[:300]!r}")

    run()
    assert not failures, f"{len(failures)} failing runs; first:\n" + "\n\n".join(failures[:5])


@pytest.mark.fuzz
def test_fuzzed_plan_documents_through_report_and_export(request, tmp_path):
    """plan.json documents with extreme values or damaged text through ``autopar
    report`` and ``autopar export`` (issue 17's command): exit 0 or 2, never a
    traceback."""
    from support.fuzz_specs import plan_document_case

    base = json.loads((paths.DATA / "report" / "plan_feasible.json").read_text())
    examples = max(40, (request.config.getoption("--fuzz-examples") or 0) // 20)
    failures: list[str] = []

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(text=plan_document_case(base))
    def run(text):
        path = tmp_path / "plan.json"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        for args in (["report", str(path), "-o", str(tmp_path / "r.html")],
                     ["export", str(path), "--to", "megatron"]):
            code, err, exc, _ = _invoke(args)
            if exc is not None or code not in (0, 2):
                failures.append(f"{args[0]}: exit {code} {type(exc).__name__ if exc else ''}: "
                                f"{exc or err[-300:]}\n{text[:300]!r}")

    run()
    assert not failures, f"{len(failures)} failing runs; first:\n" + "\n\n".join(failures[:5])
