"""The project's own H200 attention rows in the cost model's data files are the device run's.

Oracle: benchmarks/kernels/h200_results.json (``attention``, ``attention_fill``) and
h200_fill.json, written on the device; benchmarks/kernels/attention_rows.py copies them into
autopar_opt/cost/data/attention_kernels.yaml (source own_h200_sdpa, forward and backward rows)
and attention_fill.yaml (forward+backward of one sequence). A hand edit of either file, or a
re-run of the device script without regenerating them, fails here."""

import json
from importlib import resources
from pathlib import Path

import pytest
import yaml

KERNELS = Path(__file__).resolve().parents[3] / "benchmarks" / "kernels"
KERNEL = {"cudnn": "cudnn", "flash": "flash_attention_2", "efficient": "sdpa_memory_efficient"}


def _data(name: str) -> dict:
    return yaml.safe_load(resources.files("autopar_opt.cost").joinpath("data", name).read_text())


def test_the_table_rows_are_the_device_run():
    raw = json.loads((KERNELS / "h200_results.json").read_text())["attention"]
    want = sorted((KERNEL[r["backend"]], p, r["causal"], r["head_dim"], r["seq"], r["b"], r["heads"],
                   round(r[f"{p}_tflops"], 1)) for r in raw if "error" not in r for p in ("fwd", "bwd"))
    rows = [r for r in _data("attention_kernels.yaml")["rows"] if r["source"] == "own_h200_sdpa"]
    got = sorted((r["kernel"], r["pass"], r["causal"], r["head_dim"], r["seq_len"], r["batch"], r["heads"],
                  r["tflops"]) for r in rows)
    assert len(got) == len(want) == 216
    for g, w in zip(got, want):
        assert g[:7] == w[:7] and g[7] == pytest.approx(w[7], abs=0.051)


def test_the_fill_rows_are_the_device_runs():
    first = json.loads((KERNELS / "h200_results.json").read_text())["attention_fill"]
    sweep = json.loads((KERNELS / "h200_fill.json").read_text())["rows"]
    want = sorted((KERNEL[r["backend"]], r["causal"], r["head_dim"], r["seq"], r["b"], r["heads"],
                   round(r["fwd_bwd_tflops"], 1)) for r in first + sweep if "error" not in r)
    got = sorted((r["kernel"], r["causal"], r["head_dim"], r["seq_len"], r["batch"], r["heads"], r["tflops"])
                 for r in _data("attention_fill.yaml")["rows"])
    assert len(got) == len(want) == 238
    for g, w in zip(got, want):
        assert g[:6] == w[:6] and g[6] == pytest.approx(w[6], abs=0.051)
