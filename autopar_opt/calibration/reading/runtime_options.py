"""A record's stated runtime capabilities (``training.runtime_options``).

The framework text decides a record's runtime and its documented defaults
(:mod:`.runtime`, :mod:`.stacks`); a capability the text cannot carry, or one a
stack's release changed, is stated explicitly, as a spec's ``runtime_options``
is: ``training.runtime_options: {async_dgrad: true}``. Explicit beats the text:
each stated value replaces the text's, and the reading says which it replaced.
Keys are the runtime's capabilities (:data:`autopar_opt.ir.runtime.CAPABILITIES`);
a boolean takes true/false, a choice one of its values (:data:`~autopar_opt.ir.runtime.CHOICES`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from autopar_opt.calibration.reading.errors import Unmodelable
from autopar_opt.calibration.reading.schema import RawRecord, flag_value
from autopar_opt.ir.runtime import CAPABILITIES, CHOICES, Runtime

WHERE = "training.runtime_options"


def stated_options(raw: RawRecord) -> dict[str, Any]:
    """The record's ``training.runtime_options`` checked: capability -> value (bool, or a
    choice's text); empty when not stated. Raises :class:`Unmodelable` naming the key, the
    value and the rule."""
    opts = raw.training.raw("runtime_options")
    if opts is None:
        return {}
    if not isinstance(opts, dict):
        raise Unmodelable(f"{WHERE} = {opts!r} must be a mapping of runtime capability to value, "
                          "e.g. {async_dgrad: true}")
    out: dict[str, Any] = {}
    for key, value in opts.items():
        where = f"{WHERE}.{key}"
        if key in CHOICES:
            if str(value) not in CHOICES[key]:
                raise Unmodelable(f"{where} = {value!r} must be one of {', '.join(CHOICES[key])}")
            out[key] = str(value)
        elif key in CAPABILITIES:
            flag = flag_value(value, where)
            if flag is None:
                raise Unmodelable(f"{where} = null: state true or false, or drop the key")
            out[key] = flag
        else:
            raise Unmodelable(f"{where}: {key!r} is not a runtime capability; the capabilities "
                              f"are {', '.join(sorted(CAPABILITIES))}")
    return out


def apply_stated(raw: RawRecord, runtime: Runtime, notes: list[str]) -> Runtime:
    """``runtime`` with the record's stated capabilities (:func:`stated_options`), each
    change said with the value the framework text gave."""
    opts = stated_options(raw)
    if not opts:
        return runtime
    said = ", ".join(f"{k} = {v} (the framework text's: {getattr(runtime, k)})"
                     if getattr(runtime, k) != v else f"{k} = {v} (as the text's)"
                     for k, v in opts.items())
    notes.append(f"{WHERE} stated, beating the framework text: {said}")
    return replace(runtime, **opts)
