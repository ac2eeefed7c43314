"""A value that fits no form of a key taking several (a plain union) is one problem naming
every form, not one per form with pydantic's type labels (QA round 9: a capacity sweep's
``base: 42`` read "base.str = 42: must be a valid string" and "base.dict[str,any] = 42")."""

from __future__ import annotations

from support.cli import run_cli


def test_a_sweep_base_of_the_wrong_type_is_one_problem(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("base: 42\naxes: {gpus: [8]}\n"
                     "planning: {token_budget: 1.0e+9, deadline_days: 1, "
                     "prices: {per_gpu_hour: {A100-80GB: 1}, source: x}}\n")
    code, text = run_cli("capacity", sweep)
    flat = " ".join(text.split())
    assert code == 2
    assert "1 problem" in flat
    assert ("base = 42: is none of the forms this key takes; write a text string or a mapping "
            "of keys to values") in flat
    assert "base.str" not in flat and "dict[str,any]" not in flat
