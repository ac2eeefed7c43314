"""Device variants (issue 28, point 4): what a spec or record states picks the part.

Oracles: the datasheet figures written in each catalog entry's source, and the
cube law of the power cap computed by hand.
"""

import math

import pytest

from autopar_opt.cost.chips import CHIP_GROUPS
from autopar_opt.ir.hardware import (DEFAULT_INTER_NODE, DEFAULT_INTRA_NODE, DEVICE_CATALOG,
                                     HOST_LINK_GB_PER_S, make_cluster, resolve_device)


@pytest.mark.parametrize("text, memory, name", [
    ("H100-SXM 80GB", 80, "H100-SXM-80GB"),
    ("H100 (SXM assumed by MFU vs ~989 TFLOP/s; not stated)", None, "H100-SXM-80GB"),
    ("NVIDIA H100 PCIe", 80, "H100-PCIe-80GB"),
    ("H100 NVL", None, "H100-NVL-94GB"),
    ("H100", 94, "H100-NVL-94GB"),              # the 94 GB Hopper part is the NVL
    ("NVIDIA GH200 Grace Hopper", 96, "GH200-96GB"),
    ("GH200", 144, "GH200-144GB"),
    ("H20", 96, "H20-96GB"),
    ("H800", None, "H800-SXM-80GB"),
    ("H800 PCIe", 80, "H800-PCIe-80GB"),
    ("H200 NVL", None, "H200-NVL-141GB"),
    ("A100 PCIe 40GB", None, "A100-PCIe-40GB"),
    ("A800 PCIe 80GB", 80, "A800-PCIe-80GB"),
    ("NVIDIA Ampere, A100-class (A100 or A800 is not stated)", 80, "A100-80GB"),
    ("GB200", 186, "GB200"),                   # 186 GB nominal = the catalog part (184 GiB usable)
    ("B200", 180, "B200"),
])
def test_the_stated_text_and_memory_pick_the_variant(text, memory, name):
    dev, notes = resolve_device(text, memory)
    assert dev.name == name and dev.power_limit_w is None
    assert not any("stated memory" in n for n in notes)


def test_a_stated_memory_is_never_ignored():
    """An "H100 96GB" matches no catalog H100 variant: the SXM part's compute and HBM
    bandwidth with 96 GB, and the notes say so."""
    dev, notes = resolve_device("H100", 96)
    # 96 GB at the SXM part's CUDA-visible share of its nominal 80 GB (81,559 MiB: nvidia-smi)
    assert dev.name == "H100-SXM-80GB" and dev.hbm_gib == pytest.approx(96 * 81559 / 81920)
    assert dev.peak_tflops == DEVICE_CATALOG["H100-SXM-80GB"].peak_tflops
    assert any("stated memory 96 GB" in n for n in notes)


def test_power_cap_lowers_the_sustained_clock_by_the_cube_root():
    """H100 SXM rated 700 W capped at 500 W: (500/700)^(1/3) = 0.8939 of every FLOP peak,
    HBM bandwidth unchanged; a cap at or above the rating changes nothing."""
    dev, notes = resolve_device("H100 80GB", 80, power_limit_w=500)
    factor = (500 / 700) ** (1 / 3)
    assert dev.clock_factor == pytest.approx(factor) == pytest.approx(0.8939, abs=1e-4)
    assert dev.peak_flops("bf16") == pytest.approx(989e12 * factor)
    assert dev.peak_flops("fp8") == pytest.approx(1979e12 * factor)
    assert dev.hbm_gb_per_s == 3350.0 and any("500 W" in n for n in notes)
    same, notes = resolve_device("H100 80GB", 80, power_limit_w=700)
    assert same.clock_factor == 1.0 and any("at or above" in n for n in notes)


def test_pcie_nvl_and_export_parts_carry_their_datasheet_figures():
    """Dense = sparse / 2 from the datasheets quoted in the sources."""
    pcie, nvl, h20 = (DEVICE_CATALOG[n] for n in ("H100-PCIe-80GB", "H100-NVL-94GB", "H20-96GB"))
    assert (pcie.peak_tflops["bf16"], pcie.hbm_gb_per_s, pcie.tdp_w) == (1513 / 2 - 0.5, 2000.0, 350.0)
    assert (nvl.peak_tflops["bf16"], nvl.hbm_gb_per_s) == (1671 // 2, 3900.0)
    assert nvl.hbm_gib * 1024 == 95830 and nvl.nominal_memory_gb == 94.0    # nvidia-smi's MiB
    assert (h20.peak_tflops["bf16"], h20.peak_tflops["fp8"], h20.hbm_gib) == (148.0, 296.0, 96.0)
    assert "not from NVIDIA" in h20.source
    assert DEFAULT_INTRA_NODE["H100-PCIe-80GB"].name == "pcie5"


def test_every_catalog_device_has_links_a_chip_group_and_an_architecture():
    grouped = {d for devs in CHIP_GROUPS.values() for d in devs}
    for name, dev in DEVICE_CATALOG.items():
        assert name in DEFAULT_INTRA_NODE and name in DEFAULT_INTER_NODE and name in HOST_LINK_GB_PER_S
        assert name in grouped
        assert dev.arch in ("volta", "ampere", "hopper", "blackwell") and dev.tdp_w > 0 and dev.sms > 0


def test_unknown_chips_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="matches no catalog device"):
        resolve_device("MI300X", 192)
    with pytest.raises(ValueError, match="A800"):
        resolve_device("A800 40GB Active", 40)


def test_a_group_gets_only_its_members_nics():
    """8 GPUs and 4 NICs of 50 GB/s per node: a group with 8 members per node gets 4 NICs
    (200 GB/s), one with a single member half a NIC (25 GB/s: the other rank on its NIC
    communicates at the same time); with one NIC per GPU (the default) 8 and 1 NICs."""
    four = make_cluster("c", 2, 8, "H100-SXM-80GB", nics_per_node=4)
    assert four.nic_share_gb_per_s(8) == pytest.approx(200.0)
    assert four.nic_share_gb_per_s(1) == pytest.approx(25.0)
    dgx = make_cluster("c", 2, 8, "H100-SXM-80GB")
    assert dgx.nics == 8 and dgx.nic_share_gb_per_s(8) == pytest.approx(400.0)
    assert math.isclose(dgx.nic_share_gb_per_s(1), 50.0)


def test_a_chip_name_followed_by_a_digit_is_another_chip():
    """QA round 9: "NVIDIA RTX A1000" was read as an A100 (8 GB stated, A100 peaks)."""
    with pytest.raises(ValueError, match="matches no catalog device"):
        resolve_device("NVIDIA RTX A1000", 8)
    assert resolve_device("H100 80GB")[0].name == "H100-SXM-80GB"     # a size, not a chip
    assert resolve_device("nvidia_a100-sxm4-80gb")[0].name == "A100-80GB"


def test_an_unstated_form_factor_is_said():
    """QA round 9: "H100" became the SXM part silently."""
    dev, notes = resolve_device("H100", 80)
    assert dev.name == "H100-SXM-80GB"
    assert any(n.startswith("form factor not stated (H100): the SXM part assumed") for n in notes)
    for stated in ("H100 SXM5", "DGX H100", "H100 PCIe", "H100 NVL"):
        assert not any("form factor" in n for n in resolve_device(stated)[1]), stated


@pytest.mark.parametrize("name,mib", [("H100-SXM-80GB", 81559), ("H100-PCIe-80GB", 81559),
                                      ("H800-SXM-80GB", 81559), ("H200-141GB", 143771),
                                      ("H100-NVL-94GB", 95830), ("V100-32GB", 32510),
                                      ("A100-80GB", 81920)])
def test_a_parts_capacity_is_what_cuda_reports_not_its_marketed_gb(name, mib):
    """nvidia-smi's memory total (published tables of "NVIDIA H100 80GB HBM3", "NVIDIA H800",
    "NVIDIA H100 PCIe", "NVIDIA H200", "NVIDIA H100 NVL", "Tesla V100-SXM2-32GB",
    "NVIDIA A100-SXM4-80GB"): a plan's
    peak is held against it. At 80 GiB an H100 plan of 79.96 GiB was called feasible
    (examples/mixtral_8x22b_128_h100.yaml) on a GPU whose CUDA sees 79.65."""
    from autopar_opt.ir.hardware import make_cluster
    from autopar_opt.ir.training import Training
    from autopar_opt.cost.evaluate import evaluate
    from autopar_opt.model_zoo.registry import build_model
    from autopar_opt.ir.plan import uniform_plan
    from autopar_opt.ir.strategies import Strategy

    dev = DEVICE_CATALOG[name]
    assert dev.hbm_gib * 1024 == mib
    graph = build_model("debug")
    cluster = make_cluster("one", 1, 1, dev)
    plan = uniform_plan([layer.name for layer in graph.layers], 1, Strategy(dp=1, tp=1), 1)
    stage = evaluate(plan, graph, cluster, Training(4, 128, dtype="fp16")).stages[0]   # V100: no bf16
    assert stage.capacity_gib * 1024 == mib
