"""Spec sections derived from the dataclasses they configure (one source per list).

:func:`doc_entries` reads the numpy-style ``name : text`` entries of a class
docstring (the single place a field is documented); :func:`section_from_dataclass`
turns a dataclass into a pydantic section with one optional field per
dataclass field, its description from that docstring and its bounds from
the rules passed in. The spec's ``cost_model`` section is built this way from
:class:`~autopar_opt.cost.params.CostParams` and ``model.layers[]`` from
:class:`~autopar_opt.ir.graph.Layer`, so a new parameter or layer field is usable
in a spec file (and documented in ``autopar schema``) without a second edit.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from typing import Any, Callable, Optional

from pydantic import Field, create_model


def doc_entries(cls: type) -> dict[str, str]:
    """``name -> text`` of the numpy-style entries in ``cls.__doc__`` (an entry
    ``a, b : text`` documents both names)."""
    out: dict[str, str] = {}
    names: list[str] = []
    for line in (cls.__doc__ or "").splitlines():
        m = re.match(r"^    (\w+(?:, \w+)*) : (.*)$", line)
        if m:
            names = [n.strip() for n in m.group(1).split(",")]
            for n in names:
                out[n] = m.group(2).strip()
        elif names and line.startswith("        ") and line.strip():
            for n in names:
                out[n] += " " + line.strip()
        elif not line.strip() or not line.startswith(" " * 8):
            names = []
    return out


def section_from_dataclass(cls: type, base: type, *, name: str, doc: str,
                           constraints: Callable[[str, Any], dict[str, Any]],
                           examples: dict[str, Any], required: tuple[str, ...] = (),
                           exclude: tuple[str, ...] = (), optional: bool = False,
                           types: dict[str, Any] | None = None,
                           describe: Callable[[str], str] | None = None) -> type:
    """A pydantic model with one field per field of dataclass ``cls``.

    ``optional``: every field defaults to None (an override section); else the
    dataclass default is the field default. ``constraints(name, hint)`` gives
    pydantic bounds (``ge``, ``gt``, ``le``); ``examples[name]`` the example
    used in error fixes (else the default); ``types`` replaces a field's type;
    ``describe(name)`` is appended to the docstring's description.
    """
    hints = typing.get_type_hints(cls)
    docs = doc_entries(cls)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in exclude:
            continue
        hint = (types or {}).get(f.name, hints[f.name])
        default = (f.default if f.default is not dataclasses.MISSING
                   else f.default_factory() if f.default_factory is not dataclasses.MISSING  # type: ignore[misc]
                   else ...)
        example = examples.get(f.name, default if default is not ... else None)
        text = docs.get(f.name, f.name.replace("_", " ")) + (describe(f.name) if describe else "")
        kw = dict(description=text, examples=[example],
                  **constraints(f.name, hint))
        if optional:
            fields[f.name] = (Optional[hint], Field(default=None, **kw))
        else:
            fields[f.name] = (hint, Field(default=... if f.name in required else default, **kw))
    model = create_model(name, __base__=base, __doc__=doc, **fields)
    return model
