"""An imported launch file asking for MXFP8 is refused where the device cannot run it, and
said to be priced as per-tensor FP8 where it can.

Before, Megatron-LM's ``--fp8-recipe mxfp8`` and torchtitan's ``quantize.linear.mx``
converter were read as plain FP8 on an H100 (Hopper has no MX tensor-core support) and on
a B200 alike, exit 0, nothing said. Oracle: Transformer Engine's MXFP8 page (MXFP8 needs
Blackwell, SM 10.0+) and torchtitan's own assertion in ``MXLinearConverter``
(``components/quantization/mx.py``); a second route for the price: the same file with a
per-tensor recipe (``--fp8-recipe tensorwise``, the ``quantize.linear.float8`` converter)
prices the same, which is what the note says."""

from __future__ import annotations

import pytest

from support.cli import first_json, run_cli
from support.torchtitan_jobs import JOB_PLAN, export_torchtitan_job

CLUSTERS = {"h100": "{zoo: 2x8-h100}", "b200": "{nodes: 2, gpus_per_node: 8, device: B200}"}
SPEC = """\
model: {zoo: llama3-8b}
cluster: CLUSTER
training: {global_batch_size: 64, seq_len: 2048, dtype: fp8, runtime: RUNTIME}
plan: PLAN
"""
ARGS = ("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --micro-batch-size 2 "
        "--global-batch-size 64 --bf16 --fp8-format e4m3 --use-distributed-optimizer "
        "--fp8-recipe ")


def _estimate(folder, device, runtime, plan):
    spec = SPEC.replace("CLUSTER", CLUSTERS[device]).replace("RUNTIME", runtime)
    (folder / "s.yaml").write_text(spec.replace("PLAN", plan))
    code, text = run_cli("estimate", folder / "s.yaml", "--json")
    return code, first_json(text)


def _refused(code, doc, key, device):
    assert code == 2, doc
    [problem] = doc["error"]["problems"]
    assert problem["key"] == key
    assert f"asks for MXFP8, which the {device} (hopper) cannot run" in problem["rule"]
    assert "Blackwell" in problem["rule"] and "per-tensor FP8 recipe" in problem["rule"]


def test_megatron_mxfp8_is_refused_on_hopper(tmp_path):
    code, doc = _estimate(tmp_path, "h100", "megatron-lm", f'{{megatron_args: "{ARGS}tensorwise"}}')
    assert code == 0, doc
    code, doc = _estimate(tmp_path, "h100", "megatron-lm", f'{{megatron_args: "{ARGS}mxfp8"}}')
    _refused(code, doc, "plan.megatron_args", "H100-SXM-80GB")


def test_megatron_mxfp8_on_blackwell_is_priced_as_per_tensor_fp8_and_said(tmp_path):
    code, tensorwise = _estimate(tmp_path, "b200", "megatron-lm",
                                 f'{{megatron_args: "{ARGS}tensorwise"}}')
    assert code == 0, tensorwise
    code, mx = _estimate(tmp_path, "b200", "megatron-lm", f'{{megatron_args: "{ARGS}mxfp8"}}')
    assert code == 0, mx
    assert mx["metrics"] == tensorwise["metrics"]
    said = [n for n in mx["notices"] if "MXFP8" in n]
    assert said and said[0].startswith("plan.megatron_args: --fp8-recipe mxfp8: MXFP8")
    assert "priced as per-tensor FP8" in said[0]
    assert not any("MXFP8" in n for n in tensorwise["notices"])


def _torchtitan_job(folder, device) -> str:
    code, doc = _estimate(folder, device, "torchtitan", JOB_PLAN)
    assert code == 0, doc
    toml = export_torchtitan_job(folder, doc)
    assert '"quantize.linear.float8"' in toml
    return toml


@pytest.mark.parametrize("device", ["h100", "b200"])
def test_torchtitan_mx_converter(tmp_path, device):
    toml = _torchtitan_job(tmp_path, device)
    code, float8 = _estimate(tmp_path, device, "torchtitan", "{torchtitan: job.toml}")
    assert code == 0, float8
    (tmp_path / "job.toml").write_text(toml.replace('"quantize.linear.float8"',
                                                    '"quantize.linear.mx"'))
    code, mx = _estimate(tmp_path, device, "torchtitan", "{torchtitan: job.toml}")
    if device == "h100":
        _refused(code, mx, "plan.torchtitan", "H100-SXM-80GB")
        return
    assert code == 0, mx
    assert mx["metrics"] == float8["metrics"]
    assert any(n.startswith("plan.torchtitan: model.converters ['quantize.linear.mx']: MXFP8")
               and "priced as per-tensor FP8" in n for n in mx["notices"]), mx["notices"]


@pytest.mark.parametrize("converters, said", [
    ('"quantize.linear.MX"', "not a converter torchtitan 0.2.2 registers"),
    ('"quantize.zzz"', "not a converter torchtitan 0.2.2 registers"),
    ('"quantize.grouped_mm.mx"', "converts the MoE experts' grouped GEMMs only"),
    ('"quantize.grouped_mm.float8"', "converts the MoE experts' grouped GEMMs only"),
])
def test_a_converter_that_does_not_train_the_linears_in_fp8_is_refused(tmp_path, converters,
                                                                        said):
    """QA round 36: any name starting 'quantize.' was read as FP8, so a misspelt converter
    (which torchtitan's registry does not hold: the launch fails) and, on a dense model
    (llama3-8b), a grouped-GEMM converter alone (it converts MoE experts only; the linear
    layers stay bfloat16) were priced as an FP8 run, exit 0."""
    toml = _torchtitan_job(tmp_path, "b200")
    (tmp_path / "job.toml").write_text(toml.replace('"quantize.linear.float8"', converters))
    code, doc = _estimate(tmp_path, "b200", "torchtitan", "{torchtitan: job.toml}")
    assert code == 2, doc
    problem = doc["error"]["problems"][0]        # a misspelt one: then 'has no ...float8'
    assert problem["key"] == "plan.torchtitan" and said in problem["rule"], problem


def _bf16_job(folder, device) -> tuple[str, dict]:
    """A bf16 torchtitan job of the dense llama3-8b (no converter), and its estimate."""
    spec = SPEC.replace("CLUSTER", CLUSTERS[device]).replace("RUNTIME", "torchtitan")
    (folder / "s.yaml").write_text(spec.replace("dtype: fp8", "dtype: bf16").replace("PLAN", JOB_PLAN))
    code, text = run_cli("estimate", folder / "s.yaml", "--json")
    assert code == 0, text
    toml = export_torchtitan_job(folder, first_json(text))
    assert "converters" not in toml
    (folder / "s.yaml").write_text((folder / "s.yaml").read_text().replace(JOB_PLAN,
                                                                           "{torchtitan: job.toml}"))
    return toml, first_json(text)


@pytest.mark.parametrize("device", ["h100", "b200"])
def test_torchtitan_grouped_mm_mx_in_bf16_is_held_to_the_hardware(tmp_path, device):
    """QA round 37: ``quantize.grouped_mm.mx`` in a bf16 file of a dense model on an H100 was
    taken, exit 0, and said to be priced as MXFP8. torchtitan 0.2.2 builds every listed
    converter at launch and ``MXGroupedMMConverter.__init__`` asserts SM100
    (``components/quantization/mx.py``), whatever the model and dtype: refused on Hopper. On
    a B200 it runs and converts nothing (no MoE experts): priced as the bf16 file, said."""
    toml, plain = _bf16_job(tmp_path, device)
    (tmp_path / "job.toml").write_text(toml.replace("[model]\n", "[model]\nconverters = "
                                                    '["quantize.grouped_mm.mx"]\n', 1))
    code, text = run_cli("estimate", tmp_path / "s.yaml", "--json")
    doc = first_json(text)
    if device == "h100":
        _refused(code, doc, "plan.torchtitan", "H100-SXM-80GB")
        return
    assert code == 0, doc
    assert doc["metrics"] == plain["metrics"]
    assert not any("priced as per-tensor FP8" in n for n in doc["notices"]), doc["notices"]
    assert any("['quantize.grouped_mm.mx'] convert the MoE experts' grouped GEMMs only" in n
               and "change nothing" in n for n in doc["notices"]), doc["notices"]


@pytest.mark.parametrize("converters", ['"quantize.linear.float8", "quantize.grouped_mm.mx"',
                                        '"quantize.linear.mx", "quantize.grouped_mm.float8"'])
def test_torchtitan_converters_of_two_quantization_types_are_refused(tmp_path, converters):
    """QA round 37: float8 and mx converters together were taken, exit 0. torchtitan 0.2.2's
    ``QuantizationConverter._validate`` (``components/quantization/__init__.py``) asserts
    every quantize.* converter has one type ("Cannot combine model converters with different
    quantization types"), when the first converter is built: the launch fails."""
    toml = _torchtitan_job(tmp_path, "b200")
    (tmp_path / "job.toml").write_text(toml.replace('"quantize.linear.float8"', converters))
    code, doc = _estimate(tmp_path, "b200", "torchtitan", "{torchtitan: job.toml}")
    assert code == 2, doc
    rules = [p["rule"] for p in doc["error"]["problems"] if p["key"] == "plan.torchtitan"]
    assert any("combine quantization types float8 and mx" in r and "float8 for both, or mx "
               "for both" in r for r in rules), rules
