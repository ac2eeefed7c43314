"""Devices, link tiers and clusters.

Units are in the names: TFLOP/s, GiB, GB/s (10^9 bytes per second), µs.
Catalog figures are vendor datasheet numbers for *dense* math (no sparsity).
"""

from __future__ import annotations

from dataclasses import dataclass, field

GIB = 1024**3

#: Memory feasibility allowance in GiB (round-off of sums of per-layer bytes): a plan fits
#: when its peak is at most capacity + MEM_EPS GiB, in evaluate, the DPs and every MIP.
MEM_EPS = 1e-9
GB = 1e9


@dataclass(frozen=True)
class DeviceType:
    """One accelerator model.

    ``peak_tflops`` maps a dtype name (``bf16``, ``fp16``, ``tf32``, ``fp32``,
    ``fp8``) to its dense peak TFLOP/s.
    """

    name: str
    peak_tflops: dict[str, float]
    hbm_gib: float
    hbm_gb_per_s: float
    source: str = ""

    def peak_flops(self, dtype: str) -> float:
        """Peak FLOP/s for ``dtype``; raises KeyError naming the known dtypes."""
        try:
            return self.peak_tflops[dtype] * 1e12
        except KeyError:
            known = ", ".join(sorted(self.peak_tflops))
            raise KeyError(f"device {self.name} has no peak for dtype {dtype!r} (known: {known})") from None


@dataclass(frozen=True)
class LinkTier:
    """A communication tier of the α–β model (Hockney 1994).

    ``bandwidth_gb_per_s`` is the per-GPU unidirectional bandwidth a ring
    collective sees on this tier; ``latency_us`` is α, paid once per ring step.
    """

    name: str
    bandwidth_gb_per_s: float
    latency_us: float

    @property
    def bytes_per_s(self) -> float:
        return self.bandwidth_gb_per_s * GB

    @property
    def latency_s(self) -> float:
        return self.latency_us * 1e-6


def _dev(name, bf16, fp16, tf32, fp32, hbm_gib, hbm_gbs, source, fp8=None):
    peaks = {"bf16": bf16, "fp16": fp16, "tf32": tf32, "fp32": fp32}
    if fp8:
        peaks["fp8"] = fp8
    return DeviceType(name, {k: v for k, v in peaks.items() if v}, hbm_gib, hbm_gbs, source)


#: Device catalog: vendor datasheets, dense (non-sparse) tensor-core peaks.
DEVICE_CATALOG: dict[str, DeviceType] = {d.name: d for d in [
    _dev("V100-32GB", None, 125.0, None, 15.7, 32.0, 900.0,
         "NVIDIA V100 datasheet (SXM2): 125 TFLOP/s fp16 tensor, 900 GB/s HBM2"),
    _dev("A100-40GB", 312.0, 312.0, 156.0, 19.5, 40.0, 1555.0,
         "NVIDIA A100 datasheet (SXM4 40GB): 312 TFLOP/s bf16 dense, 1,555 GB/s"),
    _dev("A100-80GB", 312.0, 312.0, 156.0, 19.5, 80.0, 2039.0,
         "NVIDIA A100 datasheet (SXM4 80GB): 312 TFLOP/s bf16 dense, 2,039 GB/s"),
    _dev("A800-SXM4-80GB", 312.0, 312.0, 156.0, 19.5, 80.0, 2039.0,
         "NVIDIA A800 SXM4 80GB: China export variant of the A100 SXM4 80GB, the same GA100 "
         "compute and 80 GB HBM2e (312 TFLOP/s bf16 dense, 2,039 GB/s as the A100 80GB "
         "datasheet), NVLink cut from 600 to 400 GB/s bidirectional. NVIDIA publishes no "
         "datasheet for the 80 GB SXM part: Reuters 2022-11-08 'Nvidia offers new advanced chip "
         "for China that meets U.S. export controls' (NVIDIA statement: an alternative to the "
         "A100; distributor specification: 400 GB/s chip-to-chip against 600 GB/s on the A100), "
         "eeNews Europe 2022-11 (Omnisky A800 specification: A100-compatible, 400 GB/s); NVIDIA's "
         "A800 40GB Active product page (same GA100 peaks, 623.8 TFLOP/s sparse = 312 dense, "
         "NVLink 400 GB/s); FlagPerf llama3_8B README (nvidia-smi 'NVIDIA_A800-SXM4-80GB', "
         "'NVLink (A800: 400 GB/s)')"),
    _dev("H100-SXM-80GB", 989.0, 989.0, 495.0, 67.0, 80.0, 3350.0,
         "NVIDIA H100 datasheet (SXM5): 989 TFLOP/s bf16 dense, 1,979 FP8 dense (3,958 sparse), 3.35 TB/s", fp8=1979.0),
    _dev("H800-SXM-80GB", 989.0, 989.0, 495.0, 67.0, 80.0, 3350.0,
         "NVIDIA H800 SXM5 (export variant of the H100 SXM5: same compute and HBM3, NVLink "
         "limited to 400 GB/s bidirectional); DeepSeek-V3 report arXiv 2412.19437 Sec. 3.1",
         fp8=1979.0),
    _dev("H200-141GB", 989.0, 989.0, 495.0, 67.0, 141.0, 4800.0,
         "NVIDIA H200 datasheet (SXM): 989 TFLOP/s bf16 dense, 1,979 FP8 dense, 141 GB, 4.8 TB/s", fp8=1979.0),
    _dev("B200", 2250.0, 2250.0, 1100.0, 75.0, 179.0, 8000.0,
         "NVIDIA DGX B200 datasheet (8 GPUs: 72 PFLOP/s FP8 training, 1,440 GB HBM3e, "
         "64 TB/s) and HGX B200 datasheet: per GPU 2.25 PFLOP/s bf16 dense, 4.5 PFLOP/s FP8 "
         "dense, 180 GB (179 GiB usable), 8 TB/s", fp8=4500.0),
    _dev("GB200", 2500.0, 2500.0, 1250.0, 80.0, 184.0, 8000.0,
         "NVIDIA GB200 NVL72 datasheet (72 GPUs: 360 PFLOP/s FP16/BF16 and 720 PFLOP/s FP8 with "
         "sparsity, 13.4 TB HBM3e, 576 TB/s): per GPU 2.5 PFLOP/s bf16 dense, 5 PFLOP/s FP8 "
         "dense, 186 GB (184 GiB usable), 8 TB/s", fp8=5000.0),
]}

#: Default intra-node link per device: per-GPU unidirectional NVLink bandwidth.
DEFAULT_INTRA_NODE: dict[str, LinkTier] = {
    "V100-32GB": LinkTier("nvlink2", 150.0, 5.0),   # 6 links x 25 GB/s (V100 whitepaper)
    "A100-40GB": LinkTier("nvlink3", 300.0, 5.0),   # 12 links x 25 GB/s (A100 whitepaper)
    "A100-80GB": LinkTier("nvlink3", 300.0, 5.0),
    "A800-SXM4-80GB": LinkTier("nvlink3-a800", 200.0, 5.0),  # 400 GB/s bidirectional: 8 of A100's 12 links
    "H100-SXM-80GB": LinkTier("nvlink4", 450.0, 5.0),  # 18 links x 25 GB/s (H100 whitepaper)
    "H200-141GB": LinkTier("nvlink4", 450.0, 5.0),
    "H800-SXM-80GB": LinkTier("nvlink4-h800", 200.0, 5.0),  # 400 GB/s bidirectional (H800)
    "B200": LinkTier("nvlink5", 900.0, 5.0),        # 1.8 TB/s bidirectional (Blackwell datasheet)
    "GB200": LinkTier("nvlink5-nvl72", 900.0, 5.0),  # one 72-GPU NVLink domain (GB200 NVL72)
}

#: Default inter-node link per device: one InfiniBand NIC per GPU (DGX design).
DEFAULT_INTER_NODE: dict[str, LinkTier] = {
    "V100-32GB": LinkTier("ib-edr", 12.5, 10.0),    # 100 Gb/s EDR
    "A100-40GB": LinkTier("ib-hdr", 25.0, 10.0),    # 200 Gb/s HDR (DGX A100)
    "A100-80GB": LinkTier("ib-hdr", 25.0, 10.0),
    "A800-SXM4-80GB": LinkTier("ib-hdr", 25.0, 10.0),  # 200 Gb/s HDR (DGX A800, FlagPerf README)
    "H100-SXM-80GB": LinkTier("ib-ndr", 50.0, 10.0),  # 400 Gb/s NDR (DGX H100)
    "H200-141GB": LinkTier("ib-ndr", 50.0, 10.0),
    "H800-SXM-80GB": LinkTier("ib-ndr", 50.0, 10.0),  # 400 Gb/s IB per GPU (DeepSeek-V3 Sec. 3.2.2)
    "B200": LinkTier("ib-ndr", 50.0, 10.0),          # 8x ConnectX-7 400 Gb/s (DGX B200)
    "GB200": LinkTier("ib-ndr", 50.0, 10.0),         # ConnectX-7 400 Gb/s per GPU (NVL72 compute tray)
}

#: Host link per device: per-GPU unidirectional GPU<->CPU bandwidth, GB/s,
#: what activation offload to host memory moves over (datasheet rates):
#: PCIe Gen3 x16 16 GB/s (V100 SXM2 in DGX-1/DGX-2), PCIe Gen4 x16 32 GB/s
#: (A100 datasheet: "PCIe Gen4 64 GB/s" bidirectional), PCIe Gen5 x16 64 GB/s
#: (H100/H200 SXM and HGX/DGX B200 datasheets: "PCIe Gen5 128 GB/s"
#: bidirectional) and NVLink-C2C 450 GB/s per direction on GB200 (GB200
#: NVL72 datasheet: "NVLink-C2C 900 GB/s" bidirectional Grace-Blackwell link).
HOST_LINK_GB_PER_S: dict[str, float] = {
    "V100-32GB": 16.0, "A100-40GB": 32.0, "A100-80GB": 32.0, "A800-SXM4-80GB": 32.0,
    "H100-SXM-80GB": 64.0,
    "H800-SXM-80GB": 64.0, "H200-141GB": 64.0, "B200": 64.0, "GB200": 450.0,
}
#: Host link of a device not in :data:`HOST_LINK_GB_PER_S` (a spec's own
#: device): PCIe Gen4 x16, the slowest link of the catalog's current parts.
DEFAULT_HOST_LINK_GB_PER_S = 32.0


def host_link_gb_per_s(device: DeviceType) -> float:
    """GPU<->host bandwidth of ``device`` per direction (:data:`HOST_LINK_GB_PER_S`)."""
    return HOST_LINK_GB_PER_S.get(device.name, DEFAULT_HOST_LINK_GB_PER_S)


#: NVLink-domain size ("node" of the two-tier model) per device: 8-GPU
#: baseboards, except GB200 NVL72 (72 GPUs in one NVLink domain; jobs use
#: whole 4-GPU compute trays of it).
NVLINK_DOMAIN: dict[str, int] = {"GB200": 72}


@dataclass(frozen=True)
class Cluster:
    """``nodes`` identical nodes of ``gpus_per_node`` devices.

    Device ranks are numbered node-major: rank ``r`` lives on node
    ``r // gpus_per_node``. A group of ranks spanning more than one node is
    bound by the inter-node tier, otherwise by the intra-node tier.
    """

    name: str
    nodes: int
    gpus_per_node: int
    device: DeviceType
    intra_node: LinkTier
    inter_node: LinkTier
    source: str = ""

    @property
    def num_devices(self) -> int:
        return self.nodes * self.gpus_per_node

    def tier_for_span(self, first_rank: int, last_rank: int) -> LinkTier:
        """The tier binding a group whose ranks lie in [first_rank, last_rank]."""
        same_node = first_rank // self.gpus_per_node == last_rank // self.gpus_per_node
        return self.intra_node if same_node else self.inter_node


def make_cluster(name: str, nodes: int, gpus_per_node: int, device: str | DeviceType,
                 intra_node: LinkTier | None = None, inter_node: LinkTier | None = None,
                 source: str = "") -> Cluster:
    """Build a cluster, filling link tiers from the device's defaults."""
    dev = DEVICE_CATALOG[device] if isinstance(device, str) else device
    intra = intra_node or DEFAULT_INTRA_NODE.get(dev.name, LinkTier("intra", 300.0, 5.0))
    inter = inter_node or DEFAULT_INTER_NODE.get(dev.name, LinkTier("inter", 25.0, 10.0))
    return Cluster(name, nodes, gpus_per_node, dev, intra, inter, source)
