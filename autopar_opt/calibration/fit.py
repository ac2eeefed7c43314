"""Fit the physical cost-model parameters to published runs.

Objective: robust least squares on ``r_j = log(predicted_j / measured_j)``
(scipy ``least_squares``, ``soft_l1`` loss with scale 0.1: quadratic for
errors below ~10%, linear above), stopped when an iteration changes the
cost or the parameters by less than 0.1% (``ftol = xtol = 1e-3``: finer
than the records' own rounding, and it keeps leave-one-family-out fast
enough for the test suite). Every parameter is a physical quantity
kept inside its documented range (:data:`autopar_opt.cost.params.RANGES`,
:data:`~autopar_opt.cost.params.EFFICIENCY_RANGE`); one that ends on a bound
is listed in :attr:`FitResult.at_bound` (a sign of missing physics, reported,
not hidden). There are no per-framework factors: the runtime is a setting.

Throughput parameters:

* ``eff:<chip>`` – large-GEMM efficiency of a compute die in 16-bit (A100
  40/80 GB and the A800, the same GA100 die with fewer NVLinks, share one, H100/H200 share the GH100 die, B200/GB200 the
  Blackwell die);
* ``fp8:<chip>`` – the same in FP8 against the FP8 peak;
* ``efficiency_half_us``, ``elementwise_passes``, ``iteration_overhead_s``
  (``comm_efficiency`` and ``inter_comm_efficiency`` are pinned by nccl-tests
  figures, not fitted: issue 28, point 2, ``cost/params.py``; the attention
  kernels' efficiencies are published microbenchmarks, read from
  ``cost/data/attention_kernels.yaml``, point 1;
  ``optimizer_bytes_per_param`` stays at the measured fused-Adam 36: fitted,
  it went to its lower bound 28; ``layer_overhead_us`` stays at its prior 0:
  kernels are queued asynchronously, launch latency overlaps the previous
  kernel; ``comm_interference`` is pinned at 0.189, the measured compute
  slowdown under overlapped NCCL collectives of Lee et al. 2025, arXiv
  2507.03114: an earlier fit drove it to its lower bound, the published runs
  do not resolve it).

A die a GEMM microbenchmark measures takes that measurement's large-GEMM efficiency
instead of a fit, whether or not published runs use it (issue 28, point 1, "pin what a
microbenchmark can pin"; :func:`measurement_pins`): the H100 die the back-to-back run at
its power limit, 0.699 in 16 bits and 0.637 in FP8, from the project's own H200 run of the
zoo's GEMM shapes at 700 W (:func:`autopar_opt.cost.gemm_kernels.sustained_efficiency`;
isolated calls and traced kernels run at the boost clock a sustained load does not keep);
Blackwell OpenXLA's B200 matmul table, bf16 0.628 and FP8 0.636
(:func:`autopar_opt.cost.gemm_kernels.measured_efficiency`). FP8 is pinned since the casts,
transposes and amax reductions Transformer Engine runs around each FP8 GEMM are priced
(:mod:`autopar_opt.cost.fp8_casts`): with them priced, the FP8 efficiency fitted freely came
to 0.627, against 0.555 while they were not (the fit had absorbed them) and 0.637 measured
for the GEMM alone. Before session 18, a measured die that runs used (the GB200 rows of the
held-out file, in the fits over both files) was fitted: two MoE rows then set Blackwell at
its bound and, through the median below, every die without runs.

A chip no microbenchmark measures and no run uses takes the median of the calibrated
chips' 16-bit efficiencies (fitted or pinned); an unseen FP8 efficiency with no
measurement is that chip's 16-bit efficiency times the FP8/bf16 ratio measured on
H100 (0.61/0.71, ``benchmarks/kernels``): the physics transfers, no record of the
chip is needed. That is how leave-one-family-out validation predicts a held-out
family on new hardware. The chips the runs identify and no microbenchmark measures
(V100, A100) keep their fitted efficiencies (``benchmarks/kernels/GEMM.md`` sets them
beside the measurements).

Memory parameters: ``memory_reserve_gib`` is pinned to the memory measured outside
PyTorch's allocator on one GPU (:data:`~autopar_opt.cost.params.MEASURED_RESERVE_GIB`,
0.763 GiB: the CUDA context and the cuBLAS/cuDNN workspaces; fitted, it sat on its
lower bound); ``memory_fragmentation`` is fitted separately, by bounded least squares on the records that publish
per-GPU memory (``measured = modelled·(1 + f) + reserve`` for nvidia-smi
figures; other measures: :mod:`autopar_opt.calibration.memory`), memory-only
records included, subject to every other published plan fitting in its GPU's
memory (it ran). Memory-only records never enter the throughput fit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from autopar_opt.calibration.compare import log_residuals
from autopar_opt.calibration.memory import MEASURES, modelled_gib
from autopar_opt.calibration.modeled import ModeledRun
from autopar_opt.cost.chips import CHIP_GROUPS
from autopar_opt.cost.gemm_kernels import measured_efficiency
from autopar_opt.cost.params import EFFICIENCY_RANGE, MEASURED_RESERVE_GIB, RANGES, CostParams
from autopar_opt.ir.hardware import DEVICE_CATALOG

#: FP8 efficiency over bf16 efficiency of large GEMMs, measured on H100
#: (medians 0.614 / 0.708 of the respective dense peaks, benchmarks/kernels).
FP8_OVER_BF16 = 0.614 / 0.708
#: Scalars fitted on throughput.
SCALARS = ("efficiency_half_us", "elementwise_passes", "iteration_overhead_s")


@dataclass
class FitResult:
    """Fitted parameters and what the fit saw."""

    params: CostParams
    free: list[str]
    at_bound: list[str]
    sum_sq_log_error: float
    robust_cost: float | None
    nfev: int
    message: str
    #: False when the time limit stopped the optimiser: ``params`` are then the best
    #: point it had evaluated, not a converged fit
    converged: bool = True
    #: records whose published memory the memory fit used (:func:`fit_memory`; below two,
    #: the memory parameters are the shipped ones)
    memory_records: int = 0


def _chip_used(chip: str, runs: list[ModeledRun], fp8: bool) -> bool:
    """Whether some run trains on ``chip`` in FP8 (``fp8``) or in 16 bits: a
    chip seen only in FP8 runs takes its 16-bit efficiency by transfer (its
    output layer and attention alone cannot identify it)."""
    return any(r.cluster.device.name in CHIP_GROUPS[chip] and (r.training.dtype == "fp8") == fp8
               for r in runs)


def measurement_pins(name: str) -> float | None:
    """The microbenchmark value that pins ``name`` (``eff:<chip>`` or ``fp8:<chip>``):
    the die's measurement (:func:`~autopar_opt.cost.gemm_kernels.measured_efficiency`: the
    sustained back-to-back run where the die has one, else the median of its sources),
    whether or not published runs use the die; None where no microbenchmark measures it
    and the parameter is fitted (module docstring)."""
    kind, _, chip = name.partition(":")
    dtype = {"eff": "bf16", "fp8": "fp8"}.get(kind)
    return None if dtype is None else measured_efficiency(chip, dtype)


def _used(name: str, runs: list[ModeledRun], unpin: frozenset[str] = frozenset()) -> bool:
    """Whether the fit frees ``name``: some run depends on it and no microbenchmark
    pins it (unless ``unpin`` names it)."""
    if name not in unpin and measurement_pins(name) is not None:
        return False
    kind, _, chip = name.partition(":")
    if kind == "eff":
        return _chip_used(chip, runs, False)
    if kind == "fp8":
        return _chip_used(chip, runs, True)
    return True


def _bounds(name: str) -> tuple[float, float]:
    if ":" in name:
        return EFFICIENCY_RANGE
    lo, hi, _ = RANGES[name]
    return lo, hi


def _start(prior: CostParams) -> dict[str, float]:
    theta = {}
    for chip, devs in CHIP_GROUPS.items():
        theta[f"eff:{chip}"] = prior.efficiency_for(devs[0])
        theta[f"fp8:{chip}"] = prior.efficiency_for(devs[0], fp8=True)
    theta.update({k: float(getattr(prior, k)) for k in SCALARS})
    return theta


def assemble(prior: CostParams, theta: dict[str, float], free: list[str],
             pinned: frozenset[str] = frozenset()) -> CostParams:
    """CostParams from a parameter dictionary; chips in neither ``free`` nor ``pinned``
    (held at their ``theta`` value) take their microbenchmark or transfer from the
    fitted ones (module docstring)."""
    free = list(free) + sorted(pinned)
    fitted16 = [theta[k] for k in free if k.startswith("eff:")]
    fitted16 += [v for chip in CHIP_GROUPS if f"eff:{chip}" not in free
                 and (v := measurement_pins(f"eff:{chip}")) is not None]
    fallback16 = float(np.median(fitted16)) if fitted16 else prior.efficiency_default
    eff, fp8 = dict(prior.gemm_efficiency), dict(prior.fp8_efficiency)
    for chip, devices in CHIP_GROUPS.items():
        m16, m8 = measured_efficiency(chip, "bf16"), measured_efficiency(chip, "fp8")
        e16 = theta[f"eff:{chip}"] if f"eff:{chip}" in free else m16 or fallback16
        e8 = theta[f"fp8:{chip}"] if f"fp8:{chip}" in free else m8 or e16 * FP8_OVER_BF16
        for dev in devices:
            eff[dev] = e16
            if "fp8" in DEVICE_CATALOG[dev].peak_tflops:
                fp8[dev] = e8
    scalars = {k: theta[k] for k in SCALARS}
    return replace(prior, gemm_efficiency=eff, fp8_efficiency=fp8, efficiency_default=fallback16,
                   fp8_efficiency_default=fallback16 * FP8_OVER_BF16, **scalars)


def fit(runs: list[ModeledRun], prior: CostParams | None = None, max_nfev: int = 300,
        deadline: float | None = None, pinned: dict[str, float] | None = None,
        unpin: frozenset[str] = frozenset()) -> FitResult:
    """Fit the parameters the ``runs`` depend on; the others keep ``prior``'s
    values or transfer (module docstring). Memory parameters: :func:`fit_memory`.

    ``deadline`` (a ``time.perf_counter()`` value): past it, the next evaluation of the
    residuals stops the optimiser, and the result holds the best point evaluated so far
    with ``converged`` False. ``pinned``: parameters (``eff:<chip>``, ``fp8:<chip>`` or a
    scalar of :data:`SCALARS`) held at the given values instead of fitted (what a
    microbenchmark measures: ``benchmarks/kernels/gemm_table.py`` compares the two).
    ``unpin``: parameters a microbenchmark pins (:func:`measurement_pins`) to be
    fitted all the same (the comparison the other way round)."""
    from scipy.optimize import least_squares   # runtime dependency of --fit only

    from autopar_opt.core.deadline import PhaseDeadline, deadline_check

    if not runs:
        raise ValueError("no modeled runs to fit")
    prior = prior or CostParams()
    everything, runs = runs, [r for r in runs if not r.memory_only]
    if not runs:
        raise ValueError("no modeled run with a measured throughput to fit")
    theta0 = _start(prior)
    pinned = dict(pinned or {})
    unknown = set(pinned) - set(theta0)
    if unknown:
        raise ValueError(f"cannot pin {sorted(unknown)}: not a fitted parameter ({sorted(theta0)})")
    theta0.update(pinned)
    free = [k for k in theta0 if _used(k, runs, frozenset(unpin)) and k not in pinned]
    lo = np.array([_bounds(k)[0] for k in free])
    hi = np.array([_bounds(k)[1] for k in free])
    x0 = np.clip(np.array([theta0[k] for k in free]), lo + 1e-6 * (hi - lo), hi - 1e-6 * (hi - lo))

    def params_at(x: np.ndarray) -> CostParams:
        theta = dict(theta0)
        theta.update(zip(free, (float(v) for v in x)))
        return assemble(prior, theta, free, frozenset(pinned))

    check = deadline_check(deadline)
    best: dict = {"x": x0, "cost": np.inf, "nfev": 0}

    def residuals(x: np.ndarray) -> np.ndarray:
        check()
        r = log_residuals(runs, params_at(x))
        best["nfev"] += 1
        cost = float(np.sum(r * r))
        if cost < best["cost"]:
            best.update(x=np.array(x, dtype=float), cost=cost)
        return r

    try:
        sol = least_squares(residuals, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.1,
                            x_scale=np.maximum(hi - lo, 1e-3) * 0.1, max_nfev=max_nfev,
                            ftol=1e-3, xtol=1e-3)
        x, robust, message = sol.x, float(sol.cost), str(sol.message)
    except PhaseDeadline:          # no further pricing: the caller writes nothing of it
        message = f"stopped at the time limit after {best['nfev']} evaluations"
        return FitResult(params_at(best["x"]), free, [], best["cost"], None, int(best["nfev"]),
                         message, converged=False)
    r = log_residuals(runs, params_at(x))
    span = hi - lo
    at_bound = [k for k, v, a, b, w in zip(free, x, lo, hi, span)
                if v <= a + 1e-3 * w or v >= b - 1e-3 * w]
    params = fit_memory(everything, params_at(x))
    at_bound += _memory_at_bound(everything, params)
    return FitResult(params, free, at_bound, float(np.sum(r * r)), robust,
                     int(best["nfev"]), message, memory_records=len(_informative(everything)))


def _memory_at_bound(runs: list[ModeledRun], params: CostParams) -> list[str]:
    """The memory parameters that :func:`fit_memory` left on a bound of their
    range (reported like the throughput ones; none when no run states memory)."""
    if len(_informative(runs)) < 2:
        return []
    out = []
    for name in ("memory_fragmentation",):       # the reserve is pinned (MEASURED_RESERVE_GIB)
        lo, hi, _ = RANGES[name]
        v = getattr(params, name)
        if v <= lo + 1e-3 * (hi - lo) or v >= hi - 1e-3 * (hi - lo):
            out.append(name)
    return out


#: Slack (GiB, 1 MiB) kept below a ran plan's capacity so that the fitted
#: parameters, as written to ``calibrated.yaml`` (6 decimals), still fit it.
CENSOR_MARGIN_GIB = 2.0**-10


def _informative(runs: list[ModeledRun]) -> list[ModeledRun]:
    """End-to-end runs whose published memory measure involves the reserve or
    the fragmentation (an ``allocated`` figure involves neither)."""
    return [r for r in runs if r.kind == "end_to_end" and r.measured_memory_gib
            and MEASURES[r.memory_measure] != (0.0, 0.0)]


def fit_memory(runs: list[ModeledRun], params: CostParams) -> CostParams:
    """``memory_fragmentation`` f from ``measured = modelled·(1 + a_f·f) + a_R·R``, the
    reserve R pinned at :data:`~autopar_opt.cost.params.MEASURED_RESERVE_GIB`, over the runs that publish
    per-GPU memory, on the measure and GPU each states
    (:mod:`autopar_opt.calibration.memory`: nvidia-smi ``a_f = a_R = 1``,
    PyTorch reserved ``a_f = 1, a_R = 0``; PyTorch allocated involves neither
    and does not enter), memory-only records included, with every other
    end-to-end run as a censored observation: a published plan that ran used
    at most its GPU's memory, ``R + (1+f)·modelled <= capacity`` on its
    busiest GPU (:func:`reserve_and_fragmentation`). When fewer than two runs
    publish such memory, the shipped values (:func:`~autopar_opt.cost.params.default_params`:
    the reserve pinned, the fragmentation fitted on the published runs): the prior's
    dataclass defaults (2 GiB, 0.05) are no fit of anything (QA round 11: a fit of
    throughput-only records wrote them, and moved every memory prediction)."""
    from autopar_opt.cost.evaluate import evaluate

    measured, ran = [], []
    informative = {r.id for r in _informative(runs)}
    for run in runs:
        if run.kind != "end_to_end":
            continue
        m = evaluate(run.plan, run.graph, run.cluster, run.training, params)
        if run.id in informative:
            a_f, a_r = MEASURES[run.memory_measure]
            measured.append((modelled_gib(m.stages, run.memory_rank), run.measured_memory_gib,
                             a_f, a_r))
        else:       # it ran, so it fit (an allocated-only figure bounds nothing more)
            st = max(m.stages, key=lambda s: s.peak_memory_gib)
            ran.append((st.peak_memory_gib - st.reserve_gib, st.capacity_gib))
    if len(measured) < 2:
        from autopar_opt.cost.params import default_params

        shipped = default_params()
        return replace(params, memory_reserve_gib=MEASURED_RESERVE_GIB,
                       memory_fragmentation=shipped.memory_fragmentation)
    reserve, frag = reserve_and_fragmentation(measured, ran, reserve=MEASURED_RESERVE_GIB)
    return replace(params, memory_reserve_gib=reserve, memory_fragmentation=frag)


def reserve_and_fragmentation(measured: list[tuple[float, float]],
                              ran: list[tuple[float, float]] = (),
                              reserve: float | None = None) -> tuple[float, float]:
    """Least squares of ``a_R·reserve + (1 + a_f·f)·modelled`` on ``measured``
    tuples (modelled GiB, measured GiB[, a_f, a_R]; both coefficients 1 when
    left out: an nvidia-smi figure) within the plausible ranges, subject to
    ``reserve + (1+f)·modelled <= capacity`` for every ``ran`` pair (modelled
    GiB, capacity GiB): published plans that ran, whose memory is censored at
    the capacity (they did not run out of memory). A ran plan that would not
    fit even at the lowest reserve and no fragmentation cannot constrain the
    fit (the model misses something for it) and
    is left out. SLSQP on two variables; ``reserve`` given, the reserve is held there and
    only ``f`` is fitted."""
    from scipy.optimize import minimize

    lo_r, hi_r, _ = RANGES["memory_reserve_gib"]
    if reserve is not None:
        lo_r = hi_r = float(reserve)
    lo_f, hi_f, _ = RANGES["memory_fragmentation"]
    rows = [t if len(t) == 4 else (t[0], t[1], 1.0, 1.0) for t in measured]
    a = np.array([[a_r, a_f * m] for m, _, a_f, a_r in rows])
    y = np.array([v - m for m, v, _, _ in rows])
    cons = [{"type": "ineq",
             "fun": (lambda x, m=m, c=c: c - CENSOR_MARGIN_GIB - m - x[0] - x[1] * m),
             "jac": (lambda x, m=m: np.array([-1.0, -m]))}
            for m, c in ran if m + lo_r + CENSOR_MARGIN_GIB <= c]
    sol = minimize(lambda x: float(np.sum((a @ x - y) ** 2)), np.array([lo_r, 0.0]),
                   jac=lambda x: 2.0 * a.T @ (a @ x - y), bounds=[(lo_r, hi_r), (lo_f, hi_f)],
                   constraints=cons, method="SLSQP", options={"ftol": 1e-12, "maxiter": 500})
    return float(sol.x[0]), float(sol.x[1])
