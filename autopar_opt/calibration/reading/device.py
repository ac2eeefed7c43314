"""The GPUs of a record: the catalog device its ``gpu_type`` text names and
the nodes and network the run used.

:func:`record_device` maps the text (and the stated memory and power cap) to a
device of :data:`autopar_opt.ir.hardware.DEVICE_CATALOG`; :func:`read_cluster` reads GPUs
per node (the NVLink domain for GB200 racks) and the stated inter-node
bandwidth into :class:`ClusterFacts`, with every default in the notes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autopar_opt.calibration.reading.errors import Unmodelable
from autopar_opt.calibration.reading.schema import Hardware
from autopar_opt.ir.hardware import (DEFAULT_INTER_NODE, DEVICE_CATALOG, NVLINK_DOMAIN, DeviceType,
                                     default_nvlink_mesh, resolve_device)
from autopar_opt.ir.power_limits import PowerLimitError
from autopar_opt.ir.pipeline import pipeline_rule_broken

#: GPUs per node when a record does not say (DGX A100/H100 design).
DEFAULT_GPUS_PER_NODE = 8


def record_device(gpu_type: str, memory_gb: float | None, notes: list[str],
                  power_limit_w: float | None = None) -> DeviceType:
    """The device a record's ``hardware`` section states: the catalog variant its
    ``gpu_type`` text and ``gpu_memory_gb`` pick (H100 SXM/PCIe/NVL, H800, H20,
    GH200, A100/A800 SXM or PCIe, ...), with a stated memory and power cap
    applied (:func:`autopar_opt.ir.hardware.resolve_device`: a stated memory is
    never ignored; what it assumed goes to ``notes``). An A100 without a stated
    memory is the 40 GB part (the only DGX A100 model in 2020), said in the
    notes. Raises :class:`Unmodelable` when no catalog chip matches, or when the power cap
    is outside the part's range (:mod:`autopar_opt.ir.power_limits`)."""
    t = gpu_type.lower().replace(" ", "")
    if not t:
        raise Unmodelable("hardware.gpu_type is not stated")
    if "a100" in t and "a800" not in t and memory_gb is None \
            and "80g" not in t and "40g" not in t:
        notes.append("gpu memory not stated: A100 taken as the 40 GB part (the only DGX A100 "
                     "model in 2020)")
        memory_gb = 40.0
    try:
        device, said = resolve_device(gpu_type, memory_gb, power_limit_w)
    except PowerLimitError as exc:
        # a cap the board refuses: the record is skipped with the reason, not priced
        raise Unmodelable(f"hardware.power_limit_w: {exc}") from None
    except ValueError as exc:
        raise Unmodelable(f"hardware.gpu_type {gpu_type!r}: {exc}") from None
    notes.extend(said)
    return device


def map_device(gpu_type: str, memory_gb: float | None, notes: list[str]) -> str:
    """Catalog name of :func:`record_device`'s device."""
    return record_device(gpu_type, memory_gb, notes).name


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
    #: the device as stated: the catalog variant with a stated memory or power cap
    #: applied (:func:`record_device`); None: the catalog's ``device``
    device_type: DeviceType | None = None
    #: NICs per node as stated (None: one per GPU)
    nics_per_node: int | None = None
    #: GPUs of the stated node when the run uses fewer (a 2-GPU run on a 4-GPU node):
    #: the NVLink board its GPUs sit on (``make_cluster``'s ``board_gpus``)
    node_gpus: int | None = None
    #: the record names NVSwitch in ``hardware.intra_node``: a switched node whatever its size
    nvswitch: bool = False


def num_gpus(hw: Hardware) -> int:
    """``hardware.num_gpus``, required."""
    if hw.num_gpus is None:
        raise Unmodelable("hardware.num_gpus is not stated (null)")
    return hw.num_gpus


def read_cluster(hw: Hardware, device: str, n: int, notes: list[str],
                 device_type: DeviceType | None = None) -> ClusterFacts:
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
    node = gpn
    link = (hw.text("intra_node") or "").lower()
    switched = "nvswitch" in link and not re.search(r"\b(no|without)\s+nvswitch", link)
    if default_nvlink_mesh(device_type or DEVICE_CATALOG[device], node):
        notes.append(f"{node} SXM GPUs per node with NVSwitch (hardware.intra_node names it)"
                     if switched else
                     f"{node} SXM GPUs per node: an HGX {node}-GPU board, NVLink point to point "
                     f"without NVSwitch (a pair of GPUs has 1/{node - 1} of a GPU's NVLinks; "
                     "hardware.intra_node naming NVSwitch says otherwise)")
    if n < gpn:
        gpn = n
    if n % gpn:
        # QA round 11: the message named neither key nor fix
        raise Unmodelable(f"hardware.num_gpus = {n} is not a whole number of nodes of "
                          f"hardware.gpus_per_node = {gpn} (fix: state the GPUs the job used per "
                          "node, or its GPU count)")
    gbps = hw.inter_node_gbps_per_gpu
    if not gbps and n > gpn:
        notes.append(f"inter-node bandwidth not stated: catalog {DEFAULT_INTER_NODE[device].name} "
                     f"{DEFAULT_INTER_NODE[device].bandwidth_gb_per_s:g} GB/s per GPU")
    if hw.nics_per_node is None and n > gpn:
        # QA round 11: taken unsaid, though 2 NICs instead of 8 moved a 4-node record by -5%
        notes.append(f"nics_per_node not stated: one NIC per GPU ({gpn} per node, the DGX "
                     "design)")
    return ClusterFacts(device, n, gpn, gbps or None, hw.text("system"), device_type,
                        hw.nics_per_node, node, switched)


def check_pipeline(pp: int, cluster: ClusterFacts) -> None:
    """The published plan must keep the pipeline rules of :mod:`autopar_opt.ir.pipeline`."""
    broken = pipeline_rule_broken(pp, cluster.num_gpus, cluster.gpus_per_node)
    if broken:
        raise Unmodelable(f"the published plan breaks a pipeline rule: {broken}")
