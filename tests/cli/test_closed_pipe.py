"""A reader that closes the pipe (``autopar ... | head``) ends the command with the
shell's SIGPIPE status 141 and no message, as ``cat`` or ``git`` do (found by a new user,
session 24: exit 1 and no word, from rich's and click's own handling)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from support import paths


@pytest.mark.parametrize("args", [["zoo", "list"],
                                  ["solve", str(paths.REPO / "examples" / "quickstart.yaml")]])
def test_a_closed_pipe_exits_141_quietly(args):
    proc = subprocess.Popen([sys.executable, "-m", "autopar_opt.cli.commands", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()                      # the reader is gone before the first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "Exception ignored" not in err
