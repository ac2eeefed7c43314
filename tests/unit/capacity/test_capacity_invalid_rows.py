"""A combination of axis values the spec's rules reject, while each value runs in other
combinations, is a row of status ``invalid`` with the rule that rejected it, in
capacity.json, capacity.csv, the terminal and capacity.html; the other scenarios are
solved and answered (QA round 36: device [A100, H100] x dtype [bf16, fp8] refused the whole
sweep because an A100 has no fp8 peak). An axis value that no combination can run still
refuses the sweep up front.

Oracle: each combination's spec built alone by hand (``build_spec``): the rows that fail
are exactly the invalid ones, with that spec's own rule."""

from __future__ import annotations

import copy
import csv
import io
import json
import re
from pathlib import Path

import pytest
import yaml

from autopar_opt.capacity import load_sweep
from autopar_opt.capacity.sweep import SweepError
from autopar_opt.spec import SpecError, build_spec
from support.cli import run_cli

SWEEP = {"base": {"model": {"zoo": "debug", "overrides": {"hidden": 256, "heads": 4,
                                                          "ffn_hidden": 1024}},
                  "cluster": {"nodes": 1, "gpus_per_node": 2, "device": "A100-80GB"},
                  "training": {"global_batch_size": 8, "seq_len": 256},
                  "search": {"zero_levels": [0], "recompute": ["none"]},
                  "solver": {"name": "dp", "time_limit_s": 20}},
         "axes": {"device": ["A100-80GB", "H100-SXM-80GB"], "dtype": ["bf16", "fp8"]},
         "planning": {"token_budget": 1.0e8, "deadline_days": 1,
                      "prices": {"per_gpu_hour": {"A100-80GB": 1, "H100-SXM-80GB": 2},
                                 "source": "test"}}}


def _rule_alone(device: str, dtype: str) -> str | None:
    """Oracle: the rule the base with ``device`` and ``dtype`` set by hand is refused with."""
    spec = copy.deepcopy(SWEEP["base"])
    spec["cluster"]["device"], spec["training"]["dtype"] = device, dtype
    try:
        build_spec(spec, Path("spec.yaml"))
    except SpecError as exc:
        (problem,) = exc.problems
        return problem.rule
    return None


def test_only_the_combination_that_cannot_run_is_an_invalid_row(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(SWEEP))
    out = tmp_path / "out"
    code, text = run_cli("capacity", path, "--workers", "1", "--store", tmp_path / "s.sqlite",
                         "--out", out)
    assert code == 0, text
    doc = json.loads((out / "capacity.json").read_text())
    rules = {f"{d}_{t}": _rule_alone(d, t) for d in SWEEP["axes"]["device"]
             for t in SWEEP["axes"]["dtype"]}
    assert [r for r in rules.values() if r] and [r for r in rules.values() if not r]
    by_id = {e["id"]: e for e in doc["scenarios"]}
    assert set(by_id) == set(rules)
    for sid, rule in rules.items():
        e = by_id[sid]
        if rule is None:
            assert e["status"] == "optimal" and e["primal"] > 0, sid
        else:
            assert e["status"] == "invalid" and e["primal"] is None, sid
            assert rule in e["reason"] and e["reason"].startswith("invalid combination")
            assert e["meets"] == "no" and e["time_to_train_days"] == [None, None]
    bad = [sid for sid, rule in rules.items() if rule]
    assert doc["answers"]["invalid"]["scenarios"] == bad
    assert doc["sweep"]["scenarios"] == 4 and doc["sweep"]["invalid"] == len(bad)
    assert doc["answers"]["cheapest_meeting_requirement"]["scenario"] not in bad
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO((out / "capacity.csv").read_text()))}
    for sid in bad:
        assert rows[sid]["status"] == "invalid" and rules[sid] in rows[sid]["reason"]
        assert not (out / "scenarios" / sid).exists()
    html = (out / "capacity.html").read_text()
    assert "Invalid:" in html and bad[0] in html
    assert "invalid:" in text and rules[bad[0]] in " ".join(text.split())


def test_a_value_no_combination_can_run_still_refuses_the_sweep(tmp_path):
    sweep = copy.deepcopy(SWEEP)
    sweep["axes"]["device"] = ["A100-80GB"]            # fp8 runs on no device of the sweep
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    with pytest.raises(SweepError) as exc:
        load_sweep(path)
    (problem,) = exc.value.problems
    assert problem.key == "axes.dtype[1]" and _rule_alone("A100-80GB", "fp8") in problem.rule


def test_the_summary_line_counts_every_row(tmp_path):
    """"N scenarios (a searched, b from the store ...)": the invalid rows are among the N, so
    the line says how many there are (it read "4 scenarios (3 solved, 0 from the store"); a
    search is counted as searched, not solved (a time-limited one may find no plan)."""
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(SWEEP))
    code, text = run_cli("capacity", path, "--workers", "1", "--store", tmp_path / "s.sqlite")
    assert code == 0, text
    flat = " ".join(text.split())
    found = re.search(r"(\d+) scenarios \((\d+) searched, (\d+) from the store .*?"
                      r"(?:, (\d+) invalid, not searched)?\) in", flat)
    assert found, flat[-400:]
    n, solved, reused, bad = (int(x or 0) for x in found.groups())
    assert n == 4 and bad == 1 and solved + reused + bad == n
