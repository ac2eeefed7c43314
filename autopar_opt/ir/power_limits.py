"""The power limits a catalog GPU accepts, with their sources.

A board power cap (``nvidia-smi -pl W``) is enforced by the driver only inside the
board's range: ``nvidia-smi -q -d POWER`` prints it as "Min Power Limit" and "Max
Power Limit", and ``nvidia-smi -pl`` refuses a value outside it ("Provided power
limit 50.00 W is not a valid power limit which should be between 200.00 W and
700.00 W"). A cap outside the range cannot be set, so pricing one (1 W priced as a
GPU at a fifth of its clock, QA round 37) prices a machine that cannot exist.

:data:`POWER_LIMIT_RANGES` holds the ranges found published, each with its source.
For a catalog part not in it, the maximum is the rated board power of its catalog
entry (the datasheet's "up to" / maximum TDP, which is also the nvidia-smi maximum
of every part listed here) and no minimum is known: the readers say so and assume
none, rather than invent one. A GPU described in a spec (no rated power) has no
range. The ranges are data; :func:`power_limit_problem` states the rule.
"""

from __future__ import annotations

from dataclasses import dataclass


class PowerLimitError(ValueError):
    """A stated power limit outside the part's range (:func:`power_limit_problem`)."""


@dataclass(frozen=True)
class PowerRange:
    """The power limits (W) a part accepts: ``min_w`` (None: none published) to
    ``max_w``, and where the figures come from."""

    min_w: float | None
    max_w: float
    source: str

    def text(self) -> str:
        """The range in words with its source, for a message."""
        if self.min_w is None:
            return (f"at most {self.max_w:g} W ({self.source}); no published minimum power "
                    "limit: none assumed")
        return f"{self.min_w:g}-{self.max_w:g} W ({self.source})"


#: Published ranges, catalog name -> (min W, max W, source). nvidia-smi outputs quoted in
#: public issues name the board by its clocks or name; a vendor guide's Redfish example
#: states the same limits as AllowableMin / AllowableMax.
POWER_LIMIT_RANGES: dict[str, PowerRange] = {
    "V100-32GB": PowerRange(150.0, 300.0, "nvidia-smi -q of a Tesla V100-SXM2-32GB: Min Power "
                            "Limit 150.00 W, Max Power Limit 300.00 W; NVIDIA/nvidia-docker issue "
                            "#1076"),
    "A100-40GB": PowerRange(100.0, 400.0, "nvidia-smi -q of an A100 SXM4 of 400 W default with "
                            "1,215 MHz HBM2 (the 40 GB part): Min Power Limit 100.00 W, Max 400.00 "
                            "W; NVIDIA/nvidia-docker issue #1648"),
    "A100-80GB": PowerRange(100.0, 400.0, "nvidia-smi -q of an A100 SXM4 of 400 W default with "
                            "1,593 MHz HBM2e (the 80 GB part): Min Power Limit 100.00 W, Max "
                            "400.00 W; NVIDIA/DCGM issue #152"),
    "H100-SXM-80GB": PowerRange(200.0, 700.0, "nvidia-smi -q -d power of an HGX board of 700 W "
                                "default: Min Power Limit 200.00 W, Max 700.00 W, and "
                                "'nvidia-smi -pl 50' refused as not 'between 200.00 W and 700.00 "
                                "W'; stackhpc/ansible-slurm-appliance PR #975 (the quoted output "
                                "does not name the board; 700 W default and maximum is the H100 "
                                "SXM's rating)"),
    "B200": PowerRange(200.0, 1000.0, "NVIDIA DGX B200 User Guide, 'Managing Power Capping': a "
                       "GPU's Redfish PowerLimitWatts AllowableMin 200, AllowableMax 1000"),
    **dict.fromkeys(("GH200-96GB", "GH200-144GB"), PowerRange(
        450.0, 1000.0, "NVIDIA GH200 Grace Hopper Superchip datasheet: module power 450-1,000 W "
        "configurable (CPU + GPU + memory), the power the catalog rates the superchip at")),
}


def power_limit_range(name: str, rated_w: float) -> PowerRange | None:
    """The range of power limits of the part called ``name`` with rated power ``rated_w``
    (W; 0: not known): the published one, else at most the rated power with no minimum;
    None for a part without a rated power (a GPU described in a spec)."""
    if name in POWER_LIMIT_RANGES:
        return POWER_LIMIT_RANGES[name]
    if not rated_w:
        return None
    return PowerRange(None, rated_w, f"the {rated_w:g} W rated board power of the catalog's "
                                     f"{name}")


def power_limit_problem(name: str, rated_w: float, watts: float) -> str | None:
    """Why a power limit of ``watts`` cannot be set on the part (the rule, with the
    part's range and its source), or None when it can (or no range is known)."""
    rng = power_limit_range(name, rated_w)
    if rng is None:
        return None
    if watts > rng.max_w or (rng.min_w is not None and watts < rng.min_w):
        return (f"outside the power limits {name} accepts: {rng.text()}; nvidia-smi -pl "
                "refuses a limit outside [Min Power Limit, Max Power Limit]")
    return None


def power_limit_fix(name: str, rated_w: float) -> str:
    """The fix for :func:`power_limit_problem`'s rule."""
    rng = power_limit_range(name, rated_w)
    low = f"{rng.min_w:g}" if rng is not None and rng.min_w is not None else "0"
    high = f"{rng.max_w:g}" if rng is not None else "the rated power"
    return (f"state a limit from {low} to {high} W (nvidia-smi -q -d POWER prints the "
            "board's range), or leave power_limit_w out for the rated power")


def unsourced_minimum_note(name: str, rated_w: float, watts: float) -> str | None:
    """The note for a power limit on a part whose minimum is not published (None when it
    is, or when the part has no range): the limit was taken without a lower bound."""
    rng = power_limit_range(name, rated_w)
    if rng is None or rng.min_w is not None:
        return None
    return (f"power limit {watts:g} W: no published minimum power limit for {name} (the "
            "catalog has none with a source): none assumed, the limit is taken as stated")
