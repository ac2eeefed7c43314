"""Layout ranking: the cost model's order of one job's parallel layouts against the
measured order (``benchmarks/calibration/ranking.py`` writes ``RANKING.md`` from it).

A planner chooses between layouts, so an error common to every layout of a job costs
nothing, while a small error that swaps two close layouts can cost a lot. Runs of the same
model (layers, width, MLP width, heads, query groups, vocabulary, name) at the same
sequence length and precision on the same number of the same GPUs form a :class:`Group`
when they use two or more layouts; per group: whether the model's first choice is the
measured fastest (:attr:`Group.top1`), the measured throughput lost by running it instead
(:attr:`Group.regret`), and the pairs of layouts measured more than :data:`TIE` apart that
it orders as measured (:meth:`Group.decisive_pairs`).
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
    """One priced run of a group."""

    id: str
    layout: str
    global_batch: int
    measured: float      # samples/s
    predicted: float     # samples/s


@dataclass(frozen=True)
class Group:
    """Runs of one model, sequence, precision and machine with different layouts."""

    key: str
    source: str          # the records file
    entries: tuple[Entry, ...]

    def measured_order(self) -> list[Entry]:
        return sorted(self.entries, key=lambda e: -e.measured)

    def predicted_order(self) -> list[Entry]:
        return sorted(self.entries, key=lambda e: -e.predicted)

    @property
    def top1(self) -> bool:
        return self.predicted_order()[0].id == self.measured_order()[0].id

    @property
    def regret(self) -> float:
        return 1.0 - self.predicted_order()[0].measured / self.measured_order()[0].measured

    def decisive_pairs(self) -> tuple[int, int]:
        """(pairs measured more than TIE apart, of them ordered as measured)."""
        n = agree = 0
        es = self.entries
        for i in range(len(es)):
            for j in range(i + 1, len(es)):
                a, b = es[i], es[j]
                if abs(a.measured / b.measured - 1.0) <= TIE:
                    continue
                n += 1
                agree += (a.measured > b.measured) == (a.predicted > b.predicted)
        return n, agree


def _layout(rec: dict, run) -> str:
    s = run.strategy
    par = rec.get("parallelism") or {}
    parts = [f"tp{s.tp}", f"pp{par.get('pp') or 1}", f"dp{s.dp}"]
    if s.cp > 1:
        parts.append(f"cp{s.cp}")
    if par.get("ep"):
        parts.append(f"ep{par['ep']}")
    parts.append(f"zero{s.zero}")
    if s.recompute.value != "none":
        parts.append(f"rc-{s.recompute.value}")
    parts.append(f"mbs{(rec.get('training') or {}).get('micro_batch_size')}")
    return " ".join(parts)


def _key(rec: dict) -> str:
    m, hw, tr = rec.get("model") or {}, rec.get("hardware") or {}, rec.get("training") or {}
    dims = "/".join(str(m.get(k)) for k in ("num_layers", "hidden_size", "ffn_hidden_size",
                                             "num_attention_heads", "num_kv_heads", "vocab_size"))
    return (f"{m.get('name')} [{dims}] seq {m.get('seq_len')}, {tr.get('precision')}, "
            f"{hw.get('num_gpus')} x {hw.get('gpu_type')}")


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
    """The groups of two or more layouts among ``runs`` (modeled records of ``records``)
    that ``priced`` holds a comparison for (id -> :class:`~autopar_opt.calibration.compare.Comparison`:
    its measured and predicted samples/s)."""
    by_id = {r["id"]: r for r in records}
    buckets: dict[str, list[Entry]] = defaultdict(list)
    for run in runs:
        c = priced.get(run.id)
        if c is None or run.kind != "end_to_end":
            continue
        rec = by_id[run.id]
        buckets[_key(rec)].append(Entry(run.id, _layout(rec, run),
                                        run.training.global_batch_size, c.measured, c.predicted))
    return [Group(key, source, tuple(entries)) for key, entries in sorted(buckets.items())
            if len({e.layout for e in entries}) >= 2]


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
            "decisive_pairs_agree": agree,
            "layouts": [{"id": e.id, "layout": e.layout, "measured_rank": i + 1,
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
