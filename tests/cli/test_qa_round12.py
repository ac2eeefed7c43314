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
