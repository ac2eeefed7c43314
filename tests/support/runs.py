"""Published-run files for the calibration tests."""

from __future__ import annotations

from pathlib import Path

import yaml

from support.paths import DATA

#: the shipped in-sample calibration records (a copy of the shared calibration data)
PUBLISHED_RUNS = DATA / "published_runs.yaml"


def write_runs(tmp_path: Path, records) -> Path:
    """Write ``records`` as a run file ``tmp_path/runs.yaml`` and return its path."""
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump(records))
    return path
