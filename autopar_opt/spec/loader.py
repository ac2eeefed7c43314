"""Reading spec files: YAML (``yaml.safe_load``), TOML (``tomllib``) or JSON.

A top file's ``model``, ``cluster`` and ``training`` values may be a path
(relative to the top file) to another file holding that section; the included
file holds the section's mapping itself, or a mapping with that one key.
Every read problem (missing file, wrong extension, empty file, syntax error
with its line, an unreadable or oversized file, a duplicate key, nesting or
sizes beyond :mod:`autopar_opt.core.limits`) becomes a :class:`SpecProblem`,
never a traceback; the limits are checked before the expensive steps.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import yaml
import yaml.composer
import yaml.constructor
import yaml.resolver

from autopar_opt.core import limits
from autopar_opt.core.errors import SpecError, SpecProblem, one_of

#: File extensions and their format.
FORMATS: dict[str, str] = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".json": "json"}

#: Sections that may be given as a path to another file.
INCLUDABLE: tuple[str, ...] = ("model", "cluster", "training")
#: Sections that are mappings and cannot be files (``cost_model`` may name a fit file,
#: ``description`` and ``target`` are texts).
MAPPING_ONLY: tuple[str, ...] = ("search", "solver", "plan")


def _problem(path: Path | str, rule: str, fix: str, key: str = "", value: Any = None) -> SpecProblem:
    return SpecProblem(str(path), key, value, rule, fix)


class _TooDeep(Exception):
    """Raised by :class:`_SpecYamlLoader` past :data:`limits.MAX_DEPTH` levels."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


class _DuplicateKey(Exception):
    """Raised for a key given twice in one mapping (YAML or JSON)."""

    def __init__(self, key: str, line: int | None = None, first: int | None = None,
                 within: str = "") -> None:
        super().__init__(key)
        self.key, self.line, self.first, self.within = key, line, first, within

    @property
    def path(self) -> str:
        """The repeated key with the path of its mapping (``training.seq_len``)."""
        return f"{self.within}.{self.key}" if self.within else str(self.key)


def _dotted(parts: list[str]) -> str:
    """``["search", "[0]", "tp"]`` -> ``search[0].tp``."""
    return "".join(p if p.startswith("[") or i == 0 else "." + p for i, p in enumerate(parts))


class _LimitsMixin:
    """Refuses deep nesting (before the recursive composer can overflow the
    stack) and duplicate keys (PyYAML silently keeps the last value, so a
    typo-level mistake would change the run unseen)."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        # the path of each mapping, for a duplicate key's message: a mapping value's
        # index is its key node, a sequence item's its position (PyYAML's Composer)
        keys: list[str] = self.__dict__.setdefault("_keys", [])
        label = (str(index.value) if isinstance(parent, yaml.MappingNode)
                 and isinstance(index, yaml.ScalarNode) else f"[{index}]"
                 if isinstance(parent, yaml.SequenceNode) and isinstance(index, int) else None)
        if label is not None:
            keys.append(label)
        self._depth += 1
        try:
            if self._depth > limits.MAX_DEPTH:
                raise _TooDeep(self.peek_event().start_mark.line + 1)
            node = super().compose_node(parent, index)
            if isinstance(node, yaml.MappingNode):
                self.__dict__.setdefault("_where", {})[id(node)] = _dotted(keys)
            return node
        finally:
            self._depth -= 1
            if label is not None:
                keys.pop()

    def construct_yaml_int(self, node: Any) -> Any:
        """An integer literal of more than :data:`limits.MAX_INT_DIGITS` digits becomes a
        :class:`limits.HugeInt` (the structure walk then names its key)."""
        text = str(node.value).replace("_", "")
        if len(text) > limits.MAX_INT_DIGITS:
            return limits.HugeInt(len(text.lstrip("+-")))
        return super().construct_yaml_int(node)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[tuple[str, str], int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                    continue
                ident = (key_node.tag, key_node.value)
                line = key_node.start_mark.line + 1
                if ident in seen:
                    raise _DuplicateKey(key_node.value, line, seen[ident],
                                        self.__dict__.get("_where", {}).get(id(node), ""))
                seen[ident] = line
        return super().construct_mapping(node, deep)


try:        # libyaml scans ~5x faster than pure Python (1 MiB: ~1.7 s instead of ~8 s of CPU)
    from yaml._yaml import CParser as _CParser
except ImportError:                          # pragma: no cover - PyYAML built without libyaml
    _CParser = None

if _CParser is not None:
    class _SpecYamlLoader(_LimitsMixin, yaml.composer.Composer, _CParser,
                          yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
        """Safe loading: libyaml's scanner and parser (events), then PyYAML's
        Python composer and safe constructor, which enforce the limits."""

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            yaml.composer.Composer.__init__(self)
else:                                        # pragma: no cover
    class _SpecYamlLoader(_LimitsMixin, yaml.SafeLoader):  # type: ignore[no-redef]
        """``yaml.SafeLoader`` with the limits."""


def _number_or_text(construct):
    """A YAML 1.1 number, except base 60 (``2:08`` is 128, ``1:30:00`` 5400), kept as the
    text it is written as, so that a number field says so instead of reading a time of day
    or a ratio as a count (QA round 10)."""
    def build(loader, node):
        if ":" in str(node.value):
            return loader.construct_scalar(node)
        return construct(loader, node)
    return build


_SpecYamlLoader.add_constructor("tag:yaml.org,2002:int",
                                _number_or_text(_SpecYamlLoader.construct_yaml_int))
_SpecYamlLoader.add_constructor("tag:yaml.org,2002:float",
                                _number_or_text(_SpecYamlLoader.construct_yaml_float))


def _json_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` refusing duplicate keys (``json`` keeps the last one)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _Pairs(list):
    """A JSON object read as its (key, value) pairs, to find a repeated key's path."""


def _json_duplicate_within(text: str, key: str) -> str:
    """The path of the first JSON object that repeats ``key`` ("" if not found)."""
    try:
        tree = json.loads(text, object_pairs_hook=_Pairs, parse_int=limits.read_int)
    except (ValueError, RecursionError):
        return ""
    todo: list[tuple[Any, list[str]]] = [(tree, [])]
    while todo:
        node, where = todo.pop(0)
        if isinstance(node, _Pairs):
            names = [k for k, _ in node]
            if names.count(key) > 1:
                return _dotted(where)
            todo += [(v, where + [k]) for k, v in node]
        elif isinstance(node, list):
            todo += [(v, where + [f"[{i}]"]) for i, v in enumerate(node)]
    return ""


def _load_text(text: str, fmt: str) -> Any:
    if fmt == "yaml":
        return yaml.load(text, Loader=_SpecYamlLoader)   # SafeLoader underneath
    if fmt == "toml":
        return tomllib.loads(text)
    try:
        return json.loads(text, object_pairs_hook=_json_pairs, parse_int=limits.read_int)
    except _DuplicateKey as exc:
        exc.within = _json_duplicate_within(text, exc.key)
        raise


def _parse(text: str, fmt: str, path: Path) -> Any:
    """Parse ``text``; raises SpecError naming the line of a syntax error."""
    try:
        return _parse_raw(text, fmt, path)
    except SpecError:
        raise
    except _TooDeep as exc:
        raise SpecError([_problem(path, f"nesting deeper than the limit of {limits.MAX_DEPTH} "
                                  f"levels (line {exc.line})", "a spec nests at most a few levels: "
                                  "section, list, item")]) from None
    except RecursionError:
        raise SpecError([_problem(path, f"nesting deeper than the limit of {limits.MAX_DEPTH} levels",
                                  "a spec nests at most a few levels: section, list, item")]) from None
    except _DuplicateKey as exc:
        where = f" at line {exc.line} (first at line {exc.first})" if exc.line else ""
        raise SpecError([_problem(path, f"duplicate key {exc.key!r}{where}",
                                  "give each key once in its mapping; delete or merge the "
                                  "repeated entry", key=exc.path[:limits.MAX_KEY_CHARS])]) from None
    except (ValueError, OverflowError) as exc:   # an integer over Python's 4300-digit limit
        from autopar_opt.core.reading import huge_integer_line      # (TOML), an impossible date

        line = huge_integer_line(text) if "digits" in str(exc) else None
        if line is not None:
            key = text.splitlines()[line - 1].split("=", 1)[0].strip()[:limits.MAX_KEY_CHARS]
            raise SpecError([_problem(path, f"an integer of more than 4,300 digits at line {line} "
                                      f"exceeds the limit of {limits.MAX_INT:.0e} in magnitude",
                                      "use a realistic size (see `autopar schema` for each "
                                      "field's range)", key=key)]) from None
        raise SpecError([_problem(path, f"a value cannot be read ({str(exc)[:200]})",
                                  "write a plain number, or quote the value to make it text")]) from None


def _parse_raw(text: str, fmt: str, path: Path) -> Any:
    """Parse ``text``, turning the parsers' syntax errors into SpecErrors."""
    try:
        return _load_text(text, fmt)
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


def _read_text(path: Path, size_fix: str = limits.SPEC_SIZE_FIX,
               max_bytes: int = limits.MAX_FILE_BYTES) -> str:
    """The file's text, read only after its size passed :func:`limits.check_file_size`
    (``size_fix``: the fix of a file over the limit ``max_bytes``, for the kind of file read)."""
    too_big = limits.check_file_size(path, size_fix, max_bytes)
    if too_big is not None:
        raise SpecError([_problem(path, too_big.rule, too_big.fix)])
    try:
        with open(path, "rb") as handle:
            raw = handle.read(max_bytes + 1)
        if len(raw) > max_bytes:     # grew after stat, or a special file
            raise SpecError([_problem(path, f"the file is over the limit of "
                                      f"{max_bytes:,} bytes", "shorten it")])
        return raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([_problem(path, f"cannot read the file ({exc.__class__.__name__}: "
                                  f"{str(exc)[:200]})", "make it a readable UTF-8 text file")]) from None


#: What a spec file holds, for the fix of an empty one.
SPEC_CONTENT = ("at least the model, cluster and training sections, e.g. start from "
                "examples/quickstart.yaml", "model:, cluster:, training:, ...")


def read_mapping(path: Path | str, content: tuple[str, str] = SPEC_CONTENT) -> dict[str, Any]:
    """Read one spec file into a mapping; raises :class:`SpecError` with a fix.

    ``content`` says what the file should hold (what to write in an empty file,
    the top-level keys): a whole spec by default; an included section file or
    a sweep file pass their own, so the fix names what belongs in *that* file."""
    from autopar_opt.core.reading import refuse_empty_path

    refuse_empty_path(path)
    path = Path(path)
    data = read_document(path)
    what, keys = content
    if data is None or (isinstance(data, dict) and not data):
        raise SpecError([_problem(path, "the file is empty", f"write {what}")])
    if not isinstance(data, dict):
        from autopar_opt.core.errors import kind_of

        raise SpecError([_problem(path, f"the top level is {kind_of(data)}, not a mapping",
                                  f"write 'key: value' entries at the top level ({keys})")])
    return data


def read_document(path: Path | str, size_fix: str = limits.SPEC_SIZE_FIX,
                  max_bytes: int = limits.MAX_FILE_BYTES) -> Any:
    """Read and parse one YAML/TOML/JSON file of any shape within the limits of
    :mod:`autopar_opt.core.limits` (size, nesting, values, lengths, numbers);
    raises :class:`SpecError`. Other readers of user files (run files of
    ``autopar calibrate``) use it too, with their own ``size_fix`` (what to do with a
    file over the size limit: a spec's advice is no use for a run file) and size limit
    ``max_bytes`` (a run file's :data:`~autopar_opt.core.limits.MAX_RUN_FILE_BYTES`)."""
    from autopar_opt.core.reading import describe_path, files_in, refuse_empty_path

    refuse_empty_path(path)
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    shown = str(path).replace("\x00", "\\x00")
    shown = shown if len(shown) <= 300 else shown[:300] + "..."
    what = describe_path(path)
    if what == "is a directory":
        found = files_in(path, tuple(FORMATS))
        raise SpecError([_problem(shown, "the file is a directory",
                                  f"give one of its files, e.g. {path / found[0]}" if found
                                  else "give a file named *" + ", *".join(FORMATS))])
    if fmt is None:
        suffix = path.suffix[:40] or "(none)"
        raise SpecError([_problem(shown, f"unsupported file extension {suffix!r}",
                                  f"name the file with one of {one_of(FORMATS)}")])
    if what is not None:
        raise SpecError([_problem(shown, f"the file {what}",
                                  "check the path (relative paths are from the current "
                                  "directory, or from the top spec file for included files)")])
    data = _parse(_read_text(path, size_fix, max_bytes), fmt, path)
    problems = limits.structure_problems(data)
    if problems:
        raise SpecError([SpecProblem(str(path), *b) for b in problems])
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
    for key, value in data.items():
        # a file named for a section that cannot be one: say which can (QA round 10: "must
        # be a valid dictionary")
        if key in MAPPING_ONLY and isinstance(value, str) \
                and Path(value).suffix.lower() in FORMATS:
            problems.append(SpecProblem(str(top), str(key), value, "only the "
                                        f"{', '.join(INCLUDABLE)} sections may be files",
                                        f"write the {key} section inline, as a mapping"))
            merged.pop(key)
    for key in INCLUDABLE:
        value = merged.get(key)
        if not isinstance(value, str):
            continue
        if Path(value).suffix.lower() not in FORMATS:
            problems.append(SpecProblem(str(top), key, value, "not a section and not the path of a "
                                        f"spec file (an included file is named *{', *'.join(FORMATS)})",
                                        f"write the {key} section as a mapping, or the path of the "
                                        f"file holding it, e.g. {key}: {key}.yaml"))
            merged.pop(key)
            continue
        target = (top.parent / value)
        try:
            section = read_mapping(target, (f"the keys of the {key} section (as "
                                            f"examples/split/ holds one file per section)",
                                            f"the keys of the {key} section"))
        except SpecError as exc:
            problems.extend(_at_key(exc.problems, key, value))
            merged.pop(key)
            continue
        if set(section) == {key} and isinstance(section[key], dict):
            section = section[key]
        if key == "model" and "model_type" in section and "hf_config" not in section:
            # a Hugging Face config.json named as the model file (QA round 9: its 26 keys
            # were each refused as unknown keys of a layer-list model)
            problems.append(SpecProblem(str(top), key, value, "names a Hugging Face config.json "
                                        f"(model_type {str(section['model_type'])[:40]!r}), "
                                        "not a model section",
                                        f"write model: {{hf_config: {value}}}"))
            merged.pop(key)
            continue
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
