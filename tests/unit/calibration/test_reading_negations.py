"""A framework text that names a flag or Transformer Engine only to say it was *not* used is
read as not used (QA session 37, found while writing the CARAML record: "no Transformer
Engine" switched a Megatron-LM run to cuDNN attention, "--overlap-grad-reduce off by default"
turned gradient-reduce overlap on). Oracle: the texts' plain meaning, and each flag's
default in Megatron-Core r0.8 (``megatron/training/arguments.py``: ``--overlap-grad-reduce``,
``--overlap-param-gather`` and ``--tp-comm-overlap`` are ``store_true``, off unless passed)."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.reading import RawRecord
from autopar_opt.calibration.reading.runtime import runtime_of
from autopar_opt.calibration.reading.stacks import flag_stated, names_transformer_engine


@pytest.mark.parametrize("text, stated", [
    ("--overlap-grad-reduce", True),
    ("overlap_grad_reduce=true", True),
    ("Megatron-Core r0.8 with --overlap-grad-reduce --overlap-param-gather", True),
    ("--overlap-grad-reduce off by default", False),          # read as passed before
    ("--overlap-grad-reduce not passed", False),               # read as passed before
    ("overlap_grad_reduce disabled", False),                   # read as passed before
    ("no --overlap-grad-reduce", False),
    ("overlap_grad_reduce: false", False),
    ("without overlap-grad-reduce", False),
    ("Megatron-Core r0.8", None),
])
def test_a_flag_named_to_say_it_is_off_is_off(text, stated):
    assert flag_stated(text, "overlap_grad_reduce") is stated


def test_the_separator_blind_match_still_finds_a_flag_written_as_one_word():
    assert flag_stated("DistributedOptimizer on", "distributed optimizer") is True
    assert flag_stated("without the distributed optimizer", "distributed optimizer") is False


def test_megatron_core_reads_off_by_default_as_off():
    notes: list[str] = []
    rt = runtime_of("Megatron-Core r0.8, --overlap-grad-reduce off by default, "
                    "--tp-comm-overlap not passed", notes)
    assert rt.name == "megatron-core"
    assert (rt.grad_reduce_overlap, rt.tp_comm_overlap) == (False, False)
    on = runtime_of("Megatron-Core r0.8, --overlap-grad-reduce, --tp-comm-overlap", [])
    assert (on.grad_reduce_overlap, on.tp_comm_overlap) == (True, True)


@pytest.mark.parametrize("text, named", [
    ("Megatron-Core with Transformer Engine", True),
    ("--transformer-impl transformer_engine", True),
    ("no Transformer Engine", False),                          # named before
    ("Megatron-LM, without NVIDIA Transformer Engine", False),  # named before
    ("not transformer_engine (local layers)", False),          # named before
    ("no Transformer Engine for the MLP; TE transformer_engine attention", True),
])
def test_transformer_engine_named_only_when_used(text, named):
    assert names_transformer_engine(text) is named


def test_flash_attention_2_without_transformer_engine_on_hopper_stays_flash_attention_2():
    """Before: "no Transformer Engine" counted as TE on an sm90+ GPU, which prefers cuDNN's
    fused attention, so the run's named FlashAttention-2 was priced as a Hopper-native
    kernel (``hopper_attention`` on)."""
    rec = RawRecord.read({"hardware": {"gpu_type": "GH200"}})
    with_te = runtime_of("Megatron-Core r0.8.0 with Transformer Engine, FlashAttention-2", [], rec)
    notes: list[str] = []
    without = runtime_of("Megatron-Core r0.8.0, no Transformer Engine, FlashAttention-2", notes,
                         rec)
    assert with_te.hopper_attention is True
    assert (without.flash_attention, without.hopper_attention) == (True, False)
    assert any("FlashAttention-2 named in the framework text" in n for n in notes)
