"""Bad specs: every mistake gives exit code 2 from the CLI and a SpecError that
names the key and the fix, on one line, without a traceback.

Each case mutates a small valid spec (the ``debug`` model on one node of four
A100-40GB, global batch 16, plan tp2·pp2 with 4 micro-batches) in one place,
so the only problem reported is the one the case introduces.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from autopar_opt.cli.commands import app
from autopar_opt.spec import SpecError, load_spec
from support import paths

DATA = paths.DATA / "specs"


def base() -> dict:
    """A valid spec; each case below breaks exactly one thing."""
    return {
        "model": {"zoo": "debug"},
        "cluster": {"name": "c4", "nodes": 1, "gpus_per_node": 4, "device": "A100-40GB"},
        "training": {"global_batch_size": 16},
        "plan": {"tp": 2, "pp": 2, "microbatches": 4},
    }


def explicit_model() -> dict:
    return {"name": "m", "layers": [{"name": "a", "flops_fwd": 1e9, "params": 10},
                                    {"name": "b", "flops_fwd": 1e9, "params": 10}]}


def _set(path: str, value):
    """A mutation setting dotted ``path`` (None as value deletes the key)."""
    def apply(spec: dict) -> dict:
        node = spec
        keys = path.split(".")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(keys[-1], None)
        else:
            node[keys[-1]] = value
        return spec
    return apply


def _both(*mutations):
    def apply(spec: dict) -> dict:
        for m in mutations:
            spec = m(spec)
        return spec
    return apply


NODES2 = _set("cluster.nodes", 2)

#: (id, mutation, key regex, fix regex): the key and its fix must share a line.
CASES = [
    ("gpus_zero", _set("cluster.gpus_per_node", 0), r"cluster\.gpus_per_node",
     r"expected a positive integer, e\.g\. 8"),
    ("gpus_text", _set("cluster.gpus_per_node", "eight"), r"cluster\.gpus_per_node",
     r"expected an integer, e\.g\. 8"),
    ("cluster_key_typo", _both(_set("cluster.gpus_per_nod", 4), _set("cluster.gpus_per_node", None)),
     r"cluster\.gpus_per_nod\b", r"did you mean 'gpus_per_node'"),
    ("top_key_typo", _set("solvr", {"name": "highs"}), r"solvr", r"did you mean 'solver'"),
    ("unknown_zoo_model", _set("model.zoo", "debg"), r"model\.zoo", r"did you mean 'debug'"),
    ("quoted_integer", _set("training.global_batch_size", "32"), r"training\.global_batch_size",
     r"must be an integer, not a string: write it without quotes"),
    ("two_model_sources", _set("model.hf_config", "llama-3.1-8b"), r"model\b",
     r"gives zoo and hf_config: a model has one source \(zoo, hf_config or layers\); keep one"),
    ("unknown_zoo_cluster", lambda s: {**s, "cluster": {"zoo": "dgx-a100-9"}}, r"cluster\.zoo",
     r"use one of: .*dgx-a100-8"),
    ("unknown_device", _set("cluster.device", "A100-40G"), r"cluster\.device",
     r"did you mean 'A100-40GB'"),
    ("custom_device_missing_hbm", _set("cluster.device", {"name": "x", "peak_tflops": {"bf16": 100},
                                                          "hbm_gb_per_s": 1000}),
     r"cluster\.device\.hbm_gib", r"add 'hbm_gib', e\.g\. hbm_gib: 80"),
    ("link_negative_bw", _set("cluster.inter_node", {"bandwidth_gb_per_s": -1, "latency_us": 1}),
     r"cluster\.inter_node\.bandwidth_gb_per_s", r"expected a positive number"),
    ("dtype_unknown", _set("training.dtype", "bf17"), r"training\.dtype",
     r"use one of .*'bf16'.*did you mean 'bf16'"),
    ("dtype_not_on_device", _both(_set("cluster.device", "V100-32GB"), _set("training.dtype", "bf16")),
     r"training\.dtype", r"use one of its dtypes: fp16"),
    ("batch_missing", _set("training.global_batch_size", None), r"training\.global_batch_size",
     r"add 'global_batch_size', e\.g\. global_batch_size: 512"),
    ("optimizer_unknown", _set("training.optimizer", "adamw"), r"training\.optimizer",
     r"use one of 'adam_mixed'"),
    ("autocast_fp32", _both(_set("training.dtype", "fp32"), _set("training.autocast", True)),
     r"training\.autocast", r"16-bit dtype \(fp16 or bf16\), not fp32.*set training\.dtype to "
     r"fp16 or bf16"),
    ("autocast_text", _set("training.autocast", "maybe"), r"training\.autocast",
     r"expected true or false"),
    ("tie_not_first_last", _set("model", {"name": "m", "layers": [
        {"name": "a", "flops_fwd": 1e9, "params": 10},
        {"name": "b", "flops_fwd": 1e9, "params": 10, "tied_params": 10, "tied_to": "c"},
        {"name": "c", "flops_fwd": 1e9, "params": 10}]}),
     r"model\.layers\[1\]\.tied_to", r"join the last layer.*tie the output layer to the input "
     r"embedding"),
    ("tie_unknown_partner", _set("model", {"name": "m", "layers": [
        {"name": "a", "flops_fwd": 1e9, "params": 10},
        {"name": "b", "flops_fwd": 1e9, "params": 10, "tied_params": 10, "tied_to": "x"}]}),
     r"model\.layers\[1\]\.tied_to", r"names no layer.*name the layer that owns"),
    ("reserve_too_big", _set("training.memory_reserve_gib", 64), r"training\.memory_reserve_gib",
     r"expected a few GiB"),
    ("pp_degree_not_divisor", _set("search.pp_degrees", [3]), r"search\.pp_degrees\[0\]",
     r"use divisors of 4: 1, 2, 4"),
    ("zero_level_4", _set("search.zero_levels", [0, 4]), r"search\.zero_levels\[1\]",
     r"expected an integer at most 3"),
    ("hybrid_sharding_deepspeed", _both(_set("target", "deepspeed"), _set("plan", None),
                                       _set("search.hybrid_sharding", [True])),
     r"search\.hybrid_sharding", r"MiCS was removed.*add false"),
    ("hybrid_sharding_text", _set("search.hybrid_sharding", ["node"]), r"search\.hybrid_sharding\[0\]",
     r"expected true or false"),
    ("hybrid_shard_nodes_zero", _set("search.hybrid_shard_nodes", [0]),
     r"search\.hybrid_shard_nodes\[0\]", r"greater than 0"),
    ("hybrid_shard_nodes_whole_cluster", _both(NODES2, _set("search.hybrid_shard_nodes", [1, 2])),
     r"search\.hybrid_shard_nodes\[1\]", r"not smaller than the cluster's 2 node.*list node counts below 2"),
    ("hybrid_shard_nodes_without_hybrid", _both(NODES2, _set("search.hybrid_sharding", [False]),
                                                _set("search.hybrid_shard_nodes", [2])),
     r"search\.hybrid_shard_nodes", r"search\.hybrid_sharding is \[false\].*add true"),
    # base plan on 4 GPUs: tp2 pp2 -> dp 1; with pp 1, dp 2: a group of 2 would be all of dp*cp
    ("plan_zero_group_not_divisor", _both(NODES2, _set("plan.pp", 1), _set("plan.zero", 3),
                                          _set("plan.zero_group", 3)),
     r"plan\.zero_group", r"does not divide dp\*cp = 4.*give a multiple of cp that divides dp\*cp"),
    ("plan_zero_group_without_zero", _both(NODES2, _set("plan.pp", 1), _set("plan.zero_group", 2)),
     r"plan\.zero_group", r"needs a ZeRO level that shards.*set zero >= 1"),
    # above dp*cp, and the whole group on ZeRO-0, were read silently (QA round 10)
    ("plan_zero_group_above_dp", _both(NODES2, _set("plan.pp", 1), _set("plan.zero", 3),
                                       _set("plan.zero_group", 8)),
     r"plan\.zero_group", r"exceeds dp\*cp = 4"),
    ("plan_zero_group_whole_without_zero", _both(NODES2, _set("plan.pp", 1),
                                                 _set("plan.zero_group", 4)),
     r"plan\.zero_group", r"needs a ZeRO level that shards"),
    ("schedule_unknown", _set("search.schedules", ["zb-v"]), r"search\.schedules\[0\]",
     r"use one of 'gpipe', '1f1b' or 'interleaved'"),
    ("vp_chunks_without_interleaved", _both(_set("search.schedules", ["1f1b"]),
                                            _set("search.vp_chunks", [2])),
     r"search\.vp_chunks", r"search\.schedules does not list it.*add interleaved to search\.schedules"),
    # no schedules stated: the default of target none is 1f1b alone (Target.default_schedules)
    ("vp_chunks_outside_the_default", _both(_set("target", "none"), _set("search.vp_chunks", [2])),
     r"search\.vp_chunks", r"default schedules of target none \(1f1b\).*add interleaved"),
    ("tp_across_nodes", _both(NODES2, _set("search.tp_degrees", [1, 8])), r"search\.tp_degrees\[1\]",
     r"set search\.tp_within_node: false"),
    ("microbatches_not_divisor", _set("search.microbatches", [3]), r"search\.microbatches\[0\]",
     r"use divisors of 16"),
    ("recompute_typo", _set("search.recompute", ["selectiv"]), r"search\.recompute\[0\]",
     r"did you mean 'selective'"),
    ("solver_unknown", _set("solver.name", "cplex"), r"solver\.name", r"use one of 'auto', 'highs'"),
    ("highs_miqp", _set("solver", {"name": "highs", "form": "miqp"}), r"solver\.form", r"use form: milp"),
    ("gap_too_big", _set("solver.rel_gap", 1.5), r"solver\.rel_gap", r"less than 1"),
    ("time_limit_negative", _set("solver.time_limit_s", -5), r"solver\.time_limit_s",
     r"expected a positive number, e\.g\. 60"),
    ("plan_dp_mismatch", _set("plan.dp", 4), r"plan\.dp", r"set dp: 1"),
    ("plan_microbatches_not_divisor", _set("plan.microbatches", 3), r"plan\.microbatches",
     r"use a divisor of 16"),
    ("plan_no_microbatches", _set("plan.microbatches", None), r"plan\.microbatches",
     r"add microbatches"),
    ("plan_tp_over_heads", _both(NODES2, _set("plan.pp", 1), _set("plan.tp", 8)), r"plan\.tp",
     r"divides every layer's max_tp"),
    ("plan_stage_layers", _set("plan.stage_layers", [1, 2]), r"plan\.stage_layers",
     r"add up to 6"),
    ("plan_sp_without_tp", _both(_set("plan.tp", 1), _set("plan.pp", 4),
                                 _set("plan.sequence_parallel", True)),
     r"plan\.sequence_parallel", r"set sequence_parallel: false"),
    ("plan_vp_without_interleaved", _set("plan.vp_chunks", 2), r"plan\.vp_chunks",
     r"set schedule: interleaved"),
    ("plan_pp_not_divisor", _set("plan.pp", 3), r"plan\.pp", r"use a divisor of 4"),
    ("explicit_plan_devices", lambda s: {**s, "plan": {"microbatches": 4, "stages": [
        {"layers": ["embed", "block000", "block001", "block002", "block003", "head"],
         "strategies": [{"dp": 2, "tp": 1}]}]}},
     r"plan\.stages\[0\]\.strategies\[0\]", r"choose degrees whose product is 4"),
    ("explicit_plan_unknown_layer", lambda s: {**s, "plan": {"microbatches": 4, "stages": [
        {"layers": ["embed", "block000", "block001", "block002", "block003", "haed"],
         "strategies": [{"dp": 4}]}]}},
     r"plan\.stages\[0\]\.layers\[5\]", r"did you mean 'head'"),
    ("override_unknown", _set("model.overrides", {"num_layer": 2}), r"model\.overrides",
     r"num_layer.*use one of these"),
    ("model_key_typo", _set("model.overides", {"num_layers": 2}), r"model\.overides",
     r"did you mean 'overrides'"),
    ("explicit_edge_unknown", lambda s: {**s, "plan": None, "model": {**explicit_model(),
                                                                      "edges": [["a", "bb"]]}},
     r"model\.edges\[0\]", r"did you mean 'b'"),
    ("explicit_duplicate_layer", lambda s: {**s, "plan": None, "model": {
        "name": "m", "layers": [{"name": "a"}, {"name": "a"}]}},
     r"model\.layers\[1\]\.name", r"give every layer a unique name"),
    ("explicit_backward_edge", lambda s: {**s, "plan": None, "model": {**explicit_model(),
                                                                       "edges": [["b", "a"]]}},
     r"model\.edges\[0\]", r"topological order"),
    ("explicit_negative_flops", lambda s: {**s, "plan": None, "model": {
        "name": "m", "layers": [{"name": "a", "flops_fwd": -1}]}},
     r"model\.layers\[0\]\.flops_fwd", r"at least 0"),
    ("measured_unknown_layer", lambda s: {**s, "plan": None, "model": {**explicit_model(), "measured": [
        {"layer": "c", "tp": 1, "fwd_ms_per_sample": 1, "bwd_ms_per_sample": 2}]}},
     r"model\.measured\[0\]\.layer", r"use a layer name of the model"),
    ("layer_kind_unknown", lambda s: {**s, "plan": None, "model": {
        "name": "m", "layers": [{"name": "a", "kind": "transformer"}]}},
     r"model\.layers\[0\]\.kind", r"did you mean 'transformer_block'"),
    ("comm_efficiency_above_one", _set("cost_model.comm_efficiency", 1.5),
     r"cost_model\.comm_efficiency", r"at most 1"),
    ("gemm_efficiency_device_typo", _set("cost_model.gemm_efficiency", {"A100-40gb": 0.5}),
     r"cost_model\.gemm_efficiency\.A100-40gb", r"did you mean 'A100-40GB'"),
    ("cluster_missing", _set("cluster", None), r"cluster", r"add 'cluster'"),
    ("runtime_unknown", _set("training.runtime", "megatron_cor"), r"training\.runtime",
     r"did you mean 'megatron-core'"),
    ("runtime_capability_unknown", _set("training.runtime_options", {"tp_comm_overlp": True}),
     r"training\.runtime_options\.tp_comm_overlp", r"did you mean 'tp_comm_overlap'"),
    ("dp_overlap_fraction_is_gone", _set("cost_model.dp_overlap", 1.0),
     r"cost_model\.dp_overlap", r"remove"),
]


def _line_regex(key: str, fix: str) -> str:
    """Key and fix on the same problem line."""
    return rf"{key}[^\n]*{fix}"


def _write(tmp_path: Path, spec: dict) -> Path:
    spec = {k: v for k, v in spec.items() if v is not None}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize("mutate,key,fix", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_spec(tmp_path, mutate, key, fix):
    path = _write(tmp_path, mutate(copy.deepcopy(base())))
    with pytest.raises(SpecError, match=_line_regex(key, fix)) as info:
        load_spec(path)
    assert len(info.value.problems) == 1, str(info.value)
    assert info.value.problems[0].file == str(path)
    result = _cli("estimate", str(path))
    assert result.exit_code == 2
    assert re.search(_line_regex(key, fix), result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stdout == ""


def test_cases_are_distinct():
    assert len({c[0] for c in CASES}) == len(CASES) >= 25


def test_base_spec_is_valid(tmp_path):
    """The cases' oracle is only meaningful if the unmutated spec loads."""
    spec = load_spec(_write(tmp_path, base()))
    assert spec.plan is not None and spec.plan.pp == 2


FILE_CASES = [
    ("yaml_syntax.yaml", r"YAML syntax error at line 4", r"fix the YAML syntax"),
    ("empty.yaml", r"the file is empty", r"examples/quickstart\.yaml"),
    ("wrong_ext.txt", r"unsupported file extension '\.txt'", r"'\.yaml'"),
    ("toml_syntax.toml", r"TOML syntax error.*line 3", r"fix the TOML syntax"),
    ("json_syntax.json", r"JSON syntax error at line 4", r"no trailing comma"),
    ("top_list.yaml", r"top level is a list", r"'key: value'"),
    ("no_such_file.yaml", r"does not exist", r"check the path"),
    ("bad_include.yaml", r"model.*does not exist \(included by model: 'no_such_model_file\.yaml'\)",
     r"check the path"),
]


@pytest.mark.parametrize("name,rule,fix", FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_bad_file(name, rule, fix):
    path = DATA / name
    with pytest.raises(SpecError, match=_line_regex(rule, fix)) as info:
        load_spec(path)
    assert len(info.value.problems) == 1, str(info.value)
    result = _cli("estimate", str(path))
    assert result.exit_code == 2
    assert re.search(rule, result.stderr)
    assert "Traceback" not in result.stderr


def test_three_mistakes_reported_at_once():
    path = DATA / "three_mistakes.yaml"
    with pytest.raises(SpecError) as info:
        load_spec(path)
    keys = sorted(p.key for p in info.value.problems)
    assert keys == ["cluster.gpus_per_node", "solvr", "training.dtype"]
    assert str(info.value).startswith("invalid spec: 3 problems")
    result = _cli("estimate", str(path))
    assert result.exit_code == 2
    for key in keys:
        assert f"{path}: {key}" in result.stderr


def test_problems_of_an_included_file_name_that_file(tmp_path):
    (tmp_path / "cluster.yaml").write_text("nodes: 1\ngpus_per_node: -4\ndevice: A100-40GB\n")
    top = base()
    top["cluster"] = "cluster.yaml"
    path = _write(tmp_path, top)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    (problem,) = info.value.problems
    assert problem.file == str(tmp_path / "cluster.yaml")
    assert problem.key == "cluster.gpus_per_node" and problem.value == -4


@pytest.mark.parametrize("microbatches", [128, 16, 3])
def test_the_suggested_microbatch_counts_are_valid(tmp_path, microbatches):
    """Every micro-batch count a fix offers loads (session 24: 128 micro-batches of a
    64-sample batch on 16 GPUs suggested 64, whose 1-sample micro-batch does not split
    over dp=16)."""
    spec = {"model": {"zoo": "debug"}, "cluster": {"zoo": "debug-2x4"},
            "training": {"global_batch_size": 64, "seq_len": 128},
            "plan": {"tp": 1, "pp": 1, "microbatches": microbatches}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    fix = err.value.problems[0].fix
    offered = [int(x) for x in re.search(r"one of ([\d, ]+)", fix).group(1).split(", ")]
    assert offered == [1, 2, 4, 8] and f"e.g. {max(c for c in offered if c <= microbatches)}" in fix
    for c in offered:
        spec["plan"]["microbatches"] = c
        path.write_text(yaml.safe_dump(spec))
        assert load_spec(path).plan.microbatches == c


def test_an_unstated_default_dtype_is_said_to_be_one(tmp_path):
    """A V100 spec without training.dtype is refused for the default bf16, and the
    message says the spec did not write it (session 24: "training.dtype = 'bf16'")."""
    spec = {"model": {"zoo": "debug"}, "cluster": {"zoo": "1x8-v100-32"},
            "training": {"global_batch_size": 64, "seq_len": 128}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    problem = err.value.problems[0]
    assert problem.key == "training.dtype" and "not stated: its default is bf16" in problem.rule
    assert "e.g. training: {dtype: fp16}" in problem.fix
    spec["training"]["dtype"] = "bf16"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert "not stated" not in err.value.problems[0].rule


def _refused(tmp_path, text: str) -> SpecError:
    """The SpecError a spec of ``text`` raises (this session's message tests)."""
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    return err.value


def test_enum_error_lists_the_values_once_and_booleans_read_as_yaml(tmp_path):
    """A wrong enum value names the values once (in the fix), and a YAML boolean is
    shown as the spec spells it (true), not as Python's True."""
    text = str(_refused(tmp_path, "model: {zoo: debug}\ncluster: {nodes: 1, gpus_per_node: 4, "
                        "device: H100-SXM-80GB, intra_node_topology: nvswitch}\n"
                        "training: {global_batch_size: true}\n"))
    topo = [ln for ln in text.splitlines() if "intra_node_topology" in ln][0]
    assert topo.count("'mesh'") == 1 and "use one of 'switch' or 'mesh'" in topo
    assert "did you mean 'switch'" in topo
    batch = [ln for ln in text.splitlines() if "global_batch_size" in ln][0]
    assert "global_batch_size = true:" in batch and "True" not in batch


@pytest.mark.parametrize("device,dtype,fix", [
    ("A100-80GB", "fp16", "set training.dtype: bf16, or use training.optimizer: adam_mixed"),
    ("H100-SXM-80GB", "fp32", "set training.dtype: bf16, or use training.optimizer: adam_fp32 "
                              "(fp32 weights and moments) or adam_mixed"),
    ("V100-32GB", "fp16", "use training.optimizer: adam_mixed (device V100-32GB has no bf16 or fp8 peak)"),
])
def test_bf16_optimizer_fix_offers_only_dtypes_the_device_has(tmp_path, device, dtype, fix):
    """adam_bf16 with a dtype it cannot train in: the fix names bf16 only where the device
    computes in it (an A100 has no fp8: QA round 8), and fp32 training's own optimizer."""
    (problem,) = _refused(tmp_path, f"model: {{zoo: debug}}\ncluster: {{nodes: 1, gpus_per_node: 8, "
                                    f"device: {device}}}\ntraining: {{global_batch_size: 8, "
                                    f"dtype: {dtype}, optimizer: adam_bf16}}\n").problems
    assert problem.key == "training.dtype" and problem.fix == fix


def test_bf16_optimizer_on_a_device_without_bf16_says_both_at_once(tmp_path):
    """QA round 8: bf16 + adam_bf16 on a V100 said only 'no bf16 peak: use fp16', which led
    to the optimizer's refusal next; both are said at once."""
    problems = _refused(tmp_path, "model: {zoo: debug}\ncluster: {nodes: 1, gpus_per_node: 8, "
                        "device: V100-32GB}\ntraining: {global_batch_size: 8, dtype: bf16, "
                        "optimizer: adam_bf16}\n").problems
    assert {p.key for p in problems} == {"training.dtype", "training.optimizer"}
    assert any("use training.optimizer: adam_mixed" == p.fix for p in problems)


@pytest.mark.parametrize("search, words", [
    ("{pp_degrees: [1], tp_degrees: [1, yes]}",
     ["search.tp_degrees = [1, true]:", "expected a list of integers, e.g. [1, 2, 4, 8]"]),
    ("{sequence_parallel: yes}", ["e.g. [false, true]"]),
    ("{zero_levels: true}", ["expected a list of integers, e.g. [0, 1]"]),
    ("{sequence_parallel: [yes, maybe]}", ["search.sequence_parallel[1] = 'maybe': must be a valid boolean;"]),
])
def test_lists_and_examples_read_as_yaml(tmp_path, search, words):
    """QA round 8: a list holding a YAML boolean was shown as Python's [1, True], a list
    field's integer error said 'an integer', examples were Python reprs, and pydantic's
    parser words ('unable to interpret input') reached the user."""
    text = str(_refused(tmp_path, f"model: {{zoo: debug}}\ncluster: {{zoo: debug-2x4}}\n"
                                  f"training: {{global_batch_size: 8}}\nsearch: {search}\n"))
    for w in words:
        assert w in text, (w, text)
    assert "True" not in text and "False" not in text and "unable to interpret" not in text


def test_a_yaml_boolean_for_a_text_choice_says_how_yaml_read_it(tmp_path):
    """QA round 8: `recompute: off` arrived as false and read 'is not one of the allowed
    values' with no word on why."""
    text = str(_refused(tmp_path, "model: {zoo: debug}\ncluster: {zoo: debug-2x4}\n"
                        "training: {global_batch_size: 8}\n"
                        "plan: {tp: 1, pp: 1, dp: 8, micro_batch_size: 1, recompute: off}\n"))
    assert "plan.recompute = false" in text and "YAML reads yes, no, on and off" in text
    assert "use one of" in text


def test_fp32_training_takes_fp32_optimizer_state(tmp_path):
    """QA round 8: dtype fp32 with adam_mixed was priced as 16-bit weights and gradients
    beside an fp32 master (2 + 2 + 12 bytes), which fp32 training does not have. Unstated,
    the optimizer is fp32 training's own (adam_fp32: 4 + 4 + 8) and the assumptions say so;
    stated, adam_mixed is refused at training.dtype."""
    from autopar_opt.cost.assumptions import cost_assumptions
    from autopar_opt.ir.training import param_state_bytes
    body = ("model: {{zoo: debug}}\ncluster: {{zoo: 1x8-v100-32}}\n"
            "training: {{global_batch_size: 8, dtype: fp32{extra}}}\n")
    f = tmp_path / "ok.yaml"
    f.write_text(body.format(extra=""))
    spec = load_spec(f)
    assert spec.training.optimizer == "adam_fp32" and param_state_bytes(spec.training) == (4.0, 4.0, 8.0)
    said = [ln for ln in cost_assumptions(spec.graph, spec.cluster, spec.training) if "optimizer" in ln]
    assert any("not stated: the default for dtype fp32" in ln for ln in said)
    (problem,) = _refused(tmp_path, body.format(extra=", optimizer: adam_mixed")).problems
    assert problem.key == "training.dtype" and "use training.optimizer: adam_fp32" in problem.fix


#: A debug model on 2 A100s: the spec the tests below change one thing of.
SMALL = {"model": {"zoo": "debug"},
         "cluster": {"nodes": 1, "gpus_per_node": 2, "device": "A100-80GB"},
         "training": {"global_batch_size": 8}}


def _small(**sections) -> dict:
    """:data:`SMALL` with ``sections`` merged into its own (a new section added)."""
    out = json.loads(json.dumps(SMALL))
    for name, body in sections.items():
        out[name] = {**out.get(name, {}), **body} if isinstance(body, dict) else body
    return out


def _load_small(tmp_path, spec: dict | str):
    """load_spec of ``spec``, a mapping or the file's text."""
    from autopar_opt.spec import load_spec

    path = tmp_path / "s.yaml"
    path.write_text(spec if isinstance(spec, str) else yaml.safe_dump(spec))
    return load_spec(path)


def _refused_spec(tmp_path, spec: dict | str, match: str) -> str:
    """The SpecError message ``spec`` is refused with, which must match ``match``."""
    from autopar_opt.spec import SpecError

    with pytest.raises(SpecError, match=match) as err:
        _load_small(tmp_path, spec)
    return str(err.value)


@pytest.mark.parametrize("part, total, value", [
    ("act_attn_bytes", "act_bytes", 1.0e9),
    ("act_replicated_bytes", "act_bytes", 1.0e9),
    ("expert_params", "params", 10**9),
])
def test_a_layer_part_above_its_total_is_refused_spec(tmp_path, part, total, value):
    """QA round 10: act_attn_bytes above act_bytes priced -3.44 GiB per device; expert_params
    above params, -0.725 B active parameters."""
    layer = {"name": "l0", "kind": "transformer_block", "flops_fwd": 1.0e12, "flops_bwd": 2.0e12,
             "params": 12_600_000, "act_bytes": 3.0e8, "num_experts": 8, "top_k": 2, part: value}
    spec = _small(model={"name": "m", "layers": [layer]})
    del spec["model"]["zoo"]
    _refused_spec(tmp_path, spec, rf"model\.layers\[0\]\.{part} = .*is part of {total}")


def test_a_repeated_edge_is_refused_spec(tmp_path):
    """A repeated edge made a chain a DAG (LayerGraph.is_chain false: the search's DAG path)
    without a word (QA round 11); listed once, the same layers are a chain."""
    layer = {"kind": "transformer_block", "flops_fwd": 1.0e9, "flops_bwd": 2.0e9, "params": 5,
             "act_bytes": 1.0e6}
    layers = [dict(layer, name=n) for n in ("a", "b", "c")]
    spec = _small(model={"name": "m", "seq_len": 1024, "layers": layers,
                         "edges": [["a", "b"], ["a", "b"], ["b", "c"]]})
    del spec["model"]["zoo"]
    _refused_spec(tmp_path, spec, r"model\.edges\[1\] = \[a, b\]: repeats model\.edges\[0\]")
    spec["model"]["edges"] = [["a", "b"], ["b", "c"]]
    assert _load_small(tmp_path, spec).graph.is_chain()


def test_capacity_factor_with_load_imbalance_is_refused_spec(tmp_path):
    """A capacity factor pads every expert to its load, so a stated load_imbalance beside
    it was dropped without a word (QA round 11: capacity_factor 1.25 and load_imbalance 1.5
    priced a load of 1.25); each alone sets the routed experts' load."""
    spec = _small(model={"hf_config": "mixtral-8x7b-v0.1", "capacity_factor": 1.25,
                         "load_imbalance": 1.5}, training={"seq_len": 256})
    del spec["model"]["zoo"]
    _refused_spec(tmp_path, spec, r"model\.load_imbalance = 1\.5: is set together with "
                  r"capacity_factor = 1\.25")
    for key, value in (("capacity_factor", 1.25), ("load_imbalance", 1.5)):
        one = dict(spec, model={"hf_config": "mixtral-8x7b-v0.1", key: value})
        loads = {layer.expert_load for layer in _load_small(tmp_path, one).graph.layers
                 if layer.is_moe}
        assert loads == {value}


def test_a_moe_block_without_experts_is_refused_spec(tmp_path):
    """A layer of kind moe_block with no num_experts was priced as a dense block (every
    parameter active, no expert parallelism, no all-to-all) without a word (QA round 11);
    with its experts it loads, a token using top_k/num_experts of expert_params."""
    layer = {"name": "l0", "kind": "moe_block", "flops_fwd": 1.0e12, "flops_bwd": 2.0e12,
             "params": 12_600_000, "act_bytes": 3.0e8}
    spec = _small(model={"name": "m", "layers": [layer]})
    del spec["model"]["zoo"]
    text = _refused_spec(tmp_path, spec, r"model\.layers\[0\]\.num_experts = 0: a moe_block "
                         "needs its routed experts")
    assert "kind: transformer_block" in text
    layer.update(num_experts=8, top_k=2, expert_params=8_000_000)
    graph = _load_small(tmp_path, spec).graph
    assert graph.active_params() == 12_600_000 - 8_000_000 * (1 - 2 / 8)


@pytest.mark.parametrize("cluster, training, key", [
    ({"device_memory_gib": 0.5}, {}, r"cluster\.device_memory_gib = 0\.5"),
    ({}, {"memory_reserve_gib": 79.9}, r"training\.memory_reserve_gib = 79\.9"),
])
def test_a_device_the_reserves_fill_is_refused_spec(tmp_path, cluster, training, key):
    """The runtime's reserve (CUDA context, library workspaces) and the user's leave no room:
    a spec error naming the key (QA round 10: 'proven infeasible ... -0.24 GiB usable')."""
    _refused_spec(tmp_path, _small(cluster=cluster, training=training), rf"{key}.*runtime's reserve")


@pytest.mark.parametrize("key, values", [("schedules", ["1f1b", "1f1b"]), ("zero_levels", [0, 0, 3])])
def test_a_search_list_naming_a_value_twice_is_refused_spec(tmp_path, key, values):
    """QA round 10: every configuration was searched and listed twice."""
    _refused_spec(tmp_path, _small(search={key: values}),
             rf"search\.{key} = .*more than once; list each value once")


def test_two_sequence_lengths_are_refused_spec(tmp_path):
    """model.overrides.seq_len and training.seq_len that differ: the training's won without
    a word (QA round 10); the explicit layer form refuses the same conflict."""
    spec = _small(model={"zoo": "llama3-8b", "overrides": {"seq_len": 2048}},
                  training={"seq_len": 4096})
    _refused_spec(tmp_path, spec, r"training\.seq_len = 4096: differs from "
                             r"model\.overrides\.seq_len \(2048\)")
    spec["training"]["seq_len"] = 2048
    assert _load_small(tmp_path, spec).training.seq_len == 2048


def test_link_bandwidths_beyond_the_hardware_are_said(tmp_path):
    """400 (a 400 Gb/s NIC written as GB/s) and 900 (NVLink's both-directions figure) are
    priced as given and said (QA round 10: taken without a word)."""
    spec = _small(cluster={"nodes": 2, "gpus_per_node": 8, "device": "H100-SXM-80GB",
                           "inter_node": {"name": "ib", "bandwidth_gb_per_s": 400, "latency_us": 5},
                           "intra_node": {"name": "nvl", "bandwidth_gb_per_s": 900, "latency_us": 5}},
                  training={"global_batch_size": 16})
    notes = " ".join(_load_small(tmp_path, spec).notices)
    assert "400 GB/s per NIC is above the fastest shipping NIC" in notes
    assert "900 GB/s is above the H100-SXM-80GB's NVLink per GPU and direction (450" in notes


@pytest.mark.parametrize("search, plan, words", [
    ({}, {"tp": 1, "pp": 1, "etp": 2, "microbatches": 2},
     r"plan\.etp = 2: expert tensor parallelism needs MoE"),
    ({"etp_degrees": [2]}, None, r"search\.etp_degrees\[0\] = 2: expert tensor parallelism"),
    ({"max_microbatches": 1, "microbatches": [2, 4]}, None,
     r"search\.max_microbatches = 1: caps the default micro-batch counts.*\[2, 4\]"),
])
def test_settings_without_effect_are_refused_naming_their_key(tmp_path, search, plan, words):
    """QA round 10: etp on a dense plan was reported as "plan.ep = 1"; etp_degrees on a dense
    model and a max_microbatches the listed counts exceed were accepted without effect."""
    _refused_spec(tmp_path, _small(search=search, **({"plan": plan} if plan else {})), words)


SMALL_TEXT = ("model: {zoo: debug}\ncluster: {nodes: 1, gpus_per_node: 2, device: A100-80GB}\n"
              "training: {global_batch_size: %s}\n")


@pytest.mark.parametrize("text", ["1e3", "0o20"])
def test_an_integer_yaml_reads_as_text_is_told_why(tmp_path, text):
    """QA round 10: 'write it without quotes' for a value written without quotes."""
    said = _refused_spec(tmp_path, SMALL_TEXT % text, f"YAML reads '{text}' as text")
    assert "without quotes" not in said


def test_yaml_base_60_is_not_read_as_a_count(tmp_path):
    """QA round 10: seq_len: 2:08 was read as 128 (YAML 1.1's base 60) without a word."""
    _refused_spec(tmp_path, SMALL_TEXT % "8, seq_len: 2:08",
             r"training\.seq_len = '2:08'.*YAML 1\.1's base 60")


def test_a_described_device_named_like_a_catalog_part_is_refused_spec(tmp_path):
    """QA round 10: the catalog's calibration and links (keyed by name) priced a 1,000
    TFLOP/s part called 'A100-80GB' while the output said its architecture was unknown."""
    spec = _small(cluster={"device": {"name": "A100-80GB", "peak_tflops": {"bf16": 1000},
                                      "hbm_gib": 80, "hbm_gb_per_s": 2000}})
    _refused_spec(tmp_path, spec, r"cluster\.device\.name = 'A100-80GB': is the name of a catalog device")


def test_a_top_level_scalar_is_named_in_words(tmp_path):
    """QA round 10: "the top level is a int"."""
    _refused_spec(tmp_path, "42\n", "the top level is an integer, not a mapping")


def test_a_section_that_cannot_be_a_file_says_which_can(tmp_path):
    """QA round 10: search: sub/search.yaml got "must be a valid dictionary"."""
    said = _refused_spec(tmp_path, _small(search="sub/search.yaml"),
                         r"search = 'sub/search\.yaml': only the model, cluster, training "
                         r"sections may be files")
    assert "valid dictionary" not in said
    assert _load_small(tmp_path, {**_small(), "description": "notes.yaml"}).graph is not None
