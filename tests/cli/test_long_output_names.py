"""An output file whose name is valid but too long for the hidden files beside it
(QA round 34).

A run keeps two hidden siblings of a single output file: its lock ``.NAME.autopar.lock``
and its temporary file ``.NAME.XXXXXXXX.tmp``, 14 bytes longer than ``NAME``. A name of
242-255 bytes passed the option checks, then the lock's ``open`` failed with "File name too
long": exit 70, "a bug in the tool" (report, export, calibrate --fit, pretrain). Oracle: the
file system's own limit (``os.pathconf(..., "PC_NAME_MAX")``) and the written file's bytes.
"""

from __future__ import annotations

import os

from autopar_opt.core.files import hidden_sibling, write_atomic
from support import paths
from support.cli import run_cli


def test_hidden_siblings_fit_the_name_limit_and_stay_distinct(tmp_path):
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    assert hidden_sibling("plan.json", ".autopar.lock") == ".plan.json.autopar.lock"
    longs = ["é" * 120 + "a.html", "é" * 120 + "b.html", "y" * 250 + ".html"]
    siblings = [hidden_sibling(name, ".autopar.lock") for name in longs]
    assert len(set(siblings)) == 3
    assert all(len(s.encode()) <= limit and s.endswith(".autopar.lock") for s in siblings)
    assert siblings[0] == hidden_sibling(longs[0], ".autopar.lock")       # one name, one lock


def test_a_long_output_name_is_written_with_no_leftovers(tmp_path):
    name = "y" * 245 + ".html"              # 250 bytes: a valid name
    out = tmp_path / "solved"
    code, text = run_cli("solve", paths.REPO / "examples" / "quickstart.yaml", "--solver", "dp",
                         "--out", out, "--quiet")
    assert code == 0, text
    code, text = run_cli("report", out / "plan.json", "--out", tmp_path / name)
    assert code == 0, text
    assert (tmp_path / name).read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["solved", name])
    write_atomic(tmp_path / ("z" * 255), "whole\n")        # the longest name there is
    assert (tmp_path / ("z" * 255)).read_text() == "whole\n"
