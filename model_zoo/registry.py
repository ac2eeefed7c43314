"""Named models and clusters: the zoo's public API.

Models and clusters are *data*: ``models/NAME.yaml`` holds a model's family,
dimensions and the citation of the paper or config they come from;
``clusters/NAME.yaml`` holds node count, GPUs per node, device (a name of
:data:`autopar_opt.ir.hardware.DEVICE_CATALOG`) and optional link tiers. The
builders in :mod:`autopar_opt.model_zoo.builders` turn dimensions into a
:class:`~autopar_opt.ir.graph.LayerGraph`.

Examples
--------
>>> from autopar_opt.model_zoo.registry import build_model, get_cluster
>>> graph = build_model("debug")
>>> cluster = get_cluster("debug-2x4")
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import DEVICE_CATALOG, Cluster, LinkTier, make_cluster
from autopar_opt.model_zoo.builders import FAMILIES, validate_dims

_PACKAGE = "autopar_opt.model_zoo"


@dataclass(frozen=True)
class ModelInfo:
    """One zoo model: what it is and where its numbers come from."""

    name: str
    description: str
    source: str
    family: str
    is_chain: bool


@dataclass(frozen=True)
class ClusterInfo:
    """One named cluster: its size, device and the source of its figures."""

    name: str
    description: str
    source: str
    nodes: int
    gpus_per_node: int
    device: str


_REQUIRED_KEYS = {
    "models": ("family", "description", "source", "dims"),
    "clusters": ("description", "source", "nodes", "gpus_per_node", "device"),
}


#: libyaml's safe loader where PyYAML was built with it (the same documents, about 10x
#: faster to parse than the pure-Python one; start-up of every command, issue 18)
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read(folder: str, entry: Any) -> dict[str, Any]:
    """One zoo data file, checked: ``name`` equals the file stem and the
    required keys are present (else ``ValueError`` naming the file)."""
    data = yaml.load(entry.read_text(encoding="utf-8"), Loader=_SafeLoader)
    stem = entry.name[: -len(".yaml")]
    if not isinstance(data, dict) or data.get("name") != stem:
        raise ValueError(f"zoo file {folder}/{entry.name}: 'name' must equal {stem!r}")
    missing = [k for k in _REQUIRED_KEYS[folder] if k not in data]
    if missing:
        raise ValueError(f"zoo file {folder}/{entry.name}: missing keys {missing} "
                         f"(required: {', '.join(_REQUIRED_KEYS[folder])})")
    if folder == "models" and data.get("family") not in FAMILIES:
        raise ValueError(f"zoo model {stem!r}: unknown family {data.get('family')!r}; "
                         f"known families: {', '.join(sorted(FAMILIES))}")
    return data


@lru_cache(maxsize=2)
def _names(folder: str) -> tuple[str, ...]:
    """The names (file stems) of ``folder``'s data files, sorted; a directory
    listing, no file is parsed."""
    root = resources.files(_PACKAGE).joinpath(folder)
    return tuple(sorted(e.name[: -len(".yaml")] for e in root.iterdir()
                        if e.name.endswith(".yaml")))


@lru_cache(maxsize=None)
def _load_one(folder: str, name: str) -> dict[str, Any]:
    """The data file ``folder/name.yaml`` (``name`` from :func:`_names`), read
    once per process: a command that uses one model and one cluster parses two
    files, not the whole zoo (start-up, issue 18)."""
    return _read(folder, resources.files(_PACKAGE).joinpath(folder, f"{name}.yaml"))


def _load_dir(folder: str) -> dict[str, dict[str, Any]]:
    """Every ``folder/*.yaml`` of the package, keyed by file stem.

    Raises ``ValueError`` naming the file and the missing keys when a data
    file is incomplete (a zoo-maintainer mistake, caught on first use).
    """
    return {name: _load_one(folder, name) for name in _names(folder)}


def _models() -> dict[str, dict[str, Any]]:
    return _load_dir("models")


def _clusters() -> dict[str, dict[str, Any]]:
    return _load_dir("clusters")


def model_names() -> list[str]:
    """Every zoo model's name, sorted (no data file is parsed)."""
    return list(_names("models"))


def cluster_names() -> list[str]:
    """Every named cluster's name, sorted (no data file is parsed)."""
    return list(_names("clusters"))


def list_models() -> list[ModelInfo]:
    """Every zoo model, sorted by name, with its description and source."""
    return [ModelInfo(name, d["description"], d["source"], d["family"],
                      FAMILIES[d["family"]].is_chain)
            for name, d in sorted(_models().items())]


def model_dims(name: str) -> dict[str, Any]:
    """The default dimensions of model ``name`` (a copy; safe to modify)."""
    return dict(_model_data(name)["dims"])


def _model_data(name: str) -> dict[str, Any]:
    if name not in _names("models"):
        raise ValueError(f"unknown model {name!r}; valid names: {', '.join(_names('models'))}")
    return _load_one("models", name)


def build_model(name: str, seq_len: int | None = None,
                overrides: dict[str, Any] | None = None,
                flash_attention: bool | None = None) -> LayerGraph:
    """Build the layer graph of zoo model ``name``.

    Parameters
    ----------
    name : a name from :func:`list_models`.
    seq_len : replaces the model's default sequence length (language models
        only). Vision models (ViT, Swin, Inception) have a token count fixed
        by the image and patch size, so a ``seq_len`` is **rejected** with a
        ``ValueError``; override ``image_size``/``patch_size`` instead.
    overrides : replaces dimensions (keys of the model's ``dims``, e.g.
        ``{"num_layers": 8}``); unknown keys or invalid values raise a
        ``ValueError`` that names the model, the key, the allowed keys and the fix.
    flash_attention : builds the attention layers with (False) or without (True) the
        score activations an unfused core keeps, whatever the model's default; None:
        the model's own (:mod:`autopar_opt.spec.attention_rule` sets it from the kernel
        the runtime runs).
    """
    data = _model_data(name)
    family = FAMILIES[data["family"]]
    dims = dict(data["dims"])
    if overrides is not None and not isinstance(overrides, dict):
        raise ValueError(f"model {name!r}: overrides must be a dict of dimension -> value, "
                         f"got {type(overrides).__name__}")
    for key, value in (overrides or {}).items():
        if key not in dims:
            raise ValueError(
                f"model {name!r}: unknown override key {key!r}; allowed keys: "
                f"{', '.join(sorted(dims))} (fix: use one of these; a spec states the "
                "sequence length as training.seq_len)")
        dims[key] = value
    if seq_len is not None:
        if "seq_len" not in dims:
            raise ValueError(
                f"model {name!r} ({data['family']}) has a token count fixed by its input "
                f"image, so seq_len={seq_len!r} does not apply (fix: drop seq_len, or "
                "override image_size/patch_size)")
        dims["seq_len"] = seq_len
    validate_dims(name, dims, data["dims"])
    if flash_attention is not None:
        dims["flash_attention"] = flash_attention
    graph = family.build(name, dims, data["source"])
    published = data["dims"].get("seq_len")
    arch = graph.arch
    if (seq_len is not None and isinstance(published, int) and seq_len > published
            and arch is not None and arch.max_positions == seq_len):
        # the model's own context is its published length, not the one asked for, so that
        # a longer sequence is said (ir.arch.positions_notice; QA round 10: GPT-3 at 200k
        # tokens, a learned table of 2,048 rows, without a word; the Hugging Face path said it)
        graph.arch = replace(arch, max_positions=published)
    return graph


def list_clusters() -> list[ClusterInfo]:
    """Every named cluster, sorted by name."""
    return [ClusterInfo(name, d["description"], d["source"], int(d["nodes"]),
                        int(d["gpus_per_node"]), d["device"])
            for name, d in sorted(_clusters().items())]


def _tier(cluster: str, key: str, raw: Any) -> LinkTier | None:
    if raw is None:
        return None
    try:
        return LinkTier(str(raw["name"]), float(raw["bandwidth_gb_per_s"]),
                        float(raw["latency_us"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"cluster {cluster!r}: {key} needs name, bandwidth_gb_per_s and "
                         f"latency_us ({exc})") from None


def _topology(cluster: str, raw) -> bool | None:
    """A zoo cluster's ``intra_node_topology`` (``switch`` or ``mesh``) as
    ``make_cluster``'s ``nvlink_mesh``; None when the file does not state it."""
    if raw is None:
        return None
    if raw not in ("switch", "mesh"):
        raise ValueError(f"cluster {cluster!r}: intra_node_topology {raw!r} is not 'switch' or 'mesh'")
    return raw == "mesh"


def get_cluster(name: str) -> Cluster:
    """The :class:`~autopar_opt.ir.hardware.Cluster` named ``name``."""
    if name not in _names("clusters"):
        raise ValueError(f"unknown cluster {name!r}; valid names: {', '.join(_names('clusters'))}")
    d = _load_one("clusters", name)
    if d["device"] not in DEVICE_CATALOG:
        raise ValueError(f"cluster {name!r}: unknown device {d['device']!r}; "
                         f"known devices: {', '.join(sorted(DEVICE_CATALOG))}")
    return make_cluster(name, int(d["nodes"]), int(d["gpus_per_node"]), d["device"],
                        _tier(name, "intra_node", d.get("intra_node")),
                        _tier(name, "inter_node", d.get("inter_node")), source=d["source"],
                        nvlink_mesh=_topology(name, d.get("intra_node_topology")))
