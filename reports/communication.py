"""The report's table of each kind of communication: its whole transfer time, the part hidden
behind compute, the part exposed and the interference slowdown that part carries, per
iteration on the critical path (plan.json ``metrics.communication``,
:mod:`autopar_opt.cost.comm_split`). Read from the document alone, like every section."""

from __future__ import annotations

from autopar_opt.reports.document import to_float
from autopar_opt.reports.formatting import fmt_time

#: Kinds in plan.json's order, with their labels.
KIND_LABELS = {"tp": "tensor parallel", "cp": "context parallel",
               "zero": "ZeRO-3 gathers and scatters, ZeRO-2 reductions (per micro-batch)",
               "ep": "MoE all-to-all", "offload": "CPU activation offload copies",
               "reshard": "resharding", "dp": "data-parallel gradient sync (once per iteration)"}
FIGURES = ("total_s", "hidden_s", "exposed_s", "interference_s")


def communication_section(doc: dict) -> list[dict] | None:
    """One row per kind that moves anything (total or exposed above zero), its four figures
    formatted; [] for a plan that communicates nothing (the key is there, every figure zero);
    None for a document without ``metrics.communication`` (written before it)."""
    m = doc.get("metrics")
    comm = (m or {}).get("communication")
    if not comm:
        return None
    return communication_rows(comm, "metrics.communication")


def communication_rows(comm: dict, where: str) -> list[dict]:
    """The rows of one ``communication`` mapping (kind -> figures) found at ``where`` (the
    key a wrong figure is named by)."""
    rows = []
    for kind in list(KIND_LABELS) + sorted(k for k in comm if k not in KIND_LABELS):
        got = comm.get(kind) or {}
        vals = {f: to_float(got.get(f, 0.0), f"{where}.{kind}.{f}") or 0.0 for f in FIGURES}
        if vals["total_s"] <= 0 and vals["exposed_s"] <= 0:
            continue
        rows.append({"kind": KIND_LABELS.get(kind, kind),
                     **{f.removesuffix("_s"): fmt_time(vals[f]) for f in FIGURES}})
    return rows


def fleet_communication(doc: dict) -> list[dict]:
    """A fleet plan.json's tables: one titled ``pipeline`` from ``metrics.communication``, or
    one per replica class from ``metrics.classes[].communication`` (each class runs its own
    pipeline; the cross-group all-reduce is the metrics' ``sync_s``); [] for a document
    without them (no plan, or written before them)."""
    m = doc.get("metrics") or {}
    if m.get("communication"):
        return [{"title": "pipeline", "rows": communication_rows(m["communication"],
                                                                 "metrics.communication")}]
    return [{"title": f"class {c.get('class', t)}",
             "rows": communication_rows(c["communication"], f"metrics.classes[{t}].communication")}
            for t, c in enumerate(m.get("classes") or []) if c.get("communication")]
