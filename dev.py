#!/usr/bin/env python3
"""Bootstrap and run: ``python3 dev.py demo`` or ``python3 dev.py test``.

Needs only Python 3.11+ and pip. Creates ``.venv`` on first use, installs the
pinned dependencies of ``requirements.lock`` and the package itself
(editable), then runs the job. Re-installs when ``requirements.lock`` or
``pyproject.toml`` changed. The test job also installs ``requirements-learn.lock``
(PyTorch CPU for the learned searchers; ~40 s and ~0.8 GB the first time),
``requirements-ray.lock`` (Ray for ``autopar capacity --engine ray``; ~20 s) and
``requirements-frameworks.lock`` (Megatron-Core with Megatron-LM's training arguments,
torchtitan, DeepSpeed: the tests validate exported launch files with their own code;
~2.5 min and ~1.6 GB the first time, DeepSpeed and Megatron-Core built from source,
DeepSpeed without its CUDA ops), and ``requirements-bridge.lock`` apart, into
``.venv/megatron-bridge`` (Megatron-Bridge's configuration code with the megatron-core
release it needs, which differs from the one above; ~15 s): the tests run Bridge in a
subprocess with that folder first on ``PYTHONPATH``. The tests run in a process per core, at
most four (pytest-xdist, :func:`xdist_workers`); extra arguments go to pytest
(``python3 dev.py test -n 0 tests/unit`` runs one process).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".autopar-installed"
#: Megatron-Bridge and its megatron-core, apart from .venv's (requirements-bridge.lock)
BRIDGE = VENV / "megatron-bridge"


def _fingerprint() -> str:
    h = hashlib.sha256()
    for name in ("requirements.lock", "requirements-learn.lock", "requirements-ray.lock",
                 "requirements-frameworks.lock", "requirements-bridge.lock", "pyproject.toml"):
        h.update((ROOT / name).read_bytes())
    return h.hexdigest()


def ensure_env(learn: bool = False) -> None:
    """Create the virtual environment and install pinned dependencies if needed
    (with ``learn``, also the learned searchers' PyTorch)."""
    if sys.version_info < (3, 11):
        sys.exit(f"autopar-opt needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    want = _fingerprint() + ("+learn" if learn else "")
    if STAMP.exists() and STAMP.read_text() in (want, _fingerprint() + "+learn"):
        return
    if not (BIN / "python").exists():
        print("creating .venv ...", flush=True)
        venv.create(VENV, with_pip=True)
    pip = [str(BIN / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    print("installing pinned dependencies (requirements.lock) ...", flush=True)
    subprocess.check_call(pip + ["-r", str(ROOT / "requirements.lock")])
    if learn:
        print("installing PyTorch CPU for the learned searchers (requirements-learn.lock) ...", flush=True)
        subprocess.check_call(pip + ["-r", str(ROOT / "requirements-learn.lock")])
        print("installing Ray for the capacity engine test (requirements-ray.lock) ...", flush=True)
        subprocess.check_call(pip + ["-r", str(ROOT / "requirements-ray.lock")])
        print("installing Megatron-Core, torchtitan and DeepSpeed for the export validation "
              "tests (requirements-frameworks.lock) ...", flush=True)
        # --ignore-requires-python: megatron-core 0.17.1 (Megatron-LM's megatron/training
        # included) declares Python >= 3.12 but runs on 3.11 (requirements-frameworks.lock)
        subprocess.check_call(pip + ["--ignore-requires-python", "-r",
                                     str(ROOT / "requirements-frameworks.lock")],
                              env={**os.environ, "DS_BUILD_OPS": "0"})
        print("installing Megatron-Bridge's configuration code into .venv/megatron-bridge "
              "(requirements-bridge.lock) ...", flush=True)
        # its own megatron-core (< 0.17) beside .venv's 0.17.1; --no-deps: the lock lists
        # exactly what Bridge's configuration code imports beyond .venv
        shutil.rmtree(BRIDGE, ignore_errors=True)
        subprocess.check_call(pip + ["--no-deps", "--target", str(BRIDGE), "-r",
                                     str(ROOT / "requirements-bridge.lock")])
    subprocess.check_call(pip + ["--no-deps", "-e", str(ROOT)])
    STAMP.write_text(want)


#: Test processes at most (pytest-xdist): the suite is CPU-bound Python, so a process per
#: core, but no more than this (each holds PyTorch and the framework imports, ~1 GB).
MAX_TEST_WORKERS = 4


def xdist_workers() -> int:
    """pytest-xdist processes for the test job: one per core this process may run on, at
    most :data:`MAX_TEST_WORKERS`; 0 (no worker processes) on a one-core machine."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    n = min(MAX_TEST_WORKERS, cores or 1)
    return n if n > 1 else 0


def main(argv: list[str]) -> int:
    jobs = {
        "demo": [str(BIN / "autopar"), "solve", "examples/quickstart.yaml", "--out", "out/quickstart"],
        # --dist loadfile: a file's tests share one process, so a module's cached oracle
        # (e.g. tests/unit/search/test_runnable.py's brute force) is computed once
        "test": [str(BIN / "python"), "-m", "pytest", "-q", "-n", str(xdist_workers()),
                 "--dist", "loadfile"],
    }
    if not argv or argv[0] not in jobs:
        print("usage: python3 dev.py demo|test [extra args]", file=sys.stderr)
        return 2
    ensure_env(learn=argv[0] == "test")
    return subprocess.call(jobs[argv[0]] + argv[1:], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
