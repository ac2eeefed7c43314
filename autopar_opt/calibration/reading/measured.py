"""What a record measured: the throughput figure it is compared on, its
per-layer time, its per-GPU memory and what that memory measures.

Records publish different metrics. :func:`pick_throughput` takes, in order of
preference (measured rates first, FLOP-derived figures last):
``iteration_time_s``, ``tokens_per_sec_per_gpu``, a total token rate
(``tokens_per_sec_total`` / ``tokens_per_sec`` / ``tokens_per_second``, top
level or under ``other``), ``samples_per_sec`` (or ``samples_per_sec_from_log``
/ ``sequences_per_sec``, top level or under ``other``), ``mfu_pct``,
``tflops_per_gpu``, ``aggregate_pflops``. The conversion to samples per second
(which needs the built model's FLOP count) is
:func:`autopar_opt.calibration.flops.measured_samples_per_s`.

A throughput key that is stated (not null) must be usable: a positive finite
number in its unit (:data:`THROUGHPUT_UNITS`; ``mfu_pct`` at most 100). A text
("150 TFLOP/s"), a boolean, zero, a negative value or an MFU above 100 % makes
the record unmodelable, naming the key and the value
(:func:`unusable_throughput`), instead of leaving it to a lower-ranked key or,
with memory published, to a memory-only record. A record is memory-only when
it says so the way the shipped ones do: every throughput key null
(:class:`NoThroughput`).

Memory (``measured.memory_measure``, ``measured.memory_rank``): see
:mod:`autopar_opt.calibration.memory`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autopar_opt.calibration.reading.errors import Unmodelable
from autopar_opt.calibration.reading.schema import Measured

#: Every throughput key :func:`pick_throughput` reads, with its unit, in its order of
#: preference (measured rates first, FLOP-derived figures last).
THROUGHPUT_UNITS: dict[str, str] = {
    "iteration_time_s": "seconds per iteration", "tokens_per_sec_per_gpu": "tokens/s per GPU",
    "tokens_per_sec_total": "tokens/s of all GPUs", "tokens_per_sec": "tokens/s of all GPUs",
    "tokens_per_second": "tokens/s of all GPUs", "samples_per_sec": "samples/s",
    "samples_per_sec_from_log": "samples/s", "sequences_per_sec": "sequences/s",
    "mfu_pct": "percent of the peak", "tflops_per_gpu": "TFLOP/s per GPU",
    "aggregate_pflops": "PFLOP/s of the whole job"}
#: The keys also read under ``measured.other`` (the others at the top level only).
OTHER_TOO = ("tokens_per_sec_total", "tokens_per_sec", "tokens_per_second",
             "samples_per_sec_from_log", "sequences_per_sec")
#: What a published memory figure measures -> (fragmentation coefficient, reserve
#: coefficient) of the prediction (:mod:`autopar_opt.calibration.memory`).
MEASURES: dict[str, tuple[float, float]] = {
    "device": (1.0, 1.0), "reserved": (1.0, 0.0), "allocated": (0.0, 0.0)}
#: Which GPU a published memory figure is from.
RANKS = ("max", "last", "first")


class NoThroughput(ValueError):
    """No throughput key is stated (all null or absent): with published memory the
    record is memory-only, else unmodelable."""


@dataclass(frozen=True)
class Throughput:
    """The measured figure a record is compared on: ``key`` as found (``other.``
    in front for one under ``measured.other``) and its value, a positive
    number in the unit :data:`THROUGHPUT_UNITS` gives for the key."""

    key: str
    value: float

    @property
    def name(self) -> str:
        """The key without ``other.``."""
        return self.key.removeprefix("other.")


def unusable_throughput(measured: Measured) -> str | None:
    """The reason a stated throughput key cannot be used (the first such key, in
    :data:`THROUGHPUT_UNITS` order, top level before ``other``), naming the key,
    the value, the rule and the fix; None when every stated one is usable."""
    other = measured.other()
    for key, unit in THROUGHPUT_UNITS.items():
        for where, value in (("measured.", measured.extra(key)),
                             ("measured.other.", other.get(key))):
            if where == "measured.other." and key not in OTHER_TOO:
                continue
            v = value
            if v is None:
                continue
            number = isinstance(v, (int, float)) and not isinstance(v, bool)
            if not number:
                rule = f"is not a number of {unit}"
            elif not math.isfinite(v) or v <= 0:
                rule = f"is not a positive number of {unit}"
            elif key == "mfu_pct" and v > 100:
                rule = "is above 100 percent of the peak (a percentage, not a fraction or a rate)"
            else:
                continue
            return (f"{where}{key} = {v!r} {rule}: a stated throughput must be usable (fix: "
                    f"give it as a positive number of {unit}, or null; a memory-only record "
                    "states every throughput key as null)")
    return None


def _positive(value: object) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    return float(value) if ok else None


def stated_throughputs(measured: Measured) -> list[Throughput]:
    """Every usable throughput figure the record states, in the order of preference (that of
    :data:`THROUGHPUT_UNITS`; a key under ``measured.other`` after the same key at the top
    level)."""
    other = measured.other()
    out = []
    for key in THROUGHPUT_UNITS:
        places = [("", measured.model_extra or {})]
        if key in OTHER_TOO:
            places.append(("other.", other))
        for prefix, sec in places:
            if (v := _positive(sec.get(key))) is not None:
                out.append(Throughput(prefix + key, v))
    return out


def pick_throughput(measured: Measured) -> Throughput:
    """The figure to compare on (module docstring). Raises :class:`Unmodelable`
    when a stated key is unusable (:func:`unusable_throughput`),
    :class:`NoThroughput` when none is stated."""
    bad = unusable_throughput(measured)
    if bad:
        raise Unmodelable(bad)
    found = stated_throughputs(measured)
    if found:
        return found[0]
    hfu = (" (hfu_pct alone is not used: hardware FLOPs count the recomputation each framework "
           "counts its own way)") if _positive(measured.extra("hfu_pct")) is not None else ""
    raise NoThroughput("no usable measured throughput (iteration_time_s, tokens_per_sec_per_gpu, "
                       "tokens_per_sec_total, samples_per_sec, mfu_pct, tflops_per_gpu, "
                       "aggregate_pflops all null)" + hfu + "; fix: state one of them under "
                       "measured in its unit (`autopar schema --runs` lists the keys and units), "
                       "or measured.memory_gib_per_gpu to compare on memory alone")


def per_layer_ms(measured: Measured) -> float:
    """A per-layer record's forward + backward time of one layer, ms
    (``other.combined_ms`` or ``other.forward_ms + other.backward_ms``)."""
    from autopar_opt.calibration.reading.schema import number_problem

    other = measured.other()

    def ms(key: str) -> float | None:
        bad = number_problem(other.get(key), "measured.other", key)
        if bad:
            raise Unmodelable(bad)
        return None if other.get(key) is None else float(other[key])

    total = ms("combined_ms")
    if total is None:
        fwd, bwd = ms("forward_ms"), ms("backward_ms")
        if fwd is None or bwd is None:
            raise Unmodelable("per-layer record without combined_ms or forward_ms + backward_ms")
        total = fwd + bwd
    if total <= 0:
        raise Unmodelable(f"per-layer time {total} ms is not positive")
    return total


def memory_fields(measured: Measured) -> tuple[str, str]:
    """(measure, rank) of a record's ``measured`` section (defaults
    ``device``/``max``); an unknown value is unmodelable, naming the key."""
    measure = str(measured.memory_measure or "device").strip().lower()
    rank = str(measured.memory_rank or "max").strip().lower()
    if measure not in MEASURES:
        raise Unmodelable(f"measured.memory_measure = {measure!r} is not one of "
                          f"{', '.join(MEASURES)}")
    if rank not in RANKS:
        raise Unmodelable(f"measured.memory_rank = {rank!r} is not one of {', '.join(RANKS)}")
    return measure, rank
