"""``certificate.methods`` names why a configuration no method solved was left: its
bound within the target gap of the incumbent, or no time left (session 24: a run that
stopped at its gap after 5 s of 60 said "none (no time left)")."""

from __future__ import annotations

from autopar_opt.core.bounds import Status
from autopar_opt.ir.training import Schedule
from autopar_opt.search.certificate import WITHIN_GAP, ConfigRecord, method_records
from autopar_opt.search.configs import OuterConfig


def _rec(c: int, status: str, lower: float, **kw) -> ConfigRecord:
    return ConfigRecord(OuterConfig(1, c, Schedule.one_f_one_b), Status(status), None, lower,
                        0.0, **kw)


def test_unsolved_configurations_say_why():
    records = [ConfigRecord(OuterConfig(1, 1, Schedule.one_f_one_b), Status.optimal, 10.0, 10.0,
                            1.0, method="dp"),
               _rec(2, "not_solved", 9.995, unsolved_because=WITHIN_GAP),
               _rec(4, "not_solved", 9.0),
               _rec(8, "pruned", 11.0)]
    names = {m["method"]: m["stats"] for m in method_records(records)}
    assert names["none (bound within the target gap)"] == {"configurations": 1, "not_solved": 1}
    assert names["none (no time left)"] == {"configurations": 1, "not_solved": 1}
    assert set(names) == {"dp", "none (bound within the target gap)", "none (no time left)",
                          "analytic bound"}
