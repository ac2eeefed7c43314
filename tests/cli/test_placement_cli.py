"""``autopar place``: JSON document, output files, expert comparison, errors (exit code 2)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from autopar_opt.cli.commands import app
from support import paths

DATA = paths.DATA / "placement"
BERT = DATA / "throughput" / "LayerGraphs_bert24_inference.json"


def test_place_json_and_outputs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["place", str(BERT), "--json", "--out", str(out),
                                   "--expert", str(DATA / "experts" / "bert24_inference.json")])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    for key in ("objective", "value", "lower_bound", "gap", "status", "devices", "wall_time_s"):
        assert key in doc
    assert doc["status"] == "optimal" and abs(doc["value"] - 17.7899) < 1e-3
    assert doc["gap"] == 0.0
    placed = sorted(n for d in doc["devices"] for n in d["nodes"])
    assert placed == sorted(json.loads(BERT.read_text())["nodes"][i]["id"] for i in range(32))
    assert all({"nodes", "load", "memory_bytes"} <= set(d) for d in doc["devices"])
    # --json carries what placement.json has beside the value (QA round 9)
    assert any(b["name"].startswith("human expert") for b in doc["baselines"])
    assert "metrics" in doc and "cut_edges" in doc and doc["bound_source"]
    full = json.loads((out / "placement.json").read_text())
    expert = next(b for b in full["baselines"] if b["name"].startswith("human expert"))
    assert expert["value"] > doc["value"]
    html = (out / "report.html").read_text()
    assert "critical" in html and "human expert" in html and "Cut edges" in html


def test_place_spec_with_device_override(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"placement:\n  graph: {{file: {BERT}}}\n  devices:\n"
                    "    - {type: accelerator, count: 2}\n  objective: max-load\n")
    res = CliRunner().invoke(app, ["place", str(spec), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert len(doc["devices"]) == 2 and doc["status"] == "optimal"


def test_place_errors_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    data = json.loads(BERT.read_text())
    data["edges"][0]["destId"] = 99999
    bad.write_text(json.dumps(data))
    res = CliRunner().invoke(app, ["place", str(bad)])
    assert res.exit_code == 2
    assert "edges[0].destId" in res.output and "must be the id of a node" in res.output
    res = CliRunner().invoke(app, ["place", str(BERT), "--objective", "speed"])
    assert res.exit_code == 2 and "--objective" in res.output
    res = CliRunner().invoke(app, ["place", str(tmp_path / "missing.json")])
    assert res.exit_code == 2 and "does not exist" in res.output
    spec = tmp_path / "s.yaml"
    spec.write_text("placement:\n  graph: {zoo: no_such_graph}\n  devices: [{type: A100-80GB, count: 2}]\n")
    res = CliRunner().invoke(app, ["place", str(spec)])
    assert res.exit_code == 2 and "no_such_graph" in res.output


def test_place_torch_graph_without_torch_says_how_to_install(tmp_path: Path, monkeypatch) -> None:
    """Runs with or without PyTorch: the import is made to fail."""
    import builtins

    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("No module named 'torch'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    spec = tmp_path / "p.yaml"
    spec.write_text("placement:\n  graph: {torch: 'model.py:Net', inputs: [[2, 8]]}\n"
                    "  devices: [{type: A100-80GB, count: 2}]\n")
    result = CliRunner().invoke(app, ["place", str(spec), "--json"])
    assert result.exit_code == 2, result.output
    assert "pip install 'autopar-opt[torch]'" in result.output
    assert "placement.graph.torch" in result.output and "Traceback" not in result.output


def test_place_on_a_public_file_loads_no_solver_or_yaml() -> None:
    """Start-up of ``autopar place FILE.json`` on a small lattice: the exact DP alone, so
    neither HiGHS, scipy, networkx, the YAML parser nor numpy.ma (which every
    ``np.unique`` imports) is loaded; the answer is still the known optimum."""
    import subprocess
    import sys

    code = ("import sys, json, io, contextlib; from autopar_opt.cli.commands import main; "
            f"sys.argv = ['autopar', 'place', {str(BERT)!r}, '--json']; buf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf):\n"
            "    try: main()\n"
            "    except SystemExit: pass\n"
            "print(json.loads(buf.getvalue())['value'], "
            "[m for m in ('highspy', 'scipy', 'networkx', 'yaml', 'numpy.ma') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    value, loaded = out.stdout.split(maxsplit=1)
    assert abs(float(value) - 17.7899) < 1e-3
    assert loaded.strip() == "[]"


def _two_chains(tmp_path: Path) -> Path:
    """Chains 1->2 and 3->4 (work 5, 3, 3, 1) on 2 accelerators, no CPU: the split
    {1, 4} / {2, 3} has each set contiguous but the two feed each other (outside the
    chain-of-ideals space; QA round 9)."""
    node = lambda i, t: {"id": i, "supportedOnFpga": 1, "cpuLatency": 100.0,  # noqa: E731
                         "fpgaLatency": t, "isBackwardNode": 0, "size": 1.0}
    graph = {"maxSizePerFPGA": 100.0, "maxFPGAs": 2, "maxCPUs": 0,
             "nodes": [node(1, 5.0), node(2, 3.0), node(3, 3.0), node(4, 1.0)],
             "edges": [{"sourceId": 1, "destId": 2, "cost": 0.0},
                       {"sourceId": 3, "destId": 4, "cost": 0.0}]}
    path = tmp_path / "chains.json"
    path.write_text(json.dumps(graph))
    return path


def test_an_expert_split_outside_the_contiguous_space_is_shown_infeasible(tmp_path: Path) -> None:
    graph = _two_chains(tmp_path)
    expert = tmp_path / "expert.json"
    expert.write_text(json.dumps({"fpgas": [{"nodes": [1, 4]}, {"nodes": [2, 3]}], "cpus": []}))
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["place", str(graph), "--expert", str(expert), "--out", str(out)])
    assert res.exit_code == 0, res.output
    # by hand over the ordered ideal splits: {1} then {2, 3, 4} gives max(5, 7) = 7, every
    # other is 8 or more; the 6 of {1, 4} / {2, 3} needs the two devices to feed each other
    doc = json.loads((out / "placement.json").read_text())
    assert abs(doc["value"] - 7.0) < 1e-9 and abs(doc["lower_bound"] - 7.0) < 1e-9
    row = next(b for b in doc["baselines"] if b["name"].startswith("human expert"))
    assert row["value"] == 6.0 and any("not contiguous" in v for v in row["violations"])
    assert "infeasible for this problem: not contiguous" in res.output
    assert "infeasible for this problem" in (out / "report.html").read_text()
    assert "chains of ideals" in doc["bound_source"]
    # the non-contiguous variant accepts it and finds the 6
    res = CliRunner().invoke(app, ["place", str(graph), "--no-contiguous", "--json",
                                   "--expert", str(expert)])
    assert res.exit_code == 0, res.output
    assert abs(json.loads(res.output)["value"] - 6.0) < 1e-9


def test_a_node_in_two_expert_groups_is_refused(tmp_path: Path) -> None:
    graph = _two_chains(tmp_path)
    expert = tmp_path / "expert.json"
    expert.write_text(json.dumps({"fpgas": [{"nodes": [1, 2]}, {"nodes": [2, 3, 4]}]}))
    res = CliRunner().invoke(app, ["place", str(graph), "--expert", str(expert),
                                   "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "listed in two groups" in res.output
    assert not (tmp_path / "o").exists()


def test_a_misspelt_key_of_the_public_format_is_refused(tmp_path: Path) -> None:
    data = json.loads(_two_chains(tmp_path).read_text())
    data["nodes"][0]["colourClass"] = 1
    data["maxFPGA"] = data.pop("maxFPGAs")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    res = CliRunner().invoke(app, ["place", str(bad)])
    assert res.exit_code == 2
    assert "nodes[0].colourClass = 1: is not a key of the public placement format" in res.output
    assert "write 'colorClass' if that was meant" in res.output
    assert "maxFPGA = 2" in res.output and "write 'maxFPGAs' if that was meant" in res.output


def test_a_public_file_without_nodes_is_told_so(tmp_path: Path) -> None:
    """QA round 10: it was asked for a spec's 'placement:' mapping."""
    data = json.loads(_two_chains(tmp_path).read_text())
    del data["nodes"]
    bad = tmp_path / "no_nodes.json"
    bad.write_text(json.dumps(data))
    res = CliRunner().invoke(app, ["place", str(bad), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "nodes = (missing)" in res.output, res.output
    assert "placement' mapping" not in res.output and not (tmp_path / "o").exists()


def test_a_placement_report_with_a_bound_above_the_value_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["place", str(_two_chains(tmp_path)), "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "placement.json").read_text())
    doc["lower_bound"] = doc["value"] * 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    res = CliRunner().invoke(app, ["report", str(bad), "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and "is above value" in res.output
    assert not (tmp_path / "r.html").exists()


def test_a_placement_graph_from_two_sources_is_refused(tmp_path: Path) -> None:
    """QA round 10: graph: {file: ..., zoo: ...} used the file and dropped zoo silently."""
    _two_chains(tmp_path)
    spec = tmp_path / "p.yaml"
    spec.write_text("placement:\n  graph: {file: chains.json, zoo: inception_v3}\n")
    res = CliRunner().invoke(app, ["place", str(spec)])
    assert res.exit_code == 2 and "names 2 sources (file, zoo)" in res.output, res.output


def test_an_unknown_granularity_is_refused_not_read_as_layer(tmp_path: Path) -> None:
    """QA round 35: ``granularity: bogus`` built Inception-v3's layer graph (121 nodes) without
    a word, the generator testing ``== "op"``. Refused with the key and the two values; the
    two values build graphs of different sizes (the oracle that the key matters)."""
    from autopar_opt.model_zoo.op_graphs import inception_v3

    assert len(inception_v3(granularity="op").names) != len(inception_v3(granularity="layer").names)
    spec = tmp_path / "p.yaml"
    spec.write_text("placement:\n  graph: {zoo: inception_v3, granularity: bogus}\n"
                    "  devices: [{type: A100-80GB, count: 2}]\n")
    res = CliRunner().invoke(app, ["place", str(spec), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2, res.output
    assert "placement.graph.granularity" in res.output and "op, layer" in res.output, res.output
    assert not (tmp_path / "o").exists()


def test_an_onnx_graph_out_of_topological_order_is_refused(tmp_path: Path) -> None:
    """QA round 35: an MLP whose last MatMul is listed first was placed (exit 0) with that
    MatMul's input edge dropped (max-load 2.51e-6 against 4.27e-6 ms for the sorted twin).
    ONNX requires sorted nodes (oracle: onnx.checker rejects the file); refused, exit 2,
    naming the node, the tensor and its producer. The sorted twin is placed."""
    import pytest

    onnx = pytest.importorskip("onnx", reason="the ONNX importer is an optional extra")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="a"),
             helper.make_node("Relu", ["h"], ["r"], name="b"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="c")]
    for name, order in (("sorted", (0, 1, 2)), ("unsorted", (2, 0, 1))):
        graph = helper.make_graph(
            [nodes[k] for k in order], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 16])],
            [numpy_helper.from_array(np.zeros((16, 32), np.float32), "w1"),
             numpy_helper.from_array(np.zeros((32, 16), np.float32), "w2")])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                  str(tmp_path / f"{name}.onnx"))
        (tmp_path / f"{name}.yaml").write_text(f"placement:\n  graph: {{onnx: {name}.onnx}}\n"
                                               "  devices: [{type: A100-80GB, count: 2}]\n")
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(onnx.load(str(tmp_path / "unsorted.onnx")))
    res = CliRunner().invoke(app, ["place", str(tmp_path / "sorted.yaml")])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["place", str(tmp_path / "unsorted.yaml"), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2, res.output
    assert "placement.graph.onnx" in res.output and "node 0 (c) reads tensor 'r'" in res.output
    assert not (tmp_path / "o").exists()


def test_solver_dp_past_the_dp_guard_is_a_refused_option(tmp_path: Path) -> None:
    """``--solver dp`` on 18 parallel two-node chains (width 18: at least 2^18 = 262,144
    ideals, over the 200,000 guard; 3^18 by hand) ended in an internal error, exit 70 (QA
    round 35: the zoo GNMT graph likewise). Now exit 2 naming --solver and the guard, nothing
    written; the default route places it (the MILP)."""
    data = {"maxSizePerFPGA": 1e9, "maxFPGAs": 3, "maxCPUs": 0,
            "nodes": [{"id": i, "supportedOnFpga": 1, "cpuLatency": 1.0, "fpgaLatency": 1.0 + (7 * i) % 5,
                       "isBackwardNode": 0, "size": 1.0} for i in range(36)],
            "edges": [{"sourceId": 2 * i, "destId": 2 * i + 1, "cost": 1.5} for i in range(18)]}
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(data))
    res = CliRunner().invoke(app, ["place", str(path), "--solver", "dp", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2, res.output
    assert "--solver" in res.output and "2^18 = 262,144" in res.output and "internal" not in res.output
    assert not (tmp_path / "o" / "placement.json").exists()
    res = CliRunner().invoke(app, ["place", str(path), "--time-limit", "30"])
    assert res.exit_code == 0, res.output
