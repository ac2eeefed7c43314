"""Hostile spec files (issue 15): each one used to give a traceback or a hang.

Every case must now give one :class:`SpecError` that names the key (or the
line) and the limit, and ``autopar estimate`` must exit 2 quickly without a
traceback. The oracle of each case is the limit it breaks
(:mod:`autopar_opt.core.limits`): the message must name it.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest
import yaml
from typer.testing import CliRunner

from autopar_opt.cli.commands import app
from autopar_opt.spec import SpecError, load_spec
from autopar_opt.core import limits
from autopar_opt.ir.strategies import divisors
from support import paths


def base() -> dict:
    """A valid spec (the debug model on 4 A100-40GB, a tp2-pp2 plan)."""
    return {"model": {"zoo": "debug"},
            "cluster": {"name": "c4", "nodes": 1, "gpus_per_node": 4, "device": "A100-40GB"},
            "training": {"global_batch_size": 16},
            "plan": {"tp": 2, "pp": 2, "microbatches": 4}}


def _yaml(spec: dict) -> str:
    return yaml.safe_dump(spec, sort_keys=False)


def _explicit(n: int, **layer) -> dict:
    return {"name": "m", "layers": [{"name": f"l{i}", **layer} for i in range(n)]}


def _with(path: str, value) -> str:
    spec = base()
    node = spec
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    return _yaml(spec)


# (id, file name, text, regex the message must match)
CASES = [
    ("deep_yaml", "s.yaml", "model: " + "[" * 5000 + "]" * 5000 + "\n",
     r"nesting deeper than the limit of 32 levels \(line 1\)"),
    ("deep_json", "s.json", '{"model": ' + "[" * 100_000 + "]" * 100_000 + "}",
     r"nesting deeper than the limit of 32 levels"),
    ("deep_toml", "s.toml", "model = " + "[" * 3000 + "]" * 3000 + "\n",
     r"nesting deeper than the limit of 32 levels"),
    ("deep_block_yaml", "s.yaml", "".join(f"{' ' * i}k{i}:\n" for i in range(60)) + " " * 60 + "v\n",
     r"nesting deeper than the limit of 32 levels"),
    ("batch_1e9", "s.yaml", _with("training.global_batch_size", 10**9),
     r"training\.global_batch_size = 1000000000: exceeds the resource limit of 16,777,216"),
    ("gpus_per_node_1e9", "s.yaml", _with("cluster.gpus_per_node", 10**9),
     r"cluster\.gpus_per_node = 1000000000: exceeds the resource limit of 1,024"),
    ("nodes_1e12", "s.yaml", _with("cluster.nodes", 10**12),
     r"cluster\.nodes = 1000000000000: exceeds the resource limit of 100,000"),
    ("devices_product", "s.yaml", _yaml({**base(), "cluster": {"nodes": 100_000, "gpus_per_node": 16,
                                                                "device": "A100-40GB"}}),
     r"cluster\.nodes = 100000: 100000 nodes x 16 GPUs = 1,600,000 devices exceed the limit of "
     r"1,048,576 devices"),
    ("int_3000_digits", "s.yaml", _with("training.global_batch_size", 10**3000),
     r"training\.global_batch_size = <an integer of 3,001 digits>: an integer of 3,001 digits "
     r"exceeds the limit of 1e\+15"),
    ("int_5000_digits", "s.yaml", "training: {global_batch_size: " + "9" * 5000 + "}\n",
     r"training\.global_batch_size = <an integer of 5,000 digits>: an integer of 5,000 digits "
     r"exceeds the limit of 1e\+15"),
    ("int_6000_digits_json", "s.json", '{"training": {"global_batch_size": ' + "9" * 6000 + "}}",
     r"training\.global_batch_size = <an integer of 6,000 digits>"),
    ("int_6000_digits_toml", "s.toml", "[training]\nglobal_batch_size = " + "9" * 6000 + "\n",
     r"global_batch_size: an integer of more than 4,300 digits at line 2"),
    ("string_1e5", "s.yaml", _with("model.zoo", "x" * 100_000),
     r"model\.zoo = 'x+\.\.\.': a string of 100,000 characters exceeds the limit of 4096"),
    ("file_3MB", "s.yaml", "description: " + "x" * 3_000_000 + "\n",
     r"over the limit of 1,048,576 bytes"),
    ("layers_5000", "s.json", json.dumps({**base(), "model": _explicit(5000, flops_fwd=1e9),
                                          "plan": {"tp": 1, "pp": 1, "microbatches": 1}}),
     r"model\.layers = .*5,000 items exceed the resource limit of 2,048"),
    ("layer_max_tp_1e12", "s.yaml", _with("model", _explicit(2, flops_fwd=1e9, max_tp=10**12)),
     r"model\.layers\[0\]\.max_tp = 1000000000000: exceeds the resource limit of 1,048,576"),
    ("zoo_layers_1e9", "s.yaml", _with("model", {"zoo": "debug", "overrides": {"num_layers": 10**9}}),
     r"model\.overrides\.num_layers = 1000000000: exceeds the limit of 16777216"),
    ("zoo_layers_5000", "s.yaml", _with("model", {"zoo": "debug", "overrides": {"num_layers": 5000}}),
     r"model\.overrides = .*5000 layers exceed the limit of 2048 layers"),
    ("billion_laughs", "s.yaml",
     "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
     + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefg", "bcdefgh"))
     + "model: *h\n", r"more than 500,000 values \(YAML anchors and aliases are expanded\)"),
    ("infinite_float", "s.yaml", _with("model", _explicit(2, flops_fwd=float("inf"))),
     r"model\.layers\[0\]\.flops_fwd = inf: not a finite number"),
    ("subnormal_flops", "s.yaml", _with("model", _explicit(2, flops_fwd=5e-324)),
     r"model\.layers\[0\]\.flops_fwd = 5e-324: is below the limit of 1e-30"),
    ("tiny_peak", "s.yaml", _with("cluster.device", {"name": "g", "peak_tflops": {"bf16": 1e-300},
                                                     "hbm_gib": 80, "hbm_gb_per_s": 2000}),
     r"cluster\.device\.peak_tflops\.bf16 = 1e-300: is below the limit of 1e-30"),
    ("zero_work_model", "s.yaml", _with("model", _explicit(2, params=10)),
     r"model\.layers: every layer has zero FLOPs and no measured time"),
    ("duplicate_yaml_key", "s.yaml", _yaml(base()) + "training: {global_batch_size: 8}\n",
     r"duplicate key 'training' at line 14 \(first at line 8\)"),
    ("duplicate_nested_yaml_key", "s.yaml",
     "model: {zoo: debug, zoo: gpt-1.7b}\ncluster: {zoo: dgx-a100-8}\ntraining: {global_batch_size: 8}\n",
     r"model\.zoo: duplicate key 'zoo' at line 1"),
    ("duplicate_deep_yaml_key", "s.yaml", "model: {zoo: debug}\ncluster: {zoo: dgx-a100-8}\n"
     "training: {global_batch_size: 8}\nsearch:\n  layer_groups:\n    - {tp: 1, tp: 2}\n",
     r"search\.layer_groups\[0\]\.tp: duplicate key 'tp' at line 6"),
    ("duplicate_json_key", "s.json", '{"model": {"zoo": "debug"}, "model": {"zoo": "debug"}}',
     r"duplicate key 'model'"),
    ("duplicate_deep_json_key", "s.json", '{"model": {"zoo": "debug"}, "training": '
     '{"x": [{"a": 1}, {"a": 1, "a": 2}]}}', r"training\.x\[1\]\.a: duplicate key 'a'"),
    ("include_directory", "s.yaml", _with("model", "sub.yaml"), r"sub\.yaml: model: the file is a "
     r"directory \(included by model: 'sub\.yaml'\)"),
    ("include_too_long", "s.yaml", _with("model", "a" * 4000 + ".yaml"),
     r"the file cannot be opened \(OSError.*name too long"),
    ("include_nul_byte", "s.json", json.dumps({**base(), "model": "a\u0000b.yaml"}),
     r"the file name contains a NUL character"),
    ("impossible_date", "s.yaml", "training: {global_batch_size: 2020-13-45}\n",
     r"a value cannot be read \(month must be in 1\.\.12\)"),
]


@pytest.mark.parametrize("name,filename,text,pattern", CASES, ids=[c[0] for c in CASES])
def test_hostile_spec_is_refused_quickly_with_the_limit(tmp_path, name, filename, text, pattern):
    (tmp_path / "sub.yaml").mkdir()
    path = tmp_path / filename
    path.write_text(text, encoding="utf-8")
    start = time.perf_counter()
    with pytest.raises(SpecError) as info:
        load_spec(path)
    elapsed = time.perf_counter() - start
    assert re.search(pattern, str(info.value)), str(info.value)[:2000]
    assert elapsed < 10, f"{name}: {elapsed:.1f} s"     # hangs were minutes; not a timing target
    result = CliRunner().invoke(app, ["estimate", str(path)])
    assert result.exit_code == 2, result.output[-2000:]
    assert "Traceback" not in result.output and result.exception is None or \
        isinstance(result.exception, SystemExit)


def test_limits_do_not_reject_the_bundled_examples():
    root = paths.REPO / "examples"
    loaded = [load_spec(p) for p in sorted(root.glob("*.yaml"))
              if not p.name.startswith("capacity_")]       # sweep files, not specs
    assert len(loaded) >= 6


def test_structure_walk_visits_values_in_file_order_and_caps_the_report(tmp_path):
    data = {"a": ["x" * (limits.MAX_STRING_CHARS + 1)] * 50, "b": float("nan")}
    problems = limits.structure_problems(data)
    assert len(problems) == limits.MAX_REPORTED
    assert [p.key for p in problems[:3]] == ["a[0]", "a[1]", "a[2]"]


def test_a_file_of_exactly_the_limit_is_read(tmp_path):
    path = tmp_path / "s.yaml"
    head = _yaml(base()) + "description: "
    path.write_text(head + "x" * (limits.MAX_FILE_BYTES - len(head) - 1) + "\n")
    assert os.path.getsize(path) == limits.MAX_FILE_BYTES
    with pytest.raises(SpecError, match="a string of .* exceeds the limit of 4096"):
        load_spec(path)     # read and parsed; refused by the string limit, not the size


def test_divisors_match_the_definition_and_are_fast_for_huge_numbers():
    for n in range(1, 400):
        assert divisors(n) == [k for k in range(1, n + 1) if n % k == 0]
    assert divisors(10**12)[-3:] == [250_000_000_000, 500_000_000_000, 10**12]
