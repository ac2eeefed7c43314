"""solve's terminal summary lists the certificate rows that decide it: the answer's row
and the rows at the global bound, then others in solve order, 12 in all (QA round 10:
the first 12 in solve order left out the free-stage example's optimum, row 30 of 70)."""

from __future__ import annotations

from autopar_opt.cli.solve import SUMMARY_ROWS, summary_rows


def _rows(n: int) -> list[dict]:
    return [{"pp": i, "primal": 10.0 + i, "lower_bound": 9.0 + i} for i in range(n)]


def test_the_answer_and_the_bound_rows_are_listed_in_solve_order():
    rows = _rows(70)
    rows[29]["primal"], rows[29]["lower_bound"] = 0.5, 0.49     # the answer
    rows[50]["lower_bound"] = 0.45                               # an open row at the bound
    shown = summary_rows(rows, 0.5, 0.45)
    assert len(shown) == SUMMARY_ROWS
    assert rows[29] in shown and rows[50] in shown
    assert [r["pp"] for r in shown] == sorted(r["pp"] for r in shown)
    assert [r["pp"] for r in shown][:10] == list(range(10))     # then the first in order


def test_few_rows_are_all_listed():
    rows = _rows(5)
    assert summary_rows(rows, 10.0, 9.0) == rows


def test_an_infeasible_certificate_lists_the_first_rows():
    rows = [{"pp": i, "primal": None, "lower_bound": "inf"} for i in range(20)]
    shown = summary_rows(rows, None, "inf")
    assert len(shown) == SUMMARY_ROWS and shown == rows[:SUMMARY_ROWS]



def test_a_bound_without_a_plan_is_not_called_a_missing_bound(tmp_path):
    """--memory-limit refuses every MILP of the llama-7b example: a proven bound and no
    plan; the certificate line says so (QA round 10: "primal - s, lower bound 4.08 s, gap
    inf (no proof: bound missing)")."""
    from support import paths
    from support.cli import run_cli

    code, text = run_cli("solve", paths.REPO / "examples" / "llama7b_2x8_a100.yaml",
                         "--memory-limit", "0.001", "--solver", "highs", "--no-warm-start",
                         "--time-limit", "60")
    line = next(x for x in text.splitlines() if "certificate:" in x)
    assert "no plan found; lower bound" in line and "bound missing" not in line, text
