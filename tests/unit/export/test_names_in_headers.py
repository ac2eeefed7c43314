"""A model's or cluster's name stays on the comment line each export writes it on.

The name comes from a Hugging Face config itself (``_name_or_path``, untrusted text
downloaded with the model) or from the spec. QA round 34: a name holding a newline put
the rest of it on a line of its own, below the comment: in the Megatron-LM file a line
the file's launch line (``eval "... $(grep -v -e '^#' -e '^ *$' THIS_FILE) ..."``)
hands to the shell, so ``$(cmd)`` in a config ran ``cmd``; in torchtitan's job module,
Python code after a closing triple quote. Oracles: the shell's own parse of the lines
the launch line keeps (``shlex``: every word a flag or a flag's value), Python's parse of
the module (``ast``: the docstring is the whole name, no statement but the writer's)."""

from __future__ import annotations

import ast
import shlex
from dataclasses import replace

import pytest

from autopar_opt.export import export_plan
from support.export_cases import CLUSTER, QWEN, TRAINING, make_plan

#: A name that ends the comment line, runs a command under eval and closes a docstring.
EVIL = 'x\n$(touch /tmp/autopar_pwned) \\\n"""\nimport os  # C:\\Users\\N\u2028y\r--save /tmp/z'
PLAN = make_plan([8], dp=2, tp=2, sp=True, zero=1, ep=2, graph=QWEN)
TITAN = make_plan([8], dp=2, tp=2, sp=True, zero=3, ep=2, etp=1, graph=QWEN)


def _kept_by_launch_line(text: str) -> list[str]:
    """The lines ``grep -v -e '^#' -e '^ *$'`` passes to the launch line."""
    return [line for line in text.splitlines() if not line.startswith("#") and line.strip()]


@pytest.mark.parametrize("where", ["model", "cluster"])
def test_megatron_args_keep_the_name_in_the_comment(where):
    graph = replace(QWEN, name=EVIL) if where == "model" else QWEN
    cluster = replace(CLUSTER, name=EVIL) if where == "cluster" else CLUSTER
    text = export_plan(PLAN, graph, cluster, TRAINING, "megatron").text
    clean = export_plan(PLAN, QWEN, CLUSTER, TRAINING, "megatron").text
    assert _kept_by_launch_line(text) == _kept_by_launch_line(clean)
    words = shlex.split(" ".join(line.rstrip("\\") for line in _kept_by_launch_line(text)))
    assert not any("$(" in w or "/tmp/z" in w for w in words)
    (header,) = [line for line in text.splitlines() if "autopar-opt plan for" in line]
    assert header.startswith("# Megatron-LM arguments") and "touch /tmp/autopar_pwned" in header


@pytest.mark.parametrize("target", ["megatron-bridge", "torchtitan"])
def test_other_exports_keep_the_name_in_their_comment_or_docstring(target):
    plan = TITAN if target == "torchtitan" else PLAN
    text = export_plan(plan, replace(QWEN, name=EVIL), CLUSTER, TRAINING, target).text
    clean = export_plan(plan, QWEN, CLUSTER, TRAINING, target).text
    assert text.count("\n") == clean.count("\n")
    if target == "torchtitan":
        tree, plain = ast.parse(text), ast.parse(clean)
        assert [type(n) for n in tree.body] == [type(n) for n in plain.body]
        assert "import os  # C:\\Users\\N" in ast.get_docstring(tree)
        assert not any(isinstance(n, ast.Import) and n.names[0].name == "os" for n in tree.body)
