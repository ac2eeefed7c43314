"""The precision a Megatron-Bridge overrides file trains in, as Megatron-LM's flags.

Megatron-Bridge 0.3.1 (requirements-bridge.lock) decides the precision in two places: the
container's ``mixed_precision`` (a registered recipe's name, ``training/mixed_precision.py``)
and the model provider's own ``TransformerConfig`` fields (``model.bf16``, ``model.fp16``,
``model.fp8``, ``model.fp8_recipe``, ``model.fp8_param``, ``model.fp4``). At launch
``runtime_config_update`` (``training/config.py``) resolves ``mixed_precision`` and
``MixedPrecisionConfig.setup`` copies every one of its fields onto the model
(``update_config_with_precision_overrides``): a recipe replaces the model's fields, and
only ``mixed_precision: null`` leaves them to decide. Bridge's pre-training recipes all set
one (``recipes/common.py`` ``_pretrain_common``: ``bf16_mixed``), so a file that leaves
``mixed_precision`` out trains in its recipe's precision, which the file does not name.

:func:`precision_flags` reads the three cases: a recipe name (:data:`RECIPES`, the
registry's values), ``null`` (the model's fields, Megatron-Core 0.16.1's defaults where
absent), and no key (refused when the model section sets precision fields Bridge would
overwrite; otherwise said: priced as the spec's ``training.dtype``)."""

from __future__ import annotations

from typing import Any

#: Bridge 0.3.1's registered recipes (``training/mixed_precision.py``, each ``@register``
#: function; the hyphenated spellings are registered too) -> the ``MixedPrecisionConfig``
#: fields that decide the price: 16-bit dtype, ``fp8`` format, ``fp8_recipe``, ``fp4``.
RECIPES: dict[str, tuple[str, str | None, str, str | None]] = {
    "bf16_mixed": ("bf16", None, "tensorwise", None),
    "fp16_mixed": ("fp16", None, "tensorwise", None),
    "bf16_with_fp8_delayed_scaling_mixed": ("bf16", "hybrid", "delayed", None),
    "fp16_with_fp8_delayed_scaling_mixed": ("fp16", "hybrid", "delayed", None),
    "bf16_with_mxfp8_mixed": ("bf16", "e4m3", "mxfp8", None),
    "fp16_with_mxfp8_mixed": ("fp16", "e4m3", "mxfp8", None),
    "bf16_with_fp8_current_scaling_mixed": ("bf16", "hybrid", "tensorwise", None),
    "nemotron_h_bf16_with_fp8_current_scaling_mixed": ("bf16", "hybrid", "tensorwise", None),
    "nanov2_bf16_with_fp8_current_scaling_mixed": ("bf16", "hybrid", "blockwise", None),
    "fp16_with_fp8_current_scaling_mixed": ("fp16", "hybrid", "tensorwise", None),
    "bf16_with_fp8_subchannel_scaling_mixed": ("bf16", "hybrid", "blockwise", None),
    "fp16_with_fp8_subchannel_scaling_mixed": ("fp16", "hybrid", "blockwise", None),
    "bf16_with_nvfp4_mixed": ("bf16", None, "tensorwise", "e2m1"),
}
#: The model's precision fields and Megatron-Core 0.16.1's defaults (``ModelParallelConfig``
#: bf16/fp16, ``TransformerConfig`` fp8/fp8_recipe/fp8_param/fp4), Bridge's pinned core.
MODEL_DEFAULTS: dict[str, Any] = {"bf16": False, "fp16": False, "fp8": None,
                                  "fp8_recipe": "delayed", "fp8_param": False, "fp4": None}
#: Megatron-Core's ``fp8`` formats and ``Fp8Recipe`` names (``enums.py``).
FP8_FORMATS = ("e4m3", "hybrid")
FP8_RECIPES = ("tensorwise", "delayed", "mxfp8", "blockwise", "custom")


def _recipe_fields(name: str) -> dict[str, Any]:
    half, fp8, recipe, fp4 = RECIPES[name]
    return {"bf16": half == "bf16", "fp16": half == "fp16", "fp8": fp8, "fp8_recipe": recipe,
            "fp4": fp4}


def _flags(fields: dict[str, Any], where: str) -> tuple[list[str], list[str]]:
    """Megatron-LM's flags for precision ``fields`` (``where``: the file's words)."""
    argv, problems = [], []
    if fields.get("fp4"):
        problems.append(f"{where} trains in FP4 (fp4 {fields['fp4']!r}): the cost model has no "
                        "FP4 term; use an FP8 or 16-bit recipe")
    argv += ["--bf16"] if fields.get("bf16") else []
    argv += ["--fp16"] if fields.get("fp16") else []
    fp8 = fields.get("fp8")
    if fp8 is not None:
        recipe = fields.get("fp8_recipe", MODEL_DEFAULTS["fp8_recipe"])
        if fp8 not in FP8_FORMATS or recipe not in FP8_RECIPES:
            problems.append(f"{where}: fp8 {fp8!r} / fp8_recipe {recipe!r} is not Megatron-Core's "
                            f"(fp8 one of {', '.join(FP8_FORMATS)}; fp8_recipe one of "
                            f"{', '.join(FP8_RECIPES)})")
        else:
            argv += ["--fp8-format", fp8, "--fp8-recipe", recipe]
    return argv, problems


def precision_flags(overrides: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """``(argv, problems, notes)``: the Megatron-LM precision flags of a Bridge overrides
    mapping, what cannot be read (each naming the key), and what the reading assumed."""
    model = overrides.get("model") if isinstance(overrides.get("model"), dict) else {}
    given = {k: model[k] for k in MODEL_DEFAULTS if k in model}
    names = ", ".join(n for n in RECIPES)
    if "mixed_precision" not in overrides:
        if given:
            return [], [f"model.{', model.'.join(given)} without mixed_precision: at launch "
                        "Bridge replaces the model's precision fields with the recipe's "
                        "mixed_precision (MixedPrecisionConfig.setup; its pre-training recipes "
                        "set bf16_mixed), so the file does not say what it trains: give "
                        f"mixed_precision: a recipe name ({names}), or null to let the model's "
                        "fields decide"], []
        return [], [], ["mixed_precision is not given: the recipe the file is merged into "
                        "decides the precision (Bridge's pre-training recipes: bf16_mixed, "
                        "recipes/common.py _pretrain_common); priced as training.dtype"]
    precision = overrides["mixed_precision"]
    if precision is None:
        fields = {**MODEL_DEFAULTS, **given}
        argv, problems = _flags(fields, "mixed_precision null: the model's fields")
        notes = []
        if fields["fp8"] is not None and "fp8_recipe" not in given:
            notes.append("mixed_precision is null and model.fp8_recipe is not given: "
                         "Megatron-Core's default 'delayed'")
        return argv, problems, notes
    if not isinstance(precision, str):
        # Bridge 0.3.1 itself fails on a mapping merged in ("'dict' object has no attribute
        # 'finalize'" in runtime_config_update): refused, never a traceback
        return [], [f"mixed_precision = {precision!r}: not a recipe name (a mapping of "
                    "MixedPrecisionConfig fields is not read here); give one of Bridge's recipe "
                    f"names ({names})"], []
    name = precision.replace("-", "_")
    if name not in RECIPES:
        return [], [f"mixed_precision = {precision!r}: not one of Bridge's recipes read here "
                    f"({names})"], []
    fields = _recipe_fields(name)
    argv, problems = _flags(fields, f"mixed_precision {precision}")
    notes = [f"model.{k} {v!r} is replaced by mixed_precision {precision}'s {fields[k]!r} "
             "(Bridge's MixedPrecisionConfig.setup copies the recipe's fields onto the model)"
             for k, v in given.items() if k in fields and v != fields[k]]
    return argv, problems, notes


def stated_dtype(overrides: dict[str, Any]) -> tuple[str, str] | None:
    """``(training dtype, where)`` the file states it trains in, when it states one (a
    readable recipe name, or ``mixed_precision: null`` with the model's fields): fp8 when
    an FP8 format is set, else bf16, fp16, or fp32 (Megatron-Core trains in fp32 with
    neither). None when it does not (no ``mixed_precision``: the recipe's decides)."""
    if "mixed_precision" not in overrides:
        return None
    precision = overrides["mixed_precision"]
    if precision is None:
        model = overrides.get("model") if isinstance(overrides.get("model"), dict) else {}
        fields = {**MODEL_DEFAULTS, **{k: model[k] for k in MODEL_DEFAULTS if k in model}}
        where = "mixed_precision null with the model's fields"
    elif isinstance(precision, str) and precision.replace("-", "_") in RECIPES:
        fields, where = _recipe_fields(precision.replace("-", "_")), f"mixed_precision {precision}"
    else:
        return None
    dtype = "fp8" if fields["fp8"] else "bf16" if fields["bf16"] else \
        "fp16" if fields["fp16"] else "fp32"
    return dtype, where
