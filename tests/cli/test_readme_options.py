"""README documents every option of every command, and names no option a command lacks.

QA round 36 found ``autopar pretrain --contiguous/--no-contiguous`` in ``--help`` and nowhere
in the README, and ``solve --runnable-by``, ``place --budget-s`` and ``place --decoder``
only in prose that did not say which command takes them. Oracle: the command tree itself
(``typer.main.get_command``, what ``--help`` prints) against the README's code spans and
code lines. An option counts as documented for a command when a code span or code line
naming ``autopar COMMAND`` shows it, or when it is one of the command's common flags
(``autopar_opt.cli.commands.COMMON_FLAGS``) and the README's "One set of common flags"
entry for that flag lists the command. Hidden options (deprecated aliases) are exempt.
"""

from __future__ import annotations

import re

import typer.main

from autopar_opt.cli.commands import COMMON_FLAGS, app
from support import paths

README = (paths.REPO / "README.md").read_text()


def commands() -> dict[str, set[tuple[str, ...]]]:
    """``{"solve": {("--out", "-o"), ...}, "zoo list": {...}}``: each command's options, each
    as the tuple of its spellings (a flag pair's two sides together); hidden ones left out."""
    out: dict[str, set[tuple[str, ...]]] = {}

    def walk(cmd, path: str) -> None:
        if path:
            out[path] = {tuple(p.opts) + tuple(p.secondary_opts) for p in cmd.params
                         if p.param_type_name == "option" and not getattr(p, "hidden", False)}
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return out


def snippets(text: str, comments: bool = True) -> list[str]:
    """Code spans (possibly wrapped over lines) and code lines naming ``autopar``; without
    ``comments``, each cut at a shell comment (a comment documents an option, but may name
    another command's: ``schema --plan  # ... (--estimate: of estimate --json)``)."""
    spans = re.findall(r"`([^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    blocks = [line for block in re.findall(r"```.*?```", text, re.S) for line in block.splitlines()]
    return [s if comments else s.split(" #")[0] for s in spans + blocks if "autopar " in s]


def named(snippet: str, names) -> str | None:
    """The command ``snippet`` shows (the first ``autopar NAME`` in it), if any; the longest
    name first (``zoo list`` before ``zoo``)."""
    m = re.search(r"autopar ((?:zoo )?[a-z]+)", snippet)
    if not m:
        return None
    return next((n for n in sorted(names, key=len, reverse=True) if m.group(1).startswith(n)), None)


def has_option(text: str, option: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


def common_flag_lists(text: str) -> dict[str, str]:
    """The README's common-flags entry: flag -> the parenthesised command list after it."""
    return {flag: m.group(1) for flag in {f for fs in COMMON_FLAGS.values() for f in fs}
            if (m := re.search(rf"`{re.escape(flag)}`\s*\(([^)]*)\)", text))}


def undocumented(text: str, tree: dict[str, set[tuple[str, ...]]]) -> list[str]:
    shown = [(named(s, tree), s) for s in snippets(text)]
    lists = common_flag_lists(text)
    missing = []
    for cmd, options in tree.items():
        for spellings in options:
            longs = [o for o in spellings if o.startswith("--") and o != "--help"]
            if not longs:
                continue
            common = [o for o in longs if o in COMMON_FLAGS.get(cmd, ())]
            if any(re.search(rf"\b{cmd}\b", lists.get(o, "")) for o in common):
                continue
            if not any(c == cmd and has_option(s, o) for c, s in shown for o in longs):
                missing.append(f"{cmd} {'/'.join(longs)}")
    return sorted(missing)


def unknown(text: str, tree: dict[str, set[tuple[str, ...]]]) -> list[str]:
    """Options a snippet shows for a command that does not take them."""
    bad = []
    for s in snippets(text, comments=False):
        cmd = named(s, tree)
        if cmd is None:
            continue
        known = {o for spellings in tree[cmd] for o in spellings} | {"--help", "--version"}
        rest = s[s.index("autopar " + cmd):]
        # an option of another command the snippet goes on to name is not this one's
        rest = re.split(r"autopar (?!" + re.escape(cmd) + r"\b)", rest)[0]
        bad += [f"{cmd} {o}" for o in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", rest) if o not in known]
    return sorted(set(bad))


def test_the_checks_see_a_gap_both_ways():
    """Guards against a vacuous pass: a README naming a missing option, and one leaving an
    option out, are both caught."""
    tree = {"solve": {("--gap",), ("--seed",)}, "report": {("--out", "-o")}}
    text = "`autopar solve SPEC [--gap G] [--bogus]` and `autopar report X --out F`."
    assert unknown(text, tree) == ["solve --bogus"]
    assert undocumented(text, tree) == ["solve --seed"]


def test_every_option_of_every_command_is_in_the_readme():
    assert undocumented(README, commands()) == []


def test_the_readme_names_no_option_a_command_lacks():
    assert unknown(README, commands()) == []
