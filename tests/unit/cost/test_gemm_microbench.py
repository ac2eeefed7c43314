"""GEMM microbenchmark table and the curve fitted to it (cost/gemm_kernels.py, issue 28 point 1).

Oracles: the curve by hand (two points), exact recovery of generated times, the datasheet
peak as an upper bound on every row, the two H100 sources against each other."""

from __future__ import annotations

import numpy as np
import pytest

from autopar_opt.calibration import fit as calib_fit
from autopar_opt.cost import gemm_kernels as gk
from autopar_opt.cost.compute import kernel_time
from autopar_opt.cost.params import default_params


def _row(tau_us: float, eff: float, half_us: float, peak: float = 1e15) -> gk.Row:
    flops = tau_us * 1e-6 * peak
    return gk.Row("hand", "H100-SXM-80GB", "bf16", flops, kernel_time(flops, peak, eff, half_us), peak)


def test_fit_recovers_the_curve_that_generated_the_times():
    # t = (τ + τ_half) / eff_max exactly: the least squares must return both constants
    rows = [_row(tau, 0.7, 20.0) for tau in (5.0, 40.0, 300.0, 2000.0)]
    curve = gk.fit_curve(rows)
    assert curve.eff_max == pytest.approx(0.7, rel=1e-9)
    assert curve.half_us == pytest.approx(20.0, rel=1e-9)
    assert curve.max_rel_error < 1e-9


def test_fit_by_hand_on_two_points():
    # τ = 10 µs took 40 µs, τ = 100 µs took 160 µs: a = 4/3, b = 80/3 µs, so
    # eff_max = 3/4 and τ_half = b/a = 20 µs
    peak = 1e15
    rows = [gk.Row("hand", "H100-SXM-80GB", "bf16", tau * 1e-6 * peak, t * 1e-6, peak)
            for tau, t in ((10.0, 40.0), (100.0, 160.0))]
    curve = gk.fit_curve(rows)
    assert curve.eff_max == pytest.approx(0.75)
    assert curve.half_us == pytest.approx(20.0)


def test_one_shape_is_not_a_curve():
    with pytest.raises(ValueError, match="two measured shapes"):
        gk.fit_curve([_row(10.0, 0.7, 20.0)])


def test_a_row_faster_than_the_datasheet_peak_is_refused(monkeypatch):
    text = """sources:
  s: {device: H100-SXM-80GB}
rows:
- {source: s, dtype: bf16, b: 1, m: 4096, n: 4096, k: 4096, tflops: 1200.0}
"""
    monkeypatch.setattr(gk, "_data_text", lambda: text)
    gk.rows.cache_clear()
    try:
        with pytest.raises(ValueError, match="dense peak"):
            gk.rows()
    finally:
        gk.rows.cache_clear()


def test_every_source_is_fitted_within_its_scatter():
    fits = gk.source_fits()
    assert set(fits) == {("own_h100", "bf16"), ("own_h100", "fp8"), ("own_h200", "bf16"),
                         ("own_h200", "fp8"), ("xla_h100", "bf16"), ("xla_b200", "bf16"),
                         ("xla_b200", "fp8")}
    for key, curve in fits.items():
        # the two-constant curve describes each table to a few percent (median)
        assert curve.median_rel_error < 0.08, key
        assert 0.35 < curve.eff_max < 0.9, key


def test_the_two_h100_sources_agree_on_large_gemms():
    """Own isolated calls and XLA's kernel times differ on small GEMMs by design (launch
    latency), far less on GEMMs of at least 100 µs at peak: medians 0.708 and 0.782 of the
    dense peak, within 10% of each other."""
    own = [r.efficiency for r in gk.rows() if r.source == "own_h100" and r.dtype == "bf16"
           and r.flops / r.peak >= 100e-6]
    xla = [r.efficiency for r in gk.rows() if r.source == "xla_h100" and r.flops / r.peak >= 100e-6]
    assert len(own) >= 10 and len(xla) >= 10
    assert abs(np.median(own) / np.median(xla) - 1.0) < 0.10


def test_blackwell_takes_its_measured_efficiency_not_a_transfer():
    """No published training run identifies Blackwell's GEMM efficiency: the shipped model
    gives B200 and GB200 the B200 microbenchmark's, in 16 bits and FP8."""
    p = default_params()
    for dev in calib_fit.CHIP_GROUPS["Blackwell"]:
        assert p.efficiency_for(dev) == pytest.approx(gk.measured_efficiency("Blackwell", "bf16"),
                                                      abs=1e-6)
        assert p.efficiency_for(dev, fp8=True) == pytest.approx(
            gk.measured_efficiency("Blackwell", "fp8"), abs=1e-6)


def test_assemble_uses_the_measurement_only_for_chips_the_fit_leaves_free():
    prior = default_params()
    theta = calib_fit._start(prior)
    theta.update({"eff:H100": 0.5, "eff:A100": 0.6, "eff:V100": 0.7, "eff:Blackwell": 0.2})
    p = calib_fit.assemble(prior, theta, ["eff:H100", "eff:A100", "eff:V100"])
    assert p.efficiency_for("H100-SXM-80GB") == 0.5           # fitted wins
    assert p.efficiency_for("B200") == pytest.approx(gk.measured_efficiency("Blackwell", "bf16"))
    # a chip with neither a fit nor a measurement transfers the median of the fitted
    # and the pinned (measured) dies: H100 and A100 fitted here, Blackwell measured
    assert gk.measured_efficiency("V100", "bf16") is None
    p2 = calib_fit.assemble(prior, theta, ["eff:H100", "eff:A100"])
    assert p2.efficiency_for("V100-32GB") == pytest.approx(
        np.median([0.5, 0.6, gk.measured_efficiency("Blackwell", "bf16")]))


def test_the_h100_die_takes_its_sustained_measurement_in_16_bits_and_fp8():
    """The 16-bit and FP8 efficiencies of every GH100 device are the back-to-back H200
    run's curves (own_h200: the only source timed as training queues GEMMs, at the
    power-limited clock), not fits and not the median with the boost-clock sources (FP8
    pinned since Transformer Engine's casts are priced: cost/fp8_casts.py)."""
    own = gk.fit_curve([r for r in gk.rows() if r.source == "own_h200" and r.dtype == "bf16"])
    assert gk.sustained_sources("H100", "bf16") == ["own_h200"]
    assert gk.sustained_efficiency("H100", "bf16") == pytest.approx(own.eff_max)
    assert gk.measured_efficiency("H100", "bf16") == pytest.approx(own.eff_max)
    assert gk.sustained_efficiency("Blackwell", "bf16") is None       # XLA's kernel times only
    p = default_params()
    for dev in calib_fit.CHIP_GROUPS["H100"]:
        assert p.efficiency_for(dev) == pytest.approx(own.eff_max, abs=1e-6), dev
    assert calib_fit.measurement_pins("eff:H100") == pytest.approx(own.eff_max)
    own8 = gk.fit_curve([r for r in gk.rows() if r.source == "own_h200" and r.dtype == "fp8"])
    assert calib_fit.measurement_pins("fp8:H100") == pytest.approx(own8.eff_max)
    for dev in calib_fit.CHIP_GROUPS["H100"]:
        assert p.efficiency_for(dev, fp8=True) == pytest.approx(own8.eff_max, abs=1e-6), dev
    assert calib_fit.measurement_pins("eff:A100") is None
    # a die only a (non-sustained) microbenchmark measures is pinned to it too, even where
    # runs use it (the GB200 rows of the held-out file, in the fits over both files)
    assert calib_fit.measurement_pins("eff:Blackwell") == pytest.approx(
        gk.measured_efficiency("Blackwell", "bf16"))
    assert calib_fit.measurement_pins("fp8:Blackwell") == pytest.approx(
        gk.measured_efficiency("Blackwell", "fp8"))


def test_the_fit_frees_a_pinned_efficiency_only_when_asked():
    from autopar_opt.calibration.calibrate import load_run_file, model_records
    from pathlib import Path

    runs, _ = model_records(load_run_file(Path(__file__).resolve().parents[2] / "data"
                                          / "published_runs.yaml"))
    runs = [r for r in runs if not r.memory_only]
    assert any(r.cluster.device.name in calib_fit.CHIP_GROUPS["H100"] for r in runs)
    assert not calib_fit._used("eff:H100", runs)
    assert calib_fit._used("eff:H100", runs, frozenset({"eff:H100"}))
    assert calib_fit._used("eff:A100", runs) and not calib_fit._used("fp8:H100", runs)
    assert calib_fit._used("fp8:H100", runs, frozenset({"fp8:H100"}))


def test_own_h200_rows_are_the_measurement_file():
    """Oracle: benchmarks/kernels/h200_results.json, one row per measured (shape, layout,
    dtype), speed to the 0.01 TFLOP/s the data file keeps."""
    import json
    from pathlib import Path

    raw = json.loads((Path(__file__).resolve().parents[3] / "benchmarks" / "kernels"
                      / "h200_results.json").read_text())["gemm"]
    measured = sorted((r["dtype"], 2.0 * r["m"] * r["n"] * r["k"], round(r["tflops"], 2))
                      for r in raw if "tflops" in r)
    table = sorted((r.dtype, r.flops, round(r.flops / r.seconds / 1e12, 2))
                   for r in gk.rows() if r.source == "own_h200")
    assert len(table) == len(measured) == 556
    for (d1, f1, t1), (d2, f2, t2) in zip(measured, table):
        assert d1 == d2 and f1 == f2 and t1 == pytest.approx(t2, abs=0.006)
