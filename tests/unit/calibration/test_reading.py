"""A run file read once into typed records (issue 30, point 4).

Oracles: the rules a stated field has always had to keep (a number is a
finite int or float, a count a positive integer within its limit), written
out by hand here; the order in which a record's defaults are taken (runtime,
device, model, parallelism, nodes, training), which is the order the reports
print them in.
"""

from __future__ import annotations

import pytest

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.reading import (
    Assumption, RawRecord, RunRecord, Unmodelable, read_record, read_records)
from autopar_opt.calibration.reading.record import TOPICS
from support.runs import tiny_record


@pytest.mark.parametrize("section, key, value, message", [
    ("model", "num_layers", "32", "model.num_layers = '32' is not a number"),
    ("model", "num_layers", True, "model.num_layers = True is not a number"),
    ("model", "hidden_size", 2.5, "model.hidden_size = 2.5 must be a positive integer"),
    ("model", "hidden_size", -8, "model.hidden_size = -8.0 must be a positive integer"),
    ("model", "num_layers", 10**9, "model.num_layers = 1000000000 exceeds the limit of 2,048"),
    ("hardware", "gpu_memory_gb", "80 GB", "hardware.gpu_memory_gb = '80 GB' is not a number"),
    ("hardware", "inter_node_gbps_per_gpu", float("nan"),
     "hardware.inter_node_gbps_per_gpu = nan is not a number"),
    ("parallelism", "tp", 0, "parallelism.tp = 0.0 must be a positive integer"),
    ("training", "global_batch_size", "512", "training.global_batch_size = '512' is not a number"),
])
def test_a_stated_field_of_the_wrong_type_is_refused_naming_key_and_value(section, key, value,
                                                                          message):
    with pytest.raises(Unmodelable, match=message.replace("(", r"\(").replace(".", r"\.")):
        RawRecord.read(tiny_record(**{f"{section}__{key}": value}))


def test_every_problem_of_a_record_in_one_pass():
    with pytest.raises(Unmodelable) as err:
        RawRecord.read(tiny_record(model__num_layers="x", hardware__num_gpus=0.5))
    text = str(err.value)
    assert "model.num_layers = 'x' is not a number" in text
    assert "hardware.num_gpus = 0.5 must be a positive integer" in text
    with pytest.raises(Unmodelable, match="'hardware' is a list, expected a mapping"):
        RawRecord.read({**tiny_record(), "hardware": [1]})


def test_keys_the_model_does_not_read_are_kept_as_given():
    raw = RawRecord.read(tiny_record(model__num_local_experts="8", measured__tokens_per_sec=5))
    assert raw.model.extra("num_local_experts") == "8"
    assert raw.measured.extra("tokens_per_sec") == 5
    assert raw.model.num_layers == 1 and isinstance(raw.model.num_layers, int)


def test_every_default_is_an_assumption_with_its_topic_in_reading_order():
    """ffn, KV heads (model), dp (parallelism), GPUs per node (cluster) and
    micro-batch (training) unstated: one assumption each, in the order of
    :data:`TOPICS`; the builder's own notes (tying) follow the model topic."""
    rec = read_record(tiny_record(model__ffn_hidden_size=None, model__num_kv_heads=None,
                              parallelism__dp=None, hardware__gpus_per_node=None,
                              training__micro_batch_size=None))
    assert isinstance(rec, RunRecord)
    topics = [a.topic for a in rec.assumptions]
    assert topics == sorted(topics, key=TOPICS.index)
    texts = {a.text: a.topic for a in rec.assumptions}
    assert texts["ffn_hidden_size not stated: 4h (Megatron default)"] == "model"
    assert texts["num_kv_heads not stated: = heads (multi-head attention)"] == "model"
    assert texts["dp not stated: num_gpus/(tp·pp·cp) = 1"] == "parallelism"
    assert texts["gpus_per_node not stated: 8"] == "cluster"
    assert texts["micro_batch_size not stated: 1 (assumed: Megatron-LM's --micro-batch-size "
                 "has no default, megatron/training/arguments.py)"] == "training"
    assert rec.model.ffn == 256 and rec.model.kv_heads == 4 and rec.parallel.dp == 1
    run = build_run(rec)
    model_end = max(i for i, a in enumerate(rec.assumptions) if a.topic == "model")
    # the builder's note on the tiny record's measured rate (0.004% of the peak) aside
    said = [a for a in run.assumptions if not a.startswith("the measured rate")]
    tying = said.index("embedding tying not stated: tied (Megatron default)")
    assert tying == model_end + 1
    assert said[:tying] == [a.text for a in rec.assumptions[:model_end + 1]]
    assert said[tying + 1:] == [a.text for a in rec.assumptions[model_end + 1:]]


def test_a_record_that_cannot_be_priced_gives_its_reason_and_the_others_are_read():
    good, bad = tiny_record(), {**tiny_record(parallelism__tp=None), "id": "r2"}
    records, skipped = read_records([good, bad])
    assert [r.id for r in records] == ["r1"]
    assert skipped == [("r2", "parallelism.tp not stated (null): the manual plan is unknown")]
    assert Assumption("model", "x").topic == "model"


def test_the_measured_figure_is_picked_once():
    rec = read_record(tiny_record(measured__iteration_time_s=None, measured__tokens_per_sec_per_gpu=64))
    assert (rec.throughput.key, rec.throughput.value) == ("tokens_per_sec_per_gpu", 64.0)
    assert build_run(rec).measured_samples_per_s == 64 * 1 / 32


def test_no_builder_reads_text():
    """Oracle: the sources. Free text (framework, arch, precision, FLOP
    convention) is read in ``calibration/reading/`` only: no other calibration
    module uses regular expressions."""
    from support import paths

    builders = sorted((paths.REPO / "autopar_opt" / "calibration").glob("*.py"))
    assert len(builders) >= 8
    reading_text = [p.name for p in builders
                    if "import re\n" in p.read_text() or "re.compile(" in p.read_text()]
    assert reading_text == []
