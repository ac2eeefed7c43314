"""A Megatron-LM text that names no release is read as the 2020-22 stack, and the record's
assumptions say so (QA round 11: "Megatron-LM core 0.8" on a Llama-2-7B record was priced with
unfused softmax attention, 160 GiB per GPU for a run that fits in 80, and the only assumption
printed was the dropout)."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.reading import read_record
from support.runs import tiny_record

ERA = "Megatron-LM 2020-22 taken"


@pytest.mark.parametrize("framework", ["Megatron-LM", "Megatron-LM core 0.8",
                                       "Megatron-LM (2021)"])
def test_the_2020_22_stack_is_said(framework):
    rec = read_record(tiny_record(training__framework=framework))
    assert rec.runtime.name == "megatron-lm" and not rec.runtime.flash_attention
    said = [n for n in rec.notes() if ERA in n]
    assert len(said) == 1 and repr(framework) in said[0] and "unfused softmax" in said[0]


@pytest.mark.parametrize("framework", ["Megatron-LM 2024", "Megatron-Core 0.8",
                                       "Megatron-LM with Transformer Engine"])
def test_a_current_stack_reads_as_megatron_core_without_that_note(framework):
    rec = read_record(tiny_record(training__framework=framework))
    assert rec.runtime.name == "megatron-core"
    assert not any(ERA in n for n in rec.notes())


@pytest.mark.parametrize("framework", ["Megatron Core 0.8", "megatron_core r0.9"])
def test_megatron_core_with_a_space_or_underscore_is_megatron_core_and_said(framework):
    rec = read_record(tiny_record(training__framework=framework))
    assert rec.runtime.name == "megatron-core" and rec.runtime.flash_attention
    assert f"framework {framework!r} read as " in rec.notes()[0]
    assert not any(ERA in n for n in rec.notes())
