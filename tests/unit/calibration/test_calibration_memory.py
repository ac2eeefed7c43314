"""Published memory on the measure each record states, memory-only records,
and the interleaved schedule's warm-up memory (issue 10, point 5).

Oracles are derived by hand in each docstring."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.reading import read_record
from autopar_opt.calibration.calibrate import calibrate_file
from autopar_opt.calibration.fit import reserve_and_fragmentation
from autopar_opt.calibration.memory import memory_fields, modelled_gib, on_measure
from autopar_opt.calibration.reading import RawRecord, Unmodelable, load_run_file
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.ir.pipeline import interleaved_inflight
from autopar_opt.ir.training import Schedule
from support import paths

RUNS = paths.DATA / "published_runs.yaml"
CI_PP4 = "megatron_ci_gpt7b_tp1pp4_h100"


def _record(rid: str, measured: dict, dp: int = 1) -> dict:
    """A tiny GPT record: h=64, a=4, s=32, ffn=4h, V=128 on A100-80GB."""
    return {
        "id": rid, "record_type": "end_to_end_training_throughput",
        "model": {"arch": "GPT dense decoder", "num_layers": 2, "hidden_size": 64,
                  "num_attention_heads": 4, "num_kv_heads": 4, "ffn_hidden_size": 256,
                  "vocab_size": 128, "seq_len": 32},
        "hardware": {"gpu_type": "A100-SXM4", "gpu_memory_gb": 80, "num_gpus": dp,
                     "gpus_per_node": 8},
        "parallelism": {"tp": 1, "pp": 1, "dp": dp, "cp": 1, "sequence_parallel": False,
                        "vp_chunks": 1, "zero_stage": 0, "fsdp": "none"},
        "training": {"precision": "bf16", "micro_batch_size": 1, "global_batch_size": dp,
                     "recompute": "none", "framework": "Megatron-LM"},
        "measured": measured,
    }


def test_measure_mapping_by_hand():
    """modelled 40 GiB, reserve R = 3, fragmentation f = 0.1: nvidia-smi sees
    40·1.1 + 3 = 47, PyTorch reserved 40·1.1 = 44, PyTorch allocated 40."""
    assert on_measure(40.0, "device", 3.0, 0.1) == pytest.approx(47.0)
    assert on_measure(40.0, "reserved", 3.0, 0.1) == pytest.approx(44.0)
    assert on_measure(40.0, "allocated", 3.0, 0.1) == pytest.approx(40.0)
    assert memory_fields(RawRecord.read({}).measured) == ("device", "max")
    stated = {"measured": {"memory_measure": "Allocated", "memory_rank": "last"}}
    assert memory_fields(RawRecord.read(stated).measured) == \
        ("allocated", "last")
    with pytest.raises(Unmodelable, match="memory_measure"):
        memory_fields(RawRecord.read({"measured": {"memory_measure": "nvml"}}).measured)


def test_memory_rank_picks_the_stage_the_record_logged_from():
    """Three stages of 30, 50 and 40 GiB (reserve 2 each): ``max`` compares the busiest
    (48), ``last`` the last stage (38), ``first`` the first (28: a stack logging from
    rank 0, KempnerForge's metrics/logger.py _RankFilter)."""
    from types import SimpleNamespace as NS
    stages = [NS(peak_memory_gib=g, reserve_gib=2.0) for g in (30.0, 50.0, 40.0)]
    assert modelled_gib(stages, "max") == pytest.approx(48.0)
    assert modelled_gib(stages, "last") == pytest.approx(38.0)
    assert modelled_gib(stages, "first") == pytest.approx(28.0)
    stated = {"measured": {"memory_measure": "allocated", "memory_rank": "first"}}
    assert memory_fields(RawRecord.read(stated).measured) == ("allocated", "first")


def test_fit_with_mixed_measures_by_hand():
    """nvidia-smi: 10 -> 14 and 20 -> 25 give R + 10f = 4, R + 20f = 5, so
    f = 0.1, R = 3; a reserved figure 30 -> 33 = 30·1.1 agrees (R does not
    enter it). An allocated row carries no R or f and changes nothing."""
    r, f = reserve_and_fragmentation([(10.0, 14.0), (20.0, 25.0, 1.0, 1.0),
                                      (30.0, 33.0, 1.0, 0.0)])
    assert (r, f) == (pytest.approx(3.0, abs=1e-6), pytest.approx(0.1, abs=1e-7))
    r2, f2 = reserve_and_fragmentation([(10.0, 14.0), (20.0, 25.0), (5.0, 99.0, 0.0, 0.0)])
    assert (r2, f2) == (pytest.approx(3.0, abs=1e-6), pytest.approx(0.1, abs=1e-7))


def test_interleaved_inflight_by_hand():
    """Megatron-Core warm-up w = 2·(pp-i-1) + (v-1)·pp, all c·v when w >= c·v,
    peak w + 1 chunk micro-batches of 1/v stage each; the last chunk holds
    w + 1 - (v-1)·pp of them.

    pp=4, c=4, v=8: last rank w = 28 < 32 -> 29 chunks = 29/8 stages, 1 in
    the last chunk; first rank w = 34 >= 32 -> all 32 = 4 stages, 4 in the
    last chunk. pp=4, c=8, v=2, rank 0: w = 6 + 4 = 10 < 16 -> 11/2 = 5.5,
    11 - 4 = 7 in the last chunk."""
    assert interleaved_inflight(4, 4, 8, 3) == (29 / 8, 1)
    assert interleaved_inflight(4, 4, 8, 0) == (4.0, 4)
    assert interleaved_inflight(4, 8, 2, 0) == (5.5, 7)


def test_interleaved_activation_memory_in_evaluate():
    """The published tp1/pp4/v8 Megatron-Core plan against the same plan under
    1F1B: stage 3 holds 29/8 of a stage's micro-batch activations instead of
    1 (ratio 3.625), stage 0 holds 4 in both, and the last stage's logits are
    those of one micro-batch in both."""
    rec = next(r for r in load_run_file(RUNS) if r["id"] == CI_PP4)
    run = build_run(read_record(rec))
    assert run.plan.schedule is Schedule.interleaved and run.plan.vp_chunks == 8
    inter = evaluate(run.plan, run.graph, run.cluster, run.training).stages
    plain = evaluate(replace(run.plan, schedule=Schedule.one_f_one_b, vp_chunks=1), run.graph,
                     run.cluster, run.training).stages
    assert inter[3].activation_gib / plain[3].activation_gib == pytest.approx(29 / 8)
    assert inter[0].activation_gib == pytest.approx(plain[0].activation_gib)
    assert plain[3].logits_gib > 0
    assert inter[3].logits_gib == pytest.approx(plain[3].logits_gib)


def _summary_without(tmp_path: Path, records: list[dict]):
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump(records))
    return calibrate_file(path, cross_validate=True)


def test_memory_only_record_counts_for_memory_alone(tmp_path):
    """A record with memory and no throughput is priced on memory only: it is
    listed under memory_only, counts in the memory statistics (2 records, the
    mean of its error and the other's), and leaves the throughput statistics
    and leave-one-family-out untouched; one with neither stays unmodelable."""
    full = _record("alpha_a", {"iteration_time_s": 0.01, "memory_gib_per_gpu": 5.0})
    other = _record("beta_b", {"iteration_time_s": 0.02})
    mem_only = _record("gamma_c", {"memory_gib_per_gpu": 6.0, "memory_measure": "allocated"})
    nothing = _record("delta_d", {})
    base = _summary_without(tmp_path, [full, other])
    rep = _summary_without(tmp_path, [full, other, mem_only, nothing])
    assert [m.id for m in rep.memory_only] == ["gamma_c"]
    assert [c.id for c in rep.comparisons] == ["alpha_a", "beta_b"]
    (why,) = [w for rid, w in rep.skipped if rid == "delta_d"]
    assert "no usable measured throughput" in why
    s, b = rep.summary(), base.summary()
    for key in ("median_abs_rel_error", "p90_abs_rel_error", "lofo_median_abs_rel_error"):
        assert s[key] == pytest.approx(b[key])
    assert {c.id for c in rep.lofo_comparisons()} == {"alpha_a", "beta_b"}
    (m,) = rep.memory_only
    run = build_run(read_record(mem_only))
    st = evaluate(run.plan, run.graph, run.cluster, run.training, rep.params).stages[0]
    assert m.predicted_memory_gib == pytest.approx(st.peak_memory_gib - st.reserve_gib)
    full_err = abs(rep.comparisons[0].predicted_memory_gib / 5.0 - 1)
    assert s["memory_compared"] == 2 and s["memory_only"] == 1
    assert s["memory_median_abs_rel_error"] == pytest.approx(
        (full_err + abs(m.memory_rel_error)) / 2)
    assert s["modeled"] == 3 and s["throughput_compared"] == 2


def test_memory_only_records_never_enter_the_throughput_fit(tmp_path):
    """The throughput fit with and without a memory-only record is the same
    (its residual vector has no entry for it)."""
    from autopar_opt.calibration.calibrate import model_records
    from autopar_opt.calibration.compare import log_residuals
    from autopar_opt.cost.params import default_params

    recs = [_record("alpha_a", {"iteration_time_s": 0.01}),
            _record("gamma_c", {"memory_gib_per_gpu": 6.0})]
    runs, skipped = model_records(copy.deepcopy(recs))
    assert not skipped and runs[1].memory_only
    assert len(log_residuals(runs, default_params())) == 1


def test_full_recompute_of_a_record_checkpoints_the_blocks_only():
    """A record's full recomputation keeps the output layer's logits: the head
    and the embedding run without recomputation, every block with it, so the
    last stage's logits equal those of the same record without recompute
    (1 sample x 4·s·V = 4·32·128 bytes of fp32 logits, plus the head input)."""
    rec = _record("alpha_a", {"iteration_time_s": 0.01})
    rec["training"]["recompute"] = "full"
    full = build_run(read_record(rec))
    rec["training"]["recompute"] = "none"
    plain = build_run(read_record(rec))
    modes = {name: s.recompute.value for name, s in full.plan.strategy_of().items()}
    assert modes == {"embed": "none", "block000": "full", "block001": "full", "head": "none"}
    lf = evaluate(full.plan, full.graph, full.cluster, full.training).stages[0].logits_gib
    lp = evaluate(plain.plan, plain.graph, plain.cluster, plain.training).stages[0].logits_gib
    assert lf == pytest.approx(lp) and lf * 2**30 >= 4 * 32 * 128


def test_the_memory_only_records_map_to_their_stacks():
    """Megatron-Core CI: distributed optimizer (ZeRO-1 over dp), grad-reduce and
    param-gather overlap named, no TP overlap; Lightning + DeepSpeed: ZeRO-3 from
    the record's zero_stage; Lightning DDP: PyTorch DDP, no sharding."""
    runs = {r["id"]: build_run(read_record(r)) for r in load_run_file(RUNS)
            if r["id"].startswith(("megatron_ci_", "colossallightning_"))}
    ci = runs[CI_PP4]
    rt = ci.training.runtime
    assert rt.name == "megatron-core" and rt.grad_reduce_overlap and rt.param_gather_overlap
    assert not rt.tp_comm_overlap and ci.strategy.zero == 1
    ds = runs["colossallightning_gpt2xl_deepspeed_zero3_4xa100"]
    assert ds.training.runtime.name.startswith("deepspeed") and ds.strategy.zero == 3
    ddp = runs["colossallightning_gpt2xl_ddp_amp_4xa100"]
    assert ddp.training.runtime.name == "pytorch-ddp" and ddp.strategy.zero == 0
    assert all(r.memory_only and r.memory_measure == "allocated" for r in runs.values())


@pytest.mark.parametrize("mem", [-5.0, 90.0])
def test_implausible_memory_is_refused_with_its_reason(mem):
    """A per-GPU memory that is not positive or exceeds 1.1 x the GPU's HBM
    (A100-80GB: 80 GiB catalog, so 88 GiB) cannot be a measurement of this plan:
    the record is skipped naming the key (review 7: -5 was modelled at -387%)."""
    with pytest.raises(Unmodelable, match="memory_gib_per_gpu"):
        build_run(read_record(_record("eps_e", {"memory_gib_per_gpu": mem})))
    run = build_run(read_record(_record("eps_e", {"memory_gib_per_gpu": 20.0})))
    assert run.measured_memory_gib == 20.0


_NULL_THROUGHPUT = {"iteration_time_s": None, "tokens_per_sec_per_gpu": None, "samples_per_sec": None,
                    "mfu_pct": None, "hfu_pct": None, "tflops_per_gpu": None,
                    "aggregate_pflops": None, "other": {"memory_note": "allocated, rank 0"}}


@pytest.mark.parametrize("key, value", [
    ("iteration_time_s", "0.5 s"),            # a unit in a text: not converted
    ("iteration_time_s", 0),
    ("tokens_per_sec_per_gpu", -3000),
    ("mfu_pct", True),
    ("mfu_pct", 145.0),                       # above 100 %: not a percentage
    ("tflops_per_gpu", "150 TFLOP/s"),
    ("aggregate_pflops", 0.0),
    ("other.tokens_per_sec_total", "1.2M"),
])
def test_unusable_throughput_skips_the_record_naming_key_and_value(tmp_path, key, value):
    """A stated but unusable throughput is a skip with the key and the value, never a
    memory-only record (review finding: it silently became one) and never ignored
    for a usable lower-ranked key."""
    meas = copy.deepcopy(_NULL_THROUGHPUT)
    meas["memory_gib_per_gpu"] = 6.0
    if key.startswith("other."):
        meas["other"][key.split(".", 1)[1]] = value
    else:
        meas[key] = value
    also_good = copy.deepcopy(meas)
    also_good["samples_per_sec"] = 10.0       # a usable key beside it changes nothing
    rep = _summary_without(tmp_path, [_record("alpha_a", {"iteration_time_s": 0.01}),
                                      _record("gamma_c", meas), _record("delta_d", also_good)])
    assert [c.id for c in rep.comparisons] == ["alpha_a"] and not rep.memory_only
    reasons = dict(rep.skipped)
    for rid in ("gamma_c", "delta_d"):
        assert f"measured.{key} = {value!r}" in reasons[rid]
        assert "fix:" in reasons[rid] and "null" in reasons[rid]


def test_non_finite_throughput_is_refused_too():
    meas = {"iteration_time_s": float("nan"), "memory_gib_per_gpu": 6.0}
    with pytest.raises(Unmodelable, match=r"measured\.iteration_time_s = nan is not a positive"):
        build_run(read_record(_record("eps_e", meas)))


def test_a_record_with_every_throughput_key_null_stays_memory_only(tmp_path):
    """The shipped memory-only records state every throughput key as null (and say
    "Memory-only record." in their notes): such a record is memory-only, and the
    shipped ones still are (6 when this rule was written, 11 since)."""
    meas = dict(copy.deepcopy(_NULL_THROUGHPUT), memory_gib_per_gpu=6.0, memory_measure="allocated")
    rep = _summary_without(tmp_path, [_record("alpha_a", {"iteration_time_s": 0.01}),
                                      _record("gamma_c", meas)])
    assert [m.id for m in rep.memory_only] == ["gamma_c"] and not rep.skipped
    shipped = calibrate_file(RUNS, cross_validate=False)
    assert len(shipped.memory_only) >= 6
    assert {m.id for m in shipped.memory_only} == {
        r["id"] for r in load_run_file(RUNS) if "Memory-only record" in str(r.get("notes"))}


CI_SMALL_TP4 = "megatron_ci_gptsmall_tp4pp1_distopt_unfused_h100"


def test_megatron_core_text_turns_off_the_distributed_optimizer_and_fused_attention():
    """``without --use-distributed-optimizer`` keeps the Adam state whole on each
    data-parallel rank (ZeRO 0 although dp = 2); ``--attention-backend unfused``
    stores the attention scores. Oracle (Korthikanti et al. 2022, Eq. 2): the
    unfused block keeps ``5·a·s²·b / t`` bytes more than the fused one per
    micro-batch: 5·8·1024²·4 / 4 = 41,943,040 B for the h = 512 CI model at
    tp = 4, b = 4."""
    from autopar_opt.cost.memory import activation_bytes
    rec = next(r for r in load_run_file(RUNS) if r["id"] == CI_SMALL_TP4)
    unfused = build_run(read_record(rec))
    assert unfused.strategy.zero == 1 and not unfused.training.runtime.flash_attention
    flash_rec = copy.deepcopy(rec)
    flash_rec["training"]["framework"] = rec["training"]["framework"].replace(
        "--attention-backend unfused", "--attention-backend flash")
    flash = build_run(read_record(flash_rec))
    assert flash.training.runtime.flash_attention
    diff = (activation_bytes(unfused.block, unfused.strategy, 8, training=unfused.training)
            - activation_bytes(flash.block, flash.strategy, 8, training=flash.training))
    assert diff == pytest.approx(5 * 8 * 1024 ** 2 * 4 / 4)
    no_do = copy.deepcopy(rec)
    no_do["training"]["framework"] = ("Megatron-Core (functional test, transformer_engine) "
                                      "without --use-distributed-optimizer")
    plain = build_run(read_record(no_do))
    assert plain.strategy.zero == 0 and not plain.training.runtime.distributed_optimizer


def test_the_new_memory_only_records_are_modelled_on_their_measure():
    """Every memory-only record added from the Megatron-Core CI (12-layer
    h = 512 model: TP4 + distributed optimizer, PP4 interleaved, full
    recomputation, TP2/PP2/CP2 + SP) and the Colossal-AI Gemini row is
    modelled (not skipped), on ``torch.cuda.max_memory_allocated`` of the GPU
    it states, with the plan its fields give."""
    ids = {"megatron_ci_gptsmall_tp4pp1_distopt_unfused_h100": (4, 1, 2, 1, 1),
           "megatron_ci_gptsmall_tp1pp4vp3_unfused_h100": (1, 4, 2, 1, 0),
           "megatron_ci_gptsmall_tp1pp1_fullrecompute_h100": (1, 1, 8, 1, 0),
           "megatron_ci_gptsmall_tp2pp2cp2_sp_h100": (2, 2, 1, 2, 0),
           "colossallightning_gpt2xl_colossalai_gemini_4xa100": (1, 1, 4, 1, 3)}
    runs = {r["id"]: build_run(read_record(r)) for r in load_run_file(RUNS) if r["id"] in ids}
    assert set(runs) == set(ids)
    for rid, (tp, pp, dp, cp, zero) in ids.items():
        run = runs[rid]
        assert run.memory_only and run.memory_measure == "allocated"
        assert (run.strategy.tp, len(run.plan.stages), run.strategy.dp, run.strategy.cp,
                run.strategy.zero) == (tp, pp, dp, cp, zero), rid
    assert runs["megatron_ci_gptsmall_tp1pp4vp3_unfused_h100"].plan.vp_chunks == 3
    assert runs["megatron_ci_gptsmall_tp2pp2cp2_sp_h100"].strategy.sp
    gem = runs["colossallightning_gpt2xl_colossalai_gemini_4xa100"].training.runtime
    assert gem.name == "colossalai" and not gem.fsdp_prefetch and not gem.flash_attention
