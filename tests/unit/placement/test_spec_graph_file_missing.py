"""A placement spec whose ``graph: {file: ...}`` does not exist (QA round 12): the error
named only the resolved graph path ("nothere.json: the placement graph file does not
exist"), not the spec or its key, although a relative path is read from the spec's
folder. It names both now, as an ONNX path already was.

Oracle: the spec's folder plus the written path is where the file was looked for."""

from __future__ import annotations

import yaml

from support.cli import run_cli


def test_the_spec_and_its_key_are_named(tmp_path):
    sub = tmp_path / "specs"
    sub.mkdir()
    spec = sub / "p.yaml"
    spec.write_text(yaml.safe_dump({"placement": {"graph": {"file": "nothere.json"}}}))
    code, text = run_cli("place", spec)
    assert code == 2, text
    assert f"{spec}: placement.graph.file = 'nothere.json': file not found" in text
    assert str(sub / "nothere.json") in text
