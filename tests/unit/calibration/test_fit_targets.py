"""Issue 28's calibration targets that no other test held (audit of issue 28, qa36c).

* "memory median <= 10% on every record that states memory": ``REGIMES.md`` records it
  over both record files (97 records, 6.9%); 66 of them are in ``holdout_runs.yaml``,
  which the shipped parameters never saw, so the figure is out of sample. Re-derived
  here with the calibration's own ``compare_memory`` / ``predict`` (the script
  ``benchmarks/calibration/intervals.py`` computes it the same way) and held to the
  target and to the recorded figure.
* "No fitted parameter at a bound": the shipped fit (``calibrated.yaml``) states
  ``at_bound: []``; checked here against the ranges themselves (the fit's own rule:
  within 0.1% of the range's span of a bound, ``calibration/fit.py``), not the fit's
  list. The leave-one-group-out fits behind every out-of-sample figure and interval
  (``intervals.yaml`` ``fits``) miss it: an ``xfail(strict=True)`` naming the figure.
* "every fixed parameter cites its microbenchmark": each scalar parameter the shipped
  fit leaves fixed says where its value comes from.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import yaml

from autopar_opt.calibration.calibrate import model_records
from autopar_opt.calibration.compare import compare_memory, predict
from autopar_opt.calibration.reading import load_run_file
from autopar_opt.cost.interval import DEFAULT_FILE
from autopar_opt.cost.params import EFFICIENCY_RANGE, RANGES, default_params
from support import paths

FITTING = paths.DATA / "published_runs.yaml"
HELD_OUT = paths.REPO / "benchmarks" / "calibration" / "holdout_runs.yaml"
REGIMES_MD = paths.REPO / "benchmarks" / "calibration" / "REGIMES.md"
SHIPPED = yaml.safe_load((paths.REPO / "autopar_opt" / "cost" / "calibrated.yaml").read_text())
#: the fit's own rule for "at a bound" (calibration/fit.py: within 1e-3 of the span)
AT_BOUND = 1e-3


def _memory_errors(path) -> list[float]:
    """|predicted / measured - 1| of every record of ``path`` that states memory,
    with the shipped parameters (memory-only records through compare_memory)."""
    params, out = default_params(), []
    for run in model_records(load_run_file(path))[0]:
        if run.memory_only:
            out.append(abs(compare_memory(run, params).memory_rel_error))
        elif run.measured_memory_gib:
            pred = predict(run, params)[1]
            if pred is not None:
                out.append(abs(pred / run.measured_memory_gib - 1))
    return out


def test_memory_median_over_both_files_meets_the_target_and_the_record():
    fitting, held = _memory_errors(FITTING), _memory_errors(HELD_OUT)
    both = fitting + held
    # out of sample: the records the shipped parameters never saw
    assert len(held) >= 60 and np.median(held) <= 0.10
    assert np.median(both) <= 0.10
    # the figure REGIMES.md records is this one
    m = re.search(r"records of both files that state memory \((\d+)\) \| <= 10% \| ([\d.]+)%",
                  REGIMES_MD.read_text())
    assert m, "REGIMES.md no longer records the memory target over both files"
    assert int(m.group(1)) == len(both)
    assert float(m.group(2)) == pytest.approx(100 * np.median(both), abs=0.05)


def _on_bound(value: float, lo: float, hi: float) -> bool:
    span = hi - lo
    return value <= lo + AT_BOUND * span or value >= hi - AT_BOUND * span


def _fitted_values(params: dict, free: list[str]) -> dict[str, tuple[float, float, float]]:
    """name -> (value, lo, hi) of each fitted parameter of a parameter mapping."""
    out = {}
    for name in free:
        if name in RANGES:
            lo, hi, _ = RANGES[name]
            out[name] = (params[name], lo, hi)
    lo, hi, _ = RANGES["memory_fragmentation"]      # fitted separately (calibration/fit.py)
    out["memory_fragmentation"] = (params["memory_fragmentation"], lo, hi)
    return out


def test_the_shipped_fit_has_no_parameter_at_a_bound():
    free = list(SHIPPED["free_parameters"])
    params = SHIPPED["params"]
    values = _fitted_values(params, free)
    # the per-die efficiencies: eff:<chip> is the value of the chip's devices
    for chip, device in (("V100", "V100-32GB"), ("A100", "A100-80GB")):
        if f"eff:{chip}" in free:
            values[f"eff:{chip}"] = (params["gemm_efficiency"][device], *EFFICIENCY_RANGE)
    assert {"efficiency_half_us", "elementwise_passes", "iteration_overhead_s"} <= set(values)
    assert SHIPPED["at_bound"] == []
    on = {n: v for n, (v, lo, hi) in values.items() if _on_bound(v, lo, hi)}
    assert on == {}


@pytest.mark.xfail(strict=True, reason="missed: iteration_overhead_s within 0.1% of its 0.05 s "
                   "upper bound in 33 of the 35 leave-one-group-out fits of intervals.yaml (and "
                   "efficiency_half_us, elementwise_passes at theirs in framework:megatron, "
                   "elementwise_passes in generation:ampere; REGIMES.md's Targets row; "
                   "PINNING.md: pinned at their measurements instead, none is at a bound but "
                   "the accuracy targets fall further)")
def test_no_leave_one_group_out_fit_has_a_parameter_at_a_bound():
    free = list(SHIPPED["free_parameters"])
    fits = yaml.safe_load(DEFAULT_FILE.read_text())["fits"]
    on = {}
    for group, params in fits.items():
        hits = [n for n, (v, lo, hi) in _fitted_values(params, free).items() if _on_bound(v, lo, hi)]
        if hits:
            on[group] = hits
    assert on == {}


def test_every_fixed_parameter_says_where_its_value_comes_from():
    """A scalar the shipped fit leaves fixed names its measurement (or why it is fixed)."""
    free = set(SHIPPED["free_parameters"]) | {"memory_fragmentation"}
    fixed = [n for n in RANGES if n not in free]
    assert {"comm_efficiency", "inter_comm_efficiency", "comm_interference",
            "memory_reserve_gib"} <= set(fixed)
    for name in fixed:
        reason = RANGES[name][2]
        assert re.search(r"pinned|not fitted|measured", reason), name
