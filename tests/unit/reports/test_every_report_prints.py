"""Every HTML report the tool writes prints whole and stays self-contained (QA round 36).

The plan report had print rules (``@media print``: no clipped scroll boxes, no wide-screen
margin, no row or chart cut over two pages); the capacity, placement, fleet,
operator-sharding and peer reports had none. Oracle: the files the commands themselves
write (``solve`` of a plain spec (the session's quickstart solve), a fleet, an
operator-sharding and a peer spec, ``place``, and ``report`` of a capacity document),
each read as text: its ``@media print`` block holds every shared rule
(:data:`~autopar_opt.reports.print_style.PRINT_RULES`), and nothing in it is fetched from
elsewhere (no http(s) address but an SVG namespace name, no ``src``, ``href`` or CSS
``url()``/``@import`` leaving the file).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from autopar_opt.reports.print_style import PRINT_RULES
from support import paths
from support.cli import run_cli
from support.fleets import TINY_MIX_CLUSTER

FLEET = {"model": {"zoo": "debug"}, "cluster": copy.deepcopy(TINY_MIX_CLUSTER),
         "training": {"global_batch_size": 16},
         "search": {"zero_levels": [0, 3], "recompute": ["none", "full"]},
         "solver": {"name": "dp", "time_limit_s": 60, "rel_gap": 0.001}}


def _solve(tmp: Path, spec: Path, *args: str) -> Path:
    code, text = run_cli("solve", spec, "--out", tmp, "--quiet", *args)
    assert code == 0, text
    return tmp / "report.html"


def _fleet(tmp: Path) -> Path:
    spec = tmp / "fleet.yaml"
    spec.write_text(yaml.safe_dump(FLEET))
    return _solve(tmp / "out", spec)


def _place(tmp: Path) -> Path:
    code, text = run_cli("place", paths.REPO / "examples" / "placement" / "bert24_file.yaml",
                         "--out", tmp, "--quiet", "--time-limit", "30")
    assert code == 0, text
    return tmp / "report.html"


def _capacity(tmp: Path) -> Path:
    out = tmp / "capacity.html"
    code, text = run_cli("report", paths.DATA / "report" / "capacity_tiny.json", "--out", out,
                         "--quiet")
    assert code == 0, text
    return out


WRITERS = {
    "plan (solve)": None,          # the session's quickstart solve (conftest.quickstart_out)
    "fleet (solve)": _fleet,
    "operator sharding (solve)": lambda tmp: _solve(
        tmp, paths.REPO / "examples" / "operator_sharding" / "pipeline.yaml"),
    "peer (solve)": lambda tmp: _solve(tmp, paths.REPO / "examples" / "peers" / "piper_gnmt_k8.yaml",
                                       "--time-limit", "20"),
    "placement (place)": _place,
    "capacity (report)": _capacity,
}


def external_references(html: str) -> set[str]:
    """What in ``html`` a browser would fetch from outside the file."""
    found = [u for u in re.findall(r"https?://[^\s\"'<>)]+", html)
             if not re.search(rf"xmlns(?::\w+)?=[\"']{re.escape(u)}", html)]   # a namespace name
    found += [v for v in re.findall(r"\b(?:src|href)\s*=\s*[\"']([^\"']*)", html)
              if not v.startswith(("#", "data:"))]
    found += [v for v in re.findall(r"url\(\s*[\"']?([^)\"']*)", html) if not v.startswith(("#", "data:"))]
    found += re.findall(r"@import[^;]*", html)
    return set(found)


def test_external_references_sees_what_a_browser_fetches():
    """The check itself (guards against a vacuous pass)."""
    assert external_references('<svg xmlns="http://www.w3.org/2000/svg"><use href="#a"/>'
                               '<rect fill="url(#g)"/></svg>') == set()
    assert external_references('<script src="https://cdn.example/x.js"></script>'
                               '<link href="style.css"><style>@import "a.css"; '
                               'b{background:url(http://x/y.png)}</style>') \
        == {"https://cdn.example/x.js", "style.css", "http://x/y.png", '@import "a.css"'}


@pytest.mark.parametrize("kind", list(WRITERS))
def test_every_report_prints_with_the_shared_rules_and_is_self_contained(tmp_path, kind, request):
    write = WRITERS[kind]
    written = write(tmp_path) if write else request.getfixturevalue("quickstart_out") / "report.html"
    html = written.read_text()
    style = re.search(r"<style>(.*?)</style>", html, re.S)
    assert style, kind
    media = re.search(r"@media print\s*{(.*?)\n\s*}", style.group(1), re.S)
    assert media, f"{kind}: no @media print block"
    for rule in PRINT_RULES:
        assert rule in media.group(1), (kind, rule)
    assert external_references(html) == set(), kind
