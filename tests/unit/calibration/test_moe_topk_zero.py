"""A stated top-k of 0 is named as stated, with the rule (QA round 11: ``num_experts_per_tok:
0`` was reported as "the experts per token are not stated")."""

from __future__ import annotations

import pytest

from autopar_opt.calibration.reading import Unmodelable, read_record
from support.runs import tiny_record


def _moe(**topk):
    rec = tiny_record(model__name="tiny MoE", model__num_experts=4)
    rec["model"].update(topk)
    return rec


def test_a_top_k_of_zero_is_named_with_the_rule():
    with pytest.raises(Unmodelable, match=r"model\.num_experts_per_tok = 0: a router sends each "
                                          r"token to at least one expert \(fix: state the run's "
                                          r"top-k, 1 to 4\)"):
        read_record(_moe(num_experts_per_tok=0))
    with pytest.raises(Unmodelable, match="the experts per token are not stated"):
        read_record(_moe())
