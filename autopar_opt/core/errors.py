"""Spec errors: every problem of a spec file, found in one pass.

A :class:`SpecProblem` names the file, the key path (``cluster.gpus_per_node``),
the offending value, the rule that was broken and the fix, so that a user can
correct the file without reading the code (STYLE.md item 4: "outcomes are data,
misuse is an exception"; torchtitan's config errors are the model).
"""

from __future__ import annotations

import difflib
import re
import sys
from dataclasses import dataclass
from typing import Any, Iterable

#: Marker for a required key that is absent (shown instead of a value).
MISSING = "<missing>"


@dataclass(frozen=True)
class SpecProblem:
    """One mistake in a spec.

    Attributes
    ----------
    file : the file the key lives in (a split spec names the included file).
    key : dotted key path, e.g. ``model.layers[2].flops_fwd``; empty for the
        whole file (syntax error, empty file).
    value : the offending value (``MISSING`` for an absent required key).
    rule : what was wrong, e.g. "must be greater than 0".
    fix : what to write instead, e.g. "expected a positive integer, e.g. 8".
    """

    file: str
    key: str
    value: Any
    rule: str
    fix: str

    def format(self) -> str:
        """One readable line: ``file: key = value: rule; fix``."""
        where = f"{self.file}: {self.key}" if self.key else self.file
        shown = _short(self.value)
        value = "" if shown is None else f" = {shown}"
        return f"{where}{value}: {self.rule}; {self.fix}"


def yaml_flow(value: Any) -> str:
    """A list or mapping as the spec would write it on one line (``[1, true]``,
    ``{a: 1}``), not as Python's repr (``[1, True]``, ``{'a': 1}``)."""
    import yaml
    try:
        text = yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False)
    except yaml.YAMLError:
        return repr(value)
    return text.strip().removesuffix("...").strip()


def _short(value: Any, limit: int = 60) -> str | None:
    """A compact repr of ``value`` for messages (None when there is none)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"       # as the YAML spec spells it, not True/False
    if value == MISSING:
        return "(missing)"
    text = yaml_flow(value) if isinstance(value, (list, tuple, dict)) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class SpecError(ValueError):
    """A spec that cannot be used; carries *all* problems found.

    ``str(error)`` lists every problem on its own line, so a CLI can print it
    as is.
    """

    def __init__(self, problems: Iterable[SpecProblem]) -> None:
        self.problems: list[SpecProblem] = list(problems)
        if not self.problems:
            raise ValueError("SpecError needs at least one problem")
        super().__init__(self._message())

    def _message(self) -> str:
        n = len(self.problems)
        head = "invalid spec: 1 problem" if n == 1 else f"invalid spec: {n} problems"
        lines = [f"  - {p.format()}" for p in self.problems]
        return "\n".join([head, *lines])


def require_module(names: tuple[str, ...], file: str, key: str, rule: str, fix: str) -> Any:
    """Import the optional modules ``names`` in order and return the first.

    A missing one (an optional extra not installed) is a :class:`SpecError` at
    ``file``/``key`` with ``rule`` and ``fix`` (the ``pip install`` line), so the
    CLI exits 2 with the install hint instead of a traceback.
    """
    try:
        for name in names:
            __import__(name)   # the import statement's own hook, as a plain ``import`` would
    except ImportError as exc:
        raise SpecError([SpecProblem(file, key, None, rule, fix)]) from exc
    return sys.modules[names[0]]


def _chip(name: str) -> tuple[str, str] | None:
    """The first run of letters and its number in a name ("H100-80GB" -> ("h", "100")): for a
    device, its vendor's family and generation; None when the name has no such head. A
    letter run right after a digit is skipped, so a cluster's node shape is not taken for a
    chip ("2x8-a100" -> ("a", "100"), QA round 12: it was no head at all, and the closest
    string, '2x8-h100', was suggested over '2x8-a100-40')."""
    match = re.search(r"(?<![0-9a-z])([a-z]+)[-_ ]?(\d+)", name.lower())
    return (match.group(1), match.group(2)) if match else None


def closest_name(word: str, choices: Iterable[str]) -> str | None:
    """The choice ``word`` most likely meant, or None.

    A choice with the same head (letters and number: "H100" in "H100-80GB") wins over
    string similarity, so a device keeps its vendor and generation ("H100-80GB" ->
    "H100-SXM-80GB", not the closer string "A100-80GB"); then a similar choice with the
    same letters ("H800" for "H80"); then the most similar one (difflib, ratio >= 0.6)."""
    word = str(word)
    names = [str(c) for c in choices]
    ratio = lambda c: difflib.SequenceMatcher(None, word.lower(), c.lower()).ratio()  # noqa: E731
    head = _chip(word)
    if head is not None:
        same = [c for c in names if _chip(c) == head]
        if same:
            return max(same, key=ratio)
    close = sorted((c for c in names if ratio(c) >= 0.6), key=ratio, reverse=True)
    if head is not None:
        family = [c for c in close if (_chip(c) or ("", ""))[0] == head[0]]
        if family:
            return family[0]
    return close[0] if close else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for :func:`closest_name`, or an empty string."""
    best = closest_name(word, choices)
    return f" (did you mean {best!r}?)" if best is not None else ""


#: A value's kind in words, for messages ("is an integer", not "is a int").
KIND_WORDS = {"int": "an integer", "float": "a number", "str": "a text", "list": "a list",
              "bool": "true or false", "NoneType": "null", "dict": "a mapping"}


def kind_of(value: object) -> str:
    """``value``'s kind in words (:data:`KIND_WORDS`), its type's name otherwise."""
    name = type(value).__name__
    return KIND_WORDS.get(name, name)


def one_of(choices: Iterable[str], quote: bool = True) -> str:
    """``'a', 'b' or 'c'`` for a fix text (``a, b or c`` of words with ``quote=False``)."""
    items = [repr(str(c)) if quote else str(c) for c in choices]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " or " + items[-1]


class ProblemList:
    """Collects problems while a spec is built; knows which file holds each section."""

    def __init__(self, top_file: str, section_files: dict[str, str] | None = None) -> None:
        self.top_file = top_file
        self.section_files = dict(section_files or {})
        self.items: list[SpecProblem] = []

    def file_of(self, section: str) -> str:
        """The file a top-level section came from (the top file unless included)."""
        return self.section_files.get(section, self.top_file)

    def add(self, key: str, value: Any, rule: str, fix: str) -> None:
        """Record a problem at dotted ``key`` (its first part is the section); the same
        problem found twice (a section a fleet checks once per group) is listed once."""
        section = key.split(".")[0].split("[")[0]
        self.extend([SpecProblem(self.file_of(section), key, value, rule, fix)])

    def extend(self, problems: Iterable[SpecProblem]) -> None:
        for problem in problems:
            if problem not in self.items:
                self.items.append(problem)

    def raise_if_any(self) -> None:
        """Raise one :class:`SpecError` holding every problem collected so far."""
        if self.items:
            raise SpecError(self.items)
