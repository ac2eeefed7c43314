"""The placement MILP is counted before it is built (issue 35, memory as a budget).

Oracle: the counted rows, columns and non-zeros equal the built matrix's on small
random instances of both objectives and both variants; a budget below the count
refuses the MILP with a reason, builds nothing, and the route still answers with the
other methods' placement and bound, recorded in ``details["methods"]``."""

from __future__ import annotations

import numpy as np
import pytest

from support.placement_cases import random_problem
from autopar_opt.core.memory_budget import MemoryBudget
from autopar_opt.placement.condense import condense
from autopar_opt.placement.exact.milp import build_maxload_milp
from autopar_opt.placement.exact.solve_milp import milp_size
from autopar_opt.placement.solve import solve_placement


@pytest.mark.parametrize("seed", (0, 1, 2, 3, 5, 6))
@pytest.mark.parametrize("contiguous", [True, False])
def test_maxload_count_equals_the_built_matrix(seed: int, contiguous: bool) -> None:
    training = contiguous and seed % 2 == 1      # backward nodes: fused in the contiguous case
    p = random_problem(900 + seed, training=training, hetero=seed % 3 == 0,
                       n=4 if training else None)
    cond = condense(p, fuse_cycles=contiguous)
    size = milp_size(cond, "max-load", contiguous)
    form = build_maxload_milp(cond, contiguous=contiguous).form
    assert (size.rows, size.cols, size.nonzeros) == (form.num_rows, form.num_cols, form.A.nnz)


@pytest.mark.parametrize("seed", range(4))
def test_latency_count_equals_the_built_matrix(seed: int) -> None:
    from autopar_opt.placement.exact.latency_milp import build_latency_milp

    p = random_problem(960 + seed, n=6, hetero=seed % 2 == 0)
    cond = condense(p)
    size = milp_size(cond, "latency", True, big_m=10.0)
    form = build_latency_milp(cond, contiguous=True, big_m=10.0).form
    assert (size.rows, size.cols, size.nonzeros) == (form.num_rows, form.num_cols, form.A.nnz)


def test_a_tiny_budget_refuses_the_milp_and_keeps_the_other_methods_answer(monkeypatch) -> None:
    import autopar_opt.placement.exact.milp as milp_module

    def never(*args, **kwargs):                  # a refused MILP is never built
        if kwargs.get("builder") is None:
            raise AssertionError("the MILP was built past the budget")
        return real(*args, **kwargs)
    real = milp_module.build_maxload_milp
    monkeypatch.setattr(milp_module, "build_maxload_milp", never)
    p = random_problem(905, hetero=True)
    res = solve_placement(p, contiguous=False, solver="highs",
                          memory_budget=MemoryBudget(1.0, "--memory-limit test"))
    assert "not built" in res.details["milp_refused"]
    assert "--memory-limit" in res.details["milp_refused"]
    methods = res.details["methods"]
    assert [m["status"] for m in methods if m["method"].startswith("milp")] == ["refused"]
    assert methods[0]["method"] == "heuristics+bound"
    assert np.isfinite(res.value) and res.status in ("optimal", "feasible")
    assert res.lower_bound <= res.value


def test_the_methods_record_says_which_method_proved_the_optimum() -> None:
    p = random_problem(907, hetero=True)
    res = solve_placement(p, contiguous=False, solver="highs")
    last = res.details["methods"][-1]
    assert res.status == "optimal" and last["method"] == "milp:highs"
    assert last["status"] == "optimal" and last["primal"] == pytest.approx(res.value)
