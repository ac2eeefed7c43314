"""The searcher block of the HTML reports (``autopar solve|place --searcher ... --out``).

Both reports (the plan report and the placement report) render the same
``searcher`` entry of their JSON document (:func:`autopar_opt.learn.harness.searcher_block`):
the searcher's name and seed, its value as priced by the independent evaluator,
its wall time and samples, the proven lower bound of the space (from the exact
side's certificate) and therefore its gap, the exact optimum and the ratio to
it when the exact side proved one, and its search trace (best value so far
against wall time) as a table and an inline SVG step plot.
"""

from __future__ import annotations

import math

from autopar_opt.reports.svg_inline import inline_svg

#: Rows of the trace table (the plot shows the whole trace, thinned to this many points).
TRACE_ROWS = 12
PLOT_POINTS = 400


def _fmt(x) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.6g}"


def _finite_trace(trace: list[dict]) -> list[dict]:
    return [p for p in trace if p.get("best") is not None and math.isfinite(float(p["best"]))]


def _thin(points: list[dict], k: int) -> list[dict]:
    """At most ``k`` points: the first, the last and evenly spaced ones between (in order)."""
    if len(points) <= k:
        return points
    step = (len(points) - 1) / (k - 1)
    return [points[round(i * step)] for i in range(k)]


def trace_svg(trace: list[dict], lower_bound: float | None, optimum: float | None) -> str:
    """Step plot of the best value so far against wall time, with the bound and optimum."""
    from autopar_opt.reports.charts import _RC, _to_svg, plt

    pts = _thin(_finite_trace(trace), PLOT_POINTS)
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(7.0, 2.6))
        ax.step([p["wall_s"] for p in pts], [p["best"] for p in pts], where="post",
                color="#4C78A8", label="searcher: best so far")
        if optimum is not None:
            ax.axhline(optimum, color="#54A24B", linestyle="--", linewidth=1, label="proven optimum")
        if lower_bound is not None and (optimum is None or abs(lower_bound - optimum) > 1e-12 * abs(optimum)):
            ax.axhline(lower_bound, color="#D62728", linestyle=":", linewidth=1, label="proven lower bound")
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel("objective")
        ax.legend(loc="upper right", frameon=False)
        return _to_svg(fig)


def _plan_text(plan) -> str:
    """One line on the searcher's plan: pipeline shape (layer plans) or devices used."""
    if not isinstance(plan, dict):
        return ""
    if "pp" in plan:
        return f"pp = {plan['pp']}, {plan.get('microbatches', '?')} micro-batches"
    if "assignment" in plan:
        return f"devices used: {len(set(plan['assignment']))}"
    return ""


def searcher_context(block: dict | None) -> dict | None:
    """Template context of the ``searcher`` entry (None when the document has none)."""
    if not block:
        return None
    gap, ratio = block.get("gap"), block.get("ratio_to_optimum")
    points = _finite_trace(block.get("trace", []))
    rows = [{"wall": f"{p['wall_s']:.3f}", "samples": p["samples"], "best": _fmt(p["best"])}
            for p in _thin(points, TRACE_ROWS)]
    svg = inline_svg(trace_svg(block["trace"], block.get("lower_bound"), block.get("optimum")),
                     "trace", "The searcher's best value so far against wall time, with the proven "
                     "bound (the table below lists the points)") if points else None
    return {"name": block["name"], "seed": block["seed"], "value_text": _fmt(block.get("value")),
            "plan_text": _plan_text(block.get("plan")),
            "found": block.get("value") is not None,
            "wall_text": f"{block['wall_time_s']:.2f}", "samples": block["samples"],
            "bound_text": _fmt(block.get("lower_bound")),
            "gap_text": "—" if gap is None else f"{100 * gap:.4g}%",
            "optimum_text": _fmt(block.get("optimum")), "proven": block.get("optimum") is not None,
            "ratio_text": "—" if ratio is None else f"{ratio:.4f}x",
            "trace_rows": rows, "trace_points": len(points), "trace_svg": svg}
