"""A spec's ``power_limit_w`` (a plain cluster's or a fleet group's) on its device.

A catalog part takes the cap only inside the range its board accepts
(:mod:`autopar_opt.ir.power_limits`: ``nvidia-smi -pl`` refuses a value outside
[Min Power Limit, Max Power Limit]); a cap outside it is refused with the part's range
and its source. A GPU described in the spec has no rated power and no range: its cap is
kept as stated (and changes nothing, :attr:`~autopar_opt.ir.hardware.DeviceType.clock_factor`).
"""

from __future__ import annotations

from dataclasses import replace

from autopar_opt.core.errors import ProblemList
from autopar_opt.ir.hardware import DeviceType
from autopar_opt.ir.power_limits import power_limit_fix, power_limit_problem


def apply_power_limit(dev: DeviceType, watts: float, key: str, out: ProblemList
                      ) -> DeviceType | None:
    """``dev`` capped at ``watts``; None, with the problem recorded at ``key``, when the
    part does not accept that limit (QA round 37: 1 W on an H100 was priced)."""
    if problem := power_limit_problem(dev.name, dev.tdp_w, watts):
        out.add(key, watts, problem, power_limit_fix(dev.name, dev.tdp_w))
        return None
    return replace(dev, power_limit_w=float(watts))
