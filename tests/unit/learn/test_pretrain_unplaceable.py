"""`autopar pretrain` on a graph that no placement fits (QA round 12): every sample of it
earns the infeasibility penalty, so it teaches the policy nothing, yet it was trained on
and a policy written without a word. It is refused now (exit 2, naming the file and why,
nothing written), by the same proofs with which `autopar place` answers exit 3. A graph
with more devices than GDP's decoder tracks (63) was an internal error; refused too.

Oracle (hand): three nodes of 1 byte on two accelerators of 1 byte each need 3 bytes of
the 2 there are; `autopar place` on the same graph says "infeasible" (exit 3); the
decoder's limit is learn/place_graph.MAX_DEVICES."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli
from support.placement_cases import public_chain
from support import paths

pytest.importorskip("torch")

GRAPH = public_chain(fpga_size=1, fpgas=2)


def test_a_graph_without_a_placement_is_refused(tmp_path):
    bad = tmp_path / "nofit.json"
    bad.write_text(json.dumps(GRAPH))
    assert run_cli("place", bad)[0] == 3
    good = paths.DATA / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"
    code, text = run_cli("pretrain", bad, good, "--out", tmp_path / "p.pt", "--iterations", "1")
    assert code == 2, text
    assert "nofit.json" in text and "no placement of this graph exists" in text
    assert "3 bytes" in text and "2 bytes" in text
    assert not (tmp_path / "p.pt").exists()


def test_a_graph_with_more_devices_than_the_decoder_tracks_is_refused(tmp_path):
    from autopar_opt.learn.place_graph import MAX_DEVICES

    wide = dict(GRAPH, maxSizePerFPGA=100, maxFPGAs=MAX_DEVICES + 1)
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(wide))
    code, text = run_cli("pretrain", path, "--out", tmp_path / "p.pt", "--iterations", "1")
    assert code == 2 and "internal error" not in text, text
    assert f"wide.json: maxFPGAs + maxCPUs = {MAX_DEVICES + 1}" in text
    assert not (tmp_path / "p.pt").exists()
