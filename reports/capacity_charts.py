"""Static SVG charts of the capacity report (matplotlib, same settings as the plan report).

Read at a glance (issue 33): every legend sits below its axes inside the figure (a
legend to the right of a fixed-width figure was cut: "time-co", "deadlin",
"A100-8"), both axes carry labelled ticks in plain numbers (a log axis spanning less
than a decade showed ``3×10^-2`` or no label at all), and the data keep a margin from
the frame (points sat on it).

* :func:`pareto_svg`: time to train against cost, one point per scenario at
  the plan held (upper ends), error bars down to the lower ends (the gap),
  the time-cost frontier as a step line, the deadline as a vertical line.
* :func:`scaling_svg`: throughput (tokens/s) against GPU count, one line per
  device type and batch size (scaling curves), error bars up to the bound.

Only numbers and fixed labels (device names come from the catalog, validated)
are drawn; no user free text.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator, NullLocator  # noqa: E402

from autopar_opt.reports.charts import _RC, _to_svg  # noqa: E402

#: A log axis is used when the values span at least this factor; narrower: linear.
LOG_SPAN = 20.0
#: Share of each axis' span left free beyond the data (no point on the frame).
MARGIN = 0.08
#: Legend entries per row below the axes.
LEGEND_COLUMNS = 3


def _plain(value: float, _pos: object = None) -> str:
    """A tick label in plain digits (``0.03``, ``400,000``), never ``3×10^-2``."""
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def readable_axis(ax, which: str, values: list[float], ticks: list[float] | None = None) -> None:
    """Scale, limits and labelled ticks of one axis for ``values``: log with 1-2-5 ticks
    when they span a factor of :data:`LOG_SPAN` or more (all positive), else linear; the
    limits leave :data:`MARGIN` of the span free on both sides; ``ticks`` fixes the
    tick positions (the GPU counts of a scaling curve)."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    setter = ax.set_xscale if which == "x" else ax.set_yscale
    limits = ax.set_xlim if which == "x" else ax.set_ylim
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return
    lo, hi = min(vals), max(vals)
    log = lo > 0 and hi / lo >= LOG_SPAN
    if log:
        setter("log")
        span = math.log10(hi / lo) or 1.0
        limits(lo / 10 ** (MARGIN * span), hi * 10 ** (MARGIN * span))
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    else:
        span = (hi - lo) or abs(hi) or 1.0
        limits(lo - MARGIN * span, hi + MARGIN * span)
        axis.set_major_locator(MaxNLocator(nbins=6))
    if ticks:
        axis.set_major_locator(FixedLocator(sorted(set(ticks))))
    axis.set_major_formatter(FuncFormatter(_plain))
    axis.set_minor_locator(NullLocator())


def _legend_below(fig, ax, entries: int) -> None:
    """The legend in rows of :data:`LEGEND_COLUMNS` below the axes' labels, inside the
    figure (its height was reserved by :func:`_figure_with_legend`)."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=min(LEGEND_COLUMNS, entries),
              frameon=False, borderaxespad=0.0)


def _figure_with_legend(entries: int, width_in: float = 9.5, plot_in: float = 4.0):
    """A figure whose bottom margin holds the axis label and ``entries`` legend entries."""
    rows = math.ceil(max(entries, 1) / LEGEND_COLUMNS)
    bottom_in = 0.75 + 0.25 * rows
    left_in, top_in, right_in = 1.0, 0.2, 0.3
    height = plot_in + bottom_in + top_in
    fig = plt.figure(figsize=(width_in, height))
    ax = fig.add_axes((left_in / width_in, bottom_in / height,
                       1 - (left_in + right_in) / width_in, plot_in / height))
    return fig, ax

#: Length of the arrow of a scenario with no proven throughput bound, as a share of its
#: throughput (drawn upwards: its plans could be any faster).
UNBOUNDED_ARROW = 0.3

PALETTE = ["#4C78A8", "#F58518", "#54A24B", "#B279A2", "#E45756", "#72B7B2", "#9D755D", "#FF9DA6"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def _colors(devices: list[str]) -> dict[str, str]:
    return {d: PALETTE[i % len(PALETTE)] for i, d in enumerate(devices)}


def _down(pair: list) -> float:
    """Length of the error bar from the plan held down to the bound (a bound that
    round-off puts a hair above the plan gives no bar, not a negative one)."""
    return max(0.0, pair[1] - pair[0])


def _planned(entries: list[dict]) -> list[dict]:
    return [e for e in entries if e["time_to_train_days"][1] is not None and e["cost"][1] is not None]


def pareto_svg(entries: list[dict], frontier_ids: list[str], deadline_days: float,
               currency: str) -> str | None:
    """Time-cost scatter with gap error bars and the frontier; None when no scenario has a plan."""
    pts = _planned(entries)
    if not pts:
        return None
    devices = sorted({e["device"] for e in pts})
    color = _colors(devices)
    front_ids = set(frontier_ids)
    entries = len(devices) + 1 + bool(front_ids & {e["id"] for e in pts})
    with plt.rc_context(_RC):
        fig, ax = _figure_with_legend(entries)
        for d in devices:
            mine = [e for e in pts if e["device"] == d]
            x = [e["time_to_train_days"][1] for e in mine]
            y = [e["cost"][1] for e in mine]
            xerr = [[_down(e["time_to_train_days"]) for e in mine], [0] * len(mine)]
            yerr = [[_down(e["cost"]) for e in mine], [0] * len(mine)]
            ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="o", ms=4, color=color[d], ecolor=color[d],
                        elinewidth=0.8, capsize=2, alpha=0.85, label=d)
        front = [e for e in pts if e["id"] in set(frontier_ids)]
        front.sort(key=lambda e: e["time_to_train_days"][1])
        if front:
            ax.step([e["time_to_train_days"][1] for e in front], [e["cost"][1] for e in front],
                    where="post", color="#333333", linewidth=1.0, linestyle="--",
                    label="time-cost frontier (plans held)")
        ax.axvline(deadline_days, color="#D62728", linewidth=1.0, linestyle=":",
                   label=f"deadline {deadline_days:g} days")
        days = [v for e in pts for v in e["time_to_train_days"]] + [deadline_days]
        readable_axis(ax, "x", days)
        readable_axis(ax, "y", [v for e in pts for v in e["cost"]])
        ax.set_xlabel("time to train (days); bar: down to the proven lower bound")
        ax.set_ylabel(f"cost ({currency}); bar: down to the proven lower bound")
        ax.grid(color="#DDDDDD", linewidth=0.5, which="major")
        _legend_below(fig, ax, entries)
        return _to_svg(fig)


def scaling_svg(entries: list[dict]) -> str | None:
    """Throughput against GPU count per device type and batch size; None without plans."""
    pts = [e for e in entries if e["throughput_tokens_per_s"][0] is not None]
    if not pts:
        return None
    devices = sorted({e["device"] for e in pts})
    color = _colors(devices)
    batches = sorted({e["global_batch_size"] for e in pts})
    marker = {b: MARKERS[i % len(MARKERS)] for i, b in enumerate(batches)}
    entries = len({(e["device"], e["global_batch_size"]) for e in pts})
    drawn: list[float] = []
    with plt.rc_context(_RC):
        fig, ax = _figure_with_legend(entries)
        for d in devices:
            for b in batches:
                series = sorted((e for e in pts if e["device"] == d and e["global_batch_size"] == b),
                                key=lambda e: e["gpus"])
                if not series:
                    continue
                best: dict[int, dict] = {}
                for e in series:     # other axes: the best plan per GPU count
                    if e["gpus"] not in best or (e["throughput_tokens_per_s"][0]
                                                 > best[e["gpus"]]["throughput_tokens_per_s"][0]):
                        best[e["gpus"]] = e
                xs = sorted(best)
                lo = [best[g]["throughput_tokens_per_s"][0] for g in xs]
                hi = [best[g]["throughput_tokens_per_s"][1] or lo[i] for i, g in enumerate(xs)]
                ax.errorbar(xs, lo, yerr=[[0] * len(xs), [max(0.0, h - v) for h, v in zip(hi, lo)]],
                            color=color[d], marker=marker[b], ms=4, linewidth=1.0, capsize=2,
                            linestyle="-" if b == batches[0] else "--",
                            label=f"{d}, batch {b}")
                # no proven bound (the search was cut before one): an open arrow upwards, not
                # the bar-less point of a plan proven optimal (QA round 11)
                open_ = [g for g in xs if best[g]["throughput_tokens_per_s"][1] is None]
                if open_:
                    up = [best[g]["throughput_tokens_per_s"][0] for g in open_]
                    ax.errorbar(open_, up, yerr=[[0] * len(up), [v * UNBOUNDED_ARROW for v in up]],
                                lolims=True, fmt="none", ecolor=color[d], elinewidth=1.0)
                    drawn += [v * (1 + UNBOUNDED_ARROW) for v in up]
                drawn += lo + [h for h in hi if h is not None]
        gpus = sorted({e["gpus"] for e in pts})
        readable_axis(ax, "x", [float(g) for g in gpus], ticks=[float(g) for g in gpus])
        readable_axis(ax, "y", drawn)
        ax.set_xlabel("GPUs")
        ax.set_ylabel("tokens/s (plan held; bar: up to the proven bound)")
        ax.grid(color="#DDDDDD", linewidth=0.5, which="major")
        _legend_below(fig, ax, entries)
        return _to_svg(fig)
