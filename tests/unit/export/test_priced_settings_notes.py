"""What a plan was priced with and the exported file does not set is said, or refused
where the framework cannot run it (QA round 9): activation offloading, autocast, fp16 on
torchtitan, fp32 on Megatron-Bridge, and the optimizer notes of fp32 training."""

from __future__ import annotations

from dataclasses import replace

import pytest

from support.golden_plans import spec_for
from autopar_opt.export import ExportError, export_plan
from autopar_opt.ir.target import optimizer_notice


def _export(spec, target, **training):
    tr = replace(spec.training, **training)
    return export_plan(spec.plan, spec.graph, spec.cluster, tr, target)


@pytest.mark.parametrize("target", ["torchtitan", "deepspeed"])
def test_activation_offload_and_autocast_are_said(tmp_path, target):
    spec = spec_for("llama3_8b_fsdp", tmp_path)
    try:
        plain = _export(spec, target)
    except ExportError:
        pytest.skip(f"{target} refuses this plan")
    assert not any("activation_offload" in n or "autocast" in n for n in plain.notes)
    notes = _export(spec, target, activation_offload=0.5, autocast=True).notes
    assert any("training.activation_offload 0.5" in n and "sets no offloading" in n
               for n in notes)
    assert any("training.autocast" in n for n in notes)


@pytest.mark.parametrize("target,written", [
    ("megatron", "--cpu-offloading-num-layers 8"),
    ("megatron-bridge", "cpu_offloading_num_layers: 8")])
def test_megatron_files_set_the_offload_the_plan_was_priced_with(tmp_path, target, written):
    """QA round 36: a plan priced with activation offloading was exported with no flag (a
    note only), a file launching with more activation memory than priced. One stage of 32
    layers, no recomputation, activation_offload 0.25: the file offloads 8 layers, and the
    Megatron-LM file read back under the same spec prices as the plan."""
    spec = spec_for("llama3_8b_fp8", tmp_path)
    out = _export(spec, target, activation_offload=0.25)
    assert written in out.text
    assert not any("activation_offload" in n for n in out.notes)
    assert "cpu_offloading: true" in out.text or target == "megatron"
    with pytest.raises(ExportError, match="not a whole number of the 32 transformer layers"):
        _export(spec, target, activation_offload=0.3)
    # Megatron-Core refuses offloading beside recomputation, and with a pipeline
    with pytest.raises(ExportError, match="CPU offloading does not work when activation recomputation"):
        _export(spec_for("llama3_8b_fsdp", tmp_path), target, activation_offload=0.25)
    with pytest.raises(ExportError, match="no support for pipeline parallelism with CPU offloading"):
        _export(spec_for("llama3_8b_pp4", tmp_path), target, activation_offload=0.25)


def test_the_offloading_megatron_file_reads_back_to_the_same_price(tmp_path):
    from autopar_opt.cost.evaluate import evaluate
    from autopar_opt.cost.params import default_params
    from autopar_opt.export.megatron import parse_megatron_args
    from autopar_opt.export.megatron_import import plan_from_megatron
    spec = spec_for("llama3_8b_fp8", tmp_path)
    tr = replace(spec.training, activation_offload=0.25)
    text = export_plan(spec.plan, spec.graph, spec.cluster, tr, "megatron").text
    back = plan_from_megatron(parse_megatron_args(text), spec.graph, spec.cluster, tr)
    p = default_params()
    assert evaluate(back, spec.graph, spec.cluster, tr, p).iteration_time_s == pytest.approx(
        evaluate(spec.plan, spec.graph, spec.cluster, tr, p).iteration_time_s, rel=1e-12)


def test_fp16_is_refused_by_torchtitan_and_fp32_by_bridge(tmp_path):
    spec = spec_for("llama3_8b_fsdp", tmp_path)
    with pytest.raises(ExportError, match="fp16 training: torchtitan's mixed_precision_param"):
        _export(spec, "torchtitan", dtype="fp16")
    fp32 = spec_for("llama3_8b_fp32", tmp_path)
    with pytest.raises(ExportError, match="fp32 training: Megatron-Bridge's recipes train in bf16"):
        export_plan(fp32.plan, fp32.graph, fp32.cluster, fp32.training, "megatron-bridge")
    assert "--bf16" not in export_plan(fp32.plan, fp32.graph, fp32.cluster, fp32.training,
                                       "megatron").text


def test_the_optimizer_notice_knows_fp32_training_defaults():
    # every framework's default in fp32 training is Adam on its fp32 weights: 4 + 4 + 8
    assert optimizer_notice("megatron", "adam_fp32", "fp32") == ""
    assert optimizer_notice("megatron", "adam_mixed", "bf16") == ""
    text = optimizer_notice("torchtitan", "sgd_fp32", "fp32")
    assert "Adam on its fp32 weights (4 + 4 + 8 bytes)" in text and "adam_fp32" in text
    text = optimizer_notice("deepspeed", "adam_bf16", "bf16")
    assert "Adam with an fp32 master copy (2 + 2 + 12 bytes)" in text


def test_a_deepspeed_pipeline_says_what_its_partition_assumes(tmp_path):
    """QA round 9: partition_method='uniform' gives the plan's stages only for the plan's
    layer list, and activation_checkpoint_interval=1 checkpoints the embedding and head
    too; both were left unsaid."""
    from autopar_opt.spec import load_spec

    spec_path = tmp_path / "pp2.yaml"
    spec_path.write_text("model: {zoo: llama3-8b}\ncluster: {zoo: 2x8-h100}\n"
                         "training: {global_batch_size: 64, seq_len: 4096}\n"
                         "plan: {tp: 1, pp: 2, zero: 1, recompute: full, micro_batch_size: 1}\n")
    spec = load_spec(spec_path)
    notes = export_plan(spec.plan, spec.graph, spec.cluster, spec.training, "deepspeed").notes
    assert any("layer list must be the plan's 34 layers in order" in n and "[17, 17]" in n
               for n in notes)
    assert any("checkpointable_layers" in n for n in notes)


def test_torchtitan_names_the_recomputation_it_cannot_state(tmp_path):
    """QA round 9: full recomputation of the first blocks of a stage was refused with text
    about Megatron's selective mode, which the plan does not use."""
    from autopar_opt.ir.plan import Plan, StagePlan
    from autopar_opt.ir.training import Recompute
    from autopar_opt.spec import load_spec

    spec_path = tmp_path / "r.yaml"
    spec_path.write_text("model: {zoo: llama3-8b}\ncluster: {zoo: 2x8-h100}\n"
                         "training: {global_batch_size: 64, seq_len: 4096}\n"
                         "plan: {tp: 1, pp: 1, zero: 3, recompute: full, micro_batch_size: 1}\n")
    spec = load_spec(spec_path)
    stage = spec.plan.stages[0]
    # the first five blocks recomputed in full, the others not
    strategies = [replace(st, recompute=Recompute.none) if name.startswith("block")
                  and int(name[5:]) >= 5 else st for name, st in zip(stage.layers, stage.strategies)]
    plan = replace(spec.plan, stages=[StagePlan(stage.layers, strategies)])
    assert isinstance(plan, Plan)
    with pytest.raises(ExportError) as err:
        export_plan(plan, spec.graph, spec.cluster, spec.training, "torchtitan")
    assert "full recomputation of some blocks of a stage" in str(err.value)
    assert "Megatron's selective" not in str(err.value)
