"""Answers across fleets (issue 34): how many nodes of one group match another scenario.

"How many A100 nodes match 64 H100 nodes for this job": among the scenarios that
use group ``g`` alone, the fewest nodes whose time to train is *proven* at most
the reference scenario's (its upper end at or below the reference's lower end:
no plan of the reference can be faster). A count is proven not to match when
its lower end exceeds the reference's upper end; anything else is within the
gap. The answer is proven minimal when every smaller count of the sweep is
proven not to match. Every reference scenario that does not use ``g`` is asked.
The cheapest mix meeting a deadline is the capacity document's
``cheapest_meeting_requirement`` over every scenario, fleets included.
"""

from __future__ import annotations

import math
from typing import Any

from autopar_opt.capacity.answers import UNSOLVED, WITHIN


def _days(e: dict) -> tuple[float, float]:
    lo, hi = e["time_to_train_days"]
    return (math.inf if lo is None else lo, math.inf if hi is None else hi)


def _verdict(candidate: dict, reference: dict) -> str:
    if candidate.get("meets") == UNSOLVED:      # no plan, no bound: nothing is proven
        return WITHIN
    c, r = _days(candidate), _days(reference)
    if c[1] <= r[0]:
        return "yes"
    if c[0] > r[1]:
        return "no"
    return WITHIN


def group_matches(entries: list[dict]) -> list[dict[str, Any]]:
    """One answer per (group, reference scenario not using it) of the sweep (module doc)."""
    fleet = [e for e in entries if e.get("groups")]
    alone: dict[str, list[dict]] = {}
    for e in fleet:
        used = {g: n for g, n in e["groups"].items() if n}
        # every scenario but a proven infeasible one: a search cut without a plan still
        # has a bound, so its count is "proven slower" or undecided, never left out
        if len(used) == 1 and e["status"] != "infeasible":
            alone.setdefault(next(iter(used)), []).append(e)
    out = []
    for group, cands in sorted(alone.items()):
        cands = sorted(cands, key=lambda e: (e["groups"][group], e["id"]))
        for ref in fleet:
            if ref["groups"].get(group) or ref["primal"] is None or ref["status"] == "infeasible":
                continue
            verdict = [(c["groups"][group], c, _verdict(c, ref)) for c in cands]
            yes = [(n, c) for n, c, v in verdict if v == "yes"]
            name = " + ".join(f"{n} {g}" for g, n in ref["groups"].items() if n)
            nodes = "node" if sum(ref["groups"].values()) == 1 else "nodes"
            if not yes:
                open_ = [n for n, _, v in verdict if v == WITHIN]
                out.append({"group": group, "reference": ref["id"], "nodes": None, "proven": False,
                            "within_gap": open_,
                            "statement": f"no {group} node count in the sweep is proven to train as "
                                         f"fast as {name} {nodes} ({ref['id']})"
                                         + (f"; undecided (within the gap or not solved) at "
                                            f"{open_}" if open_ else "")})
                continue
            n, scen = yes[0]
            undecided = [m for m, _, v in verdict if m < n and v == WITHIN]
            text = (f"{n} {group} node{'' if n == 1 else 's'} ({scen['id']}) "
                    f"train{'s' if n == 1 else ''} at least as fast as {name} {nodes} "
                    f"({ref['id']}), proven")
            text += (f"; fewer is undecided (within the gap or not solved) at {undecided}"
                     if undecided else
                     "; every smaller count in the sweep is proven slower" if any(m < n for m, _, _ in verdict)
                     else "; the smallest count in the sweep")
            out.append({"group": group, "reference": ref["id"], "nodes": n, "scenario": scen["id"],
                        "proven": not undecided, "within_gap": undecided, "statement": text})
    return out
