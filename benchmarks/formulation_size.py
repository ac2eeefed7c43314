"""Formulation size and time split (build / translate / solve): Pyomo's HiGHS
interface vs the direct matrix path (Formulation.matrix() -> highspy).

Run: .venv/bin/python benchmarks/formulation_size.py  (output recorded in
benchmarks/formulation_size.md). Instances are synthetic chains on one
8-GPU node; sizes grow with layers and stages.
"""

from __future__ import annotations

import time

from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.formulations import build_formulation
from autopar_opt.solvers.registry import get_backend
from autopar_opt.model_zoo.synthetic import random_chain, small_cluster
from autopar_opt.ir.training import Schedule, SearchSpace, Training

CASES = [(8, 2), (16, 4), (32, 4), (48, 8)]


def pyomo_path(f, limit: float) -> tuple[float, float, float | None]:
    from pyomo.contrib.solver.common.factory import SolverFactory
    t0 = time.perf_counter()
    res = SolverFactory("highs").solve(f.model, time_limit=limit, rel_gap=1e-4, load_solutions=False,
                                      raise_exception_on_nonoptimal_result=False)
    total = time.perf_counter() - t0
    solve = float(getattr(res.timing_info, "wall_time", None) or total)
    return total - solve if total > solve else 0.0, solve, res.incumbent_objective


def main(limit: float = 20.0) -> None:
    tr = Training(64, 2048)
    space = SearchSpace()
    print("| layers | pp | rows | cols | binaries | build s | pyomo translate s | pyomo solve s "
          "| matrix compile s | highspy pass s | highspy solve s | same value |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, pp in CASES:
        t = build_cost_tables(random_chain(n, n), small_cluster(1, 8), tr, space, default_params(),
                              pp, 8, Schedule.one_f_one_b)
        f = build_formulation(t, "milp")
        mat = f.matrix()
        r = get_backend("highs").solve_model(mat, f.problem_class, time_limit_s=limit, rel_gap=1e-4)
        f2 = build_formulation(t, "milp")
        tr_s, sv_s, val = pyomo_path(f2, limit)
        same = val is not None and r.primal is not None and abs(val - r.primal) <= 1e-4 * r.primal
        print(f"| {n} | {pp} | {mat.num_rows} | {mat.num_cols} | {mat.num_integer} | {f.build_s:.3f} "
              f"| {tr_s:.3f} | {sv_s:.3f} | {mat.compile_s:.3f} | {r.timings['translate']:.4f} "
              f"| {r.timings['solve']:.3f} | {same} |")


if __name__ == "__main__":
    main()
