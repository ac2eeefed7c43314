"""A placement spec with ``objective: latency`` and ``contiguous: false`` (QA round 12):
the refusal named "command line: --no-contiguous = true", an option nobody gave. It names
the spec and its key now; the option's own refusal is unchanged.

Oracle: the rule (the latency model's blocks need contiguous parts) and where the value
came from: the spec in the first case, the command line in the second."""

from __future__ import annotations

import yaml

from support.cli import run_cli
from support import paths

GRAPH = paths.DATA / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"


def test_the_spec_key_is_named(tmp_path):
    spec = tmp_path / "p.yaml"
    spec.write_text(yaml.safe_dump({"placement": {"graph": {"file": str(GRAPH)},
                                                  "objective": "latency", "contiguous": False}}))
    code, text = run_cli("place", spec)
    assert code == 2, text
    assert "p.yaml: placement.contiguous = false" in text and "--no-contiguous" not in text
    assert "write objective: max-load" in text


def test_the_option_is_named_when_given(tmp_path):
    code, text = run_cli("place", GRAPH, "--objective", "latency", "--no-contiguous")
    assert code == 2 and "command line: --no-contiguous = true" in text
