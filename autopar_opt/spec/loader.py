"""Reading spec files: YAML (``yaml.safe_load``), TOML (``tomllib``) or JSON.

A top file's ``model``, ``cluster`` and ``training`` values may be a path
(relative to the top file) to another file holding that section; the included
file holds the section's mapping itself, or a mapping with that one key.
Every read problem (missing file, wrong extension, empty file, syntax error
with its line) becomes a :class:`SpecProblem`, never a traceback.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import yaml

from autopar_opt.spec.errors import SpecError, SpecProblem, one_of

#: File extensions and their format.
FORMATS: dict[str, str] = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".json": "json"}

#: Sections that may be given as a path to another file.
INCLUDABLE: tuple[str, ...] = ("model", "cluster", "training")


def _problem(path: Path | str, rule: str, fix: str, key: str = "", value: Any = None) -> SpecProblem:
    return SpecProblem(str(path), key, value, rule, fix)


def _parse(text: str, fmt: str, path: Path) -> Any:
    """Parse ``text``; raises SpecError naming the line of a syntax error."""
    try:
        if fmt == "yaml":
            return yaml.safe_load(text)
        if fmt == "toml":
            return tomllib.loads(text)
        return json.loads(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown line"
        what = exc.problem or exc.context or "syntax error"
        raise SpecError([_problem(path, f"YAML syntax error at {line}: {what}",
                                  "fix the YAML syntax on that line (indentation, ':' after "
                                  "each key, matching brackets and quotes)")]) from None
    except yaml.YAMLError as exc:
        raise SpecError([_problem(path, f"YAML error: {exc}", "fix the YAML syntax")]) from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError([_problem(path, f"TOML syntax error: {exc}",
                                  "fix the TOML syntax on that line (key = value, "
                                  "[section] headers, quoted strings)")]) from None
    except json.JSONDecodeError as exc:
        raise SpecError([_problem(path, f"JSON syntax error at line {exc.lineno}, column "
                                  f"{exc.colno}: {exc.msg}",
                                  "fix the JSON syntax on that line (double quotes, commas, "
                                  "no trailing comma)")]) from None


def read_mapping(path: Path | str) -> dict[str, Any]:
    """Read one spec file into a mapping; raises :class:`SpecError` with a fix."""
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise SpecError([_problem(path, f"unsupported file extension {path.suffix or '(none)'!r}",
                                  f"name the file with one of {one_of(FORMATS)}")])
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise SpecError([_problem(path, f"the file {what}",
                                  "check the path (relative paths are from the current "
                                  "directory, or from the top spec file for included files)")])
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([_problem(path, f"cannot read the file ({exc.__class__.__name__}: {exc})",
                                  "make it a readable UTF-8 text file")]) from None
    data = _parse(text, fmt, path)
    if data is None or (isinstance(data, dict) and not data):
        raise SpecError([_problem(path, "the file is empty",
                                  "write at least the model, cluster and training sections, "
                                  "e.g. start from examples/quickstart.yaml")])
    if not isinstance(data, dict):
        raise SpecError([_problem(path, f"the top level is a {type(data).__name__}, not a mapping",
                                  "write 'key: value' entries at the top level (model:, "
                                  "cluster:, training:, ...)")])
    return data


def resolve_includes(data: dict[str, Any], top: Path) -> tuple[dict[str, Any], dict[str, str],
                                                                list[SpecProblem]]:
    """Inline sections given as paths.

    Returns (merged mapping, section -> file it came from, problems). Sections
    whose file cannot be read are dropped from the mapping (their problem is
    reported instead), so that the rest is still validated in the same pass.
    """
    merged = dict(data)
    files: dict[str, str] = {}
    problems: list[SpecProblem] = []
    for key in INCLUDABLE:
        value = merged.get(key)
        if not isinstance(value, str):
            continue
        target = (top.parent / value)
        try:
            section = read_mapping(target)
        except SpecError as exc:
            problems.extend(_at_key(exc.problems, key, value))
            merged.pop(key)
            continue
        if set(section) == {key} and isinstance(section[key], dict):
            section = section[key]
        merged[key] = section
        files[key] = str(target)
    return merged, files, problems


def _at_key(problems: list[SpecProblem], key: str, value: str) -> list[SpecProblem]:
    """Problems of an included file, also naming the key that included it."""
    out = []
    for p in problems:
        rule = f"{p.rule} (included by {key}: {value!r})"
        out.append(SpecProblem(p.file, p.key or key, p.value, rule, p.fix))
    return out
