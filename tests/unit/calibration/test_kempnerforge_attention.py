"""KempnerForge's attention kernel: PyTorch SDPA's default backend on its locked torch.

Oracle: KempnerForge calls ``F.scaled_dot_product_attention`` with no backend forced
(``sdpa_backend = "auto"``; at 01b461a no backend option at all), and every commit of its
published benchmarks locks torch 2.11.0+cu128 with nvidia-cudnn-cu12 9.19.0.56
(``uv.lock``). PyTorch's ``check_prefer_cudnn_attention``
(``aten/src/ATen/native/transformers/cuda/sdp_utils.cpp`` @ 001f694a) puts cuDNN
attention first when the runtime cuDNN is newer than 9.15 on sm90/sm100 (minor 0 or 3
under CUDA 12), so the H100/H200 runs take cuDNN fused attention and an A100 (sm80)
keeps FlashAttention-2 first. KempnerForge's own profile of a 13B run on 24 H200
(``benchmarks/profiling/13b_24gpu_profiling.md``, 2026-04-07) lists
``aten::_cudnn_attention_backward`` among its kernels.
"""

from __future__ import annotations

from autopar_opt.calibration.reading.stacks import kempnerforge
from autopar_opt.cost.attention import kernel_for


def _kernel(arch: str) -> str | None:
    rt = kempnerforge([], "KempnerForge (PyTorch FSDP2, torch SDPA attention)")
    return kernel_for(rt.attention_kernel, rt.flash_attention, rt.flash_v2_attention,
                      rt.hopper_attention, arch)


def test_cudnn_on_hopper_and_blackwell_flash2_on_ampere():
    assert _kernel("hopper") == "cudnn"
    assert _kernel("blackwell") == "cudnn"
    assert _kernel("ampere") == "flash_attention_2"


def test_the_reading_says_why():
    notes: list[str] = []
    kempnerforge(notes, "KempnerForge")
    said = "\n".join(notes)
    assert "check_prefer_cudnn_attention" in said and "9.19" in said and "2.11" in said
