"""`autopar schema --placement` prints the typed model of a placement spec, and it
holds the rules `autopar place` checks by hand (QA round 13: there was no schema of
this form; the hand checks' key lists are now the model's fields).

Oracles: every bundled placement example is accepted by the printed JSON Schema (a
second validator, jsonschema), by the model and by `place`; each wrong spec below is
refused by both the model and `place`, at the same key (one path a prefix of the
other: a rule over two keys is reported on the entry by the model); the model's
defaults are the ones `place` applies (its --json answer)."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
import yaml
from pydantic import ValidationError

from autopar_opt.core.errors import SpecError
from autopar_opt.placement.importers.spec import load_placement
from autopar_opt.placement.importers.spec_schema import PlacementSpecFile
from support.cli import run_cli
from support.paths import DATA, REPO

EXAMPLES = sorted((REPO / "examples" / "placement").glob("*.yaml"))
BERT = str(DATA / "placement" / "throughput" / "LayerGraphs_bert24_inference.json")
ZOO = {"placement": {"graph": {"zoo": "synthetic_transformer", "nodes": 50},
                     "devices": [{"type": "A100-80GB", "count": 2}]}}
FILE = {"placement": {"graph": {"file": BERT}}}


def _schema() -> dict:
    code, text = run_cli("schema", "--placement")
    assert code == 0, text
    return json.loads(text)


def test_the_bundled_examples_validate_everywhere():
    assert len(EXAMPLES) >= 2
    validator = jsonschema.Draft202012Validator(_schema())
    for path in EXAMPLES:
        data = yaml.safe_load(path.read_text())
        assert list(validator.iter_errors(data)) == [], path
        PlacementSpecFile.model_validate(data)
        problem, _ = load_placement(path)
        assert problem.num_nodes > 0


def _with(base: dict, where: str, value) -> dict:
    doc = copy.deepcopy(base)
    *parents, last = where.split(".")
    node = doc
    for key in parents:
        node = node[int(key)] if key.isdigit() else node[key]
    node[int(last) if last.isdigit() else last] = value
    return doc


def _drop(base: dict, where: str) -> dict:
    doc = copy.deepcopy(base)
    *parents, last = where.split(".")
    node = doc
    for key in parents:
        node = node[int(key)] if key.isdigit() else node[key]
    del node[last]
    return doc


BAD = [
    ("unknown placement key", _with(ZOO, "placement.objectiv", "latency")),
    ("unknown device key", _with(ZOO, "placement.devices.0.memory", 40)),
    ("unknown top-level key", _with(ZOO, "solver", {"name": "highs"})),
    ("objective", _with(ZOO, "placement.objective", "throughput")),
    ("contiguous as text", _with(ZOO, "placement.contiguous", "yes")),
    ("negative count", _with(ZOO, "placement.devices.0.count", -1)),
    ("count true", _with(ZOO, "placement.devices.0.count", True)),
    ("count above the limit", _with(ZOO, "placement.devices.0.count", 10**6)),
    ("memory 0", _with(ZOO, "placement.devices.0.memory_gib", 0)),
    ("memory as text", _with(ZOO, "placement.devices.0.memory_gib", "80")),
    ("memory twice", _with(_with(ZOO, "placement.devices.0.memory_gib", 40),
                           "placement.devices.0.memory_bytes", 4e10)),
    ("pays_comm as text", _with(ZOO, "placement.devices.0.pays_comm", "no")),
    ("type a number", _with(ZOO, "placement.devices.0.type", 100)),
    ("no devices for a zoo graph", _drop(ZOO, "placement.devices")),
    ("empty devices", _with(ZOO, "placement.devices", [])),
    ("every count 0", _with(ZOO, "placement.devices.0.count", 0)),
    ("two sources", _with(ZOO, "placement.graph.file", BERT)),
    ("no source", _with(ZOO, "placement.graph", {"nodes": 5})),
    ("file with a zoo argument", _with(FILE, "placement.graph.nodes", 5)),
    ("file not text", _with(FILE, "placement.graph.file", 5)),
    ("onnx with an extra key", {"placement": {"graph": {"onnx": "m.onnx", "opset": 17},
                                              "devices": [{"type": "A100-80GB"}]}}),
    ("torch with a misspelt key", {"placement": {"graph": {"torch": "m.py:Net", "inputs": [[2, 8]],
                                                           "kwarg": {}},
                                                 "devices": [{"type": "A100-80GB"}]}}),
    ("description not text", _with(ZOO, "description", 5)),
]


def _related(a: str, b: str) -> bool:
    a, b = a.split("."), b.split(".")
    return a[:len(b)] == b or b[:len(a)] == a


def _model_paths(exc: ValidationError) -> list[str]:
    out = []
    for err in exc.errors():
        loc = [str(x) for x in err["loc"]]
        if loc[:2] == ["placement", "graph"] and len(loc) > 2 and loc[2] in (
                "file", "zoo", "onnx", "torch"):
            loc = loc[:2] + loc[3:]                        # the union's tag, not a key
        out.append(".".join(loc))
    return out


@pytest.mark.parametrize("case,doc", BAD, ids=[c for c, _ in BAD])
def test_a_wrong_spec_is_refused_by_both_at_the_same_key(case, doc, tmp_path):
    with pytest.raises(ValidationError) as model:
        PlacementSpecFile.model_validate(doc)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecError) as place:
        load_placement(path)
    hand = [p.key.replace("[", ".").replace("]", "") for p in place.value.problems]
    paths = _model_paths(model.value)
    assert any(_related(h, m) for h in hand for m in paths), (hand, paths)
    code, text = run_cli("place", path)             # the command: exit 2, a message, no traceback
    assert code == 2 and "Traceback" not in text


def test_the_model_defaults_are_the_ones_place_applies(tmp_path):
    model = PlacementSpecFile.model_validate(FILE).placement
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(FILE))
    code, text = run_cli("place", path, "--json")
    assert code == 0, text
    answer = json.loads(text[text.index("{"):])
    assert (answer["objective"], answer["contiguous"]) == (model.objective, model.contiguous)
    one = _drop(ZOO, "placement.devices.0.count")         # count and pays_comm left out
    zoo = PlacementSpecFile.model_validate(one).placement.devices[0]
    problem, _ = load_placement(_write(tmp_path, one))
    assert problem.num_devices == zoo.count == 1 and problem.device_types[0].pays_comm


def _write(tmp_path, doc):
    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path
