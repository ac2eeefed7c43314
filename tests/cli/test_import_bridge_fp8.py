"""A Megatron-Bridge overrides file's precision is read as Bridge 0.3.1 decides it.

Before, only four recipe names were read (``mixed_precision``); the model's own precision
fields (``model.fp8``, ``model.fp8_recipe``, ``model.bf16``) were not: an FP8 file stating
them under ``mixed_precision: null`` read under a bf16 spec was priced as BF16 (exit 0),
``model.fp8`` without ``mixed_precision`` (which Bridge drops at launch for its recipe's
bf16_mixed) was taken, ``mixed_precision: bf16_mixed`` under an FP8 spec was priced as FP8,
and Bridge's other recipes (delayed/subchannel/MXFP8) were refused as unknown. Oracles:
Bridge itself (tests/support/bridge_check.py: what ``runtime_config_update`` leaves on the
model) for each file, Bridge's recipe registry for the table, and the round trip: an FP8
plan exported to Bridge and read back prices the same, in either spelling of its recipe."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from support.bridge import BRIDGE_DIR, bridge_missing, validate_bridge
from support.cli import export_estimate, first_json, run_cli
from support.paths import TESTS

CLUSTERS = {"h100": "{zoo: 2x8-h100}", "b200": "{nodes: 2, gpus_per_node: 8, device: B200}"}
SPEC = """\
model: {zoo: llama3-8b}
cluster: CLUSTER
training: {global_batch_size: 64, seq_len: 2048, dtype: DTYPE, runtime: megatron-lm}
plan: PLAN
"""
RECIPE = "mixed_precision: bf16_with_fp8_current_scaling_mixed"
#: the same recipe's fields (Bridge's bf16_with_fp8_current_scaling_mixed) on the model
FIELDS = "model: {bf16: true, fp8: hybrid, fp8_recipe: tensorwise, "


def _estimate(folder, dtype, plan, device="h100"):
    text = SPEC.replace("CLUSTER", CLUSTERS[device]).replace("DTYPE", dtype)
    (folder / "s.yaml").write_text(text.replace("PLAN", plan))
    code, out = run_cli("estimate", folder / "s.yaml", "--json")
    return code, first_json(out)


def _exported(folder, device="h100") -> tuple[dict, str]:
    code, doc = _estimate(folder, "fp8", "{tp: 2, pp: 2, microbatches: 8, zero: 1}", device)
    assert code == 0, doc
    text = export_estimate(folder, doc, "megatron-bridge", "bridge.yaml")
    assert RECIPE in text and text.count("model: {") == 1
    return doc, text


def _variants(text: str) -> dict[str, str]:
    return {"recipe": text,
            "null": text.replace(RECIPE, "mixed_precision: null").replace("model: {", FIELDS),
            "absent": text.replace(RECIPE, "").replace("model: {", FIELDS),
            "bf16_recipe": text.replace(RECIPE, "mixed_precision: bf16_mixed"),
            "hyphens": text.replace(RECIPE, RECIPE.replace("_", "-").replace("mixed-precision",
                                                                            "mixed_precision"))}


def _read(folder, dtype, text, device="h100"):
    (folder / "b.yaml").write_text(text)
    return _estimate(folder, dtype, "{megatron_bridge: b.yaml}", device)


@pytest.mark.parametrize("variant", ["recipe", "null", "hyphens"])
def test_an_fp8_file_reads_back_as_fp8_at_the_same_price(tmp_path, variant):
    first, text = _exported(tmp_path)
    code, again = _read(tmp_path, "fp8", _variants(text)[variant])
    assert code == 0, again
    assert again["plan"] == first["plan"] and again["metrics"] == first["metrics"]
    code, doc = _read(tmp_path, "bf16", _variants(text)[variant])     # never priced as BF16
    assert code == 2, doc
    assert "trains in fp8" in doc["error"]["problems"][0]["rule"]


@pytest.mark.parametrize("variant, dtype, words", [
    ("absent", "fp8", "model.bf16, model.fp8, model.fp8_recipe without mixed_precision: at "
                      "launch Bridge replaces the model's precision fields"),
    ("absent", "bf16", "without mixed_precision"),
    ("bf16_recipe", "fp8", "mixed_precision bf16_mixed trains in bf16, but training.dtype is fp8"),
])
def test_a_file_whose_precision_is_not_the_spec_s_is_refused(tmp_path, variant, dtype, words):
    _, text = _exported(tmp_path)
    code, doc = _read(tmp_path, dtype, _variants(text)[variant])
    assert code == 2, doc
    [problem] = doc["error"]["problems"]
    assert problem["key"] == "plan.megatron_bridge" and words in problem["rule"], problem


def test_the_mxfp8_recipe_is_read_refused_on_hopper_and_said_on_blackwell(tmp_path):
    _, text = _exported(tmp_path)
    mx = text.replace(RECIPE, "mixed_precision: bf16_with_mxfp8_mixed")
    code, doc = _read(tmp_path, "fp8", mx)
    assert code == 2, doc
    [problem] = doc["error"]["problems"]
    assert problem["rule"].startswith("mixed_precision bf16_with_mxfp8_mixed's fp8_recipe "
                                      "(--fp8-recipe) mxfp8 asks for MXFP8, which the "
                                      "H100-SXM-80GB (hopper) cannot run"), problem
    first, text = _exported(tmp_path, "b200")
    code, doc = _read(tmp_path, "fp8", text.replace(RECIPE, "mixed_precision: "
                                                    "bf16_with_mxfp8_mixed"), "b200")
    assert code == 0, doc
    assert doc["metrics"] == first["metrics"]
    assert any(n.startswith("plan.megatron_bridge: mixed_precision bf16_with_mxfp8_mixed's "
                            "fp8_recipe (--fp8-recipe) mxfp8: MXFP8") for n in doc["notices"])


@pytest.mark.skipif(bridge_missing() is not None, reason=str(bridge_missing()))
def test_bridge_itself_trains_each_file_as_read(tmp_path):
    """What Bridge 0.3.1 leaves on the model after ``runtime_config_update``: FP8 for the
    recipe and for ``null`` with the model's fields (read as FP8 above), and no FP8 for the
    model's fields without ``mixed_precision`` (the recipe's bf16_mixed replaces them: why
    that file is refused rather than read as FP8)."""
    _, text = _exported(tmp_path)
    cases = []
    for name, body in _variants(text).items():
        (tmp_path / f"{name}.yaml").write_text(body)
        cases.append({"name": name, "path": str(tmp_path / f"{name}.yaml"), "world": 16,
                      "gpus_per_node": 8, "recipe": "pretrain_common"})
    _, results = validate_bridge(cases)
    got = {n: (r["derived"]["bf16"], r["derived"]["fp8"]) for n, r in results.items()
           if r["ok"]}
    assert got == {"recipe": (True, "hybrid"), "null": (True, "hybrid"),
                   "hyphens": (True, "hybrid"), "absent": (True, None),
                   "bf16_recipe": (True, None)}


@pytest.mark.skipif(bridge_missing() is not None, reason=str(bridge_missing()))
def test_the_recipe_table_is_bridges_registry():
    from autopar_opt.export.bridge_precision import RECIPES

    script = ("import json\nfrom support import te_shim\nte_shim.install()\n"
              "from megatron.bridge.training import mixed_precision as mp\n"
              "out = {}\nfor n, f in mp.MIXED_PRECISION_RECIPES.items():\n"
              "    c = f()\n    out[n] = ['bf16' if c.bf16 else 'fp16' if c.fp16 else 'fp32',"
              " c.fp8, c.fp8_recipe, c.fp4]\nprint(json.dumps(out))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(BRIDGE_DIR), str(TESTS)]),
           "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-c", script], cwd=TESTS, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    registry = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = {n: list(v) for n, v in RECIPES.items()}
    assert {n.replace("-", "_"): v for n, v in registry.items()} == ours
