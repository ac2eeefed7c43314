"""A record's architecture: stated, or known from its family, never guessed silently.

Each fact the builders need (gated MLP, biases, dropout, learned positions,
norm, embedding tying) is decided once, by the first of:

1. the record's explicit field (``model.mlp``, ``model.biases``,
   ``model.dropout``, ``model.positions``, ``model.norm``, the tying booleans;
   :class:`~autopar_opt.calibration.reading.schema.Model`);
2. the known family its model name (else its ``arch`` text) names
   (:mod:`autopar_opt.model_zoo.families`, each fact with its source);
3. the record's ``arch`` text, where it states the fact in so many words
   ("SwiGLU", "no bias", "no dropout", "learned pos", "untied");
4. an assumption, written into the record's notes (the default of
   Megatron-LM, whose GPT the older records describe).

A text that contradicts the family is noted and loses (a field overrides
both). Dropout is the one exception to the family rule on Megatron-based
stacks: Megatron builds its own model with ``hidden_dropout`` and
``attention_dropout`` 0.1 unless told otherwise, whatever the family's
reference config says, so there the text or the default decides.
:class:`Architecture` records where each fact came from and which were assumed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autopar_opt.calibration.reading.errors import Unmodelable
from autopar_opt.calibration.reading.schema import Model
from autopar_opt.model_zoo.families import Family, family_named, model_size
from autopar_opt.ir.runtime import Runtime

_GATED = re.compile(r"glu(?![a-z])|gated")
_PLAIN = re.compile(r"(?<![a-z])(gelu|relu|squared[- ]relu|relu2)(?![a-z])")
_MLP_FIELD = {"gated": True, "swiglu": True, "geglu": True, "reglu": True, "glu": True,
              "plain": False, "gelu": False, "relu": False, "squared_relu": False, "relu2": False}
_BIAS_FIELD = {"none": False, "no": False, "false": False, "all": True, "true": True,
               "yes": True, "qkv": False}
#: Runtimes that build Megatron's own GPT model (dropout 0.1 by default).
_MEGATRON = ("megatron-lm", "megatron-core", "megatron-bridge", "nemo", "nemo-megatron",
             "deepspeed")


@dataclass(frozen=True)
class Architecture:
    """The decided facts; ``sources[fact]`` says where each came from,
    ``assumed`` lists the facts no field, family or text stated."""

    family: str | None
    gated: bool
    biases: bool
    qkv_bias: bool
    dropout: bool
    learned_positions: bool
    layer_norm: bool
    tied: bool | None
    sources: dict
    assumed: tuple[str, ...]


class _Decider:
    def __init__(self, model: Model, arch: str, fam: Family | None, notes: list[str]) -> None:
        self.model, self.arch, self.fam, self.notes = model, arch, fam, notes
        self.sources: dict[str, str] = {}
        self.assumed: list[str] = []
        self.where = f"family {fam.key}" if fam else ""

    def decide(self, fact: str, field_value, family_value, text_value, default, default_why: str,
               describe=lambda v: str(v), unstated: str = "no known family states it"):
        if field_value is not None:
            self.sources[fact] = "record field"
            return field_value
        if family_value is not None:
            if text_value is not None and text_value != family_value:
                self.notes.append(f"{fact}: the arch text says {describe(text_value)}, the known "
                                  f"{self.where} states {describe(family_value)}: the family's "
                                  f"used (a model.{fact} field overrides both)")
            self.sources[fact] = f"{self.where} ({self.fam.source})"
            return family_value
        if text_value is not None:
            self.sources[fact] = "arch text"
            return text_value
        self.sources[fact] = "assumed"
        self.assumed.append(fact)
        self.notes.append(f"{fact} not stated and {unstated}: {describe(default)} "
                          f"assumed ({default_why})")
        return default


def _field(model: Model, key: str, table: dict | None = None):
    value = model.raw(key)
    if value is None:
        return None
    if table is None:
        if not isinstance(value, bool):
            raise Unmodelable(f"model.{key} = {value!r} must be true or false")
        return value
    if isinstance(value, bool) and key == "biases":
        return "all" if value else "none"
    word = str(value).strip().lower().replace("-", "_")
    if word not in table:
        raise Unmodelable(f"model.{key} = {value!r} is not one of {', '.join(sorted(table))}")
    return word


def _text_gated(arch: str) -> bool | None:
    if _GATED.search(arch):
        return True
    return False if _PLAIN.search(arch) else None


def _text_biases(arch: str) -> str | None:
    if "no bias" in arch:
        return "none"
    return "all" if re.search(r"\bbias(es|ed)?\b", arch) else None


def _text_dropout(arch: str) -> bool | None:
    if "no dropout" in arch:
        return False
    return True if re.search(r"dropout\s*0?\.\d*[1-9]", arch) else None


def _text_positions(arch: str) -> bool | None:
    if "learned pos" in arch:
        return True
    return False if re.search(r"rope|rotary|alibi", arch) else None


def _text_tied(arch: str) -> bool | None:
    if "untied" in arch:
        return False
    return True if "tied" in arch else None


def _text_norm(arch: str) -> bool | None:
    flat = arch.replace(" ", "")
    if "rmsnorm" in flat:
        return False
    return True if "layernorm" in flat else None


def read_architecture(model: Model, runtime: Runtime, notes: list[str],
                      moe: bool = False) -> Architecture:
    """Decide the architecture facts of a record's model (module docstring);
    the norm only for an MoE model (the dense builder's blocks do not depend on it)."""
    name, arch = model.text("name"), model.text("arch").lower()
    fam = family_named(model.text("family") or name, arch)
    size = model_size(name)
    d = _Decider(model, arch, fam, notes)
    yes_no = {True: "yes", False: "no"}
    gated = d.decide("mlp", _MLP_FIELD.get(_field(model, "mlp", _MLP_FIELD)),
                     None if fam is None else fam.mlp == "gated", _text_gated(arch), False,
                     "a two-matrix MLP, Megatron-LM's default",
                     lambda v: "a gated (GLU) MLP" if v else "a two-matrix MLP")
    bias_word = d.decide("biases", _field(model, "biases", _BIAS_FIELD),
                         None if fam is None else fam.biases, _text_biases(arch), "all",
                         "Megatron-LM's add_bias_linear default", lambda v: f"biases {v}")
    if bias_word == "qkv":
        notes.append("biases on the Q, K, V projections only: not built (3·h parameters per "
                     "layer, below 0.1% of the model)")
    on_megatron = runtime.name in _MEGATRON
    fam_dropout = None if (fam is None or on_megatron) else fam.dropout
    # QA round 11: with a family stated, "no known family states it" was untrue; on Megatron
    # the family's reference config is not what the run built (module docstring)
    unstated = (f"family {fam.key}'s reference config does not apply: {runtime.name} builds its "
                "own model" if fam is not None and on_megatron else "no known family states it")
    dropout = d.decide("dropout", _field(model, "dropout"), fam_dropout, _text_dropout(arch), True,
                       "Megatron-LM's hidden_dropout = attention_dropout = 0.1; state "
                       "model.dropout: false for a run with both at 0", lambda v: yes_no[v],
                       unstated)
    pos_word = _field(model, "positions", {"learned": 1, "rope": 1, "alibi": 1, "relative": 1,
                                           "none": 1})
    learned = d.decide("positions", None if pos_word is None else pos_word == "learned",
                       None if fam is None else fam.positions == "learned",
                       _text_positions(arch), on_megatron,
                       "Megatron-LM's position_embedding_type learned_absolute" if on_megatron
                       else "no position table, as RoPE or ALiBi",
                       lambda v: "a learned position table" if v else "no position table")
    norm_word = _field(model, "norm", {"layernorm": 1, "rmsnorm": 1})
    layer_norm = False
    if moe:
        layer_norm = d.decide("norm", None if norm_word is None else norm_word == "layernorm",
                              None if fam is None else fam.norm == "layernorm", _text_norm(arch),
                              False, "RMSNorm, the MoE models' norm",
                              lambda v: "LayerNorm" if v else "RMSNorm")
    tied = _stated_tying(model)
    if tied is None:
        fam_tied = None if fam is None else fam.tied_for(size)
        text_tied = _text_tied(arch)
        if fam_tied is not None:
            tied = d.decide("tied", None, fam_tied, text_tied, True, "",
                            lambda v: "tied" if v else "untied")
        elif text_tied is not None:
            d.sources["tied"] = "arch text"
            tied = text_tied
    else:
        d.sources["tied"] = "record field"
    return Architecture(fam.key if fam else None, gated, bias_word == "all", bias_word == "qkv",
                        dropout, learned, layer_norm, tied, d.sources, tuple(d.assumed))


#: The boolean fields that state the embedding tying, with the value that means tied, and
#: their description in ``schema --runs`` (QA round 11: read, but not in the schema).
TYING_KEYS = {
    "tie_word_embeddings": (True, "true: the output layer shares the input embedding's matrix "
                                  "(Hugging Face config key)."),
    "share_embeddings_and_output_weights": (True, "The same, Megatron-Core's spelling."),
    "untie_embeddings_and_output_weights": (False, "true: the output layer has its own matrix "
                                                   "(Megatron-LM's flag)."),
}


def _stated_tying(model: Model) -> bool | None:
    """The tying a boolean field states (``tie_word_embeddings``, Hugging Face;
    ``share_embeddings_and_output_weights``, Megatron-Core;
    ``untie_embeddings_and_output_weights``, Megatron-LM's flag); another value than true
    or false is refused (QA round 11: ``tie_word_embeddings: "no"`` was ignored unsaid)."""
    for key, (tied_if, _) in TYING_KEYS.items():
        value = model.raw(key)
        if value is None:
            continue
        if not isinstance(value, bool):
            raise Unmodelable(f"model.{key} = {value!r} must be true or false")
        return value is tied_if
    return None
