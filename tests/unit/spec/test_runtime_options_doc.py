"""Every key ``training.runtime_options`` accepts is documented where a user reads the
spec's keys (README: "`autopar schema` prints the full schema with every field
documented"), with its default per runtime; and every runtime option the README or an
example spec names is one the spec accepts.

Oracles: the keys the spec actually accepts are those :func:`runtime_named` takes
without a KeyError (probed one by one, with a value of the right kind); the defaults
are read from each catalog runtime built by :func:`runtime_named` with no override.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autopar_opt.ir.runtime import CHOICES, RUNTIMES, runtime_named
from autopar_opt.ir.runtime_doc import first_clause
from autopar_opt.spec.schema import json_schema

ROOT = Path(__file__).resolve().parents[3]


def _accepted_keys() -> list[str]:
    """The runtime options a spec may set: every name runtime_named accepts."""
    base = runtime_named("megatron-core")
    out = []
    for name in vars(base):
        value = CHOICES[name][0] if name in CHOICES else True
        try:
            runtime_named("megatron-core", **{name: value})
        except (KeyError, TypeError, ValueError):
            continue
        out.append(name)
    return out


def _description() -> str:
    schema = json_schema()
    return schema["$defs"]["TrainingSection"]["properties"]["runtime_options"]["description"]


def _entries(text: str) -> dict[str, str]:
    """key -> its documented line, from the description's 'Keys: a: ... | b: ...'."""
    keys = text.split("Keys: ", 1)[1]
    return {m.group(1): m.group(2) for m in
            (re.match(r"\s*([a-z0-9_]+): (.*)", part) for part in keys.split(" | ")) if m}


def test_every_accepted_runtime_option_is_documented_in_the_schema():
    accepted = _accepted_keys()
    assert len(accepted) >= 39          # 33 capabilities + 6 string options at the time of writing
    entries = _entries(_description())
    missing = [k for k in accepted if k not in entries]
    assert not missing, f"runtime options accepted but not documented by `autopar schema`: {missing}"
    for key in accepted:
        assert len(entries[key].split("[")[0].strip()) >= 20, (key, entries[key])


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
def test_documented_defaults_match_each_runtime(runtime):
    rt = runtime_named(runtime)
    entries = _entries(_description())
    for key in _accepted_keys():
        default = entries[key].rsplit("[", 1)[1]
        if key in CHOICES:
            value = getattr(rt, key)
            group = re.search(rf"\b{re.escape(value)} \(([^)]*)\)", default)
            assert group and runtime in group.group(1).split(", "), (runtime, key, default)
        else:
            on = default.startswith("on for ") and runtime in default[7:].rstrip("]").split(", ")
            assert on == getattr(rt, key), (runtime, key, default)


def test_runtime_options_named_in_readme_and_examples_are_accepted():
    accepted = set(_accepted_keys())
    docs = [ROOT / "README.md", ROOT / "docs" / "DESIGN.md", *sorted((ROOT / "examples").rglob("*.yaml"))]
    named: dict[str, str] = {}
    for path in docs:
        text = path.read_text()
        for block in re.findall(r"runtime_options:\s*\{([^}]*)\}", text, re.S):
            for key in re.findall(r"([a-z0-9_]+)\s*:", block):
                named[key] = path.name
        for key in re.findall(r"runtime options? `([a-z0-9_]+)`", text):
            named[key] = path.name
    assert len(named) >= 10
    assert not {k: v for k, v in named.items() if k not in accepted}


def test_first_clause_by_hand():
    assert first_clause("Fused kernel that keeps (FlashAttention, Dao et al. 2022) nothing. More.") == \
        "Fused kernel that keeps nothing"
    # a clause under 30 characters runs on to the next one
    assert first_clause("With ``x``: the loss casts the logits to fp32 itself; more") == \
        "With x: the loss casts the logits to fp32 itself"
    assert first_clause("Optimizer state sharded over the group (= ZeRO-1; a: b). Rest") == \
        "Optimizer state sharded over the group"


def test_readme_counts_the_runtime_options_there_are():
    """README: "`autopar schema` (`training.runtime_options`) lists every key ..., N
    capabilities and M string options". QA round 36: it said 33 and 6 while the spec accepted
    37 boolean capabilities and 6 string options. Oracle: the keys a spec may set
    (``_accepted_keys``), the string ones being those with ``CHOICES``."""
    text = " ".join((ROOT / "README.md").read_text().split())
    m = re.search(r"lists every key `runtime_options` takes, (\d+) capabilities and (\d+) string options",
                  text)
    assert m, "README no longer states the runtime options' counts"
    accepted = _accepted_keys()
    strings = [k for k in accepted if k in CHOICES]
    assert (int(m.group(1)), int(m.group(2))) == (len(accepted) - len(strings), len(strings))
