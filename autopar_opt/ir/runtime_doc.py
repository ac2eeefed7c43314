"""What each ``training.runtime_options`` key means, for the spec's documentation.

A spec may override any capability of :data:`autopar_opt.ir.runtime.CAPABILITIES`,
but their meanings were written only in :mod:`autopar_opt.ir.runtime`'s module
docstring, which a user never reads: the schema (``autopar schema``) named six of
the 39 keys. This module derives, from that docstring and the runtime catalog, one
line per key (the first clause of its paragraph, parentheses left out) and which
runtimes have it on (a boolean) or take which value (a string option), so the
schema documents every accepted key with the text the code is written against,
and a key added to the catalog without a paragraph is an error at import.
"""

from __future__ import annotations

import re

from autopar_opt.ir import runtime as _runtime
from autopar_opt.ir.runtime import CAPABILITIES, CHOICES, RUNTIMES

#: a summary shorter than this runs on to the next clause ("With eager_cross_entropy: ...")
_MIN_CLAUSE = 30


def _paragraphs(doc: str) -> dict[str, str]:
    """Each capability's first paragraph in the module docstring, by name: a line
    holding only the name, then the indented text."""
    parts = re.split(r"^([a-z0-9_]+)\n(?=    )", doc, flags=re.M)
    return {name: " ".join(body.split("\n\n")[0].split())
            for name, body in zip(parts[1::2], parts[2::2])}


def first_clause(text: str) -> str:
    """The text up to its first top-level ``:``, ``;`` or sentence end, without its
    parenthetical groups or reST literals (at least :data:`_MIN_CLAUSE` characters)."""
    text = text.replace("``", "")
    depth, out = 0, []
    for i, c in enumerate(text):
        if c == "(":
            depth += 1
            if depth == 1 and out and out[-1] == " ":
                out.pop()
            continue
        if c == ")":
            depth = max(0, depth - 1)
            continue
        if depth:
            continue
        ends = c in ":;" or (c == "." and (i + 1 == len(text) or text[i + 1] == " "))
        if ends and len("".join(out).strip()) >= _MIN_CLAUSE:
            break
        out.append(c)
    return " ".join("".join(out).split())


def capability_summaries() -> dict[str, str]:
    """Every runtime option by name (booleans, then string options) -> its one line.

    Raises RuntimeError naming an option the module docstring does not explain."""
    paras = _paragraphs(_runtime.__doc__ or "")
    missing = [name for name in CAPABILITIES if name not in paras]
    if missing:
        raise RuntimeError(f"runtime options without a paragraph in autopar_opt.ir.runtime's "
                           f"docstring: {', '.join(missing)}")
    return {name: first_clause(paras[name]) for name in CAPABILITIES}


def _defaults(name: str) -> str:
    """Which catalog runtimes have a boolean on, or each string option's value."""
    if name in CHOICES:
        by_value: dict[str, list[str]] = {}
        for rt in RUNTIMES.values():
            by_value.setdefault(getattr(rt, name), []).append(rt.name)
        return "values " + ", ".join(CHOICES[name]) + "; default " + "; ".join(
            f"{value} ({', '.join(names)})" for value, names in by_value.items())
    on = [rt.name for rt in RUNTIMES.values() if getattr(rt, name)]
    return "on for " + ", ".join(on) if on else "off for every runtime"


def runtime_options_help() -> str:
    """The description of ``training.runtime_options``: every key, what it switches
    and its default per runtime."""
    lines = [f"{name}: {text} [{_defaults(name)}]"
             for name, text in capability_summaries().items()]
    return ("Capability overrides of training.runtime, e.g. {tp_comm_overlap: false}: a boolean "
            "capability true or false, a string option one of its values. Sources and the "
            "physics each switches: autopar_opt/ir/runtime.py. Keys: " + " | ".join(lines))
