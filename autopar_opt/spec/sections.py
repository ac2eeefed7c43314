"""The base of every spec section and the solver section: what a spec shares with the
peers' ``problem:`` specs (``autopar_opt.peers.spec``), which import this module alone
rather than the whole schema (its model, cluster and plan sections load the cost model:
about a third of a peer solve's start-up)."""

from __future__ import annotations

import re
import types
import typing
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from autopar_opt.solvers.registry import AUTO, solver_names

SolverName = Literal[tuple(solver_names())]  # type: ignore[valid-type]


def _number_leaves(annotation: Any) -> set[Any]:
    """The leaf types of ``annotation`` through Annotated, Optional, Union, list
    and the values of a dict (``gemm_efficiency: dict[str, float]``)."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _number_leaves(args[0])
    if origin in (Union, types.UnionType, list):
        return set().union(*(_number_leaves(a) for a in args))
    if origin is dict:
        return _number_leaves(args[1])
    return {annotation}


class Section(BaseModel):
    """Base of every section: unknown keys are errors (reported with a "did you mean"),
    and true/false is not a number (pydantic's lax mode reads ``true`` as 1, so
    ``global_batch_size: true`` or YAML's ``nodes: yes`` became 1 silently)."""

    model_config = ConfigDict(extra="forbid", use_enum_values=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        items = (value if isinstance(value, list)
                 else list(value.values()) if isinstance(value, dict) else [value])
        has_bool = any(isinstance(v, bool) for v in items)
        has_str = any(isinstance(v, str) for v in items)
        if not (has_bool or has_str):
            return value
        field = cls.model_fields.get(info.field_name or "")
        leaves = _number_leaves(field.annotation) - {type(None)} if field is not None else set()
        if has_bool and leaves and leaves <= {int, float}:
            kind = "int_type" if int in leaves else "float_type"
            raise PydanticCustomError(kind, "Input should be a number, not true/false")
        if has_str and leaves == {int}:
            # a YAML integer is never read as a string unless it is quoted ('32'), nor a JSON
            # one: a count written as text is refused, as a Hugging Face config's is (a float
            # field keeps reading '1e12', which YAML 1.1 leaves a string)
            text = next(v for v in items if isinstance(v, str))
            if re.fullmatch(r"[+-]?\d+(:[0-5]?\d)+", text.strip()):
                raise PydanticCustomError(
                    "int_type", "Input should be an integer; {text} is YAML 1.1's base 60 "
                    "(2:08 would be 128), read as text: write the number you mean",
                    {"text": repr(text)})
            if re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)[eE]\d+|0o[0-7]+", text.strip()):
                # unquoted, YAML 1.1 reads 1.26e7 (no exponent sign) and 0o20 as text:
                # "without quotes" could not help (QA round 10)
                raise PydanticCustomError(
                    "int_type", "Input should be an integer; YAML reads {text} as text (an "
                    "exponent needs its sign, as 1.26e+7; 0o is not YAML 1.1's octal): write "
                    "the digits, e.g. 12600000", {"text": repr(text)})
            raise PydanticCustomError("int_type", "Input should be an integer, not a string: "
                                      "write it without quotes")
        if isinstance(value, str) and leaves == {bool}:
            # pydantic's lax mode reads 'yes', 'no', 'on', 'off', '1', '0' as booleans: a
            # quoted switch is refused, as a Hugging Face config's is (hf_keys.BOOL_KEYS);
            # a list's entries are left to pydantic, which names the entry's index
            raise PydanticCustomError("bool_type", "Input should be true or false, not the text "
                                      "{text}", {"text": repr(value)})
        if has_str and float in leaves:
            # YAML 1.1 leaves 1e400 (no dot) a string, which pydantic reads as inf: held to
            # the limits every number of a spec is (core.limits: finite, at most MAX_FLOAT)
            from autopar_opt.core.limits import MAX_FLOAT
            for item in items:
                try:
                    number = float(item) if isinstance(item, str) else None
                except ValueError:
                    continue
                if number is not None and not abs(number) <= MAX_FLOAT:
                    raise PydanticCustomError(
                        "finite_number", "{text} is not a finite number of at most {limit} in "
                        "magnitude", {"text": item[:40], "limit": f"{MAX_FLOAT:.0e}"})
        return value


def documented_field(description: str, example: Any, **kw: Any) -> Any:
    """A documented field with one example (used in error fixes)."""
    return Field(description=description, examples=[example], **kw)


class SolverSection(Section):
    """Which solver runs and when it may stop."""

    name: SolverName = documented_field("auto (the default: the exact DP where it is exact, then the "
                                        "block or per-layer MILP on the backend chosen by its "
                                        "declared features), or one registered backend of "
                                        "autopar_opt.solvers.registry, forced.", AUTO, default=AUTO)
    time_limit_s: float = documented_field("Wall-clock budget, s: of the whole `autopar solve` "
                                           "command (--time-limit replaces it), of each scenario "
                                           "in `autopar capacity`.", 60.0, default=60.0, gt=0)
    rel_gap: float = documented_field("Relative optimality gap at which to stop.", 1e-3, default=1e-3, ge=0, lt=1)
    form: Literal["auto", "milp", "miqp"] = documented_field("Formulation: the MIQP or its exact MILP.", "auto",
                                               default="auto")
