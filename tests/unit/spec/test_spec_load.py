"""Good specs: formats, split files, building of core objects, every example."""

from __future__ import annotations


import pytest
import yaml

from autopar_opt.cost.params import default_params
from autopar_opt.ir.graph import MeasuredCost
from autopar_opt.model_zoo.registry import build_model
from autopar_opt.spec import Spec, load_spec
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace
from support import paths

ROOT = paths.REPO
GOOD = paths.DATA / "specs" / "good"


def test_three_formats_load_to_equal_specs():
    specs = [load_spec(GOOD / f"spec.{ext}") for ext in ("yaml", "toml", "json")]
    assert specs[0] == specs[1] == specs[2]
    assert specs[0].path != specs[1].path


def test_split_files_equal_the_single_file():
    """model (JSON, wrapped in a 'model' key), cluster (YAML) and training (YAML, in the
    parent folder) included from a TOML top file."""
    split = load_spec(GOOD / "split" / "top.toml")
    assert split == load_spec(GOOD / "spec.yaml")


def test_equality_sees_a_difference(tmp_path):
    """The equality oracle above must be able to fail."""
    data = yaml.safe_load((GOOD / "spec.yaml").read_text())
    data["cost_model"]["comm_efficiency"] = 0.71
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    assert load_spec(tmp_path / "s.yaml") != load_spec(GOOD / "spec.yaml")


def test_good_spec_builds_the_stated_objects():
    spec = load_spec(GOOD / "spec.yaml")
    assert isinstance(spec, Spec)
    expected_graph = build_model("debug", overrides={"num_layers": 2})
    assert spec.graph.layers == expected_graph.layers and spec.graph.edges == expected_graph.edges
    assert spec.cluster.num_devices == 4 and spec.cluster.device.name == "A100-40GB"
    assert spec.cluster.inter_node.bandwidth_gb_per_s == 25.0
    assert spec.training.seq_len == expected_graph.seq_len       # defaults to the model's
    assert spec.space.pp_degrees == (1, 2) and spec.space.zero_levels == (0, 1)
    assert spec.space.recompute == (Recompute.none, Recompute.full)
    assert spec.space.tp_degrees == SearchSpace().tp_degrees      # omitted -> SearchSpace default
    assert spec.solver.name == "dp" and spec.solver.rel_gap == 0.01 and spec.solver.form == "auto"
    assert spec.cost_params.comm_efficiency == 0.7
    assert spec.cost_params.elementwise_passes == default_params().elementwise_passes
    assert spec.training.runtime.name == "megatron-core"


def test_megatron_micro_batch_size_becomes_microbatches():
    """4 devices, tp2 pp2 -> dp = 4/(2*2) = 1; micro_batch_size 1 per replica with a
    global batch of 16 -> 16 / (1*1) = 16 micro-batches; 4 layers split 2+2."""
    plan = load_spec(GOOD / "spec.yaml").plan
    assert plan.microbatches == 16 and plan.pp == 2
    assert [len(st.layers) for st in plan.stages] == [2, 2]
    assert set(plan.strategy_of().values()) == {Strategy(dp=1, tp=2)}


def test_explicit_model_with_measured_costs_and_explicit_plan(tmp_path):
    spec_dict = {
        "model": {"name": "m", "seq_len": 16,
                  "layers": [{"name": "a", "flops_fwd": 1e9, "flops_bwd": 2e9, "params": 100,
                              "max_tp": 2},
                             {"name": "b", "kind": "linear", "flops_fwd": 1e9, "params": 100}],
                  "measured": [{"layer": "a", "tp": 2, "fwd_ms_per_sample": 0.5,
                                "bwd_ms_per_sample": 1.0},
                               {"layer": "a", "tp": 1, "fwd_ms_per_sample": 0.9,
                                "bwd_ms_per_sample": 1.8, "act_bytes_per_sample": 1000}]},
        "cluster": {"nodes": 1, "gpus_per_node": 2,
                    "device": {"name": "toy", "peak_tflops": {"bf16": 100}, "hbm_gib": 16,
                               "hbm_gb_per_s": 1000}},
        "training": {"global_batch_size": 8},
        "plan": {"microbatches": 2, "schedule": "gpipe",
                 "stages": [{"layers": ["a"], "strategies": [{"dp": 1, "tp": 1}]},
                            {"layers": ["b"], "strategies": [{"dp": 1}]}]},
    }
    (tmp_path / "s.json").write_text(__import__("json").dumps(spec_dict))
    spec = load_spec(tmp_path / "s.json")
    a = spec.graph.layers[0]
    assert a.measured == (MeasuredCost(1, 0.9, 1.8, 1000.0), MeasuredCost(2, 0.5, 1.0, None))
    assert spec.graph.layers[1].measured == () and spec.graph.edges == [("a", "b")]
    assert spec.training.seq_len == 16 and spec.cluster.device.hbm_gib == 16
    assert spec.plan.pp == 2 and spec.plan.schedule is Schedule.gpipe
    assert spec.plan.strategy_of()["b"] == Strategy(dp=1, tp=1)


EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


#: Examples that are capacity sweeps (base spec x axes), not specs: loaded by load_sweep.
SWEEPS = [p for p in EXAMPLES if p.name.startswith("capacity_")]


@pytest.mark.parametrize("path", [p for p in EXAMPLES if p not in SWEEPS],
                         ids=[p.name for p in EXAMPLES if p not in SWEEPS])
def test_every_example_loads(path):
    spec = load_spec(path)
    assert spec.graph.layers and spec.cluster.num_devices >= 8


@pytest.mark.parametrize("path", SWEEPS, ids=[p.name for p in SWEEPS])
def test_every_sweep_example_loads(path):
    from autopar_opt.capacity import load_sweep

    sweep = load_sweep(path)
    assert len(sweep.scenarios) >= 2 and sweep.planning.prices.source


def test_examples_cover_the_requested_set():
    names = {p.name for p in EXAMPLES}
    assert {"quickstart.yaml", "llama7b_2x8_a100.yaml", "bert_huge_1x8_v100.yaml",
            "llama3_70b_1024_h100.yaml", "gpt3_175b_3072_a100.yaml",
            "estimate_megatron_gpt3_175b.yaml", "inception_v3_8gpu.yaml",
            "llama31_405b_16384_h100.yaml", "deepseek_v3_2048_h800.yaml"} <= names


def test_split_example_loads():
    spec = load_spec(ROOT / "examples" / "split" / "spec.yaml")
    assert spec.cluster.name == "1x4-a100-40" and len(spec.graph) == 4
    assert spec.training.global_batch_size == 16


def test_inception_example_is_a_single_stage_dag():
    spec = load_spec(ROOT / "examples" / "inception_v3_8gpu.yaml")
    assert not spec.graph.is_chain() and spec.space.pp_degrees == (1,)
    assert spec.cluster.num_devices == 8


def test_cluster_states_nics_memory_and_power_cap(tmp_path):
    """cluster.nics_per_node, device_memory_gib and power_limit_w (issue 28, points 2 and 4)
    reach the built cluster: 4 NICs for 8 GPUs, a 96 GB H100 with its compute, a 500 W cap
    lowering the FLOP peak by (500/700)^(1/3)."""
    data = yaml.safe_load((GOOD / "spec.yaml").read_text())
    data["cluster"] = {"nodes": 2, "gpus_per_node": 8, "device": "H100-SXM-80GB",
                       "nics_per_node": 4, "device_memory_gib": 96, "power_limit_w": 500}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    cluster = load_spec(tmp_path / "s.yaml").cluster
    assert cluster.nics == 4 and cluster.device.hbm_gib == 96.0
    assert cluster.device.peak_flops("bf16") == pytest.approx(989e12 * (500 / 700) ** (1 / 3))


def test_a_cost_model_file_overrides_only_what_it_states(tmp_path):
    """A file of one key equals the same key inline: every other parameter keeps the
    shipped calibration (QA round 10: the file reset them to the uncalibrated priors, 5.23 s
    against 5.75 s inline); a misspelt device in the file is refused as inline."""
    from autopar_opt.spec import SpecError

    data = yaml.safe_load((GOOD / "spec.yaml").read_text())
    data["cost_model"] = {"comm_efficiency": 0.71}
    (tmp_path / "inline.yaml").write_text(yaml.safe_dump(data))
    (tmp_path / "fit.yaml").write_text("params: {comm_efficiency: 0.71}\n")
    data["cost_model"] = "fit.yaml"
    (tmp_path / "file.yaml").write_text(yaml.safe_dump(data))
    by_file, inline = load_spec(tmp_path / "file.yaml"), load_spec(tmp_path / "inline.yaml")
    assert by_file.cost_params == inline.cost_params
    shipped = default_params()
    assert by_file.cost_params.efficiency_half_us == shipped.efficiency_half_us
    assert by_file.cost_params.comm_efficiency == 0.71 != shipped.comm_efficiency
    (tmp_path / "fit.yaml").write_text("params: {gemm_efficiency: {H100-SXM: 0.5}}\n")
    with pytest.raises(SpecError, match=r"gemm_efficiency\.H100-SXM.*unknown device name"):
        load_spec(tmp_path / "file.yaml")
