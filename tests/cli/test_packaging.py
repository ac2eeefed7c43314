"""The built wheel contains every module: install it into a fresh virtual
environment and run the CLI from outside the repository (a sub-package missing
from pyproject.toml fails here, not at a user's site)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv

import pytest
from support import paths

ROOT = paths.REPO


@pytest.mark.slow
def test_wheel_installs_and_runs_outside_the_repo(tmp_path):
    dist = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                            str(dist), str(ROOT)], capture_output=True, text=True)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheel = next(dist.glob("autopar_opt-*.whl"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    installed = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                                "-r", str(ROOT / "requirements.lock"), str(wheel)],
                               capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr[-3000:]
    cli = env_dir / "bin" / "autopar"
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = subprocess.run([str(py), "-c", "import autopar_opt, sys; print(autopar_opt.__file__)"],
                           cwd=workdir, env=env, check=True, capture_output=True, text=True)
    assert str(env_dir) in where.stdout, where.stdout   # the installed copy, not the checkout
    zoo = subprocess.run([str(cli), "zoo", "list"], cwd=workdir, env=env, capture_output=True, text=True)
    assert zoo.returncode == 0, zoo.stderr
    assert "debug" in zoo.stdout
    # a bundled Hugging Face config by name, read from the installed package's data
    model = subprocess.run([str(cli), "model", "mpt-7b", "--json"], cwd=workdir, env=env,
                           capture_output=True, text=True)
    assert model.returncode == 0, model.stderr
    assert json.loads(model.stdout)["params_total"] == 6_649_286_656
    out = workdir / "out"
    solve = subprocess.run([str(cli), "solve", str(ROOT / "examples" / "quickstart.yaml"),
                            "--solver", "highs", "--out", str(out), "--json", "--quiet"],
                           cwd=workdir, env=env, capture_output=True, text=True)
    assert solve.returncode == 0, solve.stderr[-2000:]
    doc = json.loads(solve.stdout)
    assert doc["status"] == "optimal"
    assert (out / "plan.json").exists() and (out / "report.html").exists()
    assert "<svg" in (out / "report.html").read_text()
    capacity = subprocess.run([str(cli), "capacity", str(ROOT / "tests" / "data" / "capacity" / "two.yaml"),
                               "--out", str(workdir / "cap"), "--quiet"],
                              cwd=workdir, env=env, capture_output=True, text=True)
    assert capacity.returncode == 0, capacity.stderr[-2000:]       # capacity package + template shipped
    assert "<svg" in (workdir / "cap" / "capacity.html").read_text()
