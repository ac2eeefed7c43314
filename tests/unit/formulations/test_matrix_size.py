"""The search's MILP is counted before it is built (issue 35, memory as a budget).

Oracle: :func:`structure_size` (the families run on a counting row sink) equals the
built structure's rows, columns and entries on small random instances (chains and
DAGs, pp 1-4, both forms, with and without symmetry cuts), and bounds the filled
matrix's non-zeros from above (entries whose cost is zero are dropped by ``fill``).
A builder given a budget below the count raises :class:`OverBudget` and builds nothing.
"""

from __future__ import annotations

import pytest

import autopar_opt.formulations.direct as direct
from autopar_opt.core.memory_budget import MemoryBudget, OverBudget
from autopar_opt.formulations.direct import DirectBuilder, build_direct, structure_key, structure_size

from autopar_opt.ir.training import Schedule
from support.mip_instances import SPACE, TRAINING, random_instance, repeated_graph, small_cluster, tables_for

#: (seed, layers, dag, nodes, gpus per node, pp, c, schedule), as tests/unit/formulations/test_direct_matrix.py
CASES = [(0, 4, False, 1, 4, 1, 4, Schedule.one_f_one_b), (1, 5, True, 1, 4, 2, 4, Schedule.gpipe),
         (2, 5, False, 1, 4, 4, 2, Schedule.one_f_one_b), (3, 6, True, 1, 4, 4, 4, Schedule.gpipe),
         (4, 5, True, 2, 2, 2, 4, Schedule.one_f_one_b), (5, 6, False, 2, 2, 4, 2, Schedule.gpipe)]


def _tables(case):
    seed, n, dag, nodes, gpus, pp, c, schedule = case
    graph, cluster, training, space = random_instance(seed, n, dag, nodes=nodes, gpus=gpus)
    return tables_for(graph, cluster, training, space, pp, c, schedule)


def _repeated(pp: int, dag: bool):
    graph = repeated_graph(0, "abbbbc", ((0, 2), (1, 4)) if dag else ())
    return tables_for(graph, small_cluster(1, 4), TRAINING, SPACE, pp, 4)


def _assert_count_is_the_build(t, symmetry: bool, form: str) -> None:
    key, _ = structure_key(t, symmetry, form)
    size = structure_size(key)
    built = build_direct(t, symmetry=symmetry, form=form)
    rows, cols = built.structure.shape
    assert (size.rows, size.cols, size.nonzeros) == (rows, cols, len(built.structure.template))
    assert built.matrix.A.nnz <= size.nonzeros
    assert built.matrix.num_rows == size.rows and built.matrix.num_cols == size.cols


@pytest.mark.parametrize("case", CASES, ids=[f"case{c[0]}" for c in CASES])
@pytest.mark.parametrize("form", ["milp", "miqp"])
def test_the_count_equals_the_built_structure(case, form):
    t = _tables(case)
    for symmetry in (False, True):
        _assert_count_is_the_build(t, symmetry, form)


@pytest.mark.parametrize("pp,dag", [(1, False), (2, True), (4, False)])
def test_the_count_equals_the_build_with_symmetry_cuts(pp, dag):
    t = _repeated(pp, dag)
    assert structure_key(t, True)[0].sym_cuts          # the cut family has rows here
    _assert_count_is_the_build(t, True, "milp")


def test_a_budget_below_the_count_builds_nothing(monkeypatch):
    t = _tables(CASES[3])
    size = structure_size(structure_key(t, True)[0])

    def never(key):
        raise AssertionError("the structure was built past the budget")
    monkeypatch.setattr(direct, "build_structure", never)
    tight = MemoryBudget(size.bytes() * 0.99, "--memory-limit test")
    with pytest.raises(OverBudget) as info:
        DirectBuilder().build(t, tight)
    assert info.value.size == size
    assert "not built" in str(info.value) and "--memory-limit" in str(info.value)
    monkeypatch.undo()
    assert DirectBuilder().build(t, MemoryBudget(size.bytes(), "exact")).matrix.num_rows == size.rows
