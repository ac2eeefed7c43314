"""Templates fall out of the operator space (issue 31, point 4).

* Megatron rediscovered: a transformer block on 4 GPUs whose unconstrained optimum is
  pure data parallelism; with a memory limit that replicated weights and activations do
  not meet, the operator-space optimum is Megatron's column/row layout (QKV and fc1 split
  on their output, heads / ffn; the output projection and fc2 split on their reduction,
  all-reduced; norms and adds replicated inside the tensor-parallel group) — every
  operator's configuration is the dp2·tp2 template's.
* The template search (one template per layer, a min-sum over layers) and the operator
  space restricted to templates (the MILP with tie rows) give the same optimum; the free
  operator space is never worse.
"""

from __future__ import annotations

import pytest

from autopar_opt.cost.operators.tables import build_tables
from autopar_opt.ir.mesh import Mesh
from autopar_opt.model_zoo.operator_graphs import transformer_lm
from autopar_opt.opspace.solve import solve_mip, solve_operator_space, solve_tables
from autopar_opt.opspace.templates import (Template, template_config, template_search, template_space,
                                           tie_rows)
from support.opspace_cases import context

#: One block (h = 1024, 8 heads, ffn 4096) of 16 sequences of 512 tokens on 4 GPUs.
BLOCK = dict(batch=16, seq_len=512, hidden=1024, heads=8, ffn_hidden=4096, vocab=1000, num_layers=1,
             embeddings=False)
CAPACITY_GIB = 0.238


def _solve(capacity_gib, solver="auto"):
    g = transformer_lm(**BLOCK)
    ctx = context(4, batch=16, capacity_gib=capacity_gib)
    return g, solve_operator_space(g, ctx, 4, "alpa", reduce_scatter=False, solver=solver)


def test_unconstrained_optimum_is_data_parallel_and_needs_more_memory_than_the_limit():
    g, r = _solve(None)
    best = r.best
    for v, k in enumerate(best.choice):
        op, cfg = g.ops[v], best.tables.configs[v][k]
        split = {d for d, f in cfg.totals(op).items() if f > 1}
        assert split == {"b"}, (op.name, cfg.label(op))
    assert best.tables.memory_of(best.choice) > CAPACITY_GIB * 2**30


@pytest.mark.parametrize("solver", ["auto", "highs"])
def test_memory_limit_rediscovers_megatron_column_row_layout(solver):
    g, r = _solve(CAPACITY_GIB, solver)
    assert r.status(1e-9) == "optimal"
    best = r.best
    assert best.mesh.shape == (2, 2)
    # dp2 on one mesh axis, tp2 on the other (both axes are inside the node: either way)
    chosen = [best.tables.configs[v][k] for v, k in enumerate(best.choice)]
    megatron = [tpl for tpl in (Template((0,), False), Template((1,), False))
                if all(cfg == template_config(op, tpl, (2, 2)) for op, cfg in zip(g.ops, chosen))]
    assert len(megatron) == 1, [(op.role, cfg.label(op)) for op, cfg in zip(g.ops, chosen)]
    assert megatron[0].degrees((2, 2)) == (2, 2)
    labels = {g.ops[v].role: best.tables.configs[v][k].label(g.ops[v]) for v, k in enumerate(best.choice)}
    assert labels["qkv"] == "b2·h2" and labels["fc1"] == "b2·f2"           # column-parallel
    assert labels["out"] == "b2·h2" and labels["fc2"] == "b2·f2"           # row-parallel (h, f reduced)
    assert labels["ln1"] == labels["add2"] == "b2"                          # replicated in the tp group
    assert "h" in g.ops[[op.role for op in g.ops].index("out")].reduction


@pytest.mark.parametrize("mesh", [(1, 4), (2, 2)])
@pytest.mark.parametrize("rs", [False, True])
@pytest.mark.parametrize("capacity_gib", [None, 0.45])
def test_template_search_equals_operator_space_restricted_to_templates(mesh, rs, capacity_gib):
    g = transformer_lm(**{**BLOCK, "num_layers": 2})
    ctx = context(4, batch=16, capacity_gib=capacity_gib)
    t = build_tables(g, ctx, Mesh(mesh, 4), "alpa", rs)
    space = template_space(t)
    found = template_search(t, space)
    term, choice, _, _, _ = solve_mip(t, "highs", 60, 1e-9, ties=tie_rows(space))
    free = solve_tables(t, "auto")
    if found is None:
        assert term == "infeasible" and choice is None
        return
    assert term == "optimal"
    assert t.objective(choice) == pytest.approx(found.value, rel=1e-7)
    assert free.value <= found.value * (1 + 1e-9)


def test_swiglu_block_keeps_megatron_templates():
    """A gated MLP (fc1 makes gate and up at once, the activation reads both slices) is still
    column/row parallel: every template applies to every operator of the block."""
    g = transformer_lm(**{**BLOCK, "gated_mlp": True})
    assert g.problems() == []
    t = build_tables(g, context(4, batch=16), Mesh((2, 2), 4), "alpa", False)
    space = template_space(t)
    assert all(len(ts) == 4 for ts in space.templates)        # dp axes (), (0,), (1,), (0, 1)
    found = template_search(t, space)
    assert found is not None and solve_tables(t, "dp").value <= found.value * (1 + 1e-9)
