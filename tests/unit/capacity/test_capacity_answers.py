"""The capacity answers on hand-made scenarios whose answers are derived by hand.

Intervals are written directly (time to train in days, cost); the rule under
test: a scenario is better than another only when its upper end beats the
other's lower end, otherwise the answer says "within the gap".
"""

from __future__ import annotations

import pytest

from autopar_opt.capacity.answers import WITHIN, cheapest, compare, fewest_gpus, meets, pareto
from autopar_opt.capacity.schema import PlanningSection

PLANNING = PlanningSection.model_validate({
    "token_budget": 1e12, "deadline_days": 30.0,
    "prices": {"per_gpu_hour": {"A": 1.0, "B": 2.0}, "source": "test"}})


def entry(sid: str, device: str, gpus: int, days: tuple, cost: tuple, status: str = "optimal",
          planning: PlanningSection = PLANNING, thr: tuple | None = None) -> dict:
    e = {"id": sid, "device": device, "gpus": gpus, "status": status,
         "primal": None if status in ("infeasible", "no_plan") else 1.0,
         "time_to_train_days": list(days), "cost": list(cost),
         "throughput_tokens_per_s": list(thr or (1.0, 2.0))}
    e["meets"] = meets(e, planning)
    return e


def test_compare_needs_upper_below_lower():
    assert compare((1.0, 2.0), (2.5, 3.0)) == "first"     # 2.0 < 2.5: proven
    assert compare((2.5, 3.0), (1.0, 2.0)) == "second"
    assert compare((1.0, 2.6), (2.5, 3.0)) == WITHIN      # overlap: no proof either way
    assert compare((1.0, 2.5), (2.5, 3.0)) == WITHIN      # equal ends are not "better"


def test_meets_is_yes_no_or_within_the_gap():
    assert entry("a", "A", 8, (10, 20), (1, 2))["meets"] == "yes"        # 20 <= 30
    assert entry("b", "A", 8, (31, 40), (1, 2))["meets"] == "no"         # best case 31 > 30
    assert entry("c", "A", 8, (25, 35), (1, 2))["meets"] == WITHIN       # 25 <= 30 < 35
    assert entry("d", "A", 8, (None, None), (None, None), "infeasible")["meets"] == "no"
    # no plan within the limit, bound 10 days: could still meet it
    assert entry("e", "A", 8, (10, None), (1, None), "no_plan")["meets"] == WITHIN


def test_throughput_target_is_part_of_the_requirement():
    p = PLANNING.model_copy(update={"target_tokens_per_s": 5.0})
    assert entry("a", "A", 8, (1, 2), (1, 2), planning=p, thr=(6.0, 7.0))["meets"] == "yes"
    assert entry("b", "A", 8, (1, 2), (1, 2), planning=p, thr=(3.0, 4.0))["meets"] == "no"
    assert entry("c", "A", 8, (1, 2), (1, 2), planning=p, thr=(4.0, 6.0))["meets"] == WITHIN


def test_cheapest_is_proven_when_every_rival_costs_at_least_its_upper_end():
    es = [entry("x", "A", 8, (10, 11), (100, 110)),
          entry("y", "A", 16, (5, 6), (110, 120)),      # lower end 110 >= 110: not cheaper
          entry("z", "B", 8, (40, 50), (10, 20))]       # misses the deadline (proven)
    ans = cheapest(es, PLANNING)
    assert ans["scenario"] == "x" and ans["proven"] and ans["within_gap"] == []


def test_cheapest_lists_rivals_within_the_gap():
    es = [entry("x", "A", 8, (10, 11), (100, 110)),
          entry("y", "A", 16, (5, 6), (105, 130)),      # could cost 105 < 110
          entry("w", "B", 8, (25, 35), (50, 70))]       # may meet the deadline, may be cheaper
    ans = cheapest(es, PLANNING)
    assert ans["scenario"] == "x" and not ans["proven"]
    assert sorted(ans["within_gap"]) == ["w", "y"]
    assert "within the gap" in ans["statement"]


def test_cheapest_without_a_proven_scenario():
    es = [entry("w", "B", 8, (25, 35), (50, 70)), entry("v", "B", 16, (40, 45), (1, 2))]
    ans = cheapest(es, PLANNING)
    assert ans["scenario"] is None and ans["within_gap"] == ["w"]


def test_fewest_gpus_per_device():
    es = [entry("a8", "A", 8, (31, 40), (1, 2)),         # proven to miss
          entry("a16", "A", 16, (20, 25), (1, 2)),       # proven to meet
          entry("a32", "A", 32, (10, 12), (3, 4)),
          entry("b8", "B", 8, (28, 33), (1, 2)),         # within the gap
          entry("b16", "B", 16, (14, 16), (1, 2))]
    ans = fewest_gpus(es, PLANNING)
    assert ans["A"]["gpus"] == 16 and ans["A"]["proven"] and ans["A"]["scenario"] == "a16"
    assert ans["B"]["gpus"] == 16 and not ans["B"]["proven"] and ans["B"]["within_gap"] == [8]


def test_pareto_frontier_dominance_needs_a_proof():
    es = [entry("fast", "A", 64, (10, 11), (300, 310)),
          entry("cheap", "A", 8, (50, 55), (100, 105)),
          entry("worse", "A", 32, (60, 62), (320, 330)),     # fast's upper ends <= its lower ends
          entry("close", "A", 16, (10.5, 12), (305, 320))]   # dominated by fast's plan, not proven
    ans = pareto(es)
    assert [m["id"] for m in ans["frontier"]] == ["fast", "cheap"]
    assert ans["off_frontier"]["worse"] == {"dominated_by": "fast"}
    assert ans["off_frontier"]["close"]["dominated_by"] is None
    assert ans["off_frontier"]["close"]["verdict"] == WITHIN
    # 'close' could reach (10.5 d, 305) and dominate fast's plan (11 d, 310): fast is not proven
    fast = next(m for m in ans["frontier"] if m["id"] == "fast")
    assert not fast["proven"] and fast["within_gap_of"] == ["close"]
    cheap = next(m for m in ans["frontier"] if m["id"] == "cheap")
    assert cheap["proven"]


@pytest.mark.parametrize("status", ["infeasible", "no_plan"])
def test_scenarios_without_a_plan_are_not_on_the_frontier(status):
    es = [entry("a", "A", 8, (10, 11), (100, 110)),
          entry("b", "A", 8, (1, None) if status == "no_plan" else (None, None),
                (1, None) if status == "no_plan" else (None, None), status)]
    assert [m["id"] for m in pareto(es)["frontier"]] == ["a"]


def test_charts_accept_a_bound_a_hair_above_the_plan():
    """Round-off can put a proven bound 1e-16 above the plan's value: no negative error bar."""
    from autopar_opt.reports.capacity_charts import pareto_svg, scaling_svg

    e = {"id": "a", "device": "A", "gpus": 8, "global_batch_size": 8,
         "time_to_train_days": [1.0 + 1e-12, 1.0], "cost": [2.0 + 1e-12, 2.0],
         "throughput_tokens_per_s": [5.0, 5.0 - 1e-12]}
    assert pareto_svg([e], ["a"], 3.0, "USD").startswith("<svg")
    assert scaling_svg([e]).startswith("<svg")


def test_a_scenario_not_solved_is_not_within_the_gap_and_unproves_the_answers():
    """A scenario the sweep holds nothing for (not run within its --time-limit) has no
    bound: it is "not solved", never "within the gap", and no answer is proven while
    it could be better (session 24: never-run scenarios were listed as "could be as
    cheap" and the answers still called proven where none was within the gap)."""
    from autopar_opt.capacity.answers import UNSOLVED
    es = [entry("x", "A", 8, (10, 11), (100, 110)),
          entry("z", "B", 8, (40, 50), (10, 20))]
    unsolved = {"id": "u", "device": "A", "gpus": 4, "status": "no_plan", "primal": None,
                "time_to_train_days": [None, None], "cost": [None, None],
                "throughput_tokens_per_s": [None, None], "meets": UNSOLVED}
    ans = cheapest(es + [unsolved], PLANNING)
    assert ans["scenario"] == "x" and not ans["proven"] and ans["within_gap"] == []
    assert ans["not_solved"] == ["u"] and "not solved (no plan, no bound" in ans["statement"]
    assert cheapest(es, PLANNING)["proven"]
    fewest = fewest_gpus(es + [unsolved], PLANNING)["A"]
    assert fewest["gpus"] == 8 and not fewest["proven"] and fewest["within_gap"] == [4]
    front = pareto(es + [unsolved])
    assert not any(m["proven"] for m in front["frontier"]) and front["not_solved"] == ["u"]
    assert "the rest within the gap" not in pareto(es)["statement"]


def test_a_scenario_without_a_plan_but_with_a_bound_unproves_the_frontier():
    """A scenario whose search found no plan within its limit keeps its proven bound:
    best case 1 day for 1 USD, which would dominate 'a' (11 days, 110 USD). 'a' was called
    a proven frontier member because only scenarios with a plan were asked (QA round 11)."""
    es = [entry("a", "A", 8, (10, 11), (100, 110)),
          entry("b", "A", 16, (1, None), (1, None), "no_plan")]
    ans = pareto(es)
    a = ans["frontier"][0]
    assert a["id"] == "a" and not a["proven"] and a["within_gap_of"] == ["b"]
    assert "1 scenario(s) without a plan, only a bound" in ans["statement"]
    # a bound that cannot reach a's plan (12 days > 11) leaves the proof standing
    far = [es[0], entry("c", "A", 16, (12, None), (50, None), "no_plan")]
    assert pareto(far)["frontier"][0]["proven"]


def test_scaling_chart_does_not_draw_a_scenario_without_a_bound_as_proven():
    """A plan whose search proved no bound (throughput upper end None: could be any faster)
    was drawn with no bar, exactly as a plan proven optimal (QA round 11). Oracle: the same
    chart with that point's bound equal to its plan."""
    from autopar_opt.reports.capacity_charts import scaling_svg

    def e(sid, gpus, thr):
        return {"id": sid, "device": "A", "gpus": gpus, "global_batch_size": 8,
                "throughput_tokens_per_s": list(thr), "time_to_train_days": [1.0, 1.0],
                "cost": [1.0, 1.0]}

    proven = scaling_svg([e("a", 8, (5.0, 5.0)), e("b", 16, (9.0, 9.0))])
    unbounded = scaling_svg([e("a", 8, (5.0, 5.0)), e("b", 16, (9.0, None))])
    assert proven == scaling_svg([e("a", 8, (5.0, 5.0)), e("b", 16, (9.0, 9.0))])  # deterministic
    assert unbounded != proven


def test_the_cheapest_answer_shows_costs_that_tell_the_scenarios_apart():
    """4.26 and 4.45 USD were both written "4 USD" (whole units), beside an answer proving
    the first cheaper (QA round 11, the tiny sweep's A100 and H100 pairs). Oracle: the costs
    to 3 significant digits; large amounts keep whole units with separators."""
    from autopar_opt.reports.formatting import fmt_money

    es = [entry("x", "A", 2, (0.05, 0.05), (4.2553, 4.2553)),
          entry("y", "B", 2, (0.03, 0.03), (4.4512, 4.4512))]
    ans = cheapest(es, PLANNING)
    assert ans["scenario"] == "x" and ans["proven"]
    assert "4.26 USD to 4.26 USD" in ans["statement"]
    assert fmt_money(1167589.6) == "1,167,590" and fmt_money(130.04) == "130"
    assert fmt_money(None) == "-"


def test_a_wide_model_error_says_how_many_runs_share_the_regime():
    """"80% interval from 198 comparable published runs ... (wide: few runs share its regime)"
    read as a contradiction; the plan report of the same scenario says "only 2 published runs
    share every regime label" (QA round 11). Oracle: the interval's own exact_matches."""
    from autopar_opt.capacity.answers import model_error

    iv = {"low": 0.0387, "high": 0.0824, "level": 0.8, "comparable_runs": 198,
          "exact_matches": 2, "wide": True}
    row = {"primal": 0.05, "interval": iv}
    err = model_error(row, 1000, 8 * 3.0, "USD")
    assert "from 198 comparable published runs" in err["text"]
    assert "(wide: only 2 published runs share every regime label of the plan)" in err["text"]
    # days: steps x iteration time; cost: days x 24 h x GPUs x price
    assert err["time_to_train_days"] == pytest.approx([1000 * 0.0387 / 86400, 1000 * 0.0824 / 86400])
    assert err["cost"][1] == pytest.approx(1000 * 0.0824 / 3600 * 8 * 3.0)


def test_the_frontier_statement_counts_in_words():
    """"1 scenarios on the time-cost frontier" (QA round 11)."""
    one = pareto([entry("a", "A", 8, (10, 11), (100, 110))])["statement"]
    assert one.startswith("1 scenario on the time-cost frontier (1 proven)")
    two = pareto([entry("a", "A", 8, (10, 11), (100, 110)), entry("b", "A", 16, (5, 6), (200, 210))])
    assert two["statement"].startswith("2 scenarios on the time-cost frontier")
