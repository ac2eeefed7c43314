"""Issue 28's targets, leave-one-group-out by regime over both record files.

The fits are ``benchmarks/calibration/intervals.py``'s (one per left-out
group: minutes, so not repeated here); its output ``autopar_opt/cost/intervals.yaml``
holds every run's out-of-sample residual and the parameters of every fit.
These tests

* re-derive every residual: each run priced with the parameters of the fit
  that left its group out (oracle: the calibration's own ``compare``), so the
  file is what the script computes, for the record files as they are now
  (their hashes: ``tests/unit/cost/test_interval.py``) and the cost model as it
  is now;
* hold every group of at least 5 runs to the targets (median |error| <= 10%,
  p90 <= 25%) and the 80% intervals to their coverage (>= 80% of left-out
  runs, per group and overall). A target the model misses today is an
  ``xfail(strict=True)`` naming the measured figure (``REGIMES.md`` records
  them all): it is reported, not weakened, and the mark must go when the
  model meets it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from autopar_opt.calibration.calibrate import model_records
from autopar_opt.calibration.compare import compare
from autopar_opt.calibration.reading import load_run_file
from autopar_opt.cost.interval import DEFAULT_FILE, LEVEL, interval_for, load_residuals
from autopar_opt.cost.params import CostParams
from support import paths

FILES = (paths.DATA / "published_runs.yaml",
         paths.REPO / "benchmarks" / "calibration" / "holdout_runs.yaml")
DOC = yaml.safe_load(DEFAULT_FILE.read_text())
GROUP_MIN = 5

#: Targets missed today (measured by intervals.py; REGIMES.md): group -> figure.
MISSED_ACCURACY = {
    "family:bloom": "median 8.6%, p90 39.5%",
    "family:dsazure2022": "median 5.4%, p90 143.2%",
    "family:flagperf": "median 11.8%, p90 24.7%",
    "family:kempnerforge": "median 15.1%, p90 19.9%",
    "family:kfcv2026": "median 23.5%, p90 33.0%",
    "family:llmfoundry": "median 10.0%, p90 20.7%",
    "family:llmfoundry2024": "median 13.3%, p90 21.3%",
    "family:moezoo": "median 7.5%, p90 29.2%",
    "family:xtuner2024": "median 8.4%, p90 29.3%",
    "fp8:true": "median 21.0%, p90 23.1%",
    "framework:deepspeed": "median 12.1%, p90 41.1%",
    "framework:fsdp": "median 10.6%, p90 24.5%",
    "framework:megatron": "median 10.4%, p90 21.3%",
    "generation:hopper": "median 12.1%, p90 33.0%",
    "moe:true": "median 7.8%, p90 43.3%",
    "sharded_at_scale:true": "median 7.3%, p90 69.3%",
}
MISSED_COVERAGE = {
    "family:bloom": "67% of 9",
    "family:dsazure2022": "67% of 9",
    "family:flagperf": "76% of 21",
    "long_context:true": "77% of 13",
    "sharded_at_scale:true": "78% of 18",
}


def _group_errors() -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for run in DOC["runs"]:
        for group, res in run["residuals"].items():
            out.setdefault(group, []).append(math.expm1(res))
    return out


GROUPS = _group_errors()
HELD = sorted(g for g, errs in GROUPS.items() if len(errs) >= GROUP_MIN)


def _marked(groups, missed):
    return [pytest.param(g, marks=pytest.mark.xfail(strict=True, reason=f"missed: {missed[g]}"))
            if g in missed else g for g in groups]


def test_every_residual_is_the_fit_without_its_group():
    runs = {}
    for path in FILES:
        runs.update({r.id: r for r in model_records(load_run_file(path))[0]})
    fits = {g: CostParams.from_dict(p) for g, p in DOC["fits"].items()}
    checked = 0
    for entry in DOC["runs"]:
        run = runs[entry["id"]]
        for group, res in entry["residuals"].items():
            assert math.log1p(compare(run, fits[group]).rel_error) == pytest.approx(res, abs=2e-6), \
                (entry["id"], group)
            checked += 1
        assert entry["residual"] == max(entry["residuals"].values(), key=abs)
    assert checked >= 3 * len(DOC["runs"])      # its family, framework and generation at least
    # every throughput run of both files is in the file, once
    assert sorted(e["id"] for e in DOC["runs"]) == sorted(i for i, r in runs.items()
                                                          if not r.memory_only)


def test_the_groups_cover_the_regimes_of_issue_28():
    kinds = {g.split(":")[0] for g in GROUPS}
    assert {"family", "framework", "generation", "long_context", "sharded_at_scale",
            "fp8", "moe"} <= kinds
    assert len(HELD) >= 10
    # the regimes issue 28 names that now hold >= 5 runs each get their target test
    assert {"long_context:true", "fp8:true", "moe:true"} <= set(HELD)


@pytest.mark.parametrize("group", _marked(HELD, MISSED_ACCURACY))
def test_group_meets_the_accuracy_targets(group):
    errs = np.abs(GROUPS[group])
    assert np.percentile(errs, 50) <= 0.10 and np.percentile(errs, 90) <= 0.25


def test_leave_one_family_out_over_both_files():
    """Median <= 10% and p90 <= 25%, both met (7.6% / 24.2% with the CARAML GH200 record, 7.3% /
    24.3% before it; 26.3% before the vocabulary
    layers KempnerForge leaves whole on every tensor-parallel rank, torch pipelining's
    reduce-scatters after the schedule and InternEvo's per-rank parameter broadcasts were
    priced, 27.0% before FSDP2's copies, 27.4%
    before the Megatron-LM 2022-23 records stated their asynchronous all-reduce). The
    largest errors: the DeepSpeed-on-Azure ZeRO-3 rows at micro-batch 1 and 4, +40% to
    +206% too fast; KempnerForge's 70B rows and pipeline rows, 17-37% too fast;
    FlagPerf's and BLOOM's rows. Asserted at the targets."""
    errs = np.abs([e for g, v in GROUPS.items() if g.startswith("family:") for e in v])
    assert len(errs) == len(DOC["runs"])
    assert np.percentile(errs, 50) <= 0.10 and np.percentile(errs, 90) <= 0.25


def _covered() -> dict[str, list[bool]]:
    """Does each run's 80% interval, taken without its own source family, cover
    its out-of-sample residual? Against the leave-own-family-out residual
    ('all', and per source family) and, per regime group, against the residual
    of the fit that left the group out."""
    from autopar_opt.cost.regime import Regime

    pool = load_residuals()
    out: dict[str, list[bool]] = {}
    for r in pool:
        lab = r.labels
        reg = Regime(lab["framework"], lab["long_context"] == "true",
                     lab["sharded_at_scale"] == "true", lab["fp8"] == "true",
                     lab["moe"] == "true", lab["generation"])
        iv = interval_for(reg, 1.0, runs=pool, exclude_family=r.family)
        lo, hi = math.log(iv.low), math.log(iv.high)
        own = lo <= r.residuals[f"family:{r.family}"] <= hi
        out.setdefault("all", []).append(own)
        out.setdefault(f"family:{r.family}", []).append(own)
        for g, res in r.residuals.items():
            if not g.startswith("family:"):
                out.setdefault(g, []).append(lo <= res <= hi)
    return out


COVERED = _covered()


#: Met again since each run contributes the range of its out-of-sample residuals
#: (cost/interval.py): 86.5% of 193 (85.8% of 190 in session 18, 88.6% of 175 in session 17; 65.1% when each run kept only its largest-magnitude
#: residual, whose sign could disagree with the family residual judged here).
def test_interval_coverage_overall():
    hits = COVERED["all"]
    assert len(hits) == len(DOC["runs"]) and np.mean(hits) >= LEVEL


@pytest.mark.parametrize("group", _marked(HELD, MISSED_COVERAGE))
def test_interval_coverage_per_group(group):
    assert len(COVERED[group]) == len(GROUPS[group])
    assert np.mean(COVERED[group]) >= LEVEL


@pytest.mark.slow
def test_a_stored_fit_is_the_fit_without_its_group():
    """Refit one group's leave-out (the smallest: one fit of the ~24) and find
    the stored parameters (oracle: the calibration's own ``fit``)."""
    from autopar_opt.calibration.fit import fit

    group = min(DOC["fits"], key=lambda g: (len(GROUPS[g]), g))
    left_out = {e["id"] for e in DOC["runs"] if group in e["residuals"]}
    runs = [r for path in FILES for r in model_records(load_run_file(path))[0]]
    params = fit([r for r in runs if r.id not in left_out], CostParams()).params.to_dict()
    stored = DOC["fits"][group]
    assert params.keys() == stored.keys()
    for key, value in stored.items():
        assert params[key] == pytest.approx(value, rel=1e-6), key
