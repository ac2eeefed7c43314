"""Operator graphs for GDP's scale study: GNMT (Wu et al. 2016) unrolled over time,
Transformer-XL unrolled over segments, and training graphs with backward ops."""

from __future__ import annotations

import numpy as np
import pytest

from autopar_opt.core.errors import SpecError
from autopar_opt.core.ideals import topological_order
from autopar_opt.model_zoo.op_graphs import BYTES, gnmt, transformer
from autopar_opt.placement.importers.zoo import build_op_graph

A100 = [{"type": "A100-40GB", "count": 8}]


def _acyclic(g) -> bool:
    topological_order(len(g.names), [tuple(e) for e in g.edges])   # raises on a cycle
    return True


def test_gnmt_size_and_structure():
    """8 + 8 layers, 100 steps: 26,025 forward ops (14 per LSTM cell: 9 encoder cells,
    8 decoder cells per step, plus residuals, attention and softmax) and as many backward
    ops: the GDP paper's "8-layer GNMT of more than 50,000 nodes"."""
    fwd = gnmt(training=False)
    assert len(fwd.names) == 26_025 and _acyclic(fwd)
    cells = [n for n in fwd.names if n.endswith(".mul_h")]
    assert len(cells) == 100 * (9 + 8)              # bi-directional bottom layer: 2 cells
    assert sum(n.endswith(".residual.t0") for n in fwd.names) == 6 + 6
    kernels = [n for n in fwd.names if n.endswith(".kernel") and n.startswith(("enc.", "dec."))]
    assert len(kernels) == 9 + 8                    # one variable per layer (and direction)
    params = sum(fwd.param_bytes) / BYTES
    # embeddings 2 x 32k x 1024, softmax 1024 x 32k, 17 LSTM kernels, attention
    assert params == pytest.approx(3 * 32000 * 1024 + 2 * (2048 * 4096 + 4096)
                                   + (3072 * 4096 + 4096) + 6 * (2048 * 4096 + 4096)
                                   + 8 * (3072 * 4096 + 4096) + 2 * 1024 * 1024 + 1024, rel=1e-12)
    train = gnmt()
    assert len(train.names) == 52_050 > 50_000 and _acyclic(train)
    assert len(train.color) == len(train.backward) == 52_050


def test_backward_ops_share_their_forward_op_class_and_never_feed_forward():
    g = transformer(layers=2, hidden=64, seq=8, batch=2, training=True)
    n = len(g.names) // 2
    color, bwd = np.array(g.color), np.array(g.backward)
    assert bwd.sum() == n and not bwd[:n].any()
    for v in range(n):                               # each class = one fwd op + its grad
        members = np.flatnonzero(color == v)
        assert len(members) == 2 and g.names[members[1]] == g.names[members[0]] + ".grad"
    assert not any(bwd[u] and not bwd[v] for u, v in g.edges)
    assert _acyclic(g)


def test_transformer_xl_memory_carries_no_gradient():
    g = transformer(layers=2, hidden=64, seq=8, batch=2, xl=True, mem_len=8, segments=3)
    assert len(g.stop_grad) == 2 * 2                 # segments 1 and 2, two layers each
    names = {(g.names[u], g.names[v]) for u, v in g.stop_grad}
    assert ("s0.l1.ln1", "s1.l1.mem_concat") not in names
    assert any(a.startswith("s0.") and b == "s1.l0.mem_concat" for a, b in names)
    t = g.with_backward()
    index = {name: i for i, name in enumerate(t.names)}
    for u, v in g.stop_grad:                        # no gradient edge back across segments
        assert (index[g.names[v] + ".grad"], index[g.names[u] + ".grad"]) not in set(t.edges)
    assert transformer(layers=18, hidden=1024, seq=384, mem_len=384, xl=True, segments=16,
                       training=True).names.__len__() == 10_464


def test_zoo_problem_keeps_colour_classes_and_refuses_huge_unrolls():
    p = build_op_graph("gnmt", A100, layers=2, seq=3, hidden=64, batch=2, vocab=100)
    assert p.is_backward.sum() == p.num_nodes // 2
    assert len(set(p.color.tolist())) == p.num_nodes // 2
    with pytest.raises(SpecError, match=r"placement\.graph\.seq = 100000: gives about"):
        build_op_graph("gnmt", A100, seq=100_000)
    with pytest.raises(SpecError, match=r"placement\.graph\.segments"):
        build_op_graph("transformer_xl", A100, segments=100_000, training=True)


def test_a_device_without_bf16_is_refused_with_the_choices():
    with pytest.raises(SpecError, match=r"devices\[0\]\.type = 'V100-32GB': has no bf16 peak.*A100"):
        build_op_graph("transformer", [{"type": "V100-32GB", "count": 2}], layers=2)
