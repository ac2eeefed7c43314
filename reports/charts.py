"""Static SVG charts for the report, drawn with matplotlib.

Charts are returned as SVG strings to be inlined in the HTML (no external
files, no scripts, no network). Output is deterministic: ``svg.hashsalt`` is
fixed, text stays text (``svg.fonttype = "none"``) and the SVG metadata carries
no date or creator version, so golden files do not drift between runs.
Charts never draw user-supplied text (model or layer names), only numbers and
fixed labels.
"""

from __future__ import annotations

import io
import re

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

COLORS = {"F": "#4C78A8", "B": "#F58518", "send": "#54A24B", "sync": "#B279A2",
          "weights": "#4C78A8", "activations": "#F58518", "capacity": "#D62728",
          "idle": "#EEEEEE"}

_RC = {"svg.hashsalt": "autopar-opt-report", "svg.fonttype": "none", "font.size": 9,
       "font.family": "sans-serif", "axes.spines.top": False, "axes.spines.right": False}

MAX_LABELLED_BARS = 24
#: Micro-batch numbers are written on at most this many bars (each is a text element).
MAX_BAR_LABELS = 400
#: Above this many bars the timeline's bars are one embedded image, not vectors.
RASTER_OPS = 2000


def _to_svg(fig) -> str:
    """Serialise ``fig`` to an inline-ready SVG string (no XML prolog, no doctype)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight",
                metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    plt.close(fig)
    text = buf.getvalue()
    text = re.sub(r"<\?xml[^>]*\?>\s*", "", text)
    text = re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)
    return text.strip()


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
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(10.5, 0.55 * len(labels) + 1.2))
        end = timeline["makespan_ms"]
        rows = [y[f"s{i}"] for i in range(pp)]
        ax.add_collection(PolyCollection(_bars([0.0] * pp, [end] * pp, rows, [0.8] * pp),
                                         facecolors=COLORS["idle"], edgecolors="none", zorder=0))
        left, width, rows, height, colors, texts = [], [], [], [], [], []
        for op in ops:
            kind = op["kind"]
            send = kind.startswith("send")
            left.append(op["start_ms"])
            width.append(op["end_ms"] - op["start_ms"])
            rows.append(y[f"l{op['stage']}" if send else f"s{op['stage']}"])
            height.append(0.45 if send else 0.8)
            colors.append(COLORS["send" if send else kind])
            if kind in ("F", "B") and width[-1] > 0.025 * end:
                texts.append((left[-1] + width[-1] / 2, rows[-1], str(op["microbatch"])))
        ax.add_collection(PolyCollection(_bars(left, width, rows, height), facecolors=colors,
                                         edgecolors="white", linewidths=0.4, zorder=2,
                                         rasterized=len(ops) > RASTER_OPS))
        if timeline["microbatches"] <= MAX_LABELLED_BARS and len(texts) <= MAX_BAR_LABELS:
            for x, row, text in texts:
                ax.text(x, row, text, ha="center", va="center", color="white", fontsize=7, zorder=3)
        ax.set_yticks([y[k] for k in y], labels)
        ax.autoscale_view()
        ax.set_xlim(0, end * 1.01)
        ax.set_xlabel("time within one iteration (ms)")
        handles = [Patch(color=COLORS["F"], label="forward"),
                   Patch(color=COLORS["B"], label="backward"),
                   Patch(color=COLORS["sync"], label="gradient sync + optimizer"),
                   Patch(color=COLORS["idle"], label="idle (bubble)")]
        if with_links:
            handles.insert(2, Patch(color=COLORS["send"], label="cross-stage transfer"))
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.22),
                  ncol=len(handles), frameon=False)
        ax.grid(axis="x", color="#DDDDDD", linewidth=0.5, zorder=-1)
        return _to_svg(fig)


def _bars(left: list[float], width: list[float], y: list[float], height: list[float]) -> np.ndarray:
    """``(N, 4, 2)`` corners of horizontal bars centred on ``y`` (what ``barh`` draws)."""
    x0, x1 = np.asarray(left, dtype=float), np.asarray(left, dtype=float) + np.asarray(width, dtype=float)
    lo = np.asarray(y, dtype=float) - np.asarray(height, dtype=float) / 2
    hi = lo + np.asarray(height, dtype=float)
    return np.stack([np.column_stack([x0, lo]), np.column_stack([x1, lo]),
                     np.column_stack([x1, hi]), np.column_stack([x0, hi])], axis=1).reshape(-1, 4, 2)


def memory_svg(memory: dict) -> str:
    """Stacked per-stage bars (weights + activations) against device capacity.

    ``memory`` holds ``stages`` (dicts with index, weight_gib, activation_gib),
    ``capacity_gib`` and ``hbm_gib``.
    """
    stages = memory["stages"]
    idx = [s["index"] for s in stages]
    w = [s["weight_gib"] for s in stages]
    a = [s["activation_gib"] for s in stages]
    cap, hbm = memory["capacity_gib"], memory["hbm_gib"]
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(max(4.0, 0.8 * len(stages) + 3.0), 3.4))
        ax.bar(idx, w, width=0.6, color=COLORS["weights"], label="weights + grads + optimizer")
        ax.bar(idx, a, width=0.6, bottom=w, color=COLORS["activations"],
               label="activations (in-flight micro-batches)")
        ax.axhline(cap, color=COLORS["capacity"], linestyle="--", linewidth=1.2,
                   label=f"usable capacity {cap:.1f} GiB")
        ax.axhline(hbm, color="#555555", linestyle=":", linewidth=1.0,
                   label=f"device HBM {hbm:.1f} GiB")
        for i, wi, ai in zip(idx, w, a):
            ax.text(i, wi + ai, f"{wi + ai:.2f}", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(idx, [f"stage {i}" for i in idx])
        ax.set_ylabel("GiB per device")
        ax.set_ylim(0, max(hbm, max(wi + ai for wi, ai in zip(w, a))) * 1.12)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        return _to_svg(fig)
