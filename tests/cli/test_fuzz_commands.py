"""Fuzzing every input kind through the command that reads it (issue 33).

The strategies of :mod:`support.fuzz_inputs` mutate shipped Piper and PaSE files,
placement graphs and specs, expert splits, run files, capacity sweeps, plan.json
documents, Hugging Face configs (every bundled one, so each reader's keys), fleet specs (cluster groups and links),
operator-sharding specs, torch.fx graphs (a spec's ``graph: {torch: model.py:Net}``
beside its module file) and the capacity.json / placement.json documents ``report``
reads; each case runs its command in-process. The
oracle for every run: no exception but ``SystemExit`` (no traceback), and an exit
code the command may answer with (:data:`support.fuzz_inputs.ALLOWED`: 0, 2 for bad
input, 3 infeasible, 4 no result within the limits; never 1).

Fast profile (CI): :data:`FAST_EXAMPLES` cases per kind, fixed seed. Long profile,
as subprocesses with their wall time and peak memory:
``python benchmarks/robustness/fuzz_commands.py --examples N``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from typer.testing import CliRunner

from autopar_opt.cli.commands import app
from support.fuzz_inputs import KINDS, STRATEGIES

FAST_EXAMPLES = 6


@pytest.mark.fuzz
@pytest.mark.parametrize("kind", KINDS)
def test_fuzzed_inputs_never_give_a_traceback_or_a_bad_exit_code(request, tmp_path_factory, kind):
    examples = max(FAST_EXAMPLES, (request.config.getoption("--fuzz-examples") or 0) // 50)
    failures: list[str] = []

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=STRATEGIES[kind]())
    def run(case):
        folder = tmp_path_factory.mktemp(kind)
        args = case.write(folder)
        result = CliRunner().invoke(app, args)
        exc = result.exception if not isinstance(result.exception, SystemExit) else None
        if exc is not None:
            failures.append(f"{' '.join(args)}: {type(exc).__name__}: {exc}")
        elif result.exit_code not in case.allowed:
            failures.append(f"{' '.join(args)}: exit {result.exit_code}: "
                            f"{(result.output + result.stderr)[-400:]}")

    run()
    assert not failures, f"{len(failures)} failing runs; first:\n" + "\n\n".join(failures[:5])
