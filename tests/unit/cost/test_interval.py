"""The error bar of a prediction (issue 28 point 6): regimes, split-conformal
quantiles by hand, and the shipped residual file's provenance."""

from __future__ import annotations

import hashlib
import math

import pytest
import yaml

from autopar_opt.cost.interval import (DEFAULT_FILE, MIN_COMPARABLE, ResidualRun, comparable,
                                       conformal_bounds, interval_for, load_residuals)
from autopar_opt.cost.regime import LABELS, Regime, generation, regime_of
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.plan import uniform_plan
from autopar_opt.ir.runtime import RUNTIMES
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training
from autopar_opt.model_zoo.transformer import decoder_lm
from support import paths

MEGATRON_HOPPER = Regime("megatron", False, False, False, False, "hopper")


def _run(i: int, residual: float, family: str | None = None, **labels) -> ResidualRun:
    reg = {**MEGATRON_HOPPER.labels(), **labels}
    return ResidualRun(f"r{i}", family or f"f{i}", reg, residual, {})


# --- split-conformal quantiles, by hand ---------------------------------------------

def test_twenty_independent_sources_give_the_inflated_order_statistics():
    # K = 20 families of one run each, residuals 1..20. Upper level
    # u = (1 - 0.2/2)·(1 + 1/20) = 0.945: the smallest value whose cumulative
    # weight (0.05 each) reaches 0.945 is the 19th; lower 1 - u = 0.055: the 2nd.
    res = [float(v) for v in range(1, 21)]
    assert conformal_bounds(res, [f"f{v}" for v in range(20)]) == (2.0, 19.0)


def test_one_family_weighs_as_one_source():
    # 19 single-run families (1..19) and one family of five runs at 100. Counted
    # run by run the 100s would hold 5/24 of the weight and set the upper end;
    # weighed as one source of K = 20 they hold 1/20, above u = 0.945.
    res = [float(v) for v in range(1, 20)] + [100.0] * 5
    fams = [f"f{v}" for v in range(1, 20)] + ["big"] * 5
    assert conformal_bounds(res, fams) == (2.0, 19.0)
    # ...and without the family weighting (each run its own family) they would:
    assert conformal_bounds(res, [f"x{i}" for i in range(len(res))])[1] == 100.0


def test_few_sources_give_the_whole_range():
    # K = 3: u = 0.9·4/3 > 1, the interval spans every residual.
    assert conformal_bounds([-0.3, 0.1, 0.2, 0.5], ["a", "a", "b", "c"]) == (-0.3, 0.5)


def test_each_run_contributes_the_range_of_its_residuals():
    """A run's residual from its family's fit and from its regime's fit can disagree
    in sign; the lower bound is taken over the runs' lows, the upper over their
    highs. Twenty single-run families, run v with residuals {-v/100, +v/100}:
    lows -0.20..-0.01, highs 0.01..0.20; the inflated order statistics (the 19th
    of 20 at u = 0.945, as above) give -0.19 and +0.19, where the one residual each
    run kept before (here the negative one) gave (-0.19, -0.02), an interval beside
    every run's positive family residual."""
    runs = tuple(ResidualRun(f"r{v}", f"f{v}", MEGATRON_HOPPER.labels(), -v / 100,
                             {"family:x": v / 100, "framework:megatron": -v / 100})
                 for v in range(1, 21))
    assert [r.low for r in runs[:2]] == [-0.01, -0.02] and runs[1].high == 0.02
    lo, hi = conformal_bounds([r.low for r in runs], [r.family for r in runs],
                              highs=[r.high for r in runs])
    assert (lo, hi) == (pytest.approx(-0.19), pytest.approx(0.19))
    assert conformal_bounds([r.residual for r in runs], [r.family for r in runs]) == \
        (pytest.approx(-0.19), pytest.approx(-0.02))
    iv = interval_for(MEGATRON_HOPPER, 10.0, runs=runs)
    assert iv.low == pytest.approx(10.0 * math.exp(-0.19))
    assert iv.high == pytest.approx(10.0 * math.exp(0.19))
    # the interval holds every run's family residual but the largest (19 of 20)
    assert sum(iv.low <= 10.0 * math.exp(r.residuals["family:x"]) <= iv.high
               for r in runs) == 19


def test_lows_highs_and_families_must_pair_up():
    with pytest.raises(ValueError, match="one low, one high and one family per run"):
        conformal_bounds([0.0, 0.1], ["a", "b"], highs=[0.2])


def test_no_residual_is_an_error():
    with pytest.raises(ValueError, match="no residuals"):
        conformal_bounds([], [])


# --- comparable runs -------------------------------------------------------------

def test_labels_are_given_up_in_order_until_enough_runs_match():
    same = [_run(i, 0.0) for i in range(4)]                       # every label shared
    other_gen = [_run(10 + i, 0.0, generation="ampere") for i in range(8)]
    other_fw = [_run(20 + i, 0.0, framework="deepspeed", generation="ampere") for i in range(30)]
    pool, kept, exact = comparable(MEGATRON_HOPPER, tuple(same + other_gen + other_fw))
    # 4 share everything (< 10); without "generation" 12 share the rest.
    assert exact == 4 and kept == LABELS[1:] and len(pool) == 12
    pool, kept, _ = comparable(MEGATRON_HOPPER, tuple(same + other_gen + other_fw),
                               exclude_family="f0")
    assert len(pool) == 11 and all(r.family != "f0" for r in pool)


def test_a_regime_with_few_runs_is_wide_and_says_so():
    # 2 long-context runs (residuals +0.9 and -0.8) among 30 short ones (+-0.1).
    short = [_run(i, 0.1 if i % 2 else -0.1) for i in range(30)]
    long_ = [_run(100, 0.9, long_context="true"), _run(101, -0.8, long_context="true")]
    reg = Regime("megatron", True, False, False, False, "hopper")
    iv = interval_for(reg, 10.0, runs=tuple(short + long_))
    assert iv.wide and iv.exact == 2
    # the interval spans the two long-context runs' own residuals
    assert iv.low == pytest.approx(10.0 * math.exp(-0.8))
    assert iv.high == pytest.approx(10.0 * math.exp(0.9))
    assert "only 2 published runs share every regime label" in iv.text()
    assert "wide interval" in iv.text()


def test_an_interval_beside_its_prediction_says_so():
    """Every comparable run measured 5-15% faster than predicted (r = log(measured /
    predicted) < 0): the interval lies wholly below the prediction and the text says so;
    all slower, above; a centred set says nothing of the kind."""
    below = interval_for(MEGATRON_HOPPER, 10.0,
                         runs=tuple(_run(i, -0.05 - 0.005 * i) for i in range(21)))
    assert below.high < 10.0 and "the interval lies below the prediction" in below.text()
    above = interval_for(MEGATRON_HOPPER, 10.0,
                         runs=tuple(_run(i, 0.05 + 0.005 * i) for i in range(21)))
    assert above.low > 10.0 and "the interval lies above the prediction" in above.text()
    centred = interval_for(MEGATRON_HOPPER, 10.0,
                           runs=tuple(_run(i, 0.01 * (i - 10)) for i in range(21)))
    assert centred.low < 10.0 < centred.high and "lies" not in centred.text()


def test_text_and_dict():
    runs = tuple(_run(i, 0.01 * (i - 10)) for i in range(21))
    iv = interval_for(MEGATRON_HOPPER, 8.62, runs=runs)
    assert not iv.wide and iv.n == 21 and iv.sources == 21
    assert iv.low < 8.62 < iv.high
    text = iv.text()
    assert text.startswith("80% interval ") and " s, from 21 comparable published runs of " \
        "21 sources (hopper, megatron, 16-bit, dense" in text
    d = iv.to_dict()
    assert d["comparable_runs"] == 21 and d["low"] == iv.low and d["text"] == text
    assert iv.inverse(100.0).low == pytest.approx(100.0 / iv.high)
    assert iv.scaled(2.0).high == pytest.approx(2.0 * iv.high)


# --- regimes ------------------------------------------------------------------------

def test_generations_of_the_catalog():
    assert [generation(n) for n in ("V100-32GB", "A100-40GB", "A800-SXM4-80GB", "H100-SXM-80GB",
                                    "H800-SXM-80GB", "H200-141GB", "B200", "GB200")] == \
        ["volta", "ampere", "ampere", "hopper", "hopper", "hopper", "blackwell", "blackwell"]


def _graph(seq):
    return decoder_lm("t", num_layers=2, seq_len=seq, hidden=256, heads=4, ffn_hidden=1024,
                      vocab=1000)


@pytest.mark.parametrize("gpus,zero,seq,runtime,dtype,expect", [
    (256, 3, 32768, "pytorch-fsdp", "bf16",
     dict(framework="fsdp", long_context=True, sharded_at_scale=True, fp8=False)),
    (128, 3, 32768, "pytorch-fsdp", "bf16",                 # ZeRO-3 below 256 GPUs: not at scale
     dict(framework="fsdp", long_context=True, sharded_at_scale=False, fp8=False)),
    (256, 1, 32767, "deepspeed", "fp8",                     # ZeRO-1 is not weight sharding
     dict(framework="deepspeed", long_context=False, sharded_at_scale=False, fp8=True)),
    (8, 0, 4096, "megatron-core", "bf16",
     dict(framework="megatron", long_context=False, sharded_at_scale=False, fp8=False)),
])
def test_regime_of_a_plan(gpus, zero, seq, runtime, dtype, expect):
    graph = _graph(seq)
    cluster = make_cluster("c", gpus // 8, 8, "H100-SXM-80GB")
    training = Training(global_batch_size=gpus, seq_len=seq, dtype=dtype,
                        runtime=RUNTIMES[runtime])
    plan = uniform_plan([l.name for l in graph.layers], 1, Strategy(dp=gpus, tp=1, zero=zero), 1)
    reg = regime_of(graph, cluster, training, plan)
    assert {k: getattr(reg, k) for k in expect} == expect
    assert reg.generation == "hopper" and not reg.moe


def test_a_model_unlike_every_published_run_says_so():
    """Every published run behind the intervals trained a transformer: a convolutional
    network's interval says that those runs are unlike it (QA round 10: Inception-v3's
    was "from 72 comparable published runs" of Megatron LLM training, said as such);
    a transformer's does not."""
    from autopar_opt.cost.interval import UNLIKE_TRANSFORMERS, plan_interval
    from autopar_opt.ir.graph import Layer, LayerGraph, LayerKind

    cluster = make_cluster("c", 1, 8, "A100-80GB")
    training = Training(global_batch_size=8, seq_len=None)
    cnn = LayerGraph.chain("cnn", [Layer(f"c{i}", kind=LayerKind.conv, flops_fwd=1e9,
                                         params=1000) for i in range(3)])
    plan = uniform_plan([l.name for l in cnn.layers], 1, Strategy(dp=8, tp=1), 1)
    said = plan_interval(cnn, cluster, training, plan, 1.0)
    assert said.unlike == UNLIKE_TRANSFORMERS and UNLIKE_TRANSFORMERS in said.text()
    assert said.scaled(2.0).unlike == said.inverse().unlike == UNLIKE_TRANSFORMERS
    lm = _graph(2048)
    lm_plan = uniform_plan([l.name for l in lm.layers], 1, Strategy(dp=8, tp=1), 1)
    assert plan_interval(lm, cluster, Training(global_batch_size=8, seq_len=2048), lm_plan,
                         1.0).unlike == ""


# --- the shipped residual file -----------------------------------------------------

def test_residual_file_is_generated_from_the_current_record_files():
    """The file is the output of benchmarks/calibration/intervals.py over the
    record files as they are now: a changed record file needs it regenerated."""
    doc = yaml.safe_load(DEFAULT_FILE.read_text())
    assert doc["generated_by"] == "python benchmarks/calibration/intervals.py"
    files = {"published_runs.yaml": paths.DATA / "published_runs.yaml",
             "holdout_runs.yaml": paths.REPO / "benchmarks" / "calibration" / "holdout_runs.yaml"}
    assert set(doc["records_files"]) == set(files)
    for name, path in files.items():
        assert doc["records_files"][name] == hashlib.sha256(path.read_bytes()).hexdigest(), \
            f"{name} changed since intervals.yaml was written: run benchmarks/calibration/intervals.py"


def test_residual_file_is_consistent():
    runs = load_residuals()
    assert len(runs) >= 100 and len({r.id for r in runs}) == len(runs)
    for r in runs:
        assert set(r.labels) == set(LABELS)
        # one leave-own-family-out residual per run, and the worst of them is 'residual'
        assert f"family:{r.family}" in r.residuals
        assert r.residual == max(r.residuals.values(), key=abs)
    # every regime large enough gets its own interval
    assert sum(1 for r in runs if r.labels["framework"] == "megatron") >= MIN_COMPARABLE


def test_every_runtime_has_a_framework_family():
    """The runtimes a spec can name and every runtime the calibration's readers
    build for a published run (oracle: the built runs of both files)."""
    from autopar_opt.calibration.calibrate import model_records
    from autopar_opt.calibration.reading import load_run_file
    from autopar_opt.cost.regime import FRAMEWORK_FAMILY

    names = set(RUNTIMES)
    for path in (paths.DATA / "published_runs.yaml",
                 paths.REPO / "benchmarks" / "calibration" / "holdout_runs.yaml"):
        names |= {r.training.runtime.name for r in model_records(load_run_file(path))[0]}
    assert names - set(FRAMEWORK_FAMILY) == set()
    assert {FRAMEWORK_FAMILY[n] for n in names} == {"megatron", "deepspeed", "fsdp", "pytorch"}
