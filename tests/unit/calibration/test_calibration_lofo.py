"""Out-of-sample validation of the cost model (issue 10, point 6).

Leave-one-family-out over the vendored published runs
(``tests/data/published_runs.yaml``, a copy of ``shared/calibration``): for
every source family, fit the physical parameters on the other families and
predict the held-out one. The recorded figures are in
``benchmarks/calibration/RESULTS.md``; this test fails when a change makes the
out-of-sample error worse than recorded.

Targets of the issue: median |err| <= 10%, p90 <= 25%. Recorded (v2 model,
after the Megatron-Bridge / FP8 / memory corrections of the third session):
median 9.7% (target met: asserted at the target), p90 26.5% (target missed by
1.5 points: asserted at the recorded figure plus 1.5 points of slack for fit
round-off, so a regression still fails). Fourth session (CPU activation offload,
fp32 FSDP gradient reduction): median 9.7%, p90 26.5%, unchanged. Ninth session
(llm-foundry's 2023 tables priced with their FlashAttention-1-class Triton
kernel, runtime ``flash_v2_attention``): median 9.9% -> 8.6%, p90 26.9% -> 25.2%;
the median stays asserted at the target, the p90 bound moves to the recorded
25.2% plus the same 1.5 points of slack (was 26.5% + 1.5). Ninth session, GEMMs
priced per kernel (``compute.GEMM_KERNELS``): median 9.6%, p90 23.2%, both
targets met and both asserted at the target. Sixteenth session (KempnerForge's
FSDP2 runs priced with the gradient sync their trainer turns off until the last
micro-batch, one fp32 reduce-scatter per iteration instead of one per
micro-batch, and their replicated output logits): median 9.2%, p90 25.6%: the
KempnerForge 70B rows, which the extra reduce-scatters had priced within 2-6%,
are now 25-27% too fast, and the H100 efficiency fitted beside them falls from
0.710 to 0.683; the p90 target is missed by 0.6 points and asserted at the
recorded figure plus the same 1.5 points of slack. Twenty-eighth session
(KempnerForge's attention read as cuDNN on Hopper): median 8.8%, p90 26.1%
(``calibrated.yaml``), inside that bound; 8.7% / 26.1% at the thirty-third.
Thirty-fourth session (FSDP2's copies around its collectives priced on the compute
stream, ``cost/fsdp_copies.py``): median 8.4%, p90 24.2%: both targets met again and
both asserted at the target. Memory-only
records (memory published, no throughput) are not predicted out of sample.
"""

from __future__ import annotations


from autopar_opt.calibration.calibrate import calibrate_file
from support import paths

RUNS = paths.DATA / "published_runs.yaml"
#: The issue's targets, both met (module docstring).
LOFO_MEDIAN_MAX = 0.10
LOFO_P90_MAX = 0.25


def test_leave_one_family_out_tolerance():
    report = calibrate_file(RUNS, cross_validate=True)
    s = report.summary()
    families = {f.family for f in report.cross_validation}
    assert families == {c.family for c in report.comparisons}     # every family held out once
    assert len(report.lofo_comparisons()) == s["throughput_compared"]   # every throughput record
    assert not {c.id for c in report.lofo_comparisons()} & {m.id for m in report.memory_only}
    assert s["lofo_median_abs_rel_error"] <= LOFO_MEDIAN_MAX
    assert s["lofo_p90_abs_rel_error"] <= LOFO_P90_MAX
