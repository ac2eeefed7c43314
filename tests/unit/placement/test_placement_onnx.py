"""ONNX importer: shapes from ONNX shape inference, FLOPs hand-derived, CLI end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

onnx = pytest.importorskip("onnx", reason="the ONNX importer is an optional extra (pip install 'autopar-opt[onnx]')")

from autopar_opt.cli.commands import app  # noqa: E402
from autopar_opt.placement.importers.onnx import onnx_op_graph  # noqa: E402


def _model(path: Path) -> None:
    """X[2,8] -> MatMul(W1[8,16]) -> Relu -> MatMul(W2[16,4]) -> Y; Relu -> ReduceSum -> S."""
    h = onnx.helper
    tp = onnx.TensorProto
    w1 = onnx.numpy_helper.from_array(np.ones((8, 16), np.float32), "W1")
    w2 = onnx.numpy_helper.from_array(np.ones((16, 4), np.float32), "W2")
    nodes = [h.make_node("MatMul", ["X", "W1"], ["A"], name="mm1"),
             h.make_node("Relu", ["A"], ["B"], name="relu"),
             h.make_node("MatMul", ["B", "W2"], ["Y"], name="mm2"),
             h.make_node("ReduceSum", ["B"], ["S"], name="sum", keepdims=0)]
    graph = h.make_graph(nodes, "tiny", [h.make_tensor_value_info("X", tp.FLOAT, [2, 8])],
                         [h.make_tensor_value_info("Y", tp.FLOAT, None),
                          h.make_tensor_value_info("S", tp.FLOAT, None)], initializer=[w1, w2])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(path))


def test_onnx_graph_shapes_and_flops(tmp_path: Path) -> None:
    path = tmp_path / "tiny.onnx"
    _model(path)
    g = onnx_op_graph(path)
    assert g.names == ["mm1", "relu", "mm2", "sum"]
    assert sorted(g.edges) == [(0, 1), (1, 2), (1, 3)]
    assert g.flops[0] == 2 * 2 * 16 * 8            # 2·M·N·K
    assert g.flops[2] == 2 * 2 * 4 * 16
    assert g.out_bytes[0] == 2 * 16 * 4            # inferred A: [2,16] float32
    assert g.param_bytes[0] == 8 * 16 * 4 and g.param_bytes[1] == 0
    assert g.gemm == [True, False, True, False]


def test_place_onnx_spec(tmp_path: Path) -> None:
    _model(tmp_path / "tiny.onnx")
    spec = tmp_path / "spec.yaml"
    spec.write_text("placement:\n  graph: {onnx: tiny.onnx}\n  devices: [{type: A100-80GB, count: 2}]\n")
    res = CliRunner().invoke(app, ["place", str(spec), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["status"] == "optimal"
    assert sorted(n for d in doc["devices"] for n in d["nodes"]) == [0, 1, 2, 3]


def test_weights_in_external_data_are_never_read(tmp_path: Path) -> None:
    """Both ONNX importers read the graph within reading.ONNX and never open external
    weight files: a model whose weights were moved to external data, then deleted, gives
    the same graph as the same model with its weights inside (oracle: that model)."""
    from autopar_opt.opspace.importers import onnx_operator_graph

    inside = tmp_path / "inside.onnx"
    _model(inside)
    model = onnx.load(str(inside))
    outside = tmp_path / "outside.onnx"
    onnx.save(model, str(outside), save_as_external_data=True, all_tensors_to_one_file=True,
              location="weights.bin", size_threshold=0)
    assert outside.stat().st_size < inside.stat().st_size       # the weights did move out
    (tmp_path / "weights.bin").unlink()
    a, b = onnx_op_graph(inside), onnx_op_graph(outside)
    assert a.param_bytes[0] == 8 * 16 * 4 and a == b     # W1's bytes, from its dims
    ops = onnx_operator_graph(inside).ops
    assert ops and ops == onnx_operator_graph(outside).ops
