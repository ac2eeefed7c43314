"""Devices, link tiers and clusters.

Units are in the names: TFLOP/s, GiB, GB/s (10^9 bytes per second), µs.
Catalog figures are vendor datasheet numbers for *dense* math (no sparsity).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from autopar_opt.ir.power_limits import PowerLimitError, power_limit_problem, unsourced_minimum_note

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
    #: GPU generation: ``volta``, ``ampere``, ``hopper``, ``blackwell`` ("" unknown)
    arch: str = ""
    #: form factor: ``sxm``, ``pcie``, ``nvl`` (PCIe card with an NVLink bridge), ``superchip``
    form: str = ""
    #: rated board power (W) at which the datasheet peaks hold (0 unknown)
    tdp_w: float = 0.0
    #: a stated power cap below ``tdp_w`` (W; None: none stated)
    power_limit_w: float | None = None
    #: streaming multiprocessors (what a communication kernel's SM reservation is a share of)
    sms: int = 0
    #: the memory the vendor names the part by, GB (0: ``hbm_gib``); a record or spec states
    #: memory in these units (B200 "180 GB" is 179 GiB usable)
    memory_gb: float = 0.0

    @property
    def nominal_memory_gb(self) -> float:
        return self.memory_gb or self.hbm_gib

    @property
    def capped(self) -> bool:
        """Whether a power limit below the rated power is stated: the one test of "capped"
        (the clock factor, the regime label and an interval's words all read it)."""
        return self.power_limit_w is not None and bool(self.tdp_w) \
            and self.power_limit_w < self.tdp_w

    @property
    def clock_factor(self) -> float:
        """Sustained tensor-core clock under :attr:`power_limit_w` over the rated
        one: ``(P_cap / P_rated)^(1/3)`` below the rated power, else 1.

        Dynamic power is ``C·V²·f`` and, in the voltage-frequency range DVFS
        works in, the voltage scales with the clock, so power ∝ ``f³`` and a cap
        lowers the sustained clock by the cube root of the power ratio (the
        "cube law" of CMOS DVFS: Mudge 2001, "Power: a first-class
        architectural design constraint", IEEE Computer 34(4), Sec. "Power
        equations"). Static power is not subtracted, so the penalty is a lower
        bound. No published GPU measurement found pins the exponent: stated in
        the plan's assumptions (:func:`autopar_opt.cost.assumptions.cost_assumptions`).
        Applied to the FLOP peaks, not to HBM bandwidth (the memory clock is
        not capped)."""
        if not self.capped:
            return 1.0
        return (self.power_limit_w / self.tdp_w) ** (1.0 / 3.0)

    def peak_flops(self, dtype: str) -> float:
        """Peak FLOP/s for ``dtype`` (sustained under a stated power cap:
        :attr:`clock_factor`); raises KeyError naming the known dtypes."""
        return self.datasheet_flops(dtype) * self.clock_factor

    def datasheet_flops(self, dtype: str) -> float:
        """The datasheet's dense peak FLOP/s for ``dtype``, whatever the power cap: the
        denominator of MFU (PaLM, Chowdhery et al. 2022, App. B: "the theoretical peak
        throughput"), so that a capped GPU running the same plan slower reports a lower
        MFU, not a higher one (QA round 10); raises KeyError naming the known dtypes."""
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


def _dev(name, bf16, fp16, tf32, fp32, hbm_gib, hbm_gbs, source, fp8=None, *, arch="", form="sxm",
         tdp_w=0.0, sms=0, memory_gb=0.0):
    peaks = {"bf16": bf16, "fp16": fp16, "tf32": tf32, "fp32": fp32}
    if fp8:
        peaks["fp8"] = fp8
    return DeviceType(name, {k: v for k, v in peaks.items() if v}, hbm_gib, hbm_gbs, source,
                      arch=arch, form=form, tdp_w=tdp_w, sms=sms, memory_gb=memory_gb)


#: What CUDA makes of an "80 GB" Hopper part's HBM3 (H100 SXM and PCIe, H800 SXM): nvidia-smi
#: and cudaMemGetInfo report 81,559 MiB in total, 79.65 GiB, not 80 (published nvidia-smi
#: tables of "NVIDIA H100 80GB HBM3", "NVIDIA H800" and "NVIDIA H100 PCIe" alike). A plan's
#: peak, runtime reserve included, is held against it: at 80 a plan of 79.96 GiB was called
#: feasible (examples/mixtral_8x22b_128_h100.yaml) on a GPU whose CUDA sees 79.65.
HOPPER_80GB_GIB = 81559 / 1024
#: The H200's 141 GB HBM3e as CUDA reports it: 143,771 MiB (nvidia-smi), 140.40 GiB; the H100
#: NVL's 94 GB: 95,830 MiB (its entry below).
H200_GIB = 143771 / 1024


#: The H100 datasheet (NVIDIA "H100 Tensor Core GPU" datasheet, 2023-2024
#: revisions, columns H100 SXM / H100 NVL; the 2022 revision's H100 PCIe
#: column). Sparse figures there are halved to the dense ones used here.
_H100_SHEET = "NVIDIA H100 Tensor Core GPU datasheet"

#: Device catalog: vendor datasheets, dense (non-sparse) tensor-core peaks.
DEVICE_CATALOG: dict[str, DeviceType] = {d.name: d for d in [
    _dev("V100-32GB", None, 125.0, None, 15.7, 32510 / 1024, 900.0,
         "NVIDIA V100 datasheet (SXM2): 125 TFLOP/s fp16 tensor, 900 GB/s HBM2, 300 W; 32 GB = "
         "32,510 MiB to CUDA (nvidia-smi)", arch="volta", tdp_w=300.0, sms=80, memory_gb=32.0),
    _dev("A100-40GB", 312.0, 312.0, 156.0, 19.5, 40.0, 1555.0,
         "NVIDIA A100 datasheet (SXM4 40GB): 312 TFLOP/s bf16 dense, 1,555 GB/s, 400 W",
         arch="ampere", tdp_w=400.0, sms=108),
    _dev("A100-80GB", 312.0, 312.0, 156.0, 19.5, 80.0, 2039.0,
         "NVIDIA A100 datasheet (SXM4 80GB): 312 TFLOP/s bf16 dense, 2,039 GB/s, 400 W",
         arch="ampere", tdp_w=400.0, sms=108),
    _dev("A100-PCIe-80GB", 312.0, 312.0, 156.0, 19.5, 80.0, 1935.0,
         "NVIDIA A100 datasheet (PCIe 80GB): 312 TFLOP/s bf16 dense, 1,935 GB/s, 300 W; "
         "NVLink bridge for 2 GPUs (600 GB/s), PCIe Gen4 otherwise",
         arch="ampere", form="pcie", tdp_w=300.0, sms=108),
    _dev("A100-PCIe-40GB", 312.0, 312.0, 156.0, 19.5, 40.0, 1555.0,
         "NVIDIA A100 datasheet (PCIe 40GB): 312 TFLOP/s bf16 dense, 1,555 GB/s, 250 W",
         arch="ampere", form="pcie", tdp_w=250.0, sms=108),
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
         "'NVLink (A800: 400 GB/s)')", arch="ampere", tdp_w=400.0, sms=108),
    _dev("A800-PCIe-80GB", 312.0, 312.0, 156.0, 19.5, 80.0, 1935.0,
         "NVIDIA A800 PCIe 80GB: the A100 PCIe 80GB's GA100 compute and memory (312 TFLOP/s bf16 "
         "dense, 1,935 GB/s, 300 W) with a 400 GB/s NVLink bridge (A800 40GB Active product page "
         "for the export variant's peaks)", arch="ampere", form="pcie", tdp_w=300.0, sms=108),
    _dev("H100-SXM-80GB", 989.0, 989.0, 495.0, 67.0, HOPPER_80GB_GIB, 3350.0,
         f"{_H100_SHEET} (H100 SXM): 989 TFLOP/s bf16 dense, 1,979 FP8 dense (3,958 sparse), "
         "3.35 TB/s, up to 700 W; 80 GB = 81,559 MiB to CUDA", fp8=1979.0, arch="hopper", tdp_w=700.0,
         sms=132, memory_gb=80.0),
    _dev("H100-PCIe-80GB", 756.0, 756.0, 378.0, 51.0, HOPPER_80GB_GIB, 2000.0,
         f"{_H100_SHEET} (H100 PCIe, 2022 revision): 1,513 TFLOP/s bf16 and 3,026 FP8 with "
         "sparsity (756 / 1,513 dense), 80 GB HBM2e, 2 TB/s, 300-350 W, NVLink bridge 600 GB/s "
         "for 2 GPUs, PCIe Gen5 otherwise; 81,559 MiB to CUDA", fp8=1513.0, arch="hopper", form="pcie",
         tdp_w=350.0, sms=114, memory_gb=80.0),
    _dev("H100-NVL-94GB", 835.0, 835.0, 418.0, 60.0, 95830 / 1024, 3900.0,
         f"{_H100_SHEET} (H100 NVL): 1,671 TFLOP/s bf16 and 3,341 FP8 with sparsity (835 / 1,671 "
         "dense), 94 GB HBM3, 3.9 TB/s, 350-400 W, NVLink bridge 600 GB/s for 2 GPUs; 95,830 MiB "
         "to CUDA (nvidia-smi)", fp8=1671.0, arch="hopper", form="nvl", tdp_w=400.0, sms=132,
         memory_gb=94.0),
    _dev("H800-SXM-80GB", 989.0, 989.0, 495.0, 67.0, HOPPER_80GB_GIB, 3350.0,
         "NVIDIA H800 SXM5 (export variant of the H100 SXM5: same compute and HBM3, NVLink "
         "limited to 400 GB/s bidirectional; 81,559 MiB to CUDA); DeepSeek-V3 report arXiv "
         "2412.19437 Sec. 3.1", fp8=1979.0, arch="hopper", tdp_w=700.0, sms=132, memory_gb=80.0),
    _dev("H800-PCIe-80GB", 756.0, 756.0, 378.0, 51.0, 80.0, 2000.0,
         "NVIDIA H800 PCIe 80GB: export variant of the H100 PCIe (same compute and 2 TB/s HBM2e, "
         "350 W; NVLink bridge 400 GB/s); peaks of the H100 PCIe column of the H100 datasheet",
         fp8=1513.0, arch="hopper", form="pcie", tdp_w=350.0, sms=114),
    _dev("H20-96GB", 148.0, 148.0, 74.0, 44.0, 96.0, 4000.0,
         "NVIDIA H20 (China export Hopper part): 148 TFLOP/s bf16 and 296 FP8 dense, 96 GB HBM3, "
         "4.0 TB/s, NVLink 900 GB/s bidirectional, 400 W. NVIDIA publishes no datasheet: figures "
         "of the partner specification sheets reported in the trade press (e.g. SemiAnalysis, "
         "'Nvidia's New China AI Chips Circumvent US Restrictions: H20 Faster Than H100 for LLM "
         "inference', 2023-11-09); stated as not from NVIDIA", fp8=296.0, arch="hopper",
         tdp_w=400.0, sms=78),
    _dev("GH200-96GB", 989.0, 989.0, 494.0, 67.0, 96.0, 4000.0,
         "NVIDIA GH200 Grace Hopper Superchip datasheet: H100 GPU with 96 GB HBM3 at 4 TB/s, 989 "
         "TFLOP/s bf16 and 1,979 FP8 dense, NVLink-C2C 900 GB/s to the Grace CPU; module power "
         "450-1,000 W configurable (CPU + GPU + memory)", fp8=1979.0, arch="hopper",
         form="superchip", tdp_w=1000.0, sms=132),
    _dev("GH200-144GB", 989.0, 989.0, 494.0, 67.0, 144.0, 4900.0,
         "NVIDIA GH200 Grace Hopper Superchip datasheet (HBM3e version): 144 GB at 4.9 TB/s, "
         "989 TFLOP/s bf16 and 1,979 FP8 dense", fp8=1979.0, arch="hopper", form="superchip",
         tdp_w=1000.0, sms=132),
    _dev("H200-141GB", 989.0, 989.0, 495.0, 67.0, H200_GIB, 4800.0,
         "NVIDIA H200 datasheet (SXM): 989 TFLOP/s bf16 dense, 1,979 FP8 dense, 141 GB, 4.8 TB/s, "
         "up to 700 W; 141 GB = 143,771 MiB to CUDA", fp8=1979.0, arch="hopper", tdp_w=700.0, sms=132,
         memory_gb=141.0),
    _dev("H200-NVL-141GB", 835.0, 835.0, 418.0, 60.0, 141.0, 4800.0,
         "NVIDIA H200 datasheet (H200 NVL): 1,671 TFLOP/s bf16 and 3,341 FP8 with sparsity (835 / "
         "1,671 dense), 141 GB HBM3e, 4.8 TB/s, up to 600 W, 2- or 4-way NVLink bridge 900 GB/s",
         fp8=1671.0, arch="hopper", form="nvl", tdp_w=600.0, sms=132),
    _dev("B200", 2250.0, 2250.0, 1100.0, 75.0, 179.0, 8000.0,
         "NVIDIA DGX B200 datasheet (8 GPUs: 72 PFLOP/s FP8 training, 1,440 GB HBM3e, "
         "64 TB/s) and HGX B200 datasheet: per GPU 2.25 PFLOP/s bf16 dense, 4.5 PFLOP/s FP8 "
         "dense, 180 GB (179 GiB usable), 8 TB/s, 1,000 W", fp8=4500.0, arch="blackwell",
         tdp_w=1000.0, sms=148, memory_gb=180.0),
    _dev("GB200", 2500.0, 2500.0, 1250.0, 80.0, 184.0, 8000.0,
         "NVIDIA GB200 NVL72 datasheet (72 GPUs: 360 PFLOP/s FP16/BF16 and 720 PFLOP/s FP8 with "
         "sparsity, 13.4 TB HBM3e, 576 TB/s): per GPU 2.5 PFLOP/s bf16 dense, 5 PFLOP/s FP8 "
         "dense, 186 GB (184 GiB usable), 8 TB/s", fp8=5000.0, arch="blackwell",
         form="superchip", tdp_w=1200.0, sms=148, memory_gb=186.0),
]}

#: A stated memory this far (GB) from a variant's is a different memory size.
MEMORY_MATCH_GB = 1.0


def _chip_of(t: str) -> str | None:
    """The chip a lower-cased, space-free GPU text names (None: no catalog chip)."""
    # a chip name followed by another digit is another chip (QA round 9: an "RTX A1000"
    # was read as an A100)
    for pattern, chip in ((r"gh200", "gh200"), (r"gb200", "gb200"), (r"(?<![a-z0-9])b200", "b200"),
                          (r"h200", "h200"), (r"h800", "h800"), (r"h100", "h100"),
                          (r"(?<![a-z0-9])h20", "h20"), (r"a100", "a100"),
                          (r"a800", "a800"), (r"v100", "v100")):
        if re.search(pattern + r"(?![0-9])", t):
            return chip
    return None


def _variant(chip: str, t: str, mem: float | None, notes: list[str]) -> str:
    """Catalog name of ``chip``'s variant that the text's form factor and the
    stated memory pick."""
    pcie = "pcie" in t
    nvl = bool(re.search(r"nvl(?!72|36|32|2)", t)) or "nvl94" in t
    sxm = "sxm" in t or "hgx" in t or "dgx" in t
    if chip == "h100" and not (pcie or nvl or sxm) and mem is not None \
            and abs(mem - 94) <= MEMORY_MATCH_GB:
        # the 94 GB Hopper part is the NVL; a text naming SXM keeps the SXM part with its
        # stated memory (QA round 11: "H100-SXM5-80GB" with 94 GB was priced as the NVL, PCIe
        # between the GPUs, half the throughput, without a word)
        notes.append("form factor not stated (H100) and 94 GB stated: the H100 NVL taken (the "
                     "94 GB part: its datasheet peaks, PCIe between boards); state SXM for an "
                     "SXM part with 94 GB")
        return "H100-NVL-94GB"
    if chip in ("h100", "h800", "a100", "a800") and not (pcie or nvl or sxm):
        # the form factor decides the peaks, power and NVLink (QA round 9: taken silently)
        notes.append(f"form factor not stated ({chip.upper()}): the SXM part assumed (its "
                     "datasheet peaks and NVLink); state PCIe or NVL for those")
    if chip == "h100":
        if nvl:
            return "H100-NVL-94GB"
        return "H100-PCIe-80GB" if pcie else "H100-SXM-80GB"
    if chip == "h800":
        return "H800-PCIe-80GB" if pcie else "H800-SXM-80GB"
    if chip == "h200":
        return "H200-NVL-141GB" if nvl or pcie else "H200-141GB"
    if chip == "gh200":
        return "GH200-144GB" if (mem or 0) > 120 or "144" in t or "hbm3e" in t else "GH200-96GB"
    if chip == "a100":
        if mem is None:
            mem = 80.0 if "80g" in t else 40.0 if "40g" in t else None
        if mem is None:
            notes.append("gpu memory not stated: A100 taken as the 40 GB part (the only DGX A100 "
                         "model in 2020)")
            mem = 40.0
        big = mem >= 60
        if pcie:
            return "A100-PCIe-80GB" if big else "A100-PCIe-40GB"
        return "A100-80GB" if big else "A100-40GB"
    if chip == "a800":
        if mem is None:
            mem = 80.0 if "80g" in t else 40.0 if "40g" in t else None
        if "active" in t or (mem is not None and mem < 60):
            raise ValueError("only the A800 80GB (SXM4 or PCIe) is in the device catalog (the A800 "
                             "40GB Active has other memory and power)")
        return "A800-PCIe-80GB" if pcie else "A800-SXM4-80GB"
    if chip == "v100" and pcie:
        # the catalog's V100 is the SXM2 part (NVLink2, 125 TFLOP/s); the PCIe card has no
        # NVLink and lower clocks: pricing it as the SXM2 would be wrong, not an assumption
        raise ValueError("only the V100 SXM2 (NVLink) is in the device catalog; the V100 PCIe "
                         "(no NVLink, 112 TFLOP/s fp16) is not")
    return {"h20": "H20-96GB", "b200": "B200", "gb200": "GB200", "v100": "V100-32GB"}[chip]


#: A memory size written in a GPU text ("V100-SXM2-16GB", "A100 80GB").
_TEXT_MEMORY = re.compile(r"(?<![0-9.])(\d{2,3})\s*gb\b")


def resolve_device(gpu_type: str, memory_gb: float | None = None,
                   power_limit_w: float | None = None) -> tuple[DeviceType, list[str]]:
    """The device a stated GPU is: the catalog variant its text and memory name,
    with a stated memory and power cap applied, and what was assumed.

    The chip comes from the text (``H100``, ``H800``, ``H20``, ``GH200``,
    ``H200``, ``A100``, ``A800``, ``B200``, ``GB200``, ``V100``); the variant
    from the form factor it names (``PCIe``, ``NVL``; SXM otherwise) and the
    stated memory (an H100 with 94 GB is the H100 NVL; an A100 with 80 GB the
    80 GB part). A stated memory is never ignored: when no variant of the chip
    has it (e.g. an "H100 96GB"), the variant keeps its compute and HBM
    bandwidth and takes the stated capacity, and the notes say so. A stated
    power cap below the variant's rated power lowers its sustained clock
    (:attr:`DeviceType.clock_factor`); one at the rated power changes nothing.

    Raises ValueError naming the reason when no catalog chip matches, and
    :class:`~autopar_opt.ir.power_limits.PowerLimitError` (a ValueError) for a power
    cap outside the part's range (:mod:`autopar_opt.ir.power_limits`).
    """
    notes: list[str] = []
    t = gpu_type.lower().replace(" ", "").replace("_", "-")
    if not t:
        raise ValueError("the GPU type is not stated")
    # the chip from the text with its separators ("h100 80gb" is an H100, "rtx a1000" no A100)
    chip = _chip_of(gpu_type.lower().replace("_", "-").replace(" ", "-"))
    if chip is None:
        raise ValueError(f"GPU type {gpu_type!r} matches no catalog device "
                         f"(known: {', '.join(DEVICE_CATALOG)})")
    if memory_gb is None and chip not in ("gh200", "gb200") \
            and (m := _TEXT_MEMORY.search(gpu_type.lower())):
        # the text's own memory is a stated memory (QA round 11: "V100-SXM2-16GB" was priced
        # with the catalog V100's 32 GB); not for a superchip, whose marketed memory counts
        # the Grace CPU's LPDDR ("GH200 576GB" = 480 GB LPDDR5X + 96 GB HBM3)
        memory_gb = float(m.group(1))
    dev = DEVICE_CATALOG[_variant(chip, t, memory_gb, notes)]
    if memory_gb is not None and abs(memory_gb - dev.nominal_memory_gb) > MEMORY_MATCH_GB:
        notes.append(f"stated memory {memory_gb:g} GB: no {dev.name.split('-')[0]} variant of the "
                     f"catalog has it; {dev.name}'s compute and {dev.hbm_gb_per_s:g} GB/s HBM "
                     f"bandwidth with the stated {memory_gb:g} GB")
        dev = replace(dev, hbm_gib=float(memory_gb) * dev.hbm_gib / dev.nominal_memory_gb,
                      memory_gb=float(memory_gb))
    if power_limit_w is not None:
        # a limit the board refuses is no machine to price (QA round 37: 1 W was priced)
        if problem := power_limit_problem(dev.name, dev.tdp_w, power_limit_w):
            raise PowerLimitError(f"power limit {power_limit_w:g} W is {problem}")
        if note := unsourced_minimum_note(dev.name, dev.tdp_w, power_limit_w):
            notes.append(note)
        if dev.tdp_w and power_limit_w < dev.tdp_w:
            dev = replace(dev, power_limit_w=float(power_limit_w))
            notes.append(f"power limit {power_limit_w:g} W below the rated {dev.tdp_w:g} W: "
                         f"sustained tensor clock (P/P_rated)^(1/3) = {dev.clock_factor:.3f} of the "
                         "datasheet peaks (DVFS cube law; not measured for this GPU)")
        else:
            notes.append(f"power limit {power_limit_w:g} W at or above the rated "
                         f"{dev.tdp_w:g} W: datasheet peaks kept")
    return dev, notes


#: Default intra-node link per device: per-GPU unidirectional NVLink bandwidth.
DEFAULT_INTRA_NODE: dict[str, LinkTier] = {
    "V100-32GB": LinkTier("nvlink2", 150.0, 5.0),   # 6 links x 25 GB/s (V100 whitepaper)
    "A100-40GB": LinkTier("nvlink3", 300.0, 5.0),   # 12 links x 25 GB/s (A100 whitepaper)
    "A100-80GB": LinkTier("nvlink3", 300.0, 5.0),
    "A800-SXM4-80GB": LinkTier("nvlink3-a800", 200.0, 5.0),  # 400 GB/s bidirectional: 8 of A100's 12 links
    "A100-PCIe-80GB": LinkTier("pcie4", 32.0, 5.0),   # PCIe Gen4 x16 (bridge pairs only 2 GPUs)
    "A100-PCIe-40GB": LinkTier("pcie4", 32.0, 5.0),
    "A800-PCIe-80GB": LinkTier("pcie4", 32.0, 5.0),
    "H100-SXM-80GB": LinkTier("nvlink4", 450.0, 5.0),  # 18 links x 25 GB/s (H100 whitepaper)
    "H100-PCIe-80GB": LinkTier("pcie5", 64.0, 5.0),   # PCIe Gen5 x16 (bridge pairs only 2 GPUs)
    "H100-NVL-94GB": LinkTier("pcie5", 64.0, 5.0),    # NVLink bridge pairs 2 GPUs; PCIe Gen5 beyond
    "H800-PCIe-80GB": LinkTier("pcie5", 64.0, 5.0),
    "H20-96GB": LinkTier("nvlink4", 450.0, 5.0),      # NVLink 900 GB/s bidirectional (HGX H20)
    "GH200-96GB": LinkTier("nvlink4", 450.0, 5.0),    # GH200 NVL2/NVL32: NVLink 900 GB/s bidirectional
    "GH200-144GB": LinkTier("nvlink4", 450.0, 5.0),
    "H200-141GB": LinkTier("nvlink4", 450.0, 5.0),
    "H200-NVL-141GB": LinkTier("pcie5", 64.0, 5.0),   # 2/4-way NVLink bridge; PCIe Gen5 across 8
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
    "A100-PCIe-80GB": LinkTier("ib-hdr", 25.0, 10.0),
    "A100-PCIe-40GB": LinkTier("ib-hdr", 25.0, 10.0),
    "A800-PCIe-80GB": LinkTier("ib-hdr", 25.0, 10.0),
    "H100-SXM-80GB": LinkTier("ib-ndr", 50.0, 10.0),  # 400 Gb/s NDR (DGX H100)
    "H100-PCIe-80GB": LinkTier("ib-ndr", 50.0, 10.0),
    "H100-NVL-94GB": LinkTier("ib-ndr", 50.0, 10.0),
    "H800-PCIe-80GB": LinkTier("ib-ndr", 50.0, 10.0),
    "H20-96GB": LinkTier("ib-ndr", 50.0, 10.0),
    "GH200-96GB": LinkTier("ib-ndr", 50.0, 10.0),     # one ConnectX-7 400 Gb/s per superchip
    "GH200-144GB": LinkTier("ib-ndr", 50.0, 10.0),
    "H200-141GB": LinkTier("ib-ndr", 50.0, 10.0),
    "H200-NVL-141GB": LinkTier("ib-ndr", 50.0, 10.0),
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
    "A100-PCIe-80GB": 32.0, "A100-PCIe-40GB": 32.0, "A800-PCIe-80GB": 32.0,
    "H100-SXM-80GB": 64.0, "H100-PCIe-80GB": 64.0, "H100-NVL-94GB": 64.0, "H800-PCIe-80GB": 64.0,
    "H20-96GB": 64.0, "H200-NVL-141GB": 64.0,
    "GH200-96GB": 450.0, "GH200-144GB": 450.0,   # NVLink-C2C 900 GB/s bidirectional (GH200 datasheet)
    "H800-SXM-80GB": 64.0, "H200-141GB": 64.0, "B200": 64.0, "GB200": 450.0,
}
#: Host link of a device not in :data:`HOST_LINK_GB_PER_S` (a spec's own
#: device): PCIe Gen4 x16, the slowest link of the catalog's current parts.
DEFAULT_HOST_LINK_GB_PER_S = 32.0


def host_link_gb_per_s(device: DeviceType) -> float:
    """GPU<->host bandwidth of ``device`` per direction (:data:`HOST_LINK_GB_PER_S`)."""
    return HOST_LINK_GB_PER_S.get(device.name, DEFAULT_HOST_LINK_GB_PER_S)


def memory_override(device: DeviceType) -> float | None:
    """The memory of a catalog part whose capacity was set apart from the catalog's (GiB),
    None for the catalog part as it is or a device of the spec's own. A spec sets it with
    ``cluster.device_memory_gib`` (a fleet group's ``device_memory_gib``); a device the spec
    describes cannot take a catalog name (``spec/build_run.py`` refuses it), so a catalog
    name with other memory than the catalog's has had its memory set (QA round 13: the
    summary called 6 GiB devices "A100-80GB" without a word)."""
    part = DEVICE_CATALOG.get(device.name)
    if part is None or abs(part.hbm_gib - device.hbm_gib) < 1e-9:
        return None
    return device.hbm_gib


def devices_text(count: int, name: str, memory_gib: float | None,
                 key: str = "cluster.device_memory_gib") -> str:
    """``8 x A100-80GB``, or ``8 x A100-80GB (memory set to 6 GiB by
    cluster.device_memory_gib)`` when :func:`memory_override` found a set memory: a header
    names the catalog part and says its memory is not the part's."""
    text = f"{count} x {name}"
    return text + (f" (memory set to {memory_gib:g} GiB by {key})" if memory_gib else "")


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
    #: network interfaces per node; the inter-node tier's bandwidth is one NIC's
    #: line rate. None: one per GPU (DGX/HGX design: 8 ConnectX-7 for 8 GPUs)
    nics_per_node: int | None = None
    #: nodes below one leaf switch (a rail-optimised scalable unit: the rail's
    #: leaf takes the same-index NIC of each of its nodes; a fat tree's leaf: all
    #: NICs of its nodes); None: every node under one non-blocking fabric
    nodes_per_leaf: int | None = None
    #: blocking factor of the fabric above the leaves (uplink over downlink
    #: capacity inverted: 2.0 = 2:1 oversubscribed); 1.0 non-blocking
    oversubscription: float = 1.0
    #: GPUs of the point-to-point NVLink board the node's GPUs sit on, each GPU's
    #: NVLinks split evenly over its ``nvlink_board - 1`` peers with no NVSwitch
    #: (:meth:`intra_share`; :func:`default_nvlink_mesh`; a job on part of a board
    #: keeps the board's size); 0: switched (NVSwitch), every GPU reaches any peer
    #: at its full NVLink bandwidth
    nvlink_board: int = 0
    #: whether the spec or record stated the wiring (``intra_node_topology``) rather
    #: than :func:`default_nvlink_mesh` deriving it: the assumptions say which
    nvlink_stated: bool = False

    @property
    def nvlink_mesh(self) -> bool:
        """Whether the node's GPUs are wired point to point (:attr:`nvlink_board`)."""
        return self.nvlink_board > 2

    def intra_share(self, members: int) -> float:
        """Share of a GPU's intra-node bandwidth a group with ``members`` ranks on
        one node gets. Switched (NVSwitch) or two GPUs per node: all of it. Point to
        point (:attr:`nvlink_mesh`): a GPU has ``L/(g-1)`` of its ``L`` links to each
        of its ``g-1`` peers, so a group of ``m`` on one node reaches its ``m-1``
        peers over ``(m-1)/(g-1)`` of them; NCCL's rings and all-to-alls use only
        the links between the group's own GPUs (a pair of a 4-GPU board: a third).
        ``g`` is the board's GPU count (:attr:`nvlink_board`). Perlmutter's 4-A100
        nodes: "each GPU is connected to each other GPU" (NERSC, Perlmutter
        architecture), 12 NVLink-3 links over 3 peers; a 4-GPU Hopper board, 18 links
        over 3 peers. Checked on KempnerForge's 4-H200 nodes (held out, ``kfmfu2026``):
        tensor parallelism over a pair priced 22% too fast on the switched figure,
        within 6% with a pair's third."""
        if not self.nvlink_mesh or members <= 1:
            return 1.0
        return min(1.0, (members - 1) / (self.nvlink_board - 1))

    @property
    def intra_pair(self) -> LinkTier:
        """The intra-node tier as one pair of GPUs sees it (a pipeline send, a
        context-parallel ring hop): :meth:`intra_share` of 2 members; the tier
        itself on a switched node. Keeps the tier's name, so its NCCL efficiency
        is the intra-node one."""
        share = self.intra_share(2)
        if share >= 1.0:
            return self.intra_node
        return LinkTier(self.intra_node.name, self.intra_node.bandwidth_gb_per_s * share,
                        self.intra_node.latency_us)

    def fabric_share(self, nodes: int) -> float:
        """Share of its NICs' line rate a group spanning ``nodes`` nodes gets from
        the fabric: 1 inside one leaf group or on a non-blocking fabric, else
        ``1/oversubscription`` (every group of the cluster communicates at once,
        so the uplinks carry ``oversubscription`` times their capacity).

        Rail-optimised and fat-tree fabrics price alike here: NVIDIA's
        reference designs build both as "a full non-blocking fat tree topology
        ... where the GPUs are connected using a rail-optimized network
        topology" (NVIDIA Enterprise Reference Architecture, HGX AI Factory,
        "Networking Physical Topologies"), and NCCL keeps each channel on its
        NIC's rail, relaying through NVLink to the GPU on the right rail (PXN,
        NCCL 2.12+), so a ring or tree does not cross rails in the network. The
        difference that matters is the leaf group (``nodes_per_leaf``: 32 DGX
        H100 per scalable unit, DGX SuperPOD reference architecture RA-11333-001)
        and the blocking above it. Nodes are taken consecutive and aligned to
        leaf groups (stated: a scheduler that scatters a job pays more)."""
        if self.nodes_per_leaf is None or nodes <= self.nodes_per_leaf:
            return 1.0
        return 1.0 / self.oversubscription

    @property
    def num_devices(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def nics(self) -> int:
        """NICs per node (:attr:`nics_per_node`, one per GPU when not stated)."""
        return self.nics_per_node or self.gpus_per_node

    def nic_share_gb_per_s(self, members_per_node: float = 1.0) -> float:
        """Inter-node line rate (GB/s) a group with ``members_per_node`` ranks on
        each node gets from it: the NICs of its own members, ``k·nics/gpus``
        NICs of ``inter_node.bandwidth_gb_per_s`` each. Every rank of a node
        communicates at once in a data- or tensor-parallel step (each rank is
        in some group of the same kind), so a group never gets a NIC the node's
        other groups use: with one NIC per GPU a group gets ``k`` NICs, with 4
        NICs for 8 GPUs half as many. NCCL runs one ring per channel and binds
        each channel to a NIC close to its GPU (NCCL topology search; DGX SuperPOD
        rail-optimised design, NVIDIA DGX H100 SuperPOD reference architecture)."""
        return members_per_node * self.nics / self.gpus_per_node * self.inter_node.bandwidth_gb_per_s

    @property
    def inter_node_per_gpu(self) -> LinkTier:
        """The inter-node tier as one GPU sees it when every GPU of its node sends at
        once (pipeline sends, all-to-alls): ``nics/gpus`` of a NIC
        (:meth:`nic_share_gb_per_s`); the tier itself with one NIC per GPU."""
        if self.nics == self.gpus_per_node:
            return self.inter_node
        return LinkTier(self.inter_node.name, self.nic_share_gb_per_s(1.0), self.inter_node.latency_us)

    def tier_for_span(self, first_rank: int, last_rank: int) -> LinkTier:
        """The tier binding a group whose ranks lie in [first_rank, last_rank]."""
        same_node = first_rank // self.gpus_per_node == last_rank // self.gpus_per_node
        return self.intra_node if same_node else self.inter_node


#: Catalog parts built on HGX/DGX SXM baseboards whose 4-GPU boards wire the GPUs
#: point to point, without NVSwitch (:func:`default_nvlink_mesh`): HGX A100 4-GPU
#: (Perlmutter, JUWELS Booster, Polaris nodes), HGX H100/H200 4-GPU. GH200 and GB200
#: sit in NVLink-switched domains; PCIe and NVL parts have no NVLink mesh of four.
MESH_BOARD_DEVICES = frozenset({"A100-40GB", "A100-80GB", "A800-SXM4-80GB", "H100-SXM-80GB",
                                "H800-SXM-80GB", "H200-141GB"})


#: Catalog parts whose 8-GPU SXM nodes have no NVSwitch: DGX-1 / HGX-1 with V100 SXM2 wire
#: the 8 GPUs as a hybrid cube-mesh, 6 NVLinks per GPU of which a pair shares 1 or 2
#: (NVIDIA, "DGX-1 with Tesla V100 System Architecture", WP-08437-002, 2017, Fig. 4);
#: NVSwitch came with DGX-2 (16 GPUs). Such a node is priced as switched unless stated,
#: and the plan's assumptions say so (:mod:`autopar_opt.cost.assumptions`; QA round 12).
CUBE_MESH_DEVICES = frozenset({"V100-32GB"})


def default_nvlink_mesh(device: DeviceType, gpus_per_node: int) -> bool:
    """Whether a node of ``gpus_per_node`` ``device`` GPUs is, unless stated, a point-to-
    point NVLink board (:attr:`Cluster.nvlink_mesh`): 3 or 4 GPUs of an SXM part of
    :data:`MESH_BOARD_DEVICES` (the 4-GPU HGX boards have no NVSwitch; 8-GPU boards do).
    Said in the plan's assumptions (:mod:`autopar_opt.cost.assumptions`); a spec states
    it with ``cluster.intra_node_topology``."""
    return device.name in MESH_BOARD_DEVICES and 3 <= gpus_per_node <= 4


def make_cluster(name: str, nodes: int, gpus_per_node: int, device: str | DeviceType,
                 intra_node: LinkTier | None = None, inter_node: LinkTier | None = None,
                 source: str = "", nics_per_node: int | None = None,
                 nodes_per_leaf: int | None = None, oversubscription: float = 1.0,
                 nvlink_mesh: bool | None = None, board_gpus: int | None = None) -> Cluster:
    """Build a cluster, filling link tiers from the device's defaults and the node's
    NVLink wiring from :func:`default_nvlink_mesh` where ``nvlink_mesh`` is None. A
    point-to-point board has ``board_gpus`` GPUs (default ``gpus_per_node``; more when
    the job uses part of a board, as a 2-GPU run on a 4-GPU HGX board)."""
    dev = DEVICE_CATALOG[device] if isinstance(device, str) else device
    intra = intra_node or DEFAULT_INTRA_NODE.get(dev.name, LinkTier("intra", 300.0, 5.0))
    inter = inter_node or DEFAULT_INTER_NODE.get(dev.name, LinkTier("inter", 25.0, 10.0))
    board = max(board_gpus or gpus_per_node, gpus_per_node)
    mesh = default_nvlink_mesh(dev, board) if nvlink_mesh is None else nvlink_mesh
    return Cluster(name, nodes, gpus_per_node, dev, intra, inter, source, nics_per_node,
                   nodes_per_leaf, oversubscription, board if mesh else 0, nvlink_mesh is not None)
