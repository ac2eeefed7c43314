"""The attention-kernel model (autopar_opt.cost.attention) against the published rows.

Each expected value is computed here by hand from the row it names in
autopar_opt/cost/data/attention_kernels.yaml (TFLOP/s / the benchmark GPU's
dense 16-bit peak, converted to the model's FLOP count as the module docstring
derives), not by calling the lookup with other arguments.
"""

import math

import pytest

from autopar_opt.cost import attention


def test_fwd_bwd_row_prices_both_passes_in_the_models_count():
    """FlashAttention-2 on A100, causal, head dim 128, s = 4096: 173 TFLOP/s forward+backward
    (FA2 paper figure panel (d)). The kernel does 3.5 F of work for the model's F + 2F, so
    each pass runs at 3/3.5 x 173/312 of the peak."""
    got = attention.lookup("flash_attention_2", "ampere", True, 128, 4096)
    assert got.kernel == "flash_attention_2" and got.arch == "ampere" and not got.notes
    assert got.fwd == pytest.approx(3 / 3.5 * 173 / 312)
    assert got.bwd == pytest.approx(got.fwd)


def test_separate_forward_and_backward_rows():
    """FlashAttention-3 on H100, non-causal, head dim 128, s = 8192: forward 646 TFLOP/s,
    backward 559 (FA3 paper figures). Forward: 646/989; backward: the kernel's 2.5 F for the
    model's 2 F: 2/2.5 x 559/989."""
    got = attention.lookup("flash_attention_3", "hopper", False, 128, 8192)
    assert got.fwd == pytest.approx(646 / 989)
    assert got.bwd == pytest.approx(2 / 2.5 * 559 / 989)


def test_backward_recovered_from_forward_and_combined_rows():
    """cuDNN on Hopper, causal, head dim 128, s = 2048, three sources. The FA3 paper: forward
    484. This project's H100 SDPA runs: forward 478.2 and 455.6, forward+backward 404.2 and
    396.6, averaged within the source; its backward R_b = 2.5 / (3.5/R_fb - 1/R_f). This
    project's H200 run: forward 465.7, backward 390.3 (timed). Each pass is the mean over the
    sources that give it: the forward over three, the backward over the two."""
    r_f_h100 = (478.2 + 455.6) / 2
    r_fb = (404.2 + 396.6) / 2
    r_b_h100 = 2.5 / (3.5 / r_fb - 1 / r_f_h100)
    got = attention.lookup("cudnn", "hopper", True, 128, 2048)
    assert got.fwd == pytest.approx((484.0 + r_f_h100 + 465.7) / 3 / 989, rel=1e-6)
    assert got.bwd == pytest.approx(2 / 2.5 * (r_b_h100 + 390.3) / 2 / 989, rel=1e-6)


def test_causal_backward_from_the_non_causal_one():
    """FlashAttention-3 causal backward is not published: the non-causal backward (head dim
    64, s = 4096: 453) times the forward's causal/non-causal ratio (420/476)."""
    got = attention.lookup("flash_attention_3", "hopper", True, 64, 4096)
    assert got.fwd == pytest.approx(420 / 989)
    assert got.bwd == pytest.approx(2 / 2.5 * 453 * 420 / 476 / 989)


def test_sequence_length_interpolates_in_log2_and_clamps():
    """FA2/A100/causal/hd64: 140 at 2k, 156 at 4k. s = 2896 (2^11.5) is half way: 148.
    Beyond the last length (16k: 171) and below the first (512: 88) the ends hold."""
    mid = attention.lookup("flash_attention_2", "ampere", True, 64, 2 ** 11.5)
    assert mid.fwd == pytest.approx(3 / 3.5 * 148 / 312)
    assert attention.lookup("flash_attention_2", "ampere", True, 64, 131072).fwd == \
        pytest.approx(3 / 3.5 * 171 / 312)
    assert attention.lookup("flash_attention_2", "ampere", True, 64, 128).fwd == \
        pytest.approx(3 / 3.5 * 88 / 312)


def test_head_dim_between_measured_ones_interpolates_and_says_so():
    """Head dim 96 on FA2/A100/causal at 16k: half way between 171 (hd 64) and 189 (hd 128)."""
    got = attention.lookup("flash_attention_2", "ampere", True, 96, 16384)
    assert got.fwd == pytest.approx(3 / 3.5 * 180 / 312)
    assert any("interpolated" in n for n in got.notes)


def test_fallbacks_are_stated():
    """Blackwell has no rows: the Hopper fractions of peak; FlashAttention-3 on an A100 (not a
    Hopper kernel): cuDNN has no A100 rows either, so FlashAttention-2."""
    bw = attention.lookup("cudnn", "blackwell", True, 128, 8192)
    hop = attention.lookup("cudnn", "hopper", True, 128, 8192)
    assert (bw.fwd, bw.bwd) == (hop.fwd, hop.bwd) and bw.arch == "hopper"
    assert any("blackwell" in n for n in bw.notes)
    a100 = attention.lookup("flash_attention_3", "ampere", True, 128, 4096)
    assert a100.kernel == "flash_attention_2" and len(a100.notes) == 2
    with pytest.raises(KeyError, match="volta"):
        attention.lookup("flash_attention_2", "volta", True, 128, 2048)


def test_every_row_names_a_source_and_a_locator():
    import yaml
    from importlib import resources

    data = yaml.safe_load(resources.files("autopar_opt.cost").joinpath(
        "data", "attention_kernels.yaml").read_text())
    for row in data["rows"]:
        assert row["source"] in data["sources"] and row["locator"]
        assert 0 < row["tflops"] < data["sources"][row["source"]]["peak_tflops"]
    assert math.isclose(attention.FWD_BWD_OVER_FWD, 3.5)
