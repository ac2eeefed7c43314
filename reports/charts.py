"""Static SVG charts for the report, drawn with matplotlib.

Charts are returned as SVG strings to be inlined in the HTML (no external
files, no scripts, no network). Output is deterministic: ``svg.hashsalt`` is
fixed, text stays text (``svg.fonttype = "none"``) and the SVG metadata carries
no date or creator version, so golden files do not drift between runs.
Charts never draw user-supplied text (model or layer names), only numbers and
fixed labels.

Cost (issue 15: the report is written after the search, inside the command's
time limit). Each chart is laid out in inches (fixed margins), not with
``bbox_inches="tight"``, which drew the whole figure a second time; bars are
collections, not one patch each; tick labels, bar labels and the figure's
height are capped (:data:`MAX_ROW_LABELS`, :data:`MAX_TIMELINE_HEIGHT_IN`,
:data:`MAX_VALUE_LABELS`), so beyond the caps a chart's cost grows only with
its bars (:mod:`autopar_opt.reports.cost` prices it before the search).
"""

from __future__ import annotations

import io
import math
import re

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.colors import to_rgba_array  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

COLORS = {"F": "#4C78A8", "B": "#F58518", "send": "#54A24B", "sync": "#B279A2",
          "weights": "#4C78A8", "activations": "#F58518", "capacity": "#D62728",
          "idle": "#EEEEEE"}

_RC = {"svg.hashsalt": "autopar-opt-report", "svg.fonttype": "none", "font.size": 9,
       "font.family": "sans-serif", "axes.spines.top": False, "axes.spines.right": False}

MAX_LABELLED_BARS = 24
#: Micro-batch numbers are written on at most this many bars (each is a text
#: element: about 1 ms to lay out and draw, most of an 8 × 16 timeline at 256).
MAX_BAR_LABELS = 64
#: Above this many bars the timeline's bars are one embedded image, not vectors.
RASTER_OPS = 2000
#: At most this many rows of the timeline (and stages of the memory chart) are
#: labelled; above, every k-th stage (each label is a matplotlib tick: ~3 ms).
MAX_ROW_LABELS = 16
#: Height of one timeline row (inches) and the most the rows take together: a
#: 32-stage timeline is 63 rows, 35 inches at full height (and its raster image
#: 3,500 px high, 0.1 s to encode).
ROW_HEIGHT_IN, MAX_TIMELINE_HEIGHT_IN = 0.55, 14.0
#: Stages of the memory chart with their GiB written above the bar (the stage
#: table below the chart lists every stage); above, only the peak stage.
MAX_VALUE_LABELS = 16

#: Margins (inches): left of the timeline (row labels such as ``link 30→31``),
#: below it (tick labels, axis label, legend), and the memory chart's legend on its right.
_TIMELINE_LEFT_IN, _TIMELINE_BOTTOM_IN, _TOP_IN, _RIGHT_IN = 1.0, 1.0, 0.15, 0.2
_MEMORY_LEFT_IN, _MEMORY_BOTTOM_IN, _MEMORY_LEGEND_IN = 0.7, 0.45, 3.2


def _to_svg(fig) -> str:
    """Serialise ``fig`` to an inline-ready SVG string (no XML prolog, no doctype)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg",
                metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    plt.close(fig)
    text = buf.getvalue()
    text = re.sub(r"<\?xml[^>]*\?>\s*", "", text)
    text = re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)
    return text.strip()


def _figure(width_in: float, height_in: float, left_in: float, right_in: float,
            bottom_in: float, top_in: float):
    """A figure with one axes placed by margins in inches (no tight-bbox pass)."""
    fig = plt.figure(figsize=(width_in, height_in))
    ax = fig.add_axes((left_in / width_in, bottom_in / height_in,
                       1 - (left_in + right_in) / width_in, 1 - (bottom_in + top_in) / height_in))
    return fig, ax


def _row_positions(pp: int, with_links: bool) -> tuple[dict[str, float], list[str]]:
    """Y position per row key (``s<i>``, ``l<i>``) and tick labels, stage 0 on top."""
    keys = []
    for i in range(pp):
        keys.append(f"s{i}")
        if with_links and i < pp - 1:
            keys.append(f"l{i}")
    y = {k: float(len(keys) - 1 - n) for n, k in enumerate(keys)}
    labels = [f"stage {k[1:]}" if k[0] == "s" else f"link {k[1:]}→{int(k[1:]) + 1}" for k in keys]
    return y, labels


def labelled_stages(count: int) -> list[int]:
    """The stages whose rows (or bars) get a tick label: all of them up to
    :data:`MAX_ROW_LABELS`, else every k-th, k the least that keeps within it."""
    step = max(1, math.ceil(count / MAX_ROW_LABELS))
    return list(range(0, count, step))


def _row_ticks(y: dict[str, float], labels: list[str], pp: int) -> tuple[list[float], list[str]]:
    """Tick positions and labels of the timeline: every row when there are at
    most :data:`MAX_ROW_LABELS`, else the stage rows of :func:`labelled_stages`."""
    keys = list(y)
    if len(keys) <= MAX_ROW_LABELS:
        return [y[k] for k in keys], labels
    return [y[f"s{i}"] for i in labelled_stages(pp)], [f"stage {i}" for i in labelled_stages(pp)]


def timeline_svg(timeline: dict) -> str:
    """Gantt chart of one iteration from ``context["timeline"]``.

    ``timeline`` holds ``pp``, ``microbatches``, ``ops`` (dicts with kind,
    stage, microbatch, start_ms, end_ms) and ``makespan_ms``.

    The bars are one collection (not one patch each) and, above
    :data:`RASTER_OPS` bars, drawn as one embedded image: the chart costs about
    as much for 7,456 bars (16 stages × 120 micro-batches) as for 40, where one
    patch per bar took 12-23 s and wrote a 2 MB SVG (issue 15: the report is
    written after the search, inside the command's time limit). Micro-batch
    numbers are written on at most :data:`MAX_BAR_LABELS` bars.
    """
    pp, ops = timeline["pp"], timeline["ops"]
    with_links = any(op["kind"].startswith("send") for op in ops)
    y, labels = _row_positions(pp, with_links)
    row_in = min(ROW_HEIGHT_IN, MAX_TIMELINE_HEIGHT_IN / len(labels))
    with plt.rc_context(_RC):
        fig, ax = _figure(10.5, row_in * len(labels) + _TIMELINE_BOTTOM_IN + _TOP_IN + 0.1,
                          _TIMELINE_LEFT_IN, _RIGHT_IN, _TIMELINE_BOTTOM_IN, _TOP_IN)
        end = timeline["makespan_ms"]
        rows = [y[f"s{i}"] for i in range(pp)]
        ax.add_collection(PolyCollection(_bars([0.0] * pp, [end] * pp, rows, [0.8] * pp),
                                         facecolors=COLORS["idle"], edgecolors="none", zorder=0),
                          autolim=False)
        left, width, rows, height, kinds, texts = [], [], [], [], [], []
        for op in ops:
            kind = op["kind"]
            send = kind.startswith("send")
            left.append(op["start_ms"])
            width.append(op["end_ms"] - op["start_ms"])
            rows.append(y[f"l{op['stage']}" if send else f"s{op['stage']}"])
            height.append(0.45 if send else 0.8)
            kinds.append("send" if send else kind)
            if kind in ("F", "B") and width[-1] > 0.025 * end:
                texts.append((left[-1] + width[-1] / 2, rows[-1], str(op["microbatch"])))
        ax.add_collection(PolyCollection(_bars(left, width, rows, height), facecolors=_rgba(kinds),
                                         edgecolors="white", linewidths=0.4, zorder=2,
                                         rasterized=len(ops) > RASTER_OPS), autolim=False)
        if timeline["microbatches"] <= MAX_LABELLED_BARS and len(texts) <= MAX_BAR_LABELS:
            for x, row, text in texts:
                ax.text(x, row, text, ha="center", va="center", color="white", fontsize=7, zorder=3)
        ax.set_yticks(*_row_ticks(y, labels, pp))
        ax.set_ylim(-0.6, len(labels) - 0.4)
        ax.set_xlim(0, end * 1.01)
        ax.set_xlabel("time within one iteration (ms)")
        _timeline_legend(fig, with_links)
        ax.grid(axis="x", color="#DDDDDD", linewidth=0.5, zorder=-1)
        return _to_svg(fig)


def _rgba(kinds: list[str]) -> np.ndarray:
    """``(N, 4)`` face colours of the bars of ``kinds`` (one colour conversion per
    kind, not per bar: 16,000 conversions were a tenth of the 32-stage chart)."""
    names = sorted(set(kinds))
    table = to_rgba_array([COLORS[k] for k in names])
    index = {k: i for i, k in enumerate(names)}
    return table[[index[k] for k in kinds]] if kinds else np.zeros((0, 4))


def _timeline_legend(fig, with_links: bool) -> None:
    """The timeline's legend, centred in the figure's bottom margin."""
    handles = [Patch(color=COLORS["F"], label="forward"),
               Patch(color=COLORS["B"], label="backward"),
               Patch(color=COLORS["sync"], label="gradient sync + optimizer"),
               Patch(color=COLORS["idle"], label="idle (bubble)")]
    if with_links:
        handles.insert(2, Patch(color=COLORS["send"], label="cross-stage transfer"))
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.0),
               ncol=len(handles), frameon=False)


def _bars(left: list[float], width: list[float], y: list[float], height: list[float]) -> np.ndarray:
    """``(N, 4, 2)`` corners of horizontal bars centred on ``y`` (what ``barh`` draws)."""
    x0, x1 = np.asarray(left, dtype=float), np.asarray(left, dtype=float) + np.asarray(width, dtype=float)
    lo = np.asarray(y, dtype=float) - np.asarray(height, dtype=float) / 2
    hi = lo + np.asarray(height, dtype=float)
    return np.stack([np.column_stack([x0, lo]), np.column_stack([x1, lo]),
                     np.column_stack([x1, hi]), np.column_stack([x0, hi])], axis=1).reshape(-1, 4, 2)


#: Colours and legend labels of the memory chart's parts (``sections.CHART_PARTS``).
MEMORY_PARTS = {"state": ("#4C78A8", "weights + grads + optimizer"),
                "activations": ("#F58518", "activations + logits (in flight)"),
                "working": ("#72B7B2", "working set of the layer in flight"),
                "reserve": ("#9D9D9D", "runtime reserve + fragmentation"),
                "other": ("#D8B5A5", "other (not split in this plan.json)")}


def memory_svg(memory: dict) -> str:
    """Stacked per-stage bars of every part of the peak against device capacity.

    ``memory`` holds ``stages`` (dicts with index and ``bars``, the GiB of each part of
    :data:`MEMORY_PARTS`, summing to the stage's peak; older callers may give only
    weight_gib and activation_gib), ``capacity_gib`` and ``hbm_gib``. The bar's top is
    the peak the card and the stage table show. One collection per part; at most
    :data:`MAX_ROW_LABELS` stage ticks and :data:`MAX_VALUE_LABELS` values are written.
    """
    stages = memory["stages"]
    idx = [s["index"] for s in stages]
    bars = [s.get("bars") or {"state": s["weight_gib"], "activations": s["activation_gib"]}
            for s in stages]
    parts = [k for k in MEMORY_PARTS if any(b.get(k, 0.0) > 0 for b in bars)] or ["state"]
    top = [sum(b.get(k, 0.0) for k in parts) for b in bars]
    cap, hbm = memory["capacity_gib"], memory["hbm_gib"]
    width = _MEMORY_LEFT_IN + _MEMORY_LEGEND_IN + max(1.6, 0.8 * min(len(stages), MAX_ROW_LABELS))
    with plt.rc_context(_RC):
        fig, ax = _figure(width, 3.4, _MEMORY_LEFT_IN, _MEMORY_LEGEND_IN, _MEMORY_BOTTOM_IN, _TOP_IN)
        # vertical bars: _bars of (bottom, height) along x, centred on the stage index
        below = np.zeros(len(idx))
        for key in parts:
            height = np.array([b.get(key, 0.0) for b in bars])
            corners = _bars(below, height, idx, [0.6] * len(idx))[:, :, ::-1]
            ax.add_collection(PolyCollection(corners, facecolors=MEMORY_PARTS[key][0],
                                             edgecolors="none"), autolim=False)
            below = below + height
        ax.axhline(cap, color=COLORS["capacity"], linestyle="--", linewidth=1.2)
        ax.axhline(hbm, color="#555555", linestyle=":", linewidth=1.0)
        shown = idx if len(idx) <= MAX_VALUE_LABELS else [idx[int(np.argmax(top))]]
        for i in shown:
            ax.text(i, top[idx.index(i)], f"{top[idx.index(i)]:.2f}", ha="center", va="bottom",
                    fontsize=8)
        ticks = [idx[k] for k in labelled_stages(len(idx))]
        ax.set_xticks(ticks, [f"stage {i}" for i in ticks])
        ax.set_xlim(min(idx) - 0.6, max(idx) + 0.6)
        ax.set_ylabel("GiB per device")
        ax.set_ylim(0, max(hbm, cap, max(top)) * 1.12)
        handles = [Patch(color=MEMORY_PARTS[k][0], label=MEMORY_PARTS[k][1]) for k in reversed(parts)]
        handles += [plt.Line2D([], [], color=COLORS["capacity"], linestyle="--", linewidth=1.2,
                               label=f"usable capacity {cap:.1f} GiB"),
                    plt.Line2D([], [], color="#555555", linestyle=":", linewidth=1.0,
                               label=f"device HBM {hbm:.1f} GiB")]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        return _to_svg(fig)
