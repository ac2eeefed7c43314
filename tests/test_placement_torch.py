"""torch.fx importer: a small branchy module, FLOPs hand-derived, placed end to end."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the torch.fx importer needs PyTorch CPU "
                                            "(pip install 'autopar-opt[learn]')")

from autopar_opt.placement import solve_placement  # noqa: E402
from autopar_opt.placement.torch_import import fx_op_graph  # noqa: E402
from autopar_opt.placement.zoo import op_problem  # noqa: E402


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
