"""A record's explicit ``training.runtime_options`` beat the framework text's defaults and are
said (explicit fields beat free text). The shipped Megatron-LM 2022-23 records state the
asynchronous input-gradient all-reduce their release ran by default (Megatron-LM commit
3f652469, 2021-09-02: ``--no-async-tensor-model-parallel-allreduce`` to turn it off), which
the 2020-22 runtime's default (Narayanan et al. 2021's stack) leaves off."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autopar_opt.calibration.reading import read_record
from autopar_opt.calibration.reading.errors import Unmodelable
from support.runs import tiny_record

ROOT = Path(__file__).resolve().parents[3]


def test_a_stated_capability_beats_the_framework_text_and_is_said():
    plain = read_record(tiny_record(training__framework="Megatron-LM (2022)"))
    assert plain.runtime.name == "megatron-lm" and not plain.runtime.async_dgrad
    rec = read_record(tiny_record(training__framework="Megatron-LM (2022)",
                                  training__runtime_options={"async_dgrad": True,
                                                             "cp_comm_type": "a2a"}))
    assert rec.runtime.name == "megatron-lm"
    assert rec.runtime.async_dgrad and rec.runtime.cp_comm_type == "a2a"
    said = [n for n in rec.notes() if "training.runtime_options stated" in n]
    assert len(said) == 1
    assert "async_dgrad = True (the framework text's: False)" in said[0]
    assert "cp_comm_type = a2a (the framework text's: p2p)" in said[0]


def test_it_beats_the_precision_text_too():
    # an fp32 reduction read from the precision text; stated off, it stays off
    rec = read_record(tiny_record(training__framework="torchtitan",
                                  training__runtime_options={"fp32_grad_reduce": "false"}))
    assert rec.runtime.name == "torchtitan" and not rec.runtime.fp32_grad_reduce


@pytest.mark.parametrize("options, words", [
    ({"async_dgrad_": True}, "'async_dgrad_' is not a runtime capability"),
    ({"async_dgrad": "maybe"}, "training.runtime_options.async_dgrad = 'maybe' must be true or false"),
    ({"cp_comm_type": "ring"}, "training.runtime_options.cp_comm_type = 'ring' must be one of p2p"),
    ({"async_dgrad": None}, "training.runtime_options.async_dgrad = null"),
    ("async_dgrad", "must be a mapping of runtime capability to value"),
])
def test_a_wrong_option_is_refused_with_its_key_and_rule(options, words):
    with pytest.raises(Unmodelable) as err:
        read_record(tiny_record(training__runtime_options=options))
    assert words in str(err.value)


def _records(path: str) -> list[dict]:
    data = yaml.safe_load((ROOT / path).read_text())
    return data if isinstance(data, list) else data["records"]


@pytest.mark.parametrize("path, prefix", [
    ("tests/data/published_runs.yaml", "korthikanti2022_"),
    ("benchmarks/calibration/holdout_runs.yaml", "megascale2024_table2_175b_megatronlm"),
])
def test_the_shipped_2022_23_megatron_lm_records_run_the_async_all_reduce(path, prefix):
    recs = [r for r in _records(path) if r["id"].startswith(prefix)]
    assert len(recs) >= 8
    for r in recs:
        rec = read_record(r)
        assert rec.runtime.name == "megatron-lm" and rec.runtime.async_dgrad, r["id"]


def test_the_2021_megatron_lm_records_keep_it_off():
    """Narayanan et al. 2021's commit 6985e58 (2021-08-18) predates 3f652469."""
    recs = [r for r in _records("tests/data/published_runs.yaml")
            if r["id"].startswith("narayanan2021_")]
    assert recs
    for r in recs:
        assert not read_record(r).runtime.async_dgrad, r["id"]
