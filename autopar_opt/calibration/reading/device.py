"""The GPUs of a record: the catalog device its ``gpu_type`` text names and
the nodes and network the run used.

:func:`map_device` maps the text (and the stated memory) to a device of
:data:`autopar_opt.ir.hardware.DEVICE_CATALOG`; :func:`read_cluster` reads GPUs
per node (the NVLink domain for GB200 racks) and the stated inter-node
bandwidth into :class:`ClusterFacts`, with every default in the notes.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar_opt.calibration.reading.errors import Unmodelable
from autopar_opt.calibration.reading.schema import Hardware
from autopar_opt.ir.hardware import DEFAULT_INTER_NODE, DEVICE_CATALOG, NVLINK_DOMAIN
from autopar_opt.ir.pipeline import pipeline_rule_broken

#: GPUs per node when a record does not say (DGX A100/H100 design).
DEFAULT_GPUS_PER_NODE = 8


def map_device(gpu_type: str, memory_gb: float | None, notes: list[str]) -> str:
    """Catalog device for a free-text ``gpu_type`` (A100 40/80 by memory; the
    A800 SXM4 80GB when the text names it and not the A100)."""
    t = gpu_type.lower().replace(" ", "")
    if not t:
        raise Unmodelable("hardware.gpu_type is not stated")
    if "h100" in t and ("pcie" in t or "nvl" in t):
        raise Unmodelable(f"hardware.gpu_type {gpu_type!r}: H100 PCIe/NVL (756/835 dense bf16 "
                          "TFLOP/s) is not in the device catalog, only H100 SXM (989)")
    if "a800" in t and "a100" not in t:   # a text naming both ("A100 or A800") keeps the A100
        mem = memory_gb or (80.0 if "80g" in t else 40.0 if "40g" in t else None)
        if "pcie" in t or "active" in t or (mem is not None and mem < 60):
            raise Unmodelable(f"hardware.gpu_type {gpu_type!r}: only the A800 SXM4 80GB is in the "
                              "device catalog (A800 PCIe / 40GB Active: other HBM and power)")
        return "A800-SXM4-80GB"
    for key, name in (("h200", "H200-141GB"), ("h100", "H100-SXM-80GB"), ("h800", "H800-SXM-80GB"),
                      ("gb200", "GB200"),
                      ("b200", "B200"), ("v100", "V100-32GB")):
        if key in t:
            return name
    if "a100" in t:
        mem = memory_gb or (80.0 if "80gb" in t else 40.0 if "40gb" in t else None)
        if mem is None:
            notes.append("gpu memory not stated: A100 taken as the 40 GB part (the only DGX A100 "
                         "model in 2020)")
            mem = 40.0
        return "A100-80GB" if mem >= 60 else "A100-40GB"
    raise Unmodelable(f"hardware.gpu_type {gpu_type!r} matches no catalog device "
                      f"({', '.join(DEVICE_CATALOG)})")


@dataclass(frozen=True)
class ClusterFacts:
    """The run's GPUs: catalog ``device``, ``num_gpus`` in nodes of
    ``gpus_per_node`` (the NVLink domain), the stated inter-node bandwidth per
    GPU in Gbit/s (``None``: the catalog's for the device) and the system name."""

    device: str
    num_gpus: int
    gpus_per_node: int
    inter_node_gbps_per_gpu: float | None
    system: str


def num_gpus(hw: Hardware) -> int:
    """``hardware.num_gpus``, required."""
    if hw.num_gpus is None:
        raise Unmodelable("hardware.num_gpus is not stated (null)")
    return hw.num_gpus


def read_cluster(hw: Hardware, device: str, n: int, notes: list[str]) -> ClusterFacts:
    """Nodes and network of a run of ``n`` GPUs of ``device``: GB200 jobs use
    whole 4-GPU trays of an NVL72 rack (the largest multiple of 4 up to 72 that
    divides ``n``, e.g. 256 GPUs: 4 x 64); other devices 8 per node unless stated."""
    gpn = hw.gpus_per_node
    if gpn is None and device in NVLINK_DOMAIN:
        trays = [g for g in range(4, NVLINK_DOMAIN[device] + 1, 4) if n % g == 0]
        gpn = max(trays) if trays else n
        notes.append(f"{device}: NVLink domain of {gpn} GPUs used per "
                     f"NVL{NVLINK_DOMAIN[device]} rack")
    elif gpn is None:
        gpn = DEFAULT_GPUS_PER_NODE
        notes.append(f"gpus_per_node not stated: {gpn}")
    if n < gpn:
        gpn = n
    if n % gpn:
        raise Unmodelable(f"{n} GPUs are not whole nodes of {gpn}")
    gbps = hw.inter_node_gbps_per_gpu
    if not gbps and n > gpn:
        notes.append(f"inter-node bandwidth not stated: catalog {DEFAULT_INTER_NODE[device].name} "
                     f"{DEFAULT_INTER_NODE[device].bandwidth_gb_per_s:g} GB/s per GPU")
    return ClusterFacts(device, n, gpn, gbps or None, hw.text("system"))


def check_pipeline(pp: int, cluster: ClusterFacts) -> None:
    """The published plan must keep the pipeline rules of :mod:`autopar_opt.ir.pipeline`."""
    broken = pipeline_rule_broken(pp, cluster.num_gpus, cluster.gpus_per_node)
    if broken:
        raise Unmodelable(f"the published plan breaks a pipeline rule: {broken}")
