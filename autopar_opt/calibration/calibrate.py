"""Run a whole record file through the cost model; fit; cross-validate.

:func:`calibrate_file` is the library entry point behind ``autopar calibrate``:
it reads the file, models what it can (listing every other record with its
reason), compares predicted and measured throughput and summarises. Records
that publish memory but no throughput are compared on memory alone
(``memory_only``): they count for the memory statistics and the memory fit,
never for the throughput statistics or leave-one-family-out. With
``fit`` it fits the physical parameters first; with ``cross_validate`` it
fits on all source families but one and predicts the one left out, for every
family (leave-one-family-out, the out-of-sample figure). :func:`write_params`
writes fitted parameters to a file the user names (a spec's ``cost_model:``
can point at it); nothing here writes into the installed package.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.compare import (Comparison, MemoryComparison, compare,
                                             compare_memory, summarize)
from autopar_opt.calibration.fit import FitResult, fit
from autopar_opt.calibration.modeled import ModeledRun
from autopar_opt.calibration.ranking import (Group, group_dict, rank_groups,
                                             summary as ranking_summary)
from autopar_opt.calibration.reading import Unmodelable, load_run_file, read_record
from autopar_opt.cost.params import CostParams, default_params
from autopar_opt.cost.evaluate import PlanError


@dataclass
class FamilyResult:
    """One held-out family of leave-one-family-out validation."""

    family: str
    trained_on: int
    comparisons: list[Comparison]
    at_bound: list[str]

    def summary(self) -> dict:
        return summarize(self.comparisons, len(self.comparisons))


@dataclass
class CalibrationReport:
    """Everything ``autopar calibrate`` prints."""

    path: str
    comparisons: list[Comparison]
    skipped: list[tuple[str, str]]
    total: int
    params: CostParams
    fit: FitResult | None = None
    cross_validation: list[FamilyResult] = field(default_factory=list)
    memory_only: list[MemoryComparison] = field(default_factory=list)
    #: families the cross-validation did not reach within the time limit
    families_left_out: list[str] = field(default_factory=list)
    #: jobs of the file with two or more layouts, ranked with ``params``
    #: (:mod:`autopar_opt.calibration.ranking`), and with the cross-validation's
    #: out-of-sample predictions where it ran
    ranking: list[Group] = field(default_factory=list)
    ranking_out_of_sample: list[Group] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Whether the fit converged and every family was validated (the time limit cut
        neither)."""
        return ((self.fit is None or self.fit.converged) and not self.families_left_out
                and not self.not_reached)

    @property
    def not_reached(self) -> list[str]:
        """Records the time limit left unmodeled or unpriced."""
        return [rid for rid, why in self.skipped if why == NOT_REACHED]

    def lofo_comparisons(self) -> list[Comparison]:
        return [c for fam in self.cross_validation for c in fam.comparisons]

    def summary(self) -> dict:
        out = summarize(self.comparisons, self.total, self.memory_only)
        if self.cross_validation:
            errs = np.array([abs(c.rel_error) for c in self.lofo_comparisons()])
            out["lofo_median_abs_rel_error"] = float(np.percentile(errs, 50)) if errs.size else None
            out["lofo_p90_abs_rel_error"] = float(np.percentile(errs, 90)) if errs.size else None
            out["lofo_max_abs_rel_error"] = float(errs.max()) if errs.size else None
        return out

    def to_dict(self) -> dict:
        records = [c.to_dict() for c in self.comparisons]
        records += [m.to_dict() for m in self.memory_only]
        records += [{"id": rid, "skipped": why} for rid, why in self.skipped]
        out = {"records": records, "summary": self.summary(), "file": self.path,
               "params": self.params.to_dict()}
        if self.fit is not None:
            out["fit"] = {"free": self.fit.free, "at_bound": self.fit.at_bound,
                          "sum_sq_log_error": self.fit.sum_sq_log_error,
                          "robust_cost": self.fit.robust_cost, "nfev": self.fit.nfev,
                          "converged": self.fit.converged, "message": self.fit.message}
        if self.families_left_out:
            out["families_left_out"] = list(self.families_left_out)
        for key, groups in (("ranking", self.ranking),
                            ("ranking_out_of_sample", self.ranking_out_of_sample)):
            if groups:
                out[key] = {"summary": ranking_summary(groups),
                            "groups": [group_dict(g) for g in groups]}
        if self.cross_validation:
            out["cross_validation"] = {
                "by": "family",
                "families": [{"family": f.family, "trained_on": f.trained_on,
                              "at_bound": f.at_bound, "summary": f.summary(),
                              "records": [c.to_dict() for c in f.comparisons]}
                             for f in self.cross_validation]}
        return out


#: Why a record is skipped when the time limit ran out before it was modeled or priced.
NOT_REACHED = "not reached within the time limit"


def _past(deadline: float | None) -> bool:
    import time

    return deadline is not None and time.perf_counter() > deadline


def model_records(records: list[dict], deadline: float | None = None
                  ) -> tuple[list[ModeledRun], list[tuple[str, str]]]:
    """(modeled runs, [(id, reason)] of the records that cannot be modeled, or that the
    ``deadline`` did not reach)."""
    runs, skipped = [], []
    for rec in records:
        if _past(deadline):
            skipped.append((str(rec["id"]), NOT_REACHED))
            continue
        try:
            runs.append(build_run(read_record(rec)))
        except KeyError as exc:        # e.g. a dtype the device has no peak for
            skipped.append((str(rec["id"]), str(exc.args[0]) if exc.args else "KeyError"))
        except (Unmodelable, PlanError, ValueError) as exc:
            skipped.append((str(rec["id"]), str(exc)))
    return runs, skipped


def calibrate_file(path: str | Path, params: CostParams | None = None, do_fit: bool = False,
                   cross_validate: bool = False, deadline: float | None = None
                   ) -> CalibrationReport:
    """Model, (optionally fit and cross-validate) and compare every record of ``path``.

    Raises :class:`~autopar_opt.calibration.reading.errors.RunFileError` for a file
    that is not a list of records with ids. ``deadline`` (``time.perf_counter()``):
    the fit and the cross-validation stop there (:attr:`CalibrationReport.complete`).
    """
    records = load_run_file(path)
    runs, skipped = model_records(records, deadline)
    result = None
    prior = params or CostParams()
    if do_fit and runs:
        result = fit(runs, prior, deadline=deadline)
        params = result.params if result.converged else None
    params = params or default_params()
    comparisons, memory_only = [], []
    for run in runs:
        if _past(deadline):
            skipped.append((run.id, NOT_REACHED))
            continue
        try:
            if run.memory_only:
                memory_only.append(compare_memory(run, params))
            else:
                comparisons.append(compare(run, params))
        except (PlanError, ValueError, ZeroDivisionError) as exc:
            skipped.append((run.id, f"cannot price the plan: {exc}"))
    priced = {c.id for c in comparisons} | {m.id for m in memory_only}
    runs = [r for r in runs if r.id in priced]
    cv, left_out = leave_one_family_out(runs, prior, deadline) if cross_validate else ([], [])
    ranking = rank_groups(str(path), records, runs, {c.id: c for c in comparisons})
    oos = rank_groups(str(path), records, runs, {c.id: c for f in cv for c in f.comparisons}) \
        if cv and not left_out else []
    return CalibrationReport(str(path), comparisons, skipped, len(records), params, result, cv,
                             memory_only, left_out, ranking, oos)


def leave_one_family_out(runs: list[ModeledRun], prior: CostParams | None = None,
                         deadline: float | None = None
                         ) -> tuple[list[FamilyResult], list[str]]:
    """For every source family with a measured throughput: fit on the others
    (their memory-only records feed the memory fit), predict its throughput.

    Returns the families validated and those the ``deadline`` left out (a family whose
    fit the deadline cut is left out too: a half-fitted prediction would not be
    out-of-sample evidence)."""
    import time

    out, left_out = [], []
    for family in sorted({r.family for r in runs if not r.memory_only}):
        train = [r for r in runs if r.family != family]
        test = [r for r in runs if r.family == family and not r.memory_only]
        if not any(not r.memory_only for r in train):
            continue
        if deadline is not None and time.perf_counter() > deadline:
            left_out.append(family)
            continue
        res = fit(train, prior or CostParams(), deadline=deadline)
        if not res.converged:
            left_out.append(family)
            continue
        out.append(FamilyResult(family, len(train), [compare(r, res.params) for r in test],
                                res.at_bound))
    return out, left_out


def write_params(report: CalibrationReport, target: str | Path) -> Path:
    """Write the fitted parameters with provenance (date, file hash, objective,
    statistics, parameters at a bound) to ``target``; a spec's ``cost_model:``
    may name the file. Raises ValueError without a fit, OSError when the file
    cannot be written."""
    if report.fit is None:
        raise ValueError("no fit to write (run with fit enabled)")
    digest = hashlib.sha256(Path(report.path).read_bytes()).hexdigest()
    doc = {
        "fitted_on": _dt.date.today().isoformat(),
        "records_file": Path(report.path).name,
        "records_sha256": digest,
        "objective": "soft-L1 (scale 0.1) least squares on log(predicted/measured samples/s); "
                     + ("memory: least squares on published per-GPU memory, every other "
                        "published plan must fit (censored at its GPU memory)"
                        if report.fit.memory_records >= 2 else
                        # QA round 11: said so when no memory was fitted
                        "memory: not fitted (fewer than two records publish device or reserved "
                        "memory): the shipped memory_reserve_gib and memory_fragmentation"),
        "sum_sq_log_error": round(report.fit.sum_sq_log_error, 6),
        "free_parameters": report.fit.free,
        "at_bound": report.fit.at_bound,
        "statistics": {k: (round(v, 6) if isinstance(v, float) else v)
                       for k, v in report.summary().items()},
        "params": _rounded(report.params.to_dict()),
    }
    target = Path(target)
    text = ("# Written by `autopar calibrate --fit --output`; a spec's `cost_model:` can name "
            "this file.\n" + yaml.safe_dump(doc, sort_keys=False))
    from autopar_opt.core.files import write_atomic

    write_atomic(target, text)    # the shared writer: nothing half-written or left behind
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
