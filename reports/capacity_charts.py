"""Static SVG charts of the capacity report (matplotlib, same settings as the plan report).

* :func:`pareto_svg`: time to train against cost, one point per scenario at
  the plan held (upper ends), error bars down to the lower ends (the gap),
  the time-cost frontier as a step line, the deadline as a vertical line.
* :func:`scaling_svg`: throughput (tokens/s) against GPU count, one line per
  device type and batch size (scaling curves), error bars up to the bound.

Only numbers and fixed labels (device names come from the catalog, validated)
are drawn; no user free text.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from autopar_opt.reports.charts import _RC, _to_svg  # noqa: E402

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
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(9.5, 5.2))
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
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("time to train (days); bar: down to the proven lower bound")
        ax.set_ylabel(f"cost ({currency}); bar: down to the proven lower bound")
        ax.grid(color="#DDDDDD", linewidth=0.5, which="both")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
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
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(9.5, 5.0))
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
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("GPUs")
        ax.set_ylabel("tokens/s (plan held; bar: up to the proven bound)")
        ax.grid(color="#DDDDDD", linewidth=0.5, which="both")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        return _to_svg(fig)
