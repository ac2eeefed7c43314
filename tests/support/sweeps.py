"""Writing a capacity sweep for a test and reading its one refusal."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autopar_opt.capacity import load_sweep
from autopar_opt.capacity.sweep import SweepError


def write_sweep(tmp_path: Path, data: dict, name: str = "s.yaml") -> Path:
    """``data`` as a sweep file in ``tmp_path``."""
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def only_problem(tmp_path: Path, data: dict):
    """(the one problem ``load_sweep`` refuses ``data`` with, the file written)."""
    path = write_sweep(tmp_path, data)
    with pytest.raises(SweepError) as exc:
        load_sweep(path)
    (problem,) = exc.value.problems
    return problem, path
