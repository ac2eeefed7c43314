"""Keys of an expert split that the public format does not have (QA round 34).

A misspelt key was ignored without a word: ``"cpu": [...]`` for ``"cpus"`` dropped the CPU
group (its nodes then followed their colour class or were "not placed"), ``"node"`` for
``"nodes"`` emptied a device; any other key passed. The public placement graph refuses its
unknown keys ("it would be ignored"); the split now does too. Oracle: the shipped splits
(keys fpgas, cpus, maxLoad; groups nodes, load) still load, and the same split with one key
misspelt is refused at that key with the right name suggested.
"""

from __future__ import annotations

import json

import pytest

from support import paths
from support.cli import run_cli

DATA = paths.DATA / "placement"
GRAPH = DATA / "throughput" / "LayerGraphs_bert24_inference.json"
EXPERT = json.loads((DATA / "experts" / "bert24_inference.json").read_text())


def _place(tmp_path, split: dict):
    path = tmp_path / "split.json"
    path.write_text(json.dumps(split))
    return run_cli("place", GRAPH, "--expert", path, "--time-limit", "20")


def test_the_shipped_split_loads(tmp_path):
    code, text = _place(tmp_path, EXPERT)
    assert code == 0, text


@pytest.mark.parametrize("edit,key,near", [
    (lambda d: d.__setitem__("cpu", d.pop("cpus")), "cpu", "cpus"),
    (lambda d: d["fpgas"][1].__setitem__("node", d["fpgas"][1].pop("nodes")), "fpgas[1].node",
     "nodes"),
])
def test_a_misspelt_key_is_refused_with_the_name_meant(tmp_path, edit, key, near):
    split = json.loads(json.dumps(EXPERT))
    edit(split)
    code, text = _place(tmp_path, split)
    assert code == 2, text
    assert f"{key} = " in text and "is not a key of the public placement format" in text
    assert f"write {near!r} if that was meant" in text
