"""Time-to-train and cost as intervals, and the planner's answers with their proofs.

Every scenario's search returns a plan (its iteration time ``primal``) and a
proven lower bound ``L`` on the iteration time of any plan in the scenario's
space under the cost model (docs/DESIGN.md §4). With ``S`` optimizer steps to
consume the token budget (``S = ceil(budget / tokens per step)``):

* time to train ``∈ [S·L, S·primal]`` — the upper end is the plan we hold,
  the lower end the best case no plan can beat;
* cost ``= time · GPUs · price per GPU-hour``, the same interval scaled;
* throughput ``= tokens per step / iteration time ∈ [tokens/primal, tokens/L]``.

A scenario is called better than another only when its upper end beats the
other's lower end (:func:`compare`); otherwise the two are "within the gap".

Apart from these proofs (which hold under the cost model), each scenario's
plan carries ``model_error``: the 80% interval of its time to train and cost
from how far the cost model has been from comparable published runs
(:mod:`autopar_opt.cost.interval`), and the answers quote it for the scenario
they pick. It never decides an answer.
The answers (Pareto frontier, cheapest scenario meeting the requirement,
fewest GPUs per device type) each carry the comparisons that prove them.
"""

from __future__ import annotations

import math
from typing import Any

from autopar_opt.capacity.fleet_axes import is_group_axis, scenario_groups
from autopar_opt.capacity.schema import PlanningSection
from autopar_opt.core.ranges import range_text
from autopar_opt.cost.interval import sharing_words
from autopar_opt.reports.formatting import fmt_beside, fmt_money

SECONDS_PER_DAY = 86400.0
WITHIN = "within the gap"
#: A scenario the sweep holds nothing for (not run within its --time-limit, or its search
#: failed): no plan and no bound, so nothing is proven of it either way.
UNSOLVED = "not solved"


def _json(x: float) -> float | None:
    return None if math.isinf(x) or math.isnan(x) else x


def compare(a: tuple[float, float], b: tuple[float, float]) -> str:
    """For a quantity to minimise: ``"first"`` when a's upper end is below b's lower
    end, ``"second"`` for the reverse, else :data:`WITHIN` (no proof either way)."""
    if a[1] < b[0]:
        return "first"
    if b[1] < a[0]:
        return "second"
    return WITHIN


def price_scenario(scenario, row: dict[str, Any], planning: PlanningSection) -> dict[str, Any]:
    """The scenario's entry of the capacity document: bounds turned into intervals."""
    tpi = scenario.tokens_per_iteration
    steps = math.ceil(planning.token_budget / tpi)
    primal = row["primal"] if row["primal"] is not None else math.inf
    lower = row["lower_bound"] if row["status"] != "infeasible" else math.inf   # None: no bound
    lower = max(0.0, lower if lower is not None else 0.0)
    prices = planning.prices.per_gpu_hour
    hourly = sum(n * prices[d] for d, n in scenario.devices.items())   # a fleet: every group's GPUs
    price = prices.get(scenario.device)
    time_s = (steps * lower, steps * primal)
    cost = tuple(t / 3600.0 * hourly for t in time_s)
    thr = (tpi / primal if primal > 0 else math.inf, tpi / lower if lower > 0 else math.inf)
    entry = {"id": scenario.id, "device": scenario.device, "gpus": scenario.gpus,
             "nodes": scenario.spec.cluster.nodes, "axes": dict(scenario.axes),
             "global_batch_size": scenario.spec.training.global_batch_size,
             "seq_len": scenario.spec.training.seq_len, "status": row["status"],
             "primal": row["primal"], "lower_bound": row["lower_bound"], "gap": row["gap"],
             "tokens_per_iteration": tpi, "steps": steps,
             "time_to_train_days": [_json(t / SECONDS_PER_DAY) for t in time_s],
             "cost": [_json(c) for c in cost],
             "throughput_tokens_per_s": [_json(thr[0]) if row["primal"] is not None else None,
                                         _json(thr[1])],
             "price_per_gpu_hour": price, "plan": row["plan"], "mfu": row["mfu"],
             "peak_memory_gib": row["peak_memory_gib"], "reason": row["reason"],
             "key": scenario.key, "notes": list(getattr(scenario, "notes", ()))}
    if scenario.spec.fleet is not None or any(is_group_axis(k) for k in scenario.axes):
        spec = scenario.spec                        # a group alone is a plain cluster of its name
        entry["groups"] = scenario_groups(spec) or {spec.cluster.name: spec.cluster.nodes}
        entry["price_per_hour"] = hourly
        # every group's nodes (QA round 9: the first group's count was written for 1 + 3)
        entry["nodes"] = sum(entry["groups"].values())
    unsolved = row["primal"] is None and row["lower_bound"] is None \
        and row["status"] != "infeasible"
    if row["status"] == "infeasible" or unsolved:
        for name in ("time_to_train_days", "cost", "throughput_tokens_per_s"):
            entry[name] = [None, None]
    entry["model_error"] = model_error(row, steps, hourly, planning.prices.currency)
    entry["meets"] = UNSOLVED if unsolved else meets(entry, planning)
    return entry


def invalid_entry(scenario, planning: PlanningSection) -> dict[str, Any]:
    """The entry of a combination the spec's rules reject
    (:class:`~autopar_opt.capacity.sweep.InvalidScenario`): the keys of every entry, status
    ``invalid``, no plan, no bound, no interval, ``reason`` the rules, ``meets`` "no" (it
    cannot run). The answers leave it out (:func:`answers`)."""
    data = scenario.data
    cluster = data.get("cluster") if isinstance(data.get("cluster"), dict) else {}
    training = data.get("training") if isinstance(data.get("training"), dict) else {}
    devices = scenario.devices
    device = "+".join(sorted(devices)) or str(cluster.get("device"))
    groups = cluster.get("groups") if isinstance(cluster.get("groups"), list) else [cluster]
    nodes = sum(g.get("nodes") for g in groups if isinstance(g, dict)
                and isinstance(g.get("nodes"), int) and not isinstance(g.get("nodes"), bool))
    hourly = sum(n * planning.prices.per_gpu_hour.get(d, 0.0) for d, n in devices.items())
    entry = {"id": scenario.id, "device": device, "gpus": sum(devices.values()), "nodes": nodes,
             "axes": dict(scenario.axes), "global_batch_size": training.get("global_batch_size"),
             "seq_len": training.get("seq_len"), "status": "invalid", "primal": None,
             "lower_bound": None, "gap": None, "tokens_per_iteration": None, "steps": None,
             "time_to_train_days": [None, None], "cost": [None, None],
             "throughput_tokens_per_s": [None, None],
             "price_per_gpu_hour": planning.prices.per_gpu_hour.get(device), "plan": None,
             "mfu": None, "peak_memory_gib": None, "reason": scenario.reason, "key": None,
             "notes": [], "model_error": None, "meets": "no"}
    if isinstance(cluster.get("groups"), list) or any(is_group_axis(k) for k in scenario.axes):
        entry["groups"] = {g["name"]: g.get("nodes") for g in groups
                           if isinstance(g, dict) and isinstance(g.get("name"), str)}
        entry["price_per_hour"] = hourly
    return entry


def model_error(row: dict[str, Any], steps: int, hourly: float,
                currency: str) -> dict[str, Any] | None:
    """The plan held, with the cost model's error bar (``row["interval"]``, the
    80% interval of its iteration time from comparable published runs): time to
    train and cost at both ends (``hourly``: the scenario's price per hour, every GPU
    of every group). None when the scenario has no plan (or its row was stored before
    intervals existed)."""
    iv = row.get("interval")
    if row["primal"] is None or not iv:
        return None
    days = [steps * iv[k] / SECONDS_PER_DAY for k in ("low", "high")]
    cost = [d * 24.0 * hourly for d in days]
    text = (f"{iv['level']:.0%} interval from {iv['comparable_runs']} comparable published runs: "
            f"{range_text(days[0], days[1], 'days')}, {_money(cost[0], currency)} to "
            f"{_money(cost[1], currency)}" + (f" (wide: {_sharing(iv)})" if iv.get("wide") else ""))
    return {"level": iv["level"], "time_to_train_days": days, "cost": cost,
            "comparable_runs": iv["comparable_runs"], "wide": bool(iv.get("wide")),
            "iteration_time_s": [iv["low"], iv["high"]], "text": text}


def _sharing(iv: dict[str, Any]) -> str:
    """Why an interval is wide, as the plan report says it: how many published runs share
    every regime label of the plan (the comparable runs matched on fewer labels)."""
    n = iv.get("exact_matches")
    if not isinstance(n, int):          # a row stored before the count was kept
        return "few published runs share its regime"
    return sharing_words(n) + " every regime label of the plan"


def _error_text(entry: dict, planning: PlanningSection) -> str:
    """The plan's 80% interval against published runs, and, when its upper end is past the
    deadline, that the answer's proof holds under the cost model only (QA round 35:
    "proven to train 1.5e+13 tokens within 60 days" beside an interval of 28.4-66.9 days
    left the reader to compare the two)."""
    err = entry.get("model_error")
    if not err:
        return ""
    days = err["time_to_train_days"][1]
    past = (f"; its upper end, {fmt_beside(days, planning.deadline_days)} days, is past the "
            f"{planning.deadline_days:g}-day deadline: the proof holds under the cost model, "
            "not against its error" if days > planning.deadline_days else "")
    return f" [the plan held, against published runs: {err['text']}{past}]"


def _interval(entry: dict, name: str, scale: float = 1.0) -> tuple[float, float]:
    lo, hi = entry[name]
    return (math.inf if lo is None else lo * scale, math.inf if hi is None else hi * scale)


def meets(entry: dict, planning: PlanningSection) -> str:
    """``"yes"`` (proven: the plan meets the deadline and target), ``"no"`` (proven:
    no plan can), or :data:`WITHIN`."""
    if entry["status"] == "infeasible":
        return "no"
    t_lo, t_hi = _interval(entry, "time_to_train_days")
    target = planning.target_tokens_per_s
    thr_lo, thr_hi = entry["throughput_tokens_per_s"]
    thr_lo = 0.0 if thr_lo is None else thr_lo
    thr_hi = math.inf if thr_hi is None else thr_hi
    if t_lo > planning.deadline_days or (target is not None and thr_hi < target):
        return "no"
    if t_hi <= planning.deadline_days and (target is None or thr_lo >= target):
        return "yes"
    return WITHIN


def requirement_text(planning: PlanningSection) -> str:
    text = f"train {planning.token_budget:.3g} tokens within {planning.deadline_days:g} days"
    if planning.target_tokens_per_s is not None:
        text += f" at >= {planning.target_tokens_per_s:.3g} tokens/s"
    return text


def _money(x: float | None, currency: str) -> str:
    return "-" if x is None else f"{fmt_money(x)} {currency}"


def cheapest(entries: list[dict], planning: PlanningSection) -> dict[str, Any]:
    """The cheapest scenario proven to meet the requirement, and why no other is cheaper.

    Winner: least cost of the plan held (upper end) among scenarios proven to
    meet. Every other scenario that might meet is either proven not cheaper
    (its lower cost end is at least the winner's upper end) or listed as
    within the gap.
    """
    cur = planning.prices.currency
    yes = [e for e in entries if e["meets"] == "yes"]
    maybe = [e for e in entries if e["meets"] == WITHIN]
    unsolved = _unsolved(entries)
    if not yes:
        return {"scenario": None, "proven": False, "within_gap": [e["id"] for e in maybe],
                "not_solved": unsolved,
                "statement": f"no scenario is proven to {requirement_text(planning)}"
                             + (f"; {len(maybe)} undecided within the gap" if maybe else "")
                             + _unsolved_text(unsolved)}
    win = min(yes, key=lambda e: (e["cost"][1], e["gpus"], e["id"]))
    win_cost = _interval(win, "cost")
    rivals, beaten = [], []
    for e in yes + maybe:
        if e is win:
            continue
        verdict = compare(win_cost, _interval(e, "cost"))
        (beaten if verdict == "first" or e["cost"][0] >= win_cost[1] else rivals).append(e["id"])
    statement = (f"{win['id']} is the cheapest scenario proven to {requirement_text(planning)}: "
                 f"{_money(win['cost'][0], cur)} to {_money(win['cost'][1], cur)}")
    if rivals:
        statement += (f"; within the gap (could be as cheap): {', '.join(rivals[:8])}"
                      + (" ..." if len(rivals) > 8 else ""))
    elif not unsolved:
        statement += "; every other scenario that could meet it provably costs at least as much"
    statement += _unsolved_text(unsolved) + _error_text(win, planning)
    return {"scenario": win["id"], "cost": win["cost"], "time_to_train_days": win["time_to_train_days"],
            "model_error": win.get("model_error"), "proven": not rivals and not unsolved,
            "within_gap": rivals, "not_solved": unsolved, "proven_not_cheaper": len(beaten),
            "statement": statement}


def _unsolved(entries: list[dict]) -> list[str]:
    return [e["id"] for e in entries if e["meets"] == UNSOLVED]


def _unsolved_text(ids: list[str]) -> str:
    """What the answers cannot say of the scenarios the sweep holds nothing for."""
    if not ids:
        return ""
    return (f"; {len(ids)} scenario(s) not solved (no plan, no bound: could be better): "
            f"{', '.join(ids[:8])}" + (" ..." if len(ids) > 8 else ""))


def fewest_gpus(entries: list[dict], planning: PlanningSection) -> dict[str, Any]:
    """Per device type: the fewest GPUs with a scenario proven to meet the requirement,
    proven minimal when every smaller count is proven not to meet it."""
    out: dict[str, Any] = {}
    for device in sorted({e["device"] for e in entries}):
        mine = [e for e in entries if e["device"] == device]
        counts = sorted({e["gpus"] for e in mine})
        verdict = {g: _count_verdict([e for e in mine if e["gpus"] == g]) for g in counts}
        ok = [g for g in counts if verdict[g] == "yes"]
        if not ok:
            open_ = [g for g in counts if verdict[g] == WITHIN]
            out[device] = {"gpus": None, "proven": False, "within_gap": open_,
                           "statement": f"no {device} count in the sweep is proven to "
                                        f"{requirement_text(planning)}"
                                        + (f" ({open_} undecided: within the gap or not "
                                           "solved)" if open_ else "")}
            continue
        best = ok[0]
        undecided = [g for g in counts if g < best and verdict[g] == WITHIN]
        scen = min((e for e in mine if e["gpus"] == best and e["meets"] == "yes"),
                   key=lambda e: (e["cost"][1], e["id"]))
        text = f"{best} x {device} ({scen['id']})"
        if undecided:
            text += f"; fewer is undecided (within the gap or not solved) at {undecided}"
        else:
            smaller = [g for g in counts if g < best]
            text += ("; every smaller count in the sweep is proven not to meet it" if smaller
                     else "; the smallest count in the sweep")
        out[device] = {"gpus": best, "scenario": scen["id"], "proven": not undecided,
                       "within_gap": undecided, "statement": text + _error_text(scen, planning),
                       "model_error": scen.get("model_error")}
    return out


def _count_verdict(group: list[dict]) -> str:
    """One GPU count meets the requirement if any of its scenarios is proven to; it is
    undecided (:data:`WITHIN`) while one is within the gap or not solved."""
    marks = {e["meets"] for e in group}
    if "yes" in marks:
        return "yes"
    return WITHIN if marks & {WITHIN, UNSOLVED} else "no"


def pareto(entries: list[dict]) -> dict[str, Any]:
    """The time-cost Pareto frontier of the plans held, with what is proven about it.

    ``frontier``: scenarios whose plans no other plan dominates (sorted by time).
    A frontier member is ``proven`` when no scenario could dominate it even in
    its best case (each other scenario's lower time or lower cost end exceeds
    the member's upper end), a scenario without a plan but with a proven bound
    included (it is not on the frontier, yet its best case may dominate a member).
    A scenario off the frontier is ``dominated``
    (proven: a frontier plan's upper ends are at or below its lower ends) or
    ``within the gap`` of the frontier.
    """
    planned = [e for e in entries if e["primal"] is not None and e["status"] != "infeasible"]
    pts = {e["id"]: (_interval(e, "time_to_train_days"), _interval(e, "cost")) for e in planned}
    front = []
    for e in planned:
        t, c = pts[e["id"]]
        dominated = any((o[0][1] <= t[1] and o[1][1] <= c[1]) and (o[0][1] < t[1] or o[1][1] < c[1])
                        for k, o in pts.items() if k != e["id"])
        if not dominated:
            front.append(e)
    front.sort(key=lambda e: (pts[e["id"]][0][1], pts[e["id"]][1][1]))
    unsolved = _unsolved(entries)
    # a scenario searched without a plan (cut by its time limit) still has a proven bound:
    # in its best case it could dominate a plan held, like any scenario within the gap
    bounded = {e["id"]: (_interval(e, "time_to_train_days"), _interval(e, "cost")) for e in entries
               if e["primal"] is None and e["status"] != "infeasible" and e["meets"] != UNSOLVED}
    members = []
    for m in front:
        t, c = pts[m["id"]]
        threats = [k for k, o in {**pts, **bounded}.items() if k != m["id"] and o[0][0] <= t[1]
                   and o[1][0] <= c[1] and (o[0][0] < t[1] or o[1][0] < c[1])]
        # a scenario not solved has no bound: it could dominate any plan held
        members.append({"id": m["id"], "proven": not threats and not unsolved,
                        "within_gap_of": threats[:10]})
    ids = {m["id"] for m in front}
    off: dict[str, Any] = {}
    for e in planned:
        if e["id"] in ids:
            continue
        t, c = pts[e["id"]]
        by = next((m["id"] for m in front if pts[m["id"]][0][1] <= t[0] and pts[m["id"]][1][1] <= c[0]),
                  None)
        off[e["id"]] = {"dominated_by": by} if by else {"dominated_by": None, "verdict": WITHIN}
    n_proven = sum(1 for v in off.values() if v["dominated_by"])
    rest = "" if n_proven == len(off) else ", the rest within the gap"
    return {"frontier": members, "off_frontier": off, "not_solved": unsolved,
            "statement": f"{len(front)} scenario{'' if len(front) == 1 else 's'} on the "
                         "time-cost frontier "
                         f"({sum(m['proven'] for m in members)} proven); {n_proven} of "
                         f"{len(off)} others proven dominated{rest}"
                         + (f"; {len(unsolved)} scenario(s) not solved are not on it and "
                            "may belong to it" if unsolved else "")
                         + (f"; {len(bounded)} scenario(s) without a plan, only a bound, are not "
                            "on it and may belong to it" if bounded else "")}


def answers(entries: list[dict], planning: PlanningSection) -> dict[str, Any]:
    """Every answer of the capacity document (with group axes, also which node count
    of each group matches each other scenario: :func:`~autopar_opt.capacity.fleet_answers.group_matches`).
    A combination the spec's rules reject (status ``invalid``) is no candidate: it cannot
    run, so it is left out of every answer, which says how many were (``invalid``)."""
    bad = [e["id"] for e in entries if e["status"] == "invalid"]
    entries = [e for e in entries if e["status"] != "invalid"]
    out = {"requirement": requirement_text(planning),
           "cheapest_meeting_requirement": cheapest(entries, planning),
           "fewest_gpus_per_device": fewest_gpus(entries, planning),
           "pareto_time_cost": pareto(entries)}
    if any(e.get("groups") for e in entries):
        from autopar_opt.capacity.fleet_answers import group_matches

        out["group_matches"] = group_matches(entries)
    if bad:
        out["invalid"] = {"scenarios": bad, "statement": (
            f"{len(bad)} combination(s) of the axes' values cannot run (status invalid, the "
            f"rule in each row's reason) and are left out of these answers: "
            f"{', '.join(bad[:8])}" + (" ..." if len(bad) > 8 else ""))}
    return out
