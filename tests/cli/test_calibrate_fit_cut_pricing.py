"""A fit that converged while the time limit cut the pricing of its records writes no file:
the file carries the statistics of that pricing (QA round 11: ``--time-limit 2`` on seven
records wrote a fit with ``modeled: 0`` statistics, said "5 parameters fitted on 0 record(s):
under-determined", and exited 4)."""

from __future__ import annotations

from autopar_opt.calibration import calibrate as calibration
from autopar_opt.cli import calibrate as command
from support.runs import tiny_record, write_runs


def test_no_fit_file_when_its_records_were_not_priced(tmp_path, monkeypatch, capsys):
    runs = write_runs(tmp_path, [tiny_record(), dict(tiny_record(measured__iteration_time_s=2e-3),
                                                      id="r2")])
    report = calibration.calibrate_file(runs, do_fit=True)
    assert report.fit is not None and report.fit.converged and len(report.comparisons) == 2
    # what the time limit leaves when it runs out after the fit, before the pricing
    report.skipped.extend((c.id, calibration.NOT_REACHED) for c in report.comparisons)
    report.comparisons.clear()
    monkeypatch.setattr(command, "calibrate_file", lambda *a, **k: report)
    out = tmp_path / "fit.yaml"
    code = command.calibrate_command(str(runs), json_output=False, fit=True, output=str(out),
                                     time_limit_s=5.0)
    err = capsys.readouterr().err
    assert code == command.EXIT_INCOMPLETE and not out.exists()
    assert "the fit converged but the time ran out before 2 of its record(s)" in err
