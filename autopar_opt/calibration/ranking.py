"""Layout ranking: the cost model's order of one job's parallel layouts against the
measured order (``benchmarks/calibration/ranking.py`` writes ``RANKING.md`` from it).

A planner chooses between layouts, so an error common to every layout of a job costs
nothing, while a small error that swaps two close layouts can cost a lot. Runs of the same
model (layers, width, MLP width, heads, query groups, vocabulary, name) at the same
sequence length, precision and global batch size on the same number of the same GPUs (one
job) form a :class:`Group` when they use two or more layouts; per group: whether the
model's first choice is the measured fastest (:attr:`Group.top1`), the measured throughput
lost by running it instead (:attr:`Group.regret`), and the pairs of layouts measured more
than :data:`TIE` apart that it orders as measured (:meth:`Group.decisive_pairs`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from autopar_opt.calibration.compare import Comparison, compare
from autopar_opt.calibration.reading import load_run_file
from autopar_opt.cost.interval import DEFAULT_FILE
from autopar_opt.cost.params import CostParams, default_params

#: Measured throughputs closer than this (relative) are a tie: not a decisive pair.
TIE = 0.02


@dataclass(frozen=True)
class Entry:
    """One layout of a group: its runs' ids, measured samples/s (their mean where a
    layout was published more than once) and predicted samples/s (one plan, one price)."""

    ids: tuple[str, ...]
    layout: str
    global_batch: int
    measured: float      # samples/s
    predicted: float     # samples/s

    @property
    def id(self) -> str:
        """The layout's runs' ids, comma-separated (its name in tables and orders)."""
        return ",".join(self.ids)


@dataclass(frozen=True)
class Group:
    """Layouts of one job: one model, sequence, precision, global batch and machine."""

    key: str
    source: str          # the records file
    entries: tuple[Entry, ...]

    def measured_order(self) -> list[Entry]:
        return sorted(self.entries, key=lambda e: (-e.measured, e.id))

    def predicted_order(self) -> list[Entry]:
        """Fastest first by prediction; a tie goes to the layout measured slower (a
        planner that cannot tell two layouts apart gets no credit for the better one)."""
        return sorted(self.entries, key=lambda e: (-e.predicted, e.measured, e.id))

    @property
    def top1(self) -> bool:
        return self.predicted_order()[0].id == self.measured_order()[0].id

    @property
    def regret(self) -> float:
        return 1.0 - self.predicted_order()[0].measured / self.measured_order()[0].measured

    def decisive_pairs(self) -> tuple[int, int]:
        """(pairs of layouts measured more than TIE apart, the faster over the slower
        less 1, of them ordered as measured)."""
        n = agree = 0
        es = self.entries
        for i in range(len(es)):
            for j in range(i + 1, len(es)):
                a, b = es[i], es[j]
                if max(a.measured, b.measured) / min(a.measured, b.measured) - 1.0 <= TIE:
                    continue
                n += 1
                agree += (a.measured > b.measured) == (a.predicted > b.predicted)
        return n, agree


def _stated(value) -> str:
    return "not stated" if value is None else str(value)


def _layout(rec: dict, run) -> str:
    """The parallel layout of a priced run: the degrees, sequence parallelism, ZeRO stage,
    recomputation, micro-batch size and pipeline schedule (with its virtual stages)."""
    s = run.strategy
    plan = run.plan
    parts = [f"tp{s.tp}", f"pp{len(plan.stages) if plan is not None else 1}", f"dp{s.dp}"]
    if s.cp > 1:
        parts.append(f"cp{s.cp}")
    if s.ep > 1:
        parts.append(f"ep{s.ep}")
    if s.sp:
        parts.append("sp")
    parts.append(f"zero{s.zero}")
    if s.recompute.value != "none":
        parts.append(f"rc-{s.recompute.value}")
    parts.append(f"mbs {_stated((rec.get('training') or {}).get('micro_batch_size'))}")
    if plan is not None and len(plan.stages) > 1:
        parts.append(plan.schedule.value + (f" vp{plan.vp_chunks}" if plan.vp_chunks > 1 else ""))
    return " ".join(parts)


def _key(rec: dict, run) -> str:
    m, hw, tr = rec.get("model") or {}, rec.get("hardware") or {}, rec.get("training") or {}
    dims = "/".join(_stated(m.get(k)) for k in ("num_layers", "hidden_size", "ffn_hidden_size",
                                                 "num_attention_heads", "num_kv_heads",
                                                 "vocab_size"))
    return (f"{_stated(m.get('name'))} [{dims}] seq {_stated(m.get('seq_len'))}, precision "
            f"{_stated(tr.get('precision'))}, global batch {run.training.global_batch_size}, "
            f"{_stated(hw.get('num_gpus'))} x {_stated(hw.get('gpu_type'))}")


def family_leave_out_params(path: Path | None = None) -> Callable[[str], CostParams]:
    """A run family -> the parameters fitted without that family (over both record files:
    the leave-one-family-out fits ``benchmarks/calibration/intervals.py`` stores in
    ``autopar_opt/cost/intervals.yaml``), for out-of-sample ranking of the fitting file's
    own groups. KeyError for a family the file has no fit for."""
    doc = yaml.safe_load((path or DEFAULT_FILE).read_text())
    fits = {key.split(":", 1)[1]: CostParams.from_dict(body)
            for key, body in doc["fits"].items() if key.startswith("family:")}
    return lambda family: fits[family]


def rank_groups(source: str, records: list[dict], runs, priced: dict[str, Comparison]
                ) -> list[Group]:
    """The jobs with two or more layouts among ``runs`` (modeled records of ``records``)
    that ``priced`` holds a comparison for (id -> :class:`~autopar_opt.calibration.compare.Comparison`:
    its measured and predicted samples/s). Runs of one layout published more than once
    are one entry: their ids and mean rates (one plan has one price with one set of
    parameters; the mean keeps the entry symmetric where the runs' families were priced
    with different leave-out fits)."""
    by_id = {r["id"]: r for r in records}
    buckets: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        c = priced.get(run.id)
        if c is None or run.kind != "end_to_end":
            continue
        rec = by_id[run.id]
        buckets[_key(rec, run)][_layout(rec, run)].append((run, c))
    out = []
    for key, layouts in sorted(buckets.items()):
        if len(layouts) < 2:
            continue
        entries = tuple(Entry(tuple(r.id for r, _ in rows), layout,
                              rows[0][0].training.global_batch_size,
                              sum(c.measured for _, c in rows) / len(rows),
                              sum(c.predicted for _, c in rows) / len(rows))
                        for layout, rows in sorted(layouts.items()))
        out.append(Group(key, source, entries))
    return out


def groups_of(source: str, path: Path, params: CostParams | None = None,
              params_of: Callable[[str], CostParams] | None = None) -> list[Group]:
    """The groups of one records file with at least two different layouts, priced with
    ``params_of(run family)`` where given (e.g. :func:`family_leave_out_params`), else with
    ``params`` (the shipped ones by default)."""
    from autopar_opt.calibration.calibrate import model_records   # calibrate imports this module

    records = load_run_file(path)
    runs, _ = model_records(records)
    shipped = params or default_params()
    priced = {run.id: compare(run, params_of(run.family) if params_of else shipped)
              for run in runs if not run.memory_only and run.kind == "end_to_end"}
    return rank_groups(source, records, runs, priced)


def group_dict(g: Group) -> dict:
    """A group as plan-free JSON: its key, figures and layouts in measured order."""
    n, agree = g.decisive_pairs()
    pred_rank = {e.id: i + 1 for i, e in enumerate(g.predicted_order())}
    return {"job": g.key, "top1": g.top1, "regret": g.regret, "decisive_pairs": n,
            "decisive_pairs_agree": agree, "measured_fastest": g.measured_order()[0].layout,
            "model_first": g.predicted_order()[0].layout,
            "layouts": [{"ids": list(e.ids), "layout": e.layout,
                         "global_batch": e.global_batch, "measured_rank": i + 1,
                         "predicted_rank": pred_rank[e.id], "measured": e.measured,
                         "predicted": e.predicted} for i, e in enumerate(g.measured_order())]}


def summary(groups: list[Group]) -> dict[str, float]:
    """Pooled figures of ``groups``: counts, first choices that are the fastest, mean and
    largest regret, decisive pairs and those ordered as measured."""
    pairs = [g.decisive_pairs() for g in groups]
    n = sum(p[0] for p in pairs)
    return {"groups": len(groups), "runs": sum(len(g.entries) for g in groups),
            "top1": sum(g.top1 for g in groups),
            "mean_regret": sum(g.regret for g in groups) / len(groups) if groups else 0.0,
            "max_regret": max((g.regret for g in groups), default=0.0),
            "pairs": n, "pairs_agree": sum(p[1] for p in pairs)}
