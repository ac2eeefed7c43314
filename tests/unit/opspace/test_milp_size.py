"""The operator-sharding MILP is counted before it is built (issue 35, memory as a budget).

Oracle: :func:`matrix_size` equals the built matrix's rows, columns and non-zeros on
small instances (random graphs, a transformer block with and without the memory row,
with per-layer template ties); a budget below the count refuses the MILP with its
reason, builds nothing, and keeps the DP's bound."""

from __future__ import annotations

import math

import numpy as np
import pytest

import autopar_opt.formulations.opspace as fo
from autopar_opt.core.memory_budget import MemoryBudget
from autopar_opt.cost.operators.tables import build_tables
from autopar_opt.formulations.opspace import build_matrix, matrix_size
from autopar_opt.ir.mesh import Mesh
from autopar_opt.model_zoo.operator_graphs import transformer_lm
from autopar_opt.opspace.solve import solve_tables
from autopar_opt.opspace.templates import template_space, tie_rows
from support.opspace_cases import context, random_graph

BLOCK = dict(batch=16, seq_len=512, hidden=1024, heads=8, ffn_hidden=4096, vocab=1000, num_layers=2)


def _assert_count(t, capacity, ties=None) -> None:
    size = matrix_size(t.time, t.edges, t.redistribution, capacity, ties)
    form, _, _ = build_matrix(t.time, t.memory, t.edges, t.redistribution, capacity, ties=ties)
    assert (size.rows, size.cols, size.nonzeros) == (form.num_rows, form.num_cols, form.A.nnz)


@pytest.mark.parametrize("seed", range(4))
def test_the_count_equals_the_built_matrix_on_random_graphs(seed):
    t = build_tables(random_graph(np.random.default_rng(seed), 6), context(4), Mesh((2, 2), 4))
    _assert_count(t, None)
    _assert_count(t, t.capacity_bytes if math.isfinite(t.capacity_bytes) else 1e9)


@pytest.mark.parametrize("mesh", [(1, 4), (2, 2)])
def test_the_count_equals_the_built_matrix_with_template_ties(mesh):
    t = build_tables(transformer_lm(**BLOCK), context(4, batch=16, capacity_gib=0.45), Mesh(mesh, 4),
                     "alpa", True)
    _assert_count(t, t.capacity_bytes)
    _assert_count(t, t.capacity_bytes, tie_rows(template_space(t)))


def test_a_budget_below_the_count_refuses_the_milp_and_builds_nothing(monkeypatch):
    t = build_tables(transformer_lm(**BLOCK), context(4, batch=16, capacity_gib=0.45), Mesh((2, 2), 4),
                     "alpa", True)

    def never(*args, **kwargs):
        raise AssertionError("the MILP was built past the budget")
    monkeypatch.setattr(fo, "build_matrix", never)
    out = solve_tables(t, "highs", memory_budget=MemoryBudget(1.0, "--memory-limit test"))
    assert out.status == "no_plan" and out.value is None
    assert "not built" in out.message and "--memory-limit" in out.message
    assert out.stats["milp_nonzeros"] > 0


@pytest.mark.parametrize("seed,pp,stage", [(0, 2, (0, 0, 1, 1)), (1, 2, (0, 1, 1, 1)), (2, 3, (0, 1, 2, 2))])
@pytest.mark.parametrize("capacity", [None, 1e12])
def test_the_pipeline_count_equals_the_built_matrix(seed, pp, stage, capacity):
    from autopar_opt.formulations.opspace_pipeline import build_pipeline_matrix, pipeline_matrix_size
    from autopar_opt.ir.training import Schedule
    from autopar_opt.opspace.pipeline import StageSplit, pipeline_tables

    g = random_graph(np.random.default_rng(seed), 4)
    t = pipeline_tables(g, context(8 if pp == 3 else 4, gpus_per_node=2),
                        StageSplit(stage, pp, 2, Schedule.one_f_one_b), (1, 2))
    size = pipeline_matrix_size([len(a) for a in t.step], list(stage), t.edges, t.mats, t.boundary, pp,
                                capacity)
    form, _, _, _ = build_pipeline_matrix(t.step, t.sync, t.weight, t.act, list(stage), t.edges, t.mats,
                                          t.boundary, pp, 2, t.inflight, capacity)
    assert (size.rows, size.cols, size.nonzeros) == (form.num_rows, form.num_cols, form.A.nnz)


def test_a_budget_below_the_pipeline_count_keeps_the_split_bound():
    from autopar_opt.ir.training import Schedule
    from autopar_opt.opspace.pipeline import StageSplit, pipeline_tables, solve_split, split_lower_bound

    g = random_graph(np.random.default_rng(0), 4)
    t = pipeline_tables(g, context(4, gpus_per_node=2), StageSplit((0, 0, 1, 1), 2, 2, Schedule.gpipe), (1, 2))
    out = solve_split(t, memory_budget=MemoryBudget(1.0, "--memory-limit test"))
    assert out.status == "no_plan" and out.choice is None and "not built" in out.message
    assert out.lower_bound == split_lower_bound(t)
