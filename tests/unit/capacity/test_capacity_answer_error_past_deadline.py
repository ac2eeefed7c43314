"""An answer proven under the cost model says when its plan's 80% interval against
published runs reaches past the deadline (QA round 35: Llama-3-70B on 4096 H100, "proven to
train 1.5e+13 tokens within 60 days" beside "80% interval ... 28.4-66.9 days")."""

from __future__ import annotations

from autopar_opt.capacity.answers import cheapest, fewest_gpus, meets
from autopar_opt.capacity.schema import PlanningSection

PLANNING = PlanningSection.model_validate({
    "token_budget": 1e12, "deadline_days": 60.0,
    "prices": {"per_gpu_hour": {"A": 1.0}, "source": "test"}})


def _entry(sid: str, gpus: int, err_hi: float) -> dict:
    e = {"id": sid, "device": "A", "gpus": gpus, "status": "optimal", "primal": 1.0,
         "time_to_train_days": [48.3, 48.3], "cost": [gpus * 1.0, gpus * 1.0],
         "throughput_tokens_per_s": [1.0, 1.0],
         "model_error": {"time_to_train_days": [28.4, err_hi], "text": f"28.4-{err_hi} days"}}
    e["meets"] = meets(e, PLANNING)
    return e


def test_an_interval_past_the_deadline_is_said():
    """Oracle: the interval's upper end against the deadline (66.9 > 60; 59.0 < 60)."""
    past = [_entry("a", 4096, 66.9)]
    assert past[0]["meets"] == "yes"
    for statement in (cheapest(past, PLANNING)["statement"],
                      fewest_gpus(past, PLANNING)["A"]["statement"]):
        assert "its upper end, 66.9 days, is past the 60-day deadline: the proof holds under " \
               "the cost model, not against its error" in statement
    within = [_entry("b", 4096, 59.0)]
    assert "past the" not in cheapest(within, PLANNING)["statement"]
    assert "28.4-59.0 days" in cheapest(within, PLANNING)["statement"]
