"""Turn pydantic validation errors into :class:`SpecProblem` s with a fix.

The key path drops the ``#tag`` steps of discriminated unions (schema.py), the
fix text comes from the error type plus the field's documented example, and an
unknown key gets a "did you mean" suggestion from the fields of the mapping it
sits in (found by walking the schema's type annotations along the path).
"""

from __future__ import annotations

import difflib
import re
import typing
from typing import Any, Callable

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from autopar_opt.core import limits
from autopar_opt.core.errors import MISSING, SpecProblem, did_you_mean, one_of, yaml_flow


def key_path(loc: tuple) -> str:
    """``('model', '#zoo', 'layers', 3, 'name')`` -> ``model.layers[3].name``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.startswith("#"):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def _tag_of(annotation: Any) -> str | None:
    for meta in getattr(annotation, "__metadata__", ()):
        tag = getattr(meta, "tag", None)
        if isinstance(tag, str):
            return tag
    return None


def _step(annotation: Any, part: Any) -> tuple[Any, bool]:
    """Follow ``part`` of a location one level into ``annotation``.

    Returns (next annotation, consumed) where ``consumed`` is False when the
    annotation was only unwrapped (Annotated/Optional) and ``part`` is still due.
    """
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return args[0], False
    if origin is typing.Union:
        if isinstance(part, str) and part.startswith("#"):
            for member in args:
                if _tag_of(member) == part:
                    return member, True
        members = [a for a in args if a is not type(None)]
        return (members[0] if members else None), False
    if origin in (list, tuple) and isinstance(part, int):
        return (args[0] if args else Any), True
    if origin is dict:
        return (args[1] if len(args) > 1 else Any), True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        field = annotation.model_fields.get(part) if isinstance(part, str) else None
        return (field if field is not None else None), True
    return None, True


def resolve(root: type[BaseModel], loc: tuple) -> Any:
    """The annotation or FieldInfo found at ``loc`` below ``root`` (None if lost)."""
    node: Any = root
    parts = list(loc)
    guard = 0
    while parts and node is not None and guard < 100:
        guard += 1
        if isinstance(node, FieldInfo):
            node = node.annotation
            continue
        node, consumed = _step(node, parts[0])
        if consumed:
            parts.pop(0)
    return node


def _model_at(root: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The pydantic model class of the mapping at ``loc`` (None when ambiguous)."""
    node = resolve(root, loc)
    for _ in range(10):
        if isinstance(node, FieldInfo):
            node = node.annotation
        elif typing.get_origin(node) is typing.Annotated:
            node = typing.get_args(node)[0]
        elif typing.get_origin(node) is typing.Union:
            models = [m for m in typing.get_args(node) if _model_in(m)]
            node = models[0] if len(models) == 1 else None
        elif isinstance(node, type) and issubclass(node, BaseModel):
            return node
        else:
            return None
    return None


def _model_in(annotation: Any) -> bool:
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _example(root: type[BaseModel], loc: tuple) -> Any:
    node = resolve(root, loc)
    if isinstance(node, FieldInfo) and node.examples:
        return node.examples[0]
    parent = resolve(root, loc[:-1]) if loc else None
    if isinstance(parent, FieldInfo) and parent.examples and isinstance(parent.examples[0], list):
        items = parent.examples[0]
        return items[0] if items else None
    return None


def _eg(example: Any) -> str:
    if example is None:
        return ""
    if isinstance(example, bool):
        return f", e.g. {str(example).lower()}"
    if isinstance(example, (dict, list)):
        return f", e.g. {yaml_flow(example)}"      # as the spec writes it, not Python's repr
    return f", e.g. {example!r}" if isinstance(example, str) else f", e.g. {example:g}" \
        if isinstance(example, float) else f", e.g. {example}"


def _number_fix(ex: Any, eg: str, one: str = "an integer", many: str = "integers") -> str:
    """The fix of a number error: ``one`` of them, or a list of ``many`` where the field's
    example is a list."""
    return f"expected a list of {many}{eg}" if isinstance(ex, list) else f"expected {one}{eg}"


def _bound_fix(kind: str, ctx: dict, eg: str) -> str:
    article = "an" if kind[0] in "aeiou" else "a"
    if ctx.get("gt") == 0:
        return f"expected a positive {kind}{eg}"
    low = ctx.get("ge", ctx.get("gt"))
    high = ctx.get("le", ctx.get("lt"))
    if "ge" in ctx and "le" in ctx:
        return f"expected {article} {kind} between {low} and {high}{eg}"
    words = {"gt": "greater than", "ge": "at least", "lt": "less than", "le": "at most"}
    parts = [f"{words[k]} {ctx[k]}" for k in ("gt", "ge", "lt", "le") if k in ctx]
    return f"expected {article} {kind} {' and '.join(parts)}{eg}"


def _kind(example: Any) -> str:
    if isinstance(example, bool):
        return "boolean"
    return "integer" if isinstance(example, int) else "number"


_FIXES: dict[str, Callable[[dict, Any, str], str]] = {
    "int_parsing": lambda c, ex, eg: _number_fix(ex, eg),
    "int_type": lambda c, ex, eg: _number_fix(ex, eg),
    "int_from_float": lambda c, ex, eg: _number_fix(ex, eg, "a whole number", "whole numbers"),
    "float_parsing": lambda c, ex, eg: _number_fix(ex, eg, "a number", "numbers"),
    "float_type": lambda c, ex, eg: _number_fix(ex, eg, "a number", "numbers"),
    "bool_parsing": lambda c, ex, eg: "expected true or false",
    "bool_type": lambda c, ex, eg: "expected true or false",
    "string_type": lambda c, ex, eg: f"expected a text string{eg}",
    "list_type": lambda c, ex, eg: f"expected a list{eg}",
    "tuple_type": lambda c, ex, eg: f"expected a list{eg}",
    "dict_type": lambda c, ex, eg: f"expected a mapping of keys to values{eg}",
    "model_type": lambda c, ex, eg: f"expected a mapping of keys to values{eg}",
    "model_attributes_type": lambda c, ex, eg: f"expected a mapping of keys to values{eg}",
    "too_short": lambda c, ex, eg: f"expected at least {c.get('min_length', 1)} item(s){eg}",
    "too_long": lambda c, ex, eg: f"expected at most {c.get('max_length')} item(s){eg}",
    "greater_than": lambda c, ex, eg: _bound_fix(_kind(ex), c, eg),
    "greater_than_equal": lambda c, ex, eg: _bound_fix(_kind(ex), c, eg),
    "less_than": lambda c, ex, eg: _bound_fix(_kind(ex), c, eg),
    "less_than_equal": lambda c, ex, eg: _bound_fix(_kind(ex), c, eg),
}


def _choices_fix(ctx: dict, value: Any) -> str:
    choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
    return f"use one of {one_of(choices)}{did_you_mean(value, choices)}"


#: Fixed-length entries ([from, to] pairs) by field name: what one entry is.
_PAIRS = {"edges": "each edge is [from, to]"}


def _pair_problem(file: str, loc: tuple, kind: str, value: Any) -> SpecProblem | None:
    """An entry of a pair list (``model.edges[0]``) with the wrong number of items,
    reported on the entry with the pair's shape, not as a missing ``edges[0][1]``."""
    if kind == "missing" and loc and isinstance(loc[-1], int):
        loc = loc[:-1]                               # the missing position -> its entry
    elif kind not in ("too_long", "tuple_type"):
        return None
    if len(loc) < 2 or not isinstance(loc[-1], int) or loc[-2] not in _PAIRS:
        return None
    got = len(value) if isinstance(value, (list, tuple)) else None
    rule = f"has {got} item(s); needs 2" if got is not None else "must be a list of 2 items"
    names = [str(v) for v in value] if isinstance(value, (list, tuple)) else []
    if len(names) == 1:
        fix = f"write [{names[0]}, b], where b is the layer {names[0]} feeds"
    else:
        fix = "write two layer names, e.g. [a, b]"
    return SpecProblem(file, key_path(loc), value, rule, f"{_PAIRS[loc[-2]]}: {fix}")


#: A key of another section that users carry over, by (section model, key): what this section
#: says instead. A fleet group's ``nic_gb_per_s`` (one NIC's rate, ``spec.build_fleet``) is a
#: plain cluster's ``inter_node`` bandwidth beside ``nics_per_node`` (``spec.build_run``): the
#: fleet refusals tell a user to write a group alone as its plain cluster, and the copied group
#: was refused with "did you mean 'nics_per_node'?" alone (QA round 36).
_OTHER_SECTIONS_KEY = {
    ("ExplicitClusterSpec", "nic_gb_per_s"):
        "nic_gb_per_s is a key of a fleet group (cluster.groups[i]); a plain cluster states one "
        "NIC's rate as inter_node: {{bandwidth_gb_per_s: {value}, latency_us: ...}} (the network's "
        "latency, e.g. 10) beside nics_per_node",
}


def problem_from_error(root: type[BaseModel], error: dict, file_of: Callable[[str], str]) -> SpecProblem:
    """One pydantic error dict -> one :class:`SpecProblem`."""
    loc = tuple(error["loc"])
    key = key_path(loc)
    kind, ctx = error["type"], error.get("ctx") or {}
    value = error.get("input")
    file = file_of(key.split(".")[0].split("[")[0])
    rule = error["msg"].replace("Input should be", "must be").replace("Field required", "required key")
    # pydantic names its own classes ("a valid dictionary or instance of InterconnectOption")
    # and its parser's words ("unable to interpret input"): the spec's reader knows neither
    rule = re.sub(r" or instance of \w+", "", rule).replace(", unable to interpret input", "")
    if kind == "extra_forbidden":
        parent = _model_at(root, loc[:-1])
        known = list(parent.model_fields) if parent else []
        hint = did_you_mean(loc[-1], known)
        fix = f"remove it{hint}" + (f"; known keys: {', '.join(known)}" if known else "")
        said = _OTHER_SECTIONS_KEY.get((parent.__name__ if parent else "", str(loc[-1])))
        if said:
            fix = said.format(value=value) + "; or " + fix
        return SpecProblem(file, key, value, f"unknown key {loc[-1]!r}", fix)
    pair = _pair_problem(file, loc, kind, value)
    if pair is not None:
        return pair
    example = _example(root, loc)
    if kind == "union_none":              # :func:`_merge_union_members`
        return SpecProblem(file, key, value, "is none of the forms this key takes",
                           f"write {one_of(dict.fromkeys(ctx['wants']), quote=False)}"
                           f"{_eg(example)}")
    if kind == "missing":
        name = key.rsplit(".", 1)[-1]
        eg = f", e.g. {name}: {example!r}" if example is not None else ""
        return SpecProblem(file, key, MISSING, "required key missing", f"add {name!r}{eg}")
    if kind in ("literal_error", "enum"):
        # the rule says what is wrong, the fix lists the values (once: pydantic's own
        # message, "Input should be 'a' or 'b'", would repeat them)
        rule = "is not one of the allowed values"
        if isinstance(value, bool):
            # YAML 1.1 reads yes/no/on/off (and true/false) as booleans: `recompute: off`
            # arrives as false, which no text choice is
            rule += (" (YAML reads yes, no, on and off as true or false: quote the word, "
                     "e.g. 'off', if it was meant as text)")
        return SpecProblem(file, key, value, rule, _choices_fix(ctx, value))
    limit = ctx.get("le") if kind == "less_than_equal" else ctx.get("max_length") \
        if kind == "too_long" else None
    if limit is not None and limit in set(limits.resource_limits().values()):
        size = f"{len(value):,} items exceed" if kind == "too_long" and hasattr(value, "__len__") \
            else "exceeds"
        rule = f"{size} the resource limit of {limit:,}"
    maker = _FIXES.get(kind)
    fix = maker(ctx, example, _eg(example)) if maker else f"see `autopar schema`{_eg(example)}"
    return SpecProblem(file, key, value, rule, fix)


def _typo_targets(root: type[BaseModel], errors: list[dict]) -> set[str]:
    """Key paths of required keys that an unknown key is probably a typo of."""
    targets = set()
    for err in errors:
        if err["type"] != "extra_forbidden":
            continue
        loc = tuple(err["loc"])
        parent = _model_at(root, loc[:-1])
        if parent is None:
            continue
        close = difflib.get_close_matches(str(loc[-1]), list(parent.model_fields), n=1, cutoff=0.6)
        if close:
            targets.add(key_path(loc[:-1] + (close[0],)))
    return targets


def _union_prefix(root: type[BaseModel], loc: tuple) -> tuple | None:
    """``loc`` without its last step when that step names a member of a plain (not
    discriminated) union, as pydantic reports each member's failure (``('base', 'str')``,
    ``('base', 'dict[str,any]')``), else None."""
    if len(loc) < 2 or not isinstance(loc[-1], str) or loc[-1].startswith("#"):
        return None
    node = resolve(root, loc[:-1])
    for _ in range(5):
        if isinstance(node, FieldInfo):
            node = node.annotation
        elif typing.get_origin(node) is typing.Annotated:
            node = typing.get_args(node)[0]
        else:
            break
    if typing.get_origin(node) is not typing.Union:
        return None
    members = [a for a in typing.get_args(node) if a is not type(None)]
    if any(_model_in(m) and isinstance(m, type) and loc[-1] in getattr(m, "model_fields", {})
           for m in members):
        return None                  # a key of a member model, not the member's label
    return tuple(loc[:-1])


def _merge_union_members(root: type[BaseModel], errors: list[dict]) -> list[dict]:
    """One error per value that fits no member of a plain union (QA round 9: a capacity
    sweep's ``base: 42`` gave "base.str = 42" and "base.dict[str,any] = 42"); the merged
    error's message names what each member expected."""
    out: list[dict] = []
    merged: dict[tuple, dict] = {}
    for err in errors:
        prefix = _union_prefix(root, tuple(err["loc"]))
        if prefix is None:
            out.append(err)
            continue
        if prefix in merged:
            merged[prefix]["_members"].append(err)
            continue
        first = dict(err, loc=prefix, _members=[err])
        merged[prefix] = first
        out.append(first)
    for err in merged.values():
        members = err.pop("_members")
        if len(members) == 1:
            err.update(members[0], loc=err["loc"])
            continue
        wants = [_kind_of_type(m["type"]) for m in members]
        err.update(type="union_none", msg="fits none of the forms it may take: "
                   + one_of(dict.fromkeys(wants), quote=False), ctx={"wants": wants})
    return out


#: What a failed union member expected, by pydantic's error type.
_TYPE_WORDS = {"string_type": "a text string", "dict_type": "a mapping of keys to values",
               "int_type": "an integer", "int_parsing": "an integer", "float_type": "a number",
               "float_parsing": "a number", "bool_type": "true or false",
               "bool_parsing": "true or false", "list_type": "a list", "model_type": "a mapping",
               "model_attributes_type": "a mapping"}


def _kind_of_type(kind: str) -> str:
    return _TYPE_WORDS.get(kind, kind.replace("_", " "))


def problems_from_validation(root: type[BaseModel], exc: ValidationError,
                             file_of: Callable[[str], str]) -> list[SpecProblem]:
    """Every error of ``exc`` as a problem, in pydantic's order.

    A required key reported missing because it was misspelt is left out: the
    unknown-key problem already says "did you mean" it.
    """
    errors = _merge_union_members(root, exc.errors())
    typos = _typo_targets(root, errors)
    out: list[SpecProblem] = []
    for err in errors:
        if err["type"] == "missing" and key_path(tuple(err["loc"])) in typos:
            continue
        problem = problem_from_error(root, err, file_of)
        if problem not in out:        # an empty pair is missing both of its items
            out.append(problem)
    return out
