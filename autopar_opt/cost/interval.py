"""An error bar on every predicted time: how far the cost model itself can be trusted.

The optimality certificate is exact *under the model*; this interval says how
far the model has been from published measurements of comparable runs, out of
sample. It never enters an objective or a bound.

Data: ``autopar_opt/cost/intervals.yaml``, written by
``benchmarks/calibration/intervals.py`` (never by hand). For every published
run with a measured throughput (both record files) it holds the run's regime
(:mod:`autopar_opt.cost.regime`) and its out-of-sample residuals
``r = log(measured time / predicted time)``: one from the fit that left out
the run's source family, one from each fit that left out a regime group the
run belongs to (leave-one-group-out), and ``residual``, the one of largest
magnitude. A run's out-of-sample error is not one number: leaving out its
source and leaving out its regime give different (sometimes opposite-signed)
residuals, so each run contributes its *range* ``[low, high]`` over all of
them (the conservative choice that keeps both signs).

Method (split-conformal with grouped data: Lei et al. 2018, "Distribution-Free
Predictive Inference for Regression", Sec. 2.2; Dunn, Wasserman & Ramdas 2022,
"Distribution-free prediction sets for two-layer hierarchical models", the
pooled CDF): the comparable runs are those sharing every regime label with
the query; while fewer than :data:`MIN_COMPARABLE` do, labels are given up in
the order of :data:`autopar_opt.cost.regime.LABELS`. Runs of one source family
are not independent draws (one publication, one cluster, one code base), so
each family weighs as one unit: a run of a family of ``n_k`` comparable runs
weighs ``1/n_k``. Over ``K`` families, the weighted quantile of the runs'
``low`` at ``1 - u`` and that of their ``high`` at ``u = (1 - a/2)·(1 + 1/K)``
(the finite-sample inflation) bound a two-sided ``1 - a`` interval on
``log(measured / predicted)``. Since every residual of a run lies in its
range, the interval contains the one built from any single kind of residual
(for instance the leave-own-family-out one that coverage is judged on):
taking the largest-magnitude residual alone, as this module did before, lost
the sign a run's other residuals had and left the intervals of well-predicted
families (Narayanan et al. 2021: +2.7 to +7.7% from its family's fit, -4 to
-8% from the regimes') outside their own errors: on the same residuals, 65.1%
of 175 runs were covered where the ranges cover 89.7% at the same median width
(``benchmarks/calibration/REGIMES.md``). The
predicted time ``T`` becomes ``[T·e^lo, T·e^hi]``. When fewer than
:data:`MIN_COMPARABLE` runs share every label, the interval also spans the
residuals of those that do and says it is wide for that reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import yaml

from autopar_opt.core.ranges import range_text
from autopar_opt.cost.regime import LABEL_DEFAULTS, LABELS, Regime
from autopar_opt.ir.graph import LayerKind

#: The shipped residual file.
DEFAULT_FILE = Path(__file__).with_name("intervals.yaml")
#: Runs a regime needs before its interval is taken from its own residuals alone.
MIN_COMPARABLE = 10
#: The interval's nominal coverage (issue 28: an 80% interval).
LEVEL = 0.8
#: Layer kinds of a transformer: every published run behind the intervals trained one.
TRANSFORMER_KINDS = frozenset((LayerKind.transformer_block, LayerKind.moe_block,
                               LayerKind.attention))
#: What the interval of a model without them says (QA round 10: Inception-v3's interval
#: was "from 72 comparable published runs" of Megatron transformer training).
UNLIKE_TRANSFORMERS = ("the model has no transformer or attention layer, while every "
                       "published run behind this interval trained a transformer: its kernels "
                       "and communication are not those runs', so the interval is a guide, not "
                       "a measurement of models like it")


#: How a form factor is written in a sentence.
FORM_WORDS = {"pcie": "PCIe", "nvl": "NVL"}


def device_unlike(device, runs: "tuple[ResidualRun, ...] | None" = None) -> str:
    """Why the published runs behind an interval are unlike the priced device ("" when they
    are not): a form factor none or few of them ran on (a PCIe or NVL card), or a power limit
    below the rated power. Each run of the residual file (``runs``; None: the shipped file)
    carries the form of its part and its power limit (``intervals.py`` writes them from the
    records), so the sentence counts them instead of asserting none exist: for such a device
    the interval does not measure how far the model's figures for the form factor (its peaks,
    PCIe links) and the capped clock (:attr:`~autopar_opt.ir.hardware.DeviceType.clock_factor`)
    can be trusted, and the interval says so instead of leaving it to be assumed (issue 28
    audit, QA round 17; the first capped run, CARAML's GH200 at 680 W, session 37)."""
    if device is None:
        return ""
    cap, capped = device.power_limit_w, device.capped
    card = bool(device.form) and device.form not in ("sxm", "superchip")
    if not (card or capped):
        return ""
    runs = load_residuals() if runs is None else runs
    parts, what = [], []
    if card:
        same = [r for r in runs if r.form == device.form]
        form = FORM_WORDS.get(device.form, device.form)
        parts.append(_few(same, len(runs), f"on a {form} card"))
        what.append("form factor")
    if capped:
        limited = [r for r in runs if r.power_limit_w is not None]
        parts.append(_few(limited, len(runs), f"under a power limit (this one: {cap:g} W of "
                                              f"{device.tdp_w:g} W rated)"))
        what.append("capped clock")
    return (f"{'; '.join(parts)}: the interval does not measure the model's figures for "
            f"{device.name}'s {' and '.join(what)}")


def _off(residual: float) -> str:
    """A residual ``log(measured / predicted time)`` in words."""
    pct = math.exp(residual) - 1
    return f"measured {abs(pct):.0%} {'slower' if pct > 0 else 'faster'} than predicted"


def _few(runs: "list[ResidualRun]", total: int, how: str) -> str:
    """"no published run behind it ran HOW", or how many of ``total`` did, each named with
    its part, its limit and how far the model was from it out of sample (its residual of
    largest magnitude, as time)."""
    if not runs:
        return f"no published run behind it ran {how}"
    named = ", ".join(
        f"{r.id} ({r.device}" + (f" at {r.power_limit_w:g} W of {r.tdp_w:g} W" if r.power_limit_w
                                 else "")
        + f", {_off(r.residual)} out of sample)" for r in runs[:3])
    more = f" and {len(runs) - 3} more" if len(runs) > 3 else ""
    return f"only {len(runs)} of the {total} published runs behind it ran {how}: {named}{more}"


@dataclass(frozen=True)
class ResidualRun:
    """One published run of the residual file."""

    id: str
    family: str
    labels: dict
    residual: float
    residuals: dict
    #: the run's part (catalog name), its form factor and its stated power limit below the
    #: rated ``tdp_w`` (None: at rated power); "" / None in a file written before they were
    device: str = ""
    form: str = ""
    power_limit_w: float | None = None
    tdp_w: float = 0.0

    @property
    def low(self) -> float:
        """The most negative of its out-of-sample residuals (module docstring)."""
        return min([self.residual, *self.residuals.values()])

    @property
    def high(self) -> float:
        """The most positive of its out-of-sample residuals."""
        return max([self.residual, *self.residuals.values()])


@dataclass(frozen=True)
class Interval:
    """``low``-``high`` around a predicted value (same unit), at ``level``,
    from ``n`` comparable published runs (of ``sources`` source families)
    matching the regime labels ``kept``;
    ``exact`` of them match every label; ``wide`` when ``exact`` is below
    :data:`MIN_COMPARABLE` (the interval then also spans their residuals)."""

    value: float
    low: float
    high: float
    level: float
    n: int
    exact: int
    kept: tuple[str, ...]
    regime: Regime
    wide: bool
    sources: int = 0
    #: layers priced from the spec's measured times (``model.measured``), which the
    #: published runs behind the interval do not describe: (measured, all) layers
    measured: tuple[int, int] = (0, 0)
    #: why the published runs behind the interval are unlike the priced model ("" when
    #: they are like it): every one trained a transformer (:func:`plan_interval`)
    unlike: str = ""
    #: why the residuals are not this prediction's model's ("" when they are): the plan was
    #: priced with other cost-model parameters than the shipped ones (:func:`plan_interval`)
    other_params: str = ""
    #: a fleet plan's groups of several GPU generations: which one's interval this is
    #: ("" otherwise; :func:`fleet_interval`)
    fleet: str = ""

    def text(self, unit: str = "s") -> str:
        """E.g. ``80% interval 7.9-9.6 s, from 23 comparable published runs
        (megatron, hopper, 16-bit, dense, ...)``; an interval that does not hold the
        prediction (every comparable run erred the same way) says which side it lies on."""
        out = (f"{self.level:.0%} interval {range_text(self.low, self.high, unit)}, from "
               f"{self.n} comparable published runs of {self.sources} sources "
               f"({self.regime.describe(self.kept) or 'any regime'})")
        if self.value < self.low or self.value > self.high:
            # the comparable runs all erred one way: the interval does not hold the
            # prediction, and says so rather than leave the reader to spot it
            out += ("; every comparable run ran faster than the model predicts it: the interval "
                    "lies below the prediction" if self.value > self.high else
                    "; every comparable run ran slower than the model predicts it: the interval "
                    "lies above the prediction")
        if self.wide:
            out += (f"; {sharing_words(self.exact)} every regime label "
                    f"({self.regime.describe()}): wide interval")
        if self.measured[0]:
            out += (f"; {self.measured[0]} of {self.measured[1]} layers are priced from the "
                    "spec's measured times (model.measured), which this interval of the "
                    "analytical model does not describe")
        if self.unlike:
            out += f"; {self.unlike}"
        if self.other_params:
            out += f"; {self.other_params}"
        if self.fleet:
            out += f"; {self.fleet}"
        return out

    def scaled(self, factor: float) -> "Interval":
        """The same interval for ``value·factor`` (e.g. seconds -> hours)."""
        return replace(self, value=self.value * factor, low=self.low * factor,
                       high=self.high * factor)

    def inverse(self, numerator: float = 1.0) -> "Interval":
        """The interval of ``numerator / value`` (a rate from a time)."""
        return replace(self, value=numerator / self.value, low=numerator / self.high,
                       high=numerator / self.low)

    def to_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "level": self.level,
                "comparable_runs": self.n, "sources": self.sources, "exact_matches": self.exact,
                "labels_kept": list(self.kept),
                "regime": self.regime.labels(), "wide": self.wide, "text": self.text()}


def sharing_words(exact: int) -> str:
    """How many published runs share every regime label of a wide interval's plan:
    ``no published run shares`` / ``only 1 published run shares`` / ``only N ... share``."""
    return ("no published run shares" if exact == 0 else "only 1 published run shares"
            if exact == 1 else f"only {exact} published runs share")


@lru_cache(maxsize=4)
def residuals_generated_on(path: str | Path = DEFAULT_FILE) -> str:
    """The date ``benchmarks/calibration/intervals.py`` wrote the residual file (its
    ``generated_on`` header), read from the file's first lines alone: a plan.json names it
    beside the calibration's date without loading every run (:func:`load_residuals`)."""
    with open(path, encoding="utf-8") as head:
        for _, line in zip(range(20), head):
            if line.startswith("generated_on:"):
                return str(yaml.safe_load(line)["generated_on"])
    return "unknown"


@lru_cache(maxsize=4)
def load_residuals(path: str | Path = DEFAULT_FILE) -> tuple[ResidualRun, ...]:
    """The runs of a residual file (cached per path; libyaml's loader where
    PyYAML has it: the file holds every leave-out fit too, and the commands
    that print an interval start in well under a second)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc = yaml.load(Path(path).read_text(), Loader=loader)  # noqa: S506 (a safe loader)
    return tuple(ResidualRun(str(r["id"]), str(r["family"]), dict(r["regime"]),
                             float(r["residual"]), dict(r.get("residuals") or {}),
                             **_device_of(r.get("device") or {}))
                 for r in doc["runs"])


def _device_of(d: dict) -> dict:
    """The device fields of a residual-file run (:class:`ResidualRun`)."""
    cap = d.get("power_limit_w")
    return {"device": str(d.get("name") or ""), "form": str(d.get("form") or ""),
            "power_limit_w": None if cap is None else float(cap),
            "tdp_w": float(d.get("tdp_w") or 0.0)}


def _label(run: "ResidualRun", key: str) -> str | None:
    """A residual run's value of label ``key`` (:data:`~autopar_opt.cost.regime.LABEL_DEFAULTS`
    where its file predates the label)."""
    return run.labels.get(key, LABEL_DEFAULTS.get(key))


def comparable(regime: Regime, runs: tuple[ResidualRun, ...], exclude_family: str | None = None,
               min_runs: int = MIN_COMPARABLE) -> tuple[list[ResidualRun], tuple[str, ...], int]:
    """(runs matching the kept labels, the kept labels, runs matching every label)."""
    labels = regime.labels()
    pool = [r for r in runs if r.family != exclude_family]

    def match(keys) -> list[ResidualRun]:
        return [r for r in pool if all(_label(r, k) == labels[k] for k in keys)]

    kept = list(LABELS)
    exact = len(match(kept))
    while kept and len(match(kept)) < min_runs:
        kept.pop(0)
    return match(kept), tuple(kept), exact


def conformal_bounds(residuals: list[float], families: list[str], level: float = LEVEL,
                     highs: list[float] | None = None) -> tuple[float, float]:
    """Family-weighted split-conformal bounds (module docstring): the lower one
    from ``residuals`` (each run's ``low``), the upper one from ``highs`` (each
    run's ``high``; ``residuals`` again when None: one residual per run)."""
    if not residuals:
        raise ValueError("no residuals to take an interval from")
    highs = residuals if highs is None else highs
    if len(highs) != len(residuals) or len(families) != len(residuals):
        raise ValueError("one low, one high and one family per run")
    sizes: dict[str, int] = {}
    for fam in families:
        sizes[fam] = sizes.get(fam, 0) + 1
    k = len(sizes)
    upper = min(1.0, (1.0 - (1.0 - level) / 2.0) * (1.0 + 1.0 / k))

    def quantile(values: list[float], q: float) -> float:
        order = sorted(range(len(values)), key=lambda i: values[i])
        return _weighted_quantile([values[i] for i in order],
                                  [1.0 / sizes[families[i]] / k for i in order], q)

    return quantile(residuals, 1.0 - upper), quantile(highs, upper)


def _weighted_quantile(sorted_values: list[float], weights: list[float], q: float) -> float:
    """The smallest value whose cumulative weight reaches ``q`` (weights sum to 1)."""
    total = 0.0
    for value, w in zip(sorted_values, weights):
        total += w
        if total >= q - 1e-12:
            return value
    return sorted_values[-1]


def interval_for(regime: Regime, value: float, level: float = LEVEL,
                 runs: tuple[ResidualRun, ...] | None = None,
                 exclude_family: str | None = None) -> Interval:
    """The ``level`` interval of a predicted time ``value`` (seconds, or any
    quantity proportional to the predicted time) of a plan in ``regime``."""
    runs = load_residuals() if runs is None else runs
    pool, kept, exact = comparable(regime, runs, exclude_family)
    lo, hi = conformal_bounds([r.low for r in pool], [r.family for r in pool], level,
                              highs=[r.high for r in pool])
    wide = exact < MIN_COMPARABLE
    if wide and exact:
        labels = regime.labels()
        own = [r for r in runs if r.family != exclude_family
               and all(_label(r, k) == labels[k] for k in LABELS)]
        lo, hi = min(lo, min(r.low for r in own)), max(hi, max(r.high for r in own))
    return Interval(value, value * math.exp(lo), value * math.exp(hi), level, len(pool), exact,
                    kept, regime, wide, len({r.family for r in pool}))


#: What the interval of a plan priced with other parameters than the shipped ones says (QA
#: round 11: a spec's `cost_model: my_fit.yaml` moved the quickstart from 1.39 to 2.12 s and
#: its interval still read as the measured error of the model that priced it).
OTHER_PARAMS = ("priced with the spec's cost-model parameters, not the shipped calibration the "
                "residuals behind this interval were measured with: it shows the shipped model's "
                "error, not this one's")


def plan_interval(graph, cluster, training, plan, iteration_time_s: float,
                  strategy=None, params=None, devices: int | None = None) -> Interval:
    """The interval of a priced plan's iteration time (its regime:
    :func:`autopar_opt.cost.regime.regime_of`). ``params``: the cost-model parameters the
    time was priced with (None: the shipped ones); others than the shipped ones are said
    (:data:`OTHER_PARAMS`). ``devices``: the GPUs the plan runs on when not the
    cluster's (a fleet plan's, :func:`fleet_interval`)."""
    from autopar_opt.cost.regime import regime_of

    found = interval_for(regime_of(graph, cluster, training, plan, strategy, devices),
                         iteration_time_s)
    tps = {n: s.tp for st in plan.stages for n, s in zip(st.layers, st.strategies)} \
        if plan is not None and hasattr(plan, "stages") else {}
    measured = sum(1 for layer in graph.layers if layer.measured and (
        layer.measured_for(tps[layer.name]) is not None if layer.name in tps else True))
    if measured:
        found = replace(found, measured=(measured, len(graph.layers)))
    unlike = [text for text in (
        "" if any(layer.kind in TRANSFORMER_KINDS for layer in graph.layers)
        else UNLIKE_TRANSFORMERS, device_unlike(getattr(cluster, "device", None))) if text]
    if unlike:
        found = replace(found, unlike="; ".join(unlike))
    if params is not None:
        from autopar_opt.cost.params import default_params

        if params.to_dict() != default_params().to_dict():
            found = replace(found, other_params=OTHER_PARAMS)
    return found


def fleet_interval(graph, fleet, training, plan, iteration_time_s: float,
                   params=None) -> Interval:
    """The interval of a fleet plan (a pipeline over groups, or data-parallel classes):
    each group it runs on is priced with its own GPU, so its regime is each group's
    (generation, and ZeRO-3 at scale over all the GPUs the plan uses); of those
    intervals the widest (largest high/low) is taken, so a plan over two generations is
    trusted no more than on the less known one, and says which (QA round 11: fleet plans
    carried no interval, while every other prediction does)."""
    if hasattr(plan, "classes"):
        parts = [(g, c.plan) for c in plan.classes for g in c.groups]
        devices = sum(s.devices for c in plan.classes for s in _stage_heads(c.plan))
    else:
        parts = [(g, plan) for g in sorted(set(plan.stage_groups or [0]))]
        devices = sum(s.devices for s in _stage_heads(plan))
    found = [(g, plan_interval(graph, fleet.groups[g], training, p, iteration_time_s,
                               params=params, devices=devices)) for g, p in parts]
    g, widest = max(found, key=lambda gi: gi[1].high / max(gi[1].low, 1e-300))
    # what makes the published runs unlike the plan, on every group it runs on: the widest
    # group's words alone left out a PCIe card or a capped group that was not the widest
    unlike = list(dict.fromkeys(part for _, iv in found if iv.unlike
                                for part in iv.unlike.split("; ")))
    if unlike:
        widest = replace(widest, unlike="; ".join(unlike))
    names = sorted({fleet.groups[k].name for k, _ in found})
    gens = {iv.regime.generation for _, iv in found}
    if len(gens) > 1:
        widest = replace(widest, fleet=f"the plan runs on groups of {len(gens)} GPU generations "
                         f"({', '.join(names)}): the widest of their regimes' intervals, group "
                         f"{fleet.groups[g].name}'s")
    return widest


def _stage_heads(plan) -> list:
    """One strategy per stage (each carries the stage's device count)."""
    return [st.strategies[0] for st in plan.stages if st.strategies]


def metrics_dict(metrics, graph, cluster, training, plan, params=None) -> dict | None:
    """``metrics.to_dict()`` (a :class:`~autopar_opt.cost.evaluate.PlanMetrics`)
    with ``interval``, the error bar of its iteration time, as ``plan.json``,
    ``estimate --json`` and the reports carry it; None without metrics. ``params``: those
    the metrics were priced with (:func:`plan_interval`)."""
    if metrics is None:
        return None
    data = metrics.to_dict()
    data["interval"] = plan_interval(graph, cluster, training, plan,
                                     metrics.iteration_time_s, params=params).to_dict()
    return data
