"""Run a whole record file through the cost model; write ``calibrated.yaml``.

:func:`calibrate_file` is the library entry point behind ``autopar calibrate``:
it reads the file, models what it can (listing every other record with its
reason), compares predicted and measured throughput and summarises.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from dataclasses import dataclass
from pathlib import Path

import yaml

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.compare import Comparison, compare, summarize
from autopar_opt.calibration.fit import FitResult, fit
from autopar_opt.calibration.records import ModeledRun, Unmodelable, load_run_file
from autopar_opt.cost.params import CostParams, default_params
from autopar_opt.evaluate import PlanError

#: Where ``default_params()`` reads the fitted parameters from.
CALIBRATED_PATH = Path(__file__).resolve().parent.parent / "cost" / "calibrated.yaml"


@dataclass
class CalibrationReport:
    """Everything ``autopar calibrate`` prints."""

    path: str
    comparisons: list[Comparison]
    skipped: list[tuple[str, str]]
    total: int
    params: CostParams
    factors: dict[str, float]
    fit: FitResult | None = None

    def summary(self) -> dict:
        return summarize(self.comparisons, self.total)

    def to_dict(self) -> dict:
        records = [c.to_dict() for c in self.comparisons]
        records += [{"id": rid, "skipped": why} for rid, why in self.skipped]
        out = {"records": records, "summary": self.summary(), "file": self.path,
               "params": self.params.to_dict(), "framework_factors": dict(self.factors)}
        if self.fit is not None:
            out["fit"] = {"free": self.fit.free, "sum_sq_log_error": self.fit.sum_sq_log_error,
                          "robust_cost": self.fit.robust_cost, "nfev": self.fit.nfev}
        return out


def stored_factors() -> dict[str, float]:
    """Software-stack factors written by the last ``--fit`` (empty if none)."""
    try:
        data = yaml.safe_load(CALIBRATED_PATH.read_text()) or {}
    except OSError:
        return {}
    return {str(k): float(v) for k, v in (data.get("framework_factors") or {}).items()}


def model_records(records: list[dict]) -> tuple[list[ModeledRun], list[tuple[str, str]]]:
    """(modeled runs, [(id, reason)] of the records that cannot be modeled)."""
    runs, skipped = [], []
    for rec in records:
        try:
            runs.append(build_run(rec))
        except KeyError as exc:        # e.g. a dtype the device has no peak for
            skipped.append((str(rec["id"]), str(exc.args[0]) if exc.args else "KeyError"))
        except (Unmodelable, PlanError, ValueError) as exc:
            skipped.append((str(rec["id"]), str(exc)))
    return runs, skipped


def calibrate_file(path: str | Path, params: CostParams | None = None,
                   factors: dict[str, float] | None = None, do_fit: bool = False
                   ) -> CalibrationReport:
    """Model, (optionally fit) and compare every record of ``path``.

    Raises :class:`~autopar_opt.calibration.records.RunFileError` for a file
    that is not a list of records with ids.
    """
    records = load_run_file(path)
    runs, skipped = model_records(records)
    result = None
    if do_fit and runs:
        result = fit(runs, params or CostParams())
        params, factors = result.params, result.factors
    params = params or default_params()
    factors = stored_factors() if factors is None else factors
    comparisons = []
    for run in runs:
        try:
            comparisons.append(compare(run, params, factors))
        except (PlanError, ValueError, ZeroDivisionError) as exc:
            skipped.append((run.id, f"cannot price the plan: {exc}"))
    return CalibrationReport(str(path), comparisons, skipped, len(records), params,
                             factors, result)


def write_calibrated(report: CalibrationReport, target: Path = CALIBRATED_PATH) -> Path:
    """Write the fitted parameters with provenance (date, file hash, objective, stats)."""
    if report.fit is None:
        raise ValueError("no fit to write (run with fit enabled)")
    digest = hashlib.sha256(Path(report.path).read_bytes()).hexdigest()
    doc = {
        "fitted_on": _dt.date.today().isoformat(),
        "records_file": Path(report.path).name,
        "records_sha256": digest,
        "objective": "soft-L1 (scale 0.1) least squares on log(predicted/measured samples/s)",
        "sum_sq_log_error": round(report.fit.sum_sq_log_error, 6),
        "free_parameters": report.fit.free,
        "statistics": {k: (round(v, 6) if isinstance(v, float) else v)
                       for k, v in report.summary().items()},
        "framework_factors": {k: round(v, 6) for k, v in report.factors.items()},
        "notes": "params are for Megatron-LM-class kernels (factor 1); H200 shares the H100 "
                 "efficiency (same GH100 die); B200 keeps its prior (no records).",
        "params": _rounded(report.params.to_dict()),
    }
    target.write_text("# Written by `autopar calibrate --fit`; read by cost.params.default_params().\n"
                      + yaml.safe_dump(doc, sort_keys=False))
    return target


def _rounded(d: dict) -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out[k] = _rounded(v)
        elif isinstance(v, float):
            out[k] = round(v, 6)
        else:
            out[k] = v
    return out
