"""The dropout assumption on a Megatron stack names the family it sets aside (QA round 11: a
record stating ``model.family: llama`` read "dropout not stated and no known family states
it", though the llama family states no dropout: Megatron builds its own model with 0.1)."""

from __future__ import annotations

from autopar_opt.calibration.reading import read_record
from support.runs import tiny_record


def _dropout_notes(**changes) -> list[str]:
    return [n for n in read_record(tiny_record(**changes)).notes() if n.startswith("dropout")]


def test_a_stated_family_on_megatron_is_named_not_denied():
    notes = _dropout_notes(model__family="llama", training__framework="Megatron-Core 0.8")
    assert len(notes) == 1 and "no known family" not in notes[0]
    assert "family llama's reference config does not apply" in notes[0]
    assert "model.dropout: false" in notes[0]


def test_without_a_family_the_note_is_as_before_and_a_field_says_nothing():
    assert "no known family states it" in _dropout_notes(training__framework="Megatron-Core")[0]
    assert _dropout_notes(model__family="llama", model__dropout=False) == []
