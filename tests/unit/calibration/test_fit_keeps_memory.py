"""A fit on records that publish no memory (fewer than two) keeps the shipped memory
parameters: the reserve pinned at the one measured on a GPU, the fragmentation fitted on the
published runs (QA round 11: ``calibrate --fit`` on seven throughput-only records wrote
``memory_reserve_gib: 2.0`` and ``memory_fragmentation: 0.05``, the dataclass defaults, and
every memory prediction of the fitted table moved, e.g. 78.3 -> 77.3 GiB)."""

from __future__ import annotations

import pytest
import yaml

from autopar_opt.calibration.calibrate import calibrate_file, write_params
from autopar_opt.cost.params import MEASURED_RESERVE_GIB, default_params
from support.runs import tiny_record, write_runs


def test_a_fit_without_memory_records_keeps_the_shipped_memory_parameters(tmp_path):
    recs = [tiny_record(), dict(tiny_record(measured__iteration_time_s=2e-3), id="r2")]
    plain = calibrate_file(write_runs(tmp_path, recs))
    report = calibrate_file(write_runs(tmp_path, recs), do_fit=True)
    assert report.fit is not None and report.fit.converged
    shipped = default_params()
    assert report.params.memory_reserve_gib == MEASURED_RESERVE_GIB == 0.763
    assert report.params.memory_fragmentation == shipped.memory_fragmentation
    # the memory predictions of the fitted table are those of the shipped parameters
    for a, b in zip(plain.comparisons, report.comparisons):
        assert b.predicted_memory_gib == pytest.approx(a.predicted_memory_gib, rel=1e-9)
    written = yaml.safe_load(write_params(report, tmp_path / "fit.yaml").read_text())["params"]
    assert written["memory_reserve_gib"] == 0.763
    assert written["memory_fragmentation"] == pytest.approx(shipped.memory_fragmentation, abs=1e-6)


def test_the_written_fit_says_whether_memory_was_fitted(tmp_path):
    """Its objective claimed a memory fit whatever the file held (QA round 11)."""
    base = [tiny_record(), dict(tiny_record(measured__iteration_time_s=2e-3), id="r2")]
    report = calibrate_file(write_runs(tmp_path, base), do_fit=True)
    text = yaml.safe_load(write_params(report, tmp_path / "a.yaml").read_text())["objective"]
    assert "memory: not fitted (fewer than two records publish" in text
    with_memory = [dict(tiny_record(measured__iteration_time_s=None,
                                    measured__memory_gib_per_gpu=m), id=f"m{i}")
                   for i, m in enumerate((2.0, 2.5))]
    report = calibrate_file(write_runs(tmp_path, base + with_memory), do_fit=True)
    assert report.fit.memory_records == 2
    text = yaml.safe_load(write_params(report, tmp_path / "b.yaml").read_text())["objective"]
    assert "memory: least squares on published per-GPU memory" in text
