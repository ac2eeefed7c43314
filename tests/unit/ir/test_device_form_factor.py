"""A GPU text's own form factor and memory are never overridden or dropped (QA round 11).

Oracles: the datasheets in the catalog entries' sources. "H100-SXM5-80GB" with 94 GB stated
was priced as the H100 NVL (835 bf16 TFLOP/s dense, PCIe between boards) instead of the SXM
part (989, NVLink 450 GB/s) with 94 GB; "H100" with 94 GB was taken as the NVL while its note
said "the SXM part assumed"; "V100-SXM2-16GB" got the catalog V100's 32 GB; a "V100 PCIe" was
priced as the SXM2 part with NVLink.
"""

import pytest

from autopar_opt.ir.hardware import DEVICE_CATALOG, resolve_device


@pytest.mark.parametrize("text", ["H100-SXM5-80GB", "H100 SXM", "HGX H100"])
def test_a_text_naming_sxm_keeps_the_sxm_part_with_the_stated_memory(text):
    dev, notes = resolve_device(text, 94)
    # 94 GB at the SXM part's CUDA-visible share (81,559 of 81,920 MiB): the H100 NVL's own
    # 94 GB shows 95,830 MiB in nvidia-smi, the same to 2 MiB
    assert dev.name == "H100-SXM-80GB" and dev.hbm_gib == pytest.approx(95830 / 1024, abs=0.005)
    assert dev.peak_tflops["bf16"] == DEVICE_CATALOG["H100-SXM-80GB"].peak_tflops["bf16"] == 989.0
    assert any("stated memory 94 GB" in n for n in notes)


def test_94_gb_without_a_form_factor_is_the_nvl_and_the_note_says_so():
    dev, notes = resolve_device("H100", 94)
    assert dev.name == "H100-NVL-94GB"
    assert any("H100 NVL taken" in n for n in notes)
    assert not any("SXM part assumed" in n for n in notes)


def test_the_memory_written_in_the_text_is_a_stated_memory():
    dev, notes = resolve_device("V100-SXM2-16GB", None)
    # 16 GB at the 32 GB part's CUDA-visible share (32,510 of 32,768 MiB: nvidia-smi)
    assert dev.name == "V100-32GB" and dev.hbm_gib == pytest.approx(16 * 32510 / 32768)
    assert any("stated memory 16 GB" in n for n in notes)
    assert resolve_device("A100 40GB", None)[0].name == "A100-40GB"     # unchanged
    assert resolve_device("H200 SXM 141GB", None)[0].hbm_gib * 1024 == 143771   # nvidia-smi


def test_a_v100_pcie_is_refused_not_priced_as_the_sxm2_part():
    with pytest.raises(ValueError, match="V100 PCIe"):
        resolve_device("Tesla V100 PCIe 32GB", 32)


def test_a_superchips_marketed_memory_is_not_its_hbm():
    """"GH200 576GB" counts the Grace CPU's 480 GB of LPDDR5X: the text's number is not the
    GPU's memory (the GH200 variants are told apart by 144 / HBM3e in the text, as before)."""
    dev, notes = resolve_device("GH200 576GB", None)
    assert dev.name == "GH200-96GB" and dev.hbm_gib == 96.0
    assert not any("stated memory" in n for n in notes)
    assert resolve_device("GH200 144GB", None)[0].name == "GH200-144GB"
