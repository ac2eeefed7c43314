"""The solve report says how to get the plan's launch files, and its commands work
(QA round 36: report.html named the target framework but no command or file name).

Oracle: a second route. Each command the report lists is run as written (plan.json and
the output file placed in a temporary folder) and must exit 0 and write its file.
"""

from __future__ import annotations

import json
import re
import shlex

import pytest

from autopar_opt.reports.render import render_html
from support import paths
from support.cli import run_cli


@pytest.fixture(scope="module")
def solved(quickstart_out):
    return quickstart_out


def test_every_listed_export_command_writes_its_file(solved, tmp_path):
    html = render_html(json.loads((solved / "plan.json").read_text()))
    section = re.search(r'<div id="launch">(.*?)</div>', html, re.S)
    assert section, "the report has no launch files section"
    commands = re.findall(r"<code>(autopar export [^<]*)</code>", section.group(1))
    assert {c.split("--to ")[1].split()[0] for c in commands} == {"megatron", "megatron-bridge"}
    for command in commands:
        argv = shlex.split(command)[1:]
        argv[argv.index("plan.json")] = str(solved / "plan.json")
        out = tmp_path / argv[argv.index("--out") + 1]
        argv[argv.index("--out") + 1] = str(out)
        code, text = run_cli(*argv)
        assert code == 0, (command, text)
        assert out.stat().st_size > 0, command


def test_a_free_space_plan_lists_every_exporter_and_says_they_may_refuse():
    from autopar_opt.reports.launch import launch_section

    section = launch_section({"search_space": {"target": {"framework": "none"}}})
    tos = [c["command"].split("--to ")[1].split()[0] for c in section["commands"]]
    assert sorted(tos) == ["deepspeed", "megatron", "megatron-bridge", "torchtitan"]
    assert "refuses" in section["note"]
    old = launch_section({"search_space": {"target": {"framework": "torchtitan", "version": "0.2"}}})
    assert [c["command"] for c in old["commands"]] == [
        "autopar export plan.json --to torchtitan --out job.toml"]


def test_a_dag_gets_no_export_command_and_export_indeed_refuses(tmp_path):
    """A DAG (Inception v3) has no target to state, so the report lists no command and says
    why; the second route: ``autopar export`` refuses the plan (exit 2)."""
    code, text = run_cli("solve", paths.REPO / "examples" / "inception_v3_8gpu.yaml", "--out",
                         tmp_path, "--quiet", "--time-limit", "20")
    assert code == 0, text
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert doc["spec"]["model"]["is_chain"] is False
    html = render_html(doc)
    section = re.search(r'<div id="launch">(.*?)</div>', html, re.S).group(1)
    assert "autopar export plan.json" not in section and "not a chain" in section
    code, text = run_cli("export", tmp_path / "plan.json", "--to", "megatron")
    assert code == 2, text
