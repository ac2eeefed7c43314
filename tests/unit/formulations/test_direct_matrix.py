"""The matrix HiGHS solves (formulations/direct.py) and the Pyomo model written
from the same family rows (formulations/pyomo_model.py) are one MILP.

Oracles: Pyomo's own standard-form compiler reading the generated Pyomo model
(``compile_matrix``), compared by canonical rows (every row as {column name:
coefficient} with its bounds, sign-normalised, rows sorted: equal up to row
order and sign); the HiGHS optimum of both; ``evaluate`` of the decoded plan;
and the rows themselves for warm starts.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import autopar_opt.formulations as formulations
from autopar_opt.cost.params import default_params
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.formulations import FormulationError, build_formulation
from autopar_opt.formulations.direct import DirectBuilder, build_direct, structure_key
from autopar_opt.search.baselines import best_uniform_for_config
from autopar_opt.search.engine import SearchOptions, run_search
from autopar_opt.solvers.registry import get_backend
from autopar_opt.core.matrix import compile_matrix
from autopar_opt.core.result import ProblemClass, Termination
from autopar_opt.ir.training import Schedule
from support.mip_instances import SPACE, TRAINING, random_instance, repeated_graph, small_cluster, tables_for

#: (seed, layers, dag, nodes, gpus per node, pp, c, schedule)
CASES = [(0, 4, False, 1, 4, 1, 4, Schedule.one_f_one_b), (1, 5, True, 1, 4, 2, 4, Schedule.gpipe),
         (2, 5, False, 1, 4, 4, 2, Schedule.one_f_one_b), (3, 6, True, 1, 4, 4, 4, Schedule.gpipe),
         (4, 5, True, 2, 2, 2, 4, Schedule.one_f_one_b), (5, 6, False, 2, 2, 4, 2, Schedule.gpipe),
         (6, 4, True, 1, 4, 2, 1, Schedule.one_f_one_b)]


def _tables(case):
    seed, n, dag, nodes, gpus, pp, c, schedule = case
    graph, cluster, training, space = random_instance(seed, n, dag, nodes=nodes, gpus=gpus)
    return tables_for(graph, cluster, training, space, pp, c, schedule)


def _repeated(pp: int = 2, dag: bool = True, seed: int = 0):
    graph = repeated_graph(seed, "abbbbc", ((0, 2), (1, 4)) if dag else ())
    return tables_for(graph, small_cluster(1, 4), TRAINING, SPACE, pp, 4)


def canonical_rows(form) -> list[tuple]:
    """Rows as (names, coefficients, lo, hi), zeros dropped, first coefficient
    positive, sorted: equal lists mean equal constraint sets."""
    A = form.A.tocsr().copy()
    A.eliminate_zeros()
    out = []
    for r in range(A.shape[0]):
        sl = slice(A.indptr[r], A.indptr[r + 1])
        names = [form.columns[j] for j in A.indices[sl]]
        order = np.argsort(names)
        vals, lo, hi = A.data[sl][order], form.row_lo[r], form.row_hi[r]
        if len(vals) and vals[0] < 0:
            vals, lo, hi = -vals, -hi, -lo
        out.append((tuple(names[i] for i in order), tuple(vals), float(lo), float(hi)))
    return sorted(out, key=lambda row: (row[0], tuple(np.round(row[1], 9)), row[2], row[3]))


def assert_same_matrix(ref, got) -> None:
    assert sorted(ref.columns) == sorted(got.columns)
    for attr in ("c", "col_lo", "col_hi", "integrality"):
        a, b = dict(zip(ref.columns, getattr(ref, attr))), dict(zip(got.columns, getattr(got, attr)))
        assert all(np.isclose(a[k], b[k], rtol=1e-12) for k in a), attr
    assert got.offset == pytest.approx(ref.offset, rel=1e-12)
    r1, r2 = canonical_rows(ref), canonical_rows(got)
    assert len(r1) == len(r2)
    for x, y in zip(r1, r2):
        assert x[0] == y[0], (x, y)
        np.testing.assert_allclose(x[1], y[1], rtol=1e-12)
        np.testing.assert_allclose([x[2], x[3]], [y[2], y[3]], rtol=1e-12)


def _pyomo_matrix(tables, form: str = "milp", symmetry: bool = True):
    """The MILP as Pyomo's compiler reads the Pyomo model (the independent translation)."""
    return compile_matrix(build_formulation(tables, form, symmetry=symmetry).model)


def _highs(matrix, **kw):
    return get_backend("highs").solve_model(matrix, ProblemClass.milp, time_limit_s=30,
                                            rel_gap=1e-9, **kw)


@pytest.mark.parametrize("case", CASES, ids=[f"case{c[0]}" for c in CASES])
def test_direct_matrix_equals_pyomo(case):
    t = _tables(case)
    for symmetry in (False, True):
        assert_same_matrix(_pyomo_matrix(t, "milp", symmetry=symmetry),
                           build_direct(t, symmetry=symmetry).matrix)


@pytest.mark.parametrize("pp,dag", [(1, False), (2, True), (2, False)])
def test_direct_matrix_equals_pyomo_with_symmetry_cuts(pp, dag):
    t = _repeated(pp, dag)
    direct = build_direct(t, symmetry=True).matrix
    assert any(name.startswith("symmetry_order") for name in direct.row_names)
    assert_same_matrix(_pyomo_matrix(t, "milp", symmetry=True), direct)


def test_comparison_detects_a_changed_coefficient():
    t = _tables(CASES[1])
    ref, direct = _pyomo_matrix(t, "milp"), build_direct(t).matrix
    direct.A.data[np.argmax(np.abs(direct.A.data) != 1.0)] *= 1.5
    with pytest.raises(AssertionError):
        assert_same_matrix(ref, direct)


def test_zero_resharding_edge_changes_the_structure():
    """An all-zero resharding matrix has no big-M rows: it must be part of the key."""
    t = _tables(CASES[1])
    zero = dataclasses.replace(t, reshard=[np.zeros_like(t.reshard[0])] + t.reshard[1:])
    assert structure_key(t, True)[0] != structure_key(zero, True)[0]
    builder = DirectBuilder()
    builder.build(t)
    direct = builder.build(zero)
    assert not direct.cached
    assert_same_matrix(_pyomo_matrix(zero, "milp"), direct.matrix)


@pytest.mark.parametrize("case", CASES[:5], ids=[f"case{c[0]}" for c in CASES[:5]])
def test_same_optimum_and_decoded_plan_prices_to_it(case):
    t = _tables(case)
    graph, cluster, training = t.graph, t.cluster, t.training
    direct = build_direct(t)
    r_direct = _highs(direct.matrix)
    r_pyomo = _highs(_pyomo_matrix(t, "milp"))
    assert r_direct.termination is r_pyomo.termination
    if r_pyomo.termination is Termination.infeasible:
        return
    assert r_direct.termination is Termination.optimal
    assert r_direct.primal == pytest.approx(r_pyomo.primal, rel=1e-7)
    plan = direct.decode_values(r_direct.solution)
    assert evaluate(plan, graph, cluster, training).iteration_time_s == pytest.approx(r_direct.primal,
                                                                                     rel=1e-7)


def test_cached_structure_refills_coefficients_only():
    """Same pp, another c or schedule: one structure, fresh coefficients, the
    same optimum as a fresh build."""
    graph, cluster, training, space = random_instance(4, 5, dag=True)   # c=4 and c=8 share strategies
    builder = DirectBuilder()
    first = builder.build(tables_for(graph, cluster, training, space, 2, 4))
    assert not first.cached
    for c, schedule in ((4, Schedule.gpipe), (8, Schedule.one_f_one_b), (8, Schedule.gpipe)):
        t = tables_for(graph, cluster, training, space, 2, c, schedule)
        cached, fresh = builder.build(t), build_direct(t)
        assert cached.cached and cached.structure is first.structure
        assert (cached.matrix.A != fresh.matrix.A).nnz == 0
        assert np.array_equal(cached.matrix.c, fresh.matrix.c)
        assert np.array_equal(cached.matrix.row_hi, fresh.matrix.row_hi)
        assert _highs(cached.matrix).primal == pytest.approx(_highs(fresh.matrix).primal, rel=1e-9)
        assert_same_matrix(_pyomo_matrix(t, "milp"), cached.matrix)
    other_tables = tables_for(graph, cluster, training, space, 1, 4)   # other stages and strategies
    assert other_tables.strategies != first.tables.strategies
    other = builder.build(other_tables)
    assert not other.cached
    assert builder.hits == 3 and builder.misses == 2


@pytest.mark.parametrize("symmetry", [False, True])
def test_warm_start_vector_is_feasible_and_priced(symmetry):
    for t in (_tables(CASES[3]), _repeated(2, True)):
        plan = best_uniform_for_config(t)
        assert plan is not None
        direct = build_direct(t, symmetry=symmetry)
        x = direct.start_vector(plan)
        m = direct.matrix
        ax = m.A @ x
        assert np.all(ax >= m.row_lo - 1e-9) and np.all(ax <= m.row_hi + 1e-9)
        assert np.all(x >= m.col_lo) and np.all(x <= m.col_hi)
        assert np.array_equal(x[m.integrality], np.round(x[m.integrality]))
        value = evaluate(direct.decode_values(x), t.graph, t.cluster, t.training).iteration_time_s
        assert m.objective(x) == pytest.approx(value, rel=1e-9)


def test_decode_needs_a_solution_vector():
    direct = build_direct(_tables(CASES[0]))
    with pytest.raises(FormulationError, match="no solution vector"):
        direct.decode_values(None)
    with pytest.raises(FormulationError, match="no valid strategy|stages need"):
        build_direct(dataclasses.replace(_tables(CASES[0]), pp=8))


def test_search_on_highs_builds_no_pyomo_model(monkeypatch):
    """The HiGHS search path never calls build_formulation (unless exporting)
    and records the build/translate/solve split of every solve."""
    def refuse(*args, **kwargs):
        raise AssertionError("the HiGHS search built a Pyomo model")
    monkeypatch.setattr(formulations, "build_formulation", refuse)
    graph, cluster, training, space = random_instance(4, 4, dag=True)
    result = run_search(graph, cluster, training, space, default_params(),
                        SearchOptions(solver="highs", time_limit_s=60, rel_gap=1e-9,
                                      dp_check=True))
    solved = [r for r in result.certificate.configurations if r.status == "optimal"]
    assert solved and result.plan is not None
    assert all(set(r.timings) == {"build", "translate", "solve", "dp_warm"} for r in solved)


def test_miqp_shares_the_linear_families_row_for_row():
    """One definition per family: the MIQP's Pyomo model holds exactly the MILP's
    rows of every shared family (same names, coefficients and bounds)."""
    t = _repeated(2, True)
    shared = ("stage_monotone", "stage_nonempty", "order_", "strategy_", "symmetry_", "same_stage",
              "bottleneck_", "sync_max_")

    def rows(form):
        m = compile_matrix(build_formulation(t, form).model) if form == "milp" else None
        if m is None:   # the MIQP is quadratic: compare its linear rows in the structure
            m = build_direct(t, form="miqp").matrix
        keep = [r for r, name in enumerate(m.row_names) if name.startswith(shared)]
        sub = dataclasses.replace(m, A=m.A[keep], row_lo=m.row_lo[keep], row_hi=m.row_hi[keep],
                                  row_names=[m.row_names[r] for r in keep])
        return canonical_rows(sub)
    milp, miqp = rows("milp"), rows("miqp")
    assert any(r[0][0].startswith("s[") for r in milp) and len(milp) == len(miqp)
    assert milp == miqp
    model = build_formulation(t, "miqp").model
    assert {c.name for c in model.component_objects(pyo_constraint())} >= {
        "stage_nonempty", "strategy_onehot", "symmetry_order", "same_stage_lo", "sync_max_ge_stage",
        "edge_reshard_def", "stage_time"}


def pyo_constraint():
    import pyomo.environ as pyo
    return pyo.Constraint


def test_a_new_family_is_one_edit(monkeypatch):
    """A family registered once (rows only) appears in the HiGHS matrix, in the
    Pyomo model of both forms, and in Pyomo's compilation of it."""
    from autopar_opt.formulations import rows as rows_mod
    from autopar_opt.formulations.layout import INF

    monkeypatch.setattr(rows_mod, "_REGISTRY", list(rows_mod._REGISTRY))

    @rows_mod.family(order=95)
    def at_most_one_first_strategy(R, C, key):
        """``extra_cap``: ``sum_u s[u,0] <= n - 1`` (a test family)."""
        R.add("extra_cap", [()], np.zeros(C.n, dtype=int), C.s(np.arange(C.n), 0), 1.0, -INF, C.n - 1.0)

    t = _tables(CASES[1])
    direct = build_direct(t)
    assert direct.matrix.row_names[-1] == "extra_cap"
    assert "extra_cap_ub" in _pyomo_matrix(t).row_names     # Pyomo marks the upper side
    for form in ("milp", "miqp"):
        con = build_formulation(t, form).model.extra_cap
        assert con.upper == t.num_layers - 1
    assert_same_matrix(_pyomo_matrix(t), direct.matrix)
