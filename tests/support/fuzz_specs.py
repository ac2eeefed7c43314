"""Hypothesis strategies for malformed and extreme spec files (issue 15).

A case is (file name, file text, extra files): a valid base spec mutated at a
random key path with an extreme value (huge, tiny, negative, non-finite,
wrong type, very long, deeply nested), keys deleted or added, then written as
YAML, JSON or TOML, and sometimes damaged as text (truncated, a byte
inserted, a line duplicated, nesting wrapped around it) or pointed at an
include that is a directory, missing, itself, or absurdly named.
"""

from __future__ import annotations

import json
import math
from typing import Any

import yaml
from hypothesis import strategies as st

BASES: list[dict[str, Any]] = [
    {"model": {"zoo": "debug"},
     "cluster": {"name": "c4", "nodes": 1, "gpus_per_node": 4, "device": "A100-40GB"},
     "training": {"global_batch_size": 16},
     "search": {"pp_degrees": [1, 2], "zero_levels": [0, 1], "recompute": ["none"]},
     "plan": {"tp": 2, "pp": 2, "microbatches": 4}},
    {"model": {"name": "m", "layers": [
        {"name": "a", "flops_fwd": 1e9, "flops_bwd": 2e9, "params": 1000, "act_bytes": 1e6,
         "output_bytes": 1e5, "max_tp": 2},
        {"name": "b", "flops_fwd": 1e9, "flops_bwd": 2e9, "params": 1000, "act_bytes": 1e6,
         "output_bytes": 1e5, "max_tp": 2}], "edges": [["a", "b"]]},
     "cluster": {"nodes": 1, "gpus_per_node": 2,
                 "device": {"name": "g", "peak_tflops": {"bf16": 100.0}, "hbm_gib": 16,
                            "hbm_gb_per_s": 900}},
     "training": {"global_batch_size": 8, "seq_len": 128, "memory_reserve_gib": 1},
     "solver": {"name": "highs", "time_limit_s": 5, "rel_gap": 0.01},
     "cost_model": {"comm_efficiency": 0.8},
     "plan": {"stages": [{"layers": ["a", "b"], "strategies": [{"dp": 2}]}], "microbatches": 2}},
    {"model": {"zoo": "gpt-1.7b", "overrides": {"num_layers": 4}},
     "cluster": {"zoo": "dgx-a100-8"},
     "training": {"global_batch_size": 64, "seq_len": 2048, "dtype": "bf16"},
     "search": {"pp_degrees": [1, 2], "tp_degrees": [1, 2], "sequence_parallel": [False],
                "zero_levels": [0], "recompute": ["none"], "microbatches": [4, 8]},
     "plan": {"tp": 2, "pp": 2, "microbatches": 8}},
]

_HUGE_INTS = st.sampled_from([0, -1, -(10**6), 10**6, 10**9, 2**31, 10**12, 10**15 + 1, 10**18,
                              10**100, 10**3000, 2**63])
_FLOATS = st.sampled_from([0.0, -1.0, 1e-320, 5e-324, 1e-31, 1e29, 1e31, 1e308, math.inf,
                           -math.inf, math.nan, 0.5, 1.0, 1.5])
_TEXT = st.one_of(st.text(max_size=20),
                  st.builds(lambda n, c: c * n, st.sampled_from([100, 5000, 100_000, 600_000]),
                            st.sampled_from(["x", "é", "\U0001F600", "\x00", "\n", "{"])))


def _nested(depth: int, leaf: Any, as_list: bool) -> Any:
    out = leaf
    for _ in range(depth):
        out = [out] if as_list else {"k": out}
    return out


EXTREMES = st.one_of(
    _HUGE_INTS, _FLOATS, _TEXT, st.none(), st.booleans(),
    st.lists(_HUGE_INTS, max_size=5),
    st.builds(_nested, st.sampled_from([5, 40, 120]), st.just(1), st.booleans()),
    st.builds(lambda n: list(range(n)), st.sampled_from([0, 3, 5000, 30_000])),
    st.dictionaries(st.text(max_size=8), _HUGE_INTS, max_size=3),
)


def key_paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path of a mapping/list tree (lists by index)."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += key_paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += key_paths(value, prefix + (i,))
    return out


def set_at(tree: Any, path: tuple, value: Any, delete: bool) -> None:
    node = tree
    for part in path[:-1]:
        node = node[part]
    if delete and isinstance(node, dict):
        node.pop(path[-1], None)
    elif delete and isinstance(node, list) and len(node) > 1:
        node.pop(path[-1])
    else:
        node[path[-1]] = value


@st.composite
def mutated_tree(draw) -> dict:
    """A base spec with 1-3 mutations (set an extreme value, delete, add a key)."""
    tree = json.loads(json.dumps(draw(st.sampled_from(BASES))))
    for _ in range(draw(st.sampled_from([0, 1, 1, 1, 2, 3]))):
        paths = key_paths(tree)
        kind = draw(st.sampled_from(["set", "set", "set", "delete", "add"]))
        if kind == "add" or not paths:
            parent = draw(st.sampled_from([()] + [p for p in paths if isinstance(_get(tree, p), dict)]))
            node = _get(tree, parent)
            node[draw(st.sampled_from(["extra", "nodes", "zoo", "layers", "plan", "x" * 300]))] = \
                draw(EXTREMES)
            continue
        set_at(tree, draw(st.sampled_from(paths)), draw(EXTREMES), kind == "delete")
    return tree


def _get(tree: Any, path: tuple) -> Any:
    for part in path:
        tree = tree[part]
    return tree


# ------------------------------------------------------------------ writers
def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if abs(value) < 10**4000 else "9" * 4400
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        items = [f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items() if v is not None]
        return "{" + ", ".join(items) + "}"
    return '""'


def to_text(tree: dict, fmt: str) -> str:
    """``tree`` written as YAML, JSON or TOML (TOML: inline tables, nulls dropped)."""
    if fmt == "json":
        return json.dumps(tree, allow_nan=True)
    if fmt == "toml":
        return "\n".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in tree.items()
                         if v is not None) + "\n"
    return yaml.safe_dump(tree, sort_keys=False, allow_unicode=True, width=10**9)


@st.composite
def text_damage(draw, text: str) -> str:
    """Optionally damage ``text``: truncate, insert a character, duplicate a line, wrap in nesting."""
    kind = draw(st.sampled_from(["none", "none", "truncate", "insert", "dup_line", "wrap"]))
    if kind == "truncate" and text:
        return text[: draw(st.integers(0, len(text) - 1))]
    if kind == "insert":
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.sampled_from(["\x00", "{", "]", ":", "\t", "&a", "*a", "!!python/object:os.system", "'", "\ufeff", "\xff"])) + text[at:]
    if kind == "dup_line":
        lines = text.splitlines(keepends=True)
        if lines:
            i = draw(st.integers(0, len(lines) - 1))
            lines.insert(i, lines[i])
        return "".join(lines)
    if kind == "wrap":
        depth = draw(st.sampled_from([10, 100, 3000]))
        return '{"a": ' * depth + "1" + "}" * depth if draw(st.booleans()) else text + \
            "deep: " + "[" * depth + "]" * depth + "\n"
    return text


@st.composite
def spec_case(draw) -> tuple[str, str, str | None]:
    """(file name, file text, include kind or None)."""
    fmt = draw(st.sampled_from(["yaml", "json", "toml"]))
    tree = draw(mutated_tree())
    include = draw(st.sampled_from([None] * 6 + ["directory", "missing", "itself", "long", "other"]))
    if include is not None:
        tree["model"] = {"directory": "sub.yaml", "missing": "nope.yaml", "itself": f"spec.{fmt}",
                         "long": "a" * 300 + ".yaml", "other": "model.json"}[include]
    text = draw(text_damage(to_text(tree, fmt)))
    return f"spec.{fmt}", text, include


@st.composite
def hf_config_case(draw, configs: dict[str, dict]) -> str:
    """A bundled Hugging Face config.json with 0-2 keys set to extreme values, maybe damaged."""
    data = json.loads(json.dumps(configs[draw(st.sampled_from(sorted(configs)))]))
    for _ in range(draw(st.sampled_from([0, 1, 1, 2]))):
        key = draw(st.sampled_from(sorted(data) + ["num_hidden_layers", "hidden_size", "extra"]))
        data[key] = draw(EXTREMES)
    return draw(text_damage(json.dumps(data, allow_nan=True)))


@st.composite
def plan_document_case(draw, base: dict) -> str:
    """A plan.json document with 0-2 values (anywhere in it) set to extreme values, maybe damaged."""
    doc = json.loads(json.dumps(base))
    for _ in range(draw(st.sampled_from([0, 1, 1, 2]))):
        paths = key_paths(doc)
        set_at(doc, draw(st.sampled_from(paths)), draw(EXTREMES), draw(st.booleans()))
    return draw(text_damage(json.dumps(doc, allow_nan=True)))
