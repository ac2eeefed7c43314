"""``moe_pad_expert_input_to_capacity`` written as text is read as it says (QA round 11: the
text "false" was true, so the experts were priced at the padded capacity and the note on the
unpadded capacity factor was not written)."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.reading import Unmodelable, read_record
from support.runs import tiny_record


def _notes(pad):
    rec = tiny_record(model__name="tiny MoE", model__num_experts=4, model__top_k=2,
                      model__moe_expert_capacity_factor=1.25)
    rec["model"]["moe_pad_expert_input_to_capacity"] = pad
    return [n for n in read_record(rec).notes() if "capacity factor 1.25 without padding" in n]


def test_pad_flags_are_read_as_written():
    assert len(_notes("false")) == 1 and len(_notes(False)) == 1 and len(_notes(None)) == 1
    assert _notes("true") == [] and _notes(True) == []
    with pytest.raises(Unmodelable, match="moe_pad_expert_input_to_capacity = 'sometimes' must "
                                          "be true or false"):
        _notes("sometimes")
