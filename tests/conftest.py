"""Shared pytest options.

``--fuzz-examples N`` sets how many generated specs the fuzz test runs (the
CI default is a fixed-seed fast profile, see tests/cli/test_fuzz.py); the long
profile is ``pytest -m fuzz --fuzz-examples 10000 --fuzz-report FILE``, whose
counts are recorded in benchmarks/robustness/.
"""

from __future__ import annotations


def pytest_addoption(parser) -> None:
    group = parser.getgroup("fuzz", "spec fuzzing (issue 15)")
    group.addoption("--fuzz-examples", type=int, default=None,
                    help="number of generated specs for tests/cli/test_fuzz.py (default: fast profile)")
    group.addoption("--fuzz-report", default=None,
                    help="write the fuzz run's counts (runs, exit codes, tracebacks, slow runs) "
                         "as JSON to this file")
