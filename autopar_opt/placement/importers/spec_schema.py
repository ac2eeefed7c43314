"""The typed model (pydantic v2) of a placement spec, ``autopar place SPEC``: what
``autopar schema --placement`` prints.

``autopar place`` checks a spec by hand (:mod:`autopar_opt.placement.importers.spec`,
whose messages name the file, the key, the value, the rule and a fix); this model states
the same keys, types, bounds and defaults for editors and validators, and the hand
checks take their key lists from it (:data:`~autopar_opt.placement.importers.spec.
PLACEMENT_KEYS`, ``DEVICE_KEYS``), so the two cannot list different keys. The rules the
model cannot know (a zoo generator's arguments, a catalog name, a file that exists,
the graph's own limits) are checked by ``place`` only. Before (QA round 13) there was no
schema of this form: ``autopar schema`` described the three ``solve`` forms only.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (ConfigDict, Discriminator, Field, StrictBool, StrictInt, StrictStr, Tag,
                      field_validator, model_validator)
from pydantic_core import PydanticCustomError

from autopar_opt.core import limits
from autopar_opt.spec.sections import Section, documented_field

#: Where an operator graph comes from: exactly one of these keys of ``placement.graph``.
GRAPH_SOURCES = ("file", "zoo", "onnx", "torch")

PositiveFinite = Annotated[float, Field(gt=0, allow_inf_nan=False)]
PositiveInt = Annotated[StrictInt, Field(gt=0)]


class FileGraph(Section):
    """A graph in the public placement format (Tarnawski et al.; it states its nodes,
    devices and times itself)."""

    file: StrictStr = documented_field("Path of the public-format JSON graph, relative to the "
                                       "spec's folder.", "bert.json")


class ZooGraph(Section):
    """A zoo operator graph (``model_zoo/op_graphs.py``); every other key is an argument of
    its generator (checked by ``autopar place`` against the generator's signature)."""

    model_config = ConfigDict(extra="allow")

    zoo: StrictStr = documented_field("Zoo operator graph name.", "synthetic_transformer")


class OnnxGraph(Section):
    """An ONNX model (needs the ``onnx`` extra); external weight files are never opened."""

    onnx: StrictStr = documented_field("Path of the .onnx file, relative to the spec's folder.",
                                       "model.onnx")


class TorchGraph(Section):
    """A PyTorch module traced by torch.fx (needs the ``torch`` extra)."""

    torch: StrictStr = documented_field("module.py:Class or package.module:factory.",
                                        "model.py:Net")
    inputs: list[Annotated[list[PositiveInt], Field(min_length=1)]] = documented_field(
        "Input shapes (lists of positive integers), one per forward argument.", [[8, 16]],
        min_length=1)
    kwargs: dict[str, Any] = documented_field("Keyword arguments of the class or factory.",
                                              {"num_classes": 10}, default_factory=dict)


def _graph_tag(value: Any) -> str | None:
    """The one source key a graph names (None: none or several, which the union refuses)."""
    found = [k for k in GRAPH_SOURCES if isinstance(value, dict) and k in value]
    return found[0] if len(found) == 1 else None


GraphSection = Annotated[Union[Annotated[FileGraph, Tag("file")], Annotated[ZooGraph, Tag("zoo")],
                               Annotated[OnnxGraph, Tag("onnx")],
                               Annotated[TorchGraph, Tag("torch")]],
                         Discriminator(_graph_tag, custom_error_type="graph_source",
                                       custom_error_message="must name exactly one of file, zoo, "
                                       "onnx and torch")]


class PlacementDevice(Section):
    """One kind of device and how many of it there are."""

    type: StrictStr = documented_field(
        "A device catalog name (zoo, ONNX and torch graphs; it needs a bf16 peak), or for a "
        "file graph one of the types it has times for (accelerator, cpu).", "A100-80GB")
    count: Annotated[StrictInt, Field(ge=0, le=limits.MAX_PLACEMENT_DEVICES)] = documented_field(
        "Number of devices of this type.", 8, default=1)
    memory_bytes: Optional[PositiveFinite] = documented_field(
        "Memory of one device, bytes (default: the catalog's, or the file's maxSizePerFPGA, "
        "unlimited for a CPU). Give this or memory_gib, not both.", 8.6e10, default=None)
    memory_gib: Optional[PositiveFinite] = documented_field(
        "Memory of one device, GiB (2^30 bytes). Give this or memory_bytes, not both.", 80,
        default=None)
    pays_comm: Optional[StrictBool] = documented_field(
        "Whether a device's load includes its transfers (default: true for accelerators, false "
        "for the host CPU of a file graph, as in the paper).", True, default=None)

    @field_validator("memory_bytes", "memory_gib", mode="before")
    @classmethod
    def _not_text(cls, value: Any) -> Any:
        """A number, never text (``place`` refuses '80', as a count in quotes)."""
        if isinstance(value, str):
            raise PydanticCustomError("float_type", "Input should be a number, not text")
        return value

    @model_validator(mode="after")
    def _one_memory(self) -> "PlacementDevice":
        if self.memory_bytes is not None and self.memory_gib is not None:
            raise ValueError("gives memory_bytes and memory_gib: one device memory, two "
                             "values; keep one of them")
        return self


class PlacementSection(Section):
    """What ``autopar place`` places: an operator graph on devices."""

    graph: GraphSection = documented_field(
        "Where the operator graph comes from: {file: PATH}, {zoo: NAME, ...arguments}, "
        "{onnx: PATH} or {torch: REF, inputs: [...], kwargs: {...}}.", {"file": "bert.json"})
    devices: Optional[list[PlacementDevice]] = documented_field(
        "The devices; required for zoo, ONNX and torch graphs, optional for a file graph "
        "(it has its own).", [{"type": "A100-80GB", "count": 8}], default=None, min_length=1)
    objective: Literal["max-load", "latency"] = documented_field(
        "max-load (throughput of a pipelined deployment) or latency (one sample); "
        "--objective replaces it.", "max-load", default="max-load")
    contiguous: StrictBool = documented_field(
        "Contiguous parts only (a chain of ideals; latency needs it); --contiguous / "
        "--no-contiguous replace it.", True, default=True)

    @model_validator(mode="after")
    def _devices_there(self) -> "PlacementSection":
        if self.devices is None and not isinstance(self.graph, FileGraph):
            raise ValueError("devices is required for a zoo, ONNX or torch graph")
        if self.devices is not None and sum(d.count for d in self.devices) == 0:
            raise ValueError("every devices count is 0: no device to place the nodes on")
        return self


class PlacementSpecFile(Section):
    """A placement spec (YAML, JSON or TOML) for ``autopar place SPEC``; a public-format
    JSON graph may be given to ``place`` directly instead."""

    description: Optional[StrictStr] = documented_field("Free text.", "BERT-24 on 4 accelerators",
                                                        default=None)
    placement: PlacementSection = documented_field(
        "The graph, the devices and the objective.",
        {"graph": {"zoo": "synthetic_transformer", "nodes": 1000},
         "devices": [{"type": "A100-80GB", "count": 8}]})


def placement_json_schema() -> dict:
    """The JSON Schema ``autopar schema --placement`` prints."""
    return PlacementSpecFile.model_json_schema()
