"""``report`` of a placement.json edited by hand (QA round 34).

The placement report checked value, bound, gap and status, and rendered whatever else the
document held: a device's ``nodes: "x"``, ``devices: "x"``, ``details: []``, each with exit
0. Oracle: what ``autopar place`` writes (its devices a list of entries, each with a list of
node ids; details a mapping); that document still renders. (``devices: []`` stays accepted:
the report tests render such a document.)
"""

from __future__ import annotations

import json

import pytest

from support import paths
from support.cli import run_cli

GRAPH = paths.DATA / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"


@pytest.fixture(scope="module")
def placement(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("placed")
    code, text = run_cli("place", GRAPH, "--out", out, "--quiet", "--time-limit", "20")
    assert code == 0, text
    return json.loads((out / "placement.json").read_text())


@pytest.mark.parametrize("edit,words", [
    (lambda d: d["devices"][0].__setitem__("nodes", "x"), "devices must be a list of"),
    (lambda d: d.__setitem__("devices", "x"), "devices must be a list of"),
    (lambda d: d.__setitem__("details", []), "details = [] must be a mapping"),
])
def test_an_edited_placement_is_refused_at_its_key(tmp_path, placement, edit, words):
    doc = json.loads(json.dumps(placement))
    edit(doc)
    path = tmp_path / "placement.json"
    path.write_text(json.dumps(doc))
    code, text = run_cli("report", path, "--out", tmp_path / "r.html")
    assert code == 2, text
    assert words in text and "not one the placement report can read" in text
    assert not (tmp_path / "r.html").exists()


def test_the_written_placement_still_renders(tmp_path, placement):
    path = tmp_path / "placement.json"
    path.write_text(json.dumps(placement))
    code, text = run_cli("report", path, "--out", tmp_path / "r.html")
    assert code == 0, text
