"""A torchtitan 0.2 job file's FP8 converters are checked against ``training.dtype``.

Before, the reading checked only ``mixed_precision_param`` (bfloat16 for both bf16 and FP8
runs): the FP8 export (``converters = ["quantize.linear.float8"]``) read under a bf16 spec
priced as bf16 (1.160 s), and the bf16 export read under an FP8 spec priced as FP8 (0.950 s),
each with exit 0 and nothing said. Oracle: torchtitan 0.2.2 trains FP8 GEMMs only through its
registered converters (``components/quantization/float8.py``); the FP8 export reads back under
the FP8 spec it was written from (exit 0), so each refusal is the mismatch's."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli
from support.torchtitan_jobs import JOB_PLAN, export_torchtitan_job

SPEC = """\
model: {zoo: llama3-8b}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 64, seq_len: 2048, dtype: DTYPE, runtime: torchtitan}
plan: PLAN
"""


def _estimate(folder, dtype, plan):
    (folder / "s.yaml").write_text(SPEC.replace("DTYPE", dtype).replace("PLAN", plan))
    code, text = run_cli("estimate", folder / "s.yaml", "--json")
    return code, json.JSONDecoder().raw_decode(text[text.index("{\n"):])[0]


def _export(folder, dtype):
    code, doc = _estimate(folder, dtype, JOB_PLAN)
    assert code == 0, doc
    export_torchtitan_job(folder, doc)
    return doc


def test_the_fp8_export_reads_back_under_its_spec(tmp_path):
    first = _export(tmp_path, "fp8")
    code, again = _estimate(tmp_path, "fp8", "{torchtitan: job.toml}")
    assert code == 0, again
    assert again["metrics"] == first["metrics"]


@pytest.mark.parametrize("written, read, words", [
    ("fp8", "bf16", "model.converters ['quantize.linear.float8'] train the linear layers in "
                    "low precision, but training.dtype is bf16"),
    ("bf16", "fp8", "model.converters has no quantize.linear.float8: the file trains in "
                    "bfloat16, but training.dtype is fp8"),
])
def test_a_precision_the_file_does_not_train_is_refused(tmp_path, written, read, words):
    _export(tmp_path, written)
    code, doc = _estimate(tmp_path, read, "{torchtitan: job.toml}")
    assert code == 2, doc
    problems = doc["error"]["problems"]
    assert any(p["key"] == "plan.torchtitan" and words in p["rule"] for p in problems), problems


def test_a_converter_listed_twice_is_priced_once_and_said(tmp_path):
    """QA round 37: ``converters = ["quantize.linear.float8", "quantize.linear.float8"]`` was
    taken without a word. torchtitan 0.2.2 does not refuse it (``ModelConvertersContainer``
    in ``protocols/model_converter.py`` builds one converter per listed name, no check for
    repeats), and the second float8 pass re-swaps each Float8Linear over the same weight:
    the file is the once-listed one's, priced the same, and the repeat is said."""
    first = _export(tmp_path, "fp8")
    toml = (tmp_path / "job.toml").read_text()
    twice = '"quantize.linear.float8", "quantize.linear.float8"'
    (tmp_path / "job.toml").write_text(toml.replace('"quantize.linear.float8"', twice, 1))
    code, doc = _estimate(tmp_path, "fp8", "{torchtitan: job.toml}")
    assert code == 0, doc
    assert doc["metrics"] == first["metrics"]
    said = [n for n in doc["notices"] if "lists 'quantize.linear.float8' 2 times" in n]
    assert said and "ModelConvertersContainer" in said[0] and "list it once" in said[0], doc["notices"]
