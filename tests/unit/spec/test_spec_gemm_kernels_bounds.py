"""``gemm_kernels`` and ``gemm_kernels_unfused`` (``int | None`` layer fields) are
bounded like every other count: the schema derived from ``graph.Layer`` used to
give ``ge=0`` only to fields typed exactly ``int``/``float``, so an optional count
was unbounded and ``gemm_kernels_unfused: -1000`` under ``runtime: torchtitan``
priced a negative GEMM latency (a negative iteration time, exit 0).

Oracle: the rule each value breaks, written out (a count is >= 0; a layer that
runs GEMM FLOPs launches at least one GEMM kernel); the CLI contract for bad
input (exit 2, file, key, value, rule and fix on one line; with ``--json`` the same
fields as one JSON error object on stdout and no estimate; no file written, no traceback).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from autopar_opt.cli.commands import app
from autopar_opt.spec import SpecError, load_spec


def _spec(layer_extra: dict, kind: str = "transformer_block") -> dict:
    layers = [{"name": "a", "kind": kind, "flops_fwd": 1e9, "flops_bwd": 2e9, "params": 10,
               **layer_extra},
              {"name": "b", "kind": "transformer_block", "flops_fwd": 1e9, "flops_bwd": 2e9,
               "params": 10}]
    return {"model": {"name": "m", "layers": layers},
            "cluster": {"name": "c4", "nodes": 1, "gpus_per_node": 4, "device": "A100-40GB"},
            "training": {"global_batch_size": 16, "runtime": "torchtitan"},
            "plan": {"tp": 1, "pp": 2, "microbatches": 4}}


def _write(tmp_path: Path, spec: dict) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.mark.parametrize("key,value,rule,fix", [
    ("gemm_kernels_unfused", -1000, r"greater than or equal to 0", r"expected a number at least 0"),
    ("gemm_kernels", -3, r"greater than or equal to 0", r"expected a number at least 0"),
    ("gemm_kernels_unfused", 0, r"at least 1 on a transformer_block layer",
     r"give the GEMM kernels of one forward pass"),
    ("gemm_kernels", 0, r"at least 1 on a transformer_block layer",
     r"give the GEMM kernels of one forward pass"),
])
def test_bad_gemm_kernel_count_exits_2_naming_file_key_value_rule_fix(tmp_path, key, value, rule,
                                                                      fix):
    path = _write(tmp_path, _spec({key: value}))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert len(info.value.problems) == 1, str(info.value)
    result = CliRunner().invoke(app, ["estimate", str(path), "--json"])
    assert result.exit_code == 2
    line = next(ln for ln in result.stderr.splitlines() if f"layers[0].{key}" in ln)
    assert str(path) in line and str(value) in line
    assert re.search(rf"= {value}: .*{rule}.*{fix}", line), line
    error = json.loads(result.stdout)["error"]          # the same fields, no estimate
    assert set(json.loads(result.stdout)) == {"error"} and "Traceback" not in result.stderr
    assert error["exit_code"] == 2 and error["kind"] == "invalid spec"
    assert [(p["file"], p["key"], p["value"]) for p in error["problems"]] == \
        [(str(path), f"model.layers[0].{key}", value)]
    assert rule in error["problems"][0]["rule"] and fix in error["problems"][0]["fix"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]  # nothing written


def test_a_memory_bound_or_flopless_layer_may_state_zero_kernels(tmp_path):
    """Zero GEMM kernels is a sound count where no GEMM runs: a norm (priced as
    HBM traffic) or a layer without forward FLOPs."""
    load_spec(_write(tmp_path, _spec({"gemm_kernels": 0}, kind="norm")))
    spec = _spec({"gemm_kernels_unfused": 0})
    spec["model"]["layers"][0]["flops_fwd"] = 0.0
    load_spec(_write(tmp_path, spec))


def test_a_valid_count_still_estimates(tmp_path):
    path = _write(tmp_path, _spec({"gemm_kernels": 4, "gemm_kernels_unfused": 7}))
    result = CliRunner().invoke(app, ["estimate", str(path), "--json"])
    assert result.exit_code == 0, result.stderr
