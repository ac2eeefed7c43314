"""ONNX and torch.fx models as operator graphs: kinds, iteration spaces, the exact solve."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch", reason="the torch.fx importer needs PyTorch")

from autopar_opt.ir.operators import OpKind  # noqa: E402
from autopar_opt.opspace.importers import fx_operator_graph, onnx_operator_graph  # noqa: E402
from autopar_opt.opspace.solve import solve_operator_space  # noqa: E402
from support.cli import run_cli  # noqa: E402
from support.opspace_cases import context  # noqa: E402

MODEL = '''
import torch
from torch import nn

class MLP(nn.Module):
    def __init__(self, d=1024, h=4096):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(h, d)
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        return self.ln(x + self.fc2(self.act(self.fc1(x))))

class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.r = nn.ReLU()
        self.p = nn.MaxPool2d(2)
        self.fc = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x):
        x = self.p(self.r(self.bn(self.c1(x))))
        return torch.softmax(self.fc(torch.flatten(x, 1)), dim=1)
'''


@pytest.fixture()
def nets(tmp_path, monkeypatch):
    (tmp_path / "nets.py").write_text(MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    return importlib.import_module("nets")


def test_fx_mlp_and_cnn_become_iteration_spaces(nets):
    g = fx_operator_graph(nets.MLP(), torch.zeros(8, 128, 1024), name="MLP")
    assert g.problems() == []
    assert [op.kind for op in g.ops] == [OpKind.gemm, OpKind.elementwise, OpKind.gemm, OpKind.elementwise,
                                         OpKind.norm]
    fc1 = g.ops[0]
    assert fc1.sizes == {"b": 8, "a1": 128, "n": 4096, "k": 1024} and fc1.reduction == ("k",)
    assert fc1.flops == 2.0 * 8 * 128 * 4096 * 1024
    assert g.ops[4].stats == ("a2",)
    c = fx_operator_graph(nets.CNN(), torch.zeros(8, 3, 16, 16), name="CNN")
    assert c.problems() == [] and "0 opaque" in c.source
    assert [op.kind for op in c.ops] == [OpKind.conv, OpKind.norm, OpKind.elementwise, OpKind.pool,
                                         OpKind.reshape, OpKind.gemm, OpKind.softmax]


def test_fx_graph_is_solved_exactly_and_shards_a_large_mlp(nets):
    g = fx_operator_graph(nets.MLP(), torch.zeros(8, 1024, 1024), name="MLP")
    r = solve_operator_space(g, context(4, batch=8), 4)
    assert r.status(1e-9) == "optimal"
    labels = [r.best.tables.configs[v][k].label(g.ops[v]) for v, k in enumerate(r.best.choice)]
    assert labels[0] != "rep"                        # this much work is split, not replicated


def test_onnx_export_of_the_same_module_gives_the_same_gemms(nets, tmp_path):
    pytest.importorskip("onnx", reason="the ONNX importer is an optional extra")
    path = tmp_path / "mlp.onnx"
    torch.onnx.export(nets.MLP(), (torch.zeros(8, 128, 1024),), str(path), dynamo=False)
    g = onnx_operator_graph(path)
    assert g.problems() == []
    gemms = [op for op in g.ops if op.kind is OpKind.gemm]
    assert [op.sizes["n"] for op in gemms] == [4096, 1024]
    assert [op.flops for op in gemms] == [2.0 * 8 * 128 * 4096 * 1024] * 2


def test_spec_with_a_torch_graph(nets, tmp_path):
    (tmp_path / "spec.yaml").write_text(
        "problem:\n  format: operator_sharding\n  graph: {torch: nets.py:MLP, inputs: [[8, 128, 1024]]}\n"
        "  cluster: {nodes: 1, gpus_per_node: 4, device: A100-80GB}\n")
    code, out = run_cli("solve", tmp_path / "spec.yaml", "--json")
    assert code == 0, out
    doc = json.loads(out[out.index("{"):])
    assert doc["spec"]["problem"]["operators"] == 5 and doc["certificate"]["exact"]
    (tmp_path / "bad.yaml").write_text(
        "problem:\n  format: operator_sharding\n  graph: {torch: nets.py:Nope, inputs: [[8, 16]]}\n"
        "  cluster: {nodes: 1, gpus_per_node: 4, device: A100-80GB}\n")
    code, out = run_cli("solve", tmp_path / "bad.yaml")
    assert code == 2 and "problem.graph.torch" in out


@pytest.mark.parametrize("inputs, words", [
    ("[[1000000000, 128, 1024]]", "more than the 134,217,728"),   # 0.5 PB of zeros, refused unread
    ("[[8, 0, 1024]]", "positive integers"),
])
def test_spec_with_a_torch_graph_too_large_or_empty_to_trace(nets, tmp_path, inputs, words):
    (tmp_path / "big.yaml").write_text(
        f"problem:\n  format: operator_sharding\n  graph: {{torch: nets.py:MLP, inputs: {inputs}}}\n"
        "  cluster: {nodes: 1, gpus_per_node: 4, device: A100-80GB}\n")
    code, out = run_cli("solve", tmp_path / "big.yaml")
    assert code == 2 and "problem.graph.inputs" in out and words in out
