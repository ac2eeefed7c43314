"""Known architecture families: what naming a model family says about its blocks.

``families.yaml`` (next to this module) lists families by name (Llama 1/2/3,
Mistral, Mixtral, Qwen 1/2/3, Gemma 1/2, DeepSeek, GPT-NeoX, Falcon, OPT,
BLOOM, Nemotron-4, GLM-130B, MPT, GPT-2/3, BERT, T5) with the facts the cost
model builds from (gated or plain MLP, norm, biases, embedding tying,
attention layout, positions) and the published parameter counts of named
sizes, each with the config or paper that states it. A record or spec whose
model name (or, failing that, its ``arch`` text) names a family is built with
these facts unless it states them itself; what neither states is assumed and
said (:mod:`autopar_opt.calibration.reading.model`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

FAMILIES_FILE = Path(__file__).with_name("families.yaml")
#: A model size in a name: "8B", "405b", "1.7B", "8x7B", "125m", "xl".
_SIZE = re.compile(r"(?<![\w.])(\d+x\d+(?:\.\d+)?[bm]|\d+(?:\.\d+)?[bm]|xl|base|large)(?![a-z])",
                   re.IGNORECASE)


@dataclass(frozen=True)
class PublishedCount:
    """A published parameter count of one named size (total; ``active`` for
    MoE), ``rounded`` when the authors publish a rounded figure."""

    params: float
    active: float | None
    source: str
    rounded: bool = False


@dataclass(frozen=True)
class Family:
    """One family of ``families.yaml`` (see its header for the fields)."""

    key: str
    patterns: tuple[re.Pattern, ...]
    mlp: str
    activation: str
    norm: str
    biases: str
    tied: Any
    attention: Any
    positions: str
    parallel_block: bool
    dropout: bool | None
    source: str
    models: dict[str, PublishedCount] = field(default_factory=dict)

    def matches(self, text: str) -> bool:
        return any(p.search(text) for p in self.patterns)

    def _by_size(self, value: Any, size: str | None) -> Any:
        if isinstance(value, dict):
            return value.get(size, value.get("default")) if size else value.get("default")
        return value

    def tied_for(self, size: str | None) -> bool | None:
        """Embedding tying of the named size (``None``: the sources do not say)."""
        return self._by_size(self.tied, size)

    def attention_for(self, size: str | None) -> str:
        return self._by_size(self.attention, size)

    def published(self, size: str | None) -> PublishedCount | None:
        return self.models.get(size) if size else None


def model_size(name: str) -> str | None:
    """The size token of a model name, lower case (``LLAMA3.1_405B`` -> ``405b``)."""
    found = _SIZE.findall(name.replace("_", " "))
    return found[-1].lower() if found else None


def _family(key: str, d: dict) -> Family:
    models = {}
    for size, m in (d.get("models") or {}).items():
        models[str(size).lower()] = PublishedCount(
            float(m["params"]), float(m["active"]) if m.get("active") else None, str(m["source"]),
            bool(m.get("rounded", False)))
    return Family(key, tuple(re.compile(p, re.IGNORECASE) for p in d["match"]), d["mlp"],
                  d["activation"], d["norm"], d["biases"], d.get("tied"), d["attention"],
                  d["positions"], bool(d.get("parallel_block", False)), d.get("dropout"),
                  " ".join(str(d["source"]).split()), models)


@lru_cache(maxsize=1)
def families() -> tuple[Family, ...]:
    """Every family of ``families.yaml``, in the file's order (first match wins)."""
    doc = yaml.safe_load(FAMILIES_FILE.read_text())
    return tuple(_family(k, v) for k, v in doc.items())


def family_named(name: str, arch: str = "") -> Family | None:
    """The family a model name names, else the one its ``arch`` text names, else None."""
    for text in (name, arch):
        for fam in families():
            if text and fam.matches(text):
                return fam
    return None
