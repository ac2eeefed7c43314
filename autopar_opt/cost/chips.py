"""Compute dies, and which catalog devices share one: the unit a GEMM
efficiency belongs to.

Devices built on one compute die (A100 40/80 GB, PCIe and SXM, and the A800,
the same GA100 die with fewer NVLinks; H100, H200, H800, H20 and GH200 on
GH100; B200 and GB200 on Blackwell) reach the same fraction of their own
peaks, so the calibration fits (or a microbenchmark measures) one large-GEMM
efficiency per die (:mod:`autopar_opt.calibration.fit`), and the cost model's
assumptions name the die a device's efficiency was taken from
(:mod:`autopar_opt.cost.assumptions`).
"""

from __future__ import annotations

#: Dies, each with the catalog devices (``ir.hardware.DEVICE_CATALOG``) built on it.
CHIP_GROUPS: dict[str, tuple[str, ...]] = {
    "V100": ("V100-32GB",),
    "A100": ("A100-40GB", "A100-80GB", "A800-SXM4-80GB", "A100-PCIe-80GB", "A100-PCIe-40GB",
             "A800-PCIe-80GB"),
    "H100": ("H100-SXM-80GB", "H200-141GB", "H800-SXM-80GB", "H100-PCIe-80GB", "H100-NVL-94GB",
             "H800-PCIe-80GB", "H20-96GB", "GH200-96GB", "GH200-144GB", "H200-NVL-141GB"),
    "Blackwell": ("B200", "GB200"),
}


def chip_of(device_name: str) -> str | None:
    """The die ``device_name`` is built on; None for a device outside the groups
    (a spec's own device)."""
    for chip, devices in CHIP_GROUPS.items():
        if device_name in devices:
            return chip
    return None
