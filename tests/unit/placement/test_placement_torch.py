"""torch.fx importer: a small branchy module, FLOPs hand-derived, placed end to end."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the torch.fx importer needs PyTorch CPU "
                                            "(pip install 'autopar-opt[torch]')")

from autopar_opt.placement import solve_placement  # noqa: E402
from autopar_opt.placement.importers.torch_fx import fx_op_graph  # noqa: E402
from autopar_opt.placement.importers.zoo import op_problem  # noqa: E402


class Branchy(torch.nn.Module):
    """x -> fc1 -> relu -> (fc2, fc3) -> add -> matmul with its transpose."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)
        self.fc3 = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        y = self.fc2(h) + self.fc3(h)
        return torch.matmul(y, y.t())


def test_fx_graph_flops_and_edges() -> None:
    g = fx_op_graph(Branchy(), torch.zeros(2, 8))
    assert g.names == ["fc1", "relu", "fc2", "fc3", "add", "t", "matmul"]
    idx = {n: i for i, n in enumerate(g.names)}
    assert (idx["relu"], idx["fc2"]) in g.edges and (idx["relu"], idx["fc3"]) in g.edges
    assert g.flops[idx["fc1"]] == 2 * (2 * 16) * 8              # 2·numel(out)·in_features
    assert g.flops[idx["matmul"]] == 2 * (2 * 2) * 4            # [2,4] @ [4,2]: 2·numel·K
    assert g.param_bytes[idx["fc1"]] == (8 * 16 + 16) * 4
    assert g.out_bytes[idx["fc1"]] == 2 * 16 * 4
    p = op_problem(g, [{"type": "A100-80GB", "count": 2}], "branchy")
    res = solve_placement(p)
    assert res.status == "optimal" and res.assignment is not None


MODEL_PY = '''
import torch


class Branchy(torch.nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, hidden)
        self.fc2 = torch.nn.Linear(hidden, 4)
        self.fc3 = torch.nn.Linear(hidden, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        y = self.fc2(h) + self.fc3(h)
        return torch.matmul(y, y.t())
'''


def _spec(tmp_path, graph: dict) -> str:
    import yaml

    (tmp_path / "model.py").write_text(MODEL_PY)
    spec = tmp_path / "place.yaml"
    spec.write_text(yaml.safe_dump({"placement": {"graph": graph,
                                                  "devices": [{"type": "A100-80GB", "count": 2}]}}))
    return str(spec)


def test_place_cli_takes_a_torch_module_from_a_spec(tmp_path) -> None:
    """`autopar place` on {torch: model.py:Branchy}: the same problem as the library
    importer on the same module, solved and checked by the evaluator."""
    import json

    import numpy as np
    from typer.testing import CliRunner

    from autopar_opt.cli.commands import app
    from autopar_opt.placement import evaluate_placement
    from autopar_opt.placement.importers.spec import load_placement

    spec = _spec(tmp_path, {"torch": "model.py:Branchy", "kwargs": {"hidden": 16},
                            "inputs": [[2, 8]]})
    problem, _ = load_placement(spec)
    lib = op_problem(fx_op_graph(Branchy(), torch.zeros(2, 8)), [{"type": "A100-80GB", "count": 2}],
                     "Branchy")
    assert problem.node_names == lib.node_names and np.array_equal(problem.edges, lib.edges)
    assert np.allclose(problem.time["A100-80GB"], lib.time["A100-80GB"])
    result = CliRunner().invoke(app, ["place", spec, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["status"] == "optimal"
    assign = np.empty(problem.num_nodes, dtype=np.int64)
    labels = problem.device_labels()
    for d in doc["devices"]:
        assign[[problem.node_ids.index(v) for v in d["nodes"]]] = labels.index(d["device"])
    assert evaluate_placement(problem, assign).value == pytest.approx(doc["value"], rel=1e-9)


@pytest.mark.parametrize("graph,key,words", [
    ({"torch": "model.py:Nope", "inputs": [[2, 8]]}, "placement.graph.torch", "no attribute 'Nope'"),
    ({"torch": "missing.py:Net", "inputs": [[2, 8]]}, "placement.graph.torch", "file not found"),
    ({"torch": "model.py:Branchy", "inputs": [[2, 9]]}, "placement.graph.torch", "cannot be built"),
    ({"torch": "model.py:Branchy", "inputs": "2x8"}, "placement.graph.inputs", "list of input shapes"),
    # 10^9 x 8 float32 zeros (32 GB) would be allocated before the trace: refused unread
    ({"torch": "model.py:Branchy", "inputs": [[10**9, 8]]}, "placement.graph.inputs",
     "more than the 134,217,728"),
    ({"torch": "model.py:Branchy", "inputs": [[2**26, 1], [2**26, 1], [2, 8]]},
     "placement.graph.inputs", "elements"),
])
def test_place_cli_torch_spec_errors_exit_2(tmp_path, graph, key, words) -> None:
    from typer.testing import CliRunner

    from autopar_opt.cli.commands import app

    result = CliRunner().invoke(app, ["place", _spec(tmp_path, graph), "--json"])
    assert result.exit_code == 2, result.output
    assert key in result.output and words in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("body,words", [
    ("raise SystemExit(5)\n", "cannot be imported (SystemExit: 5)"),
    ("import torch\nclass Net(torch.nn.Module):\n    def __init__(self):\n"
     "        super().__init__()\n        raise SystemExit(7)\n", "cannot be built and traced"),
])
def test_a_module_that_exits_is_a_spec_problem_not_a_silent_exit(tmp_path, body, words) -> None:
    """User code calling SystemExit at import or construction: exit 2 naming the key and
    the exit, not autopar ending with the module's own code and no message."""
    from typer.testing import CliRunner

    from autopar_opt.cli.commands import app

    pytest.importorskip("torch")
    spec = _spec(tmp_path, {"torch": "boom.py:Net", "inputs": [[2, 8]]})
    (tmp_path / "boom.py").write_text(body)
    result = CliRunner().invoke(app, ["place", spec, "--json"])
    assert result.exit_code == 2, result.output
    assert "placement.graph.torch" in result.output and words in result.output
