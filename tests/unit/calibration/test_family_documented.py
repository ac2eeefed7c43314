"""How a record's source family (the unit of ``--cross-validate family``) is derived from its id
is documented where a user writes ids (QA round 11: neither ``schema --runs`` nor
``calibrate --help`` said it, and a user's file of "mine_*" ids is one family, so nothing is
cross-validated). Oracle: ``family_of`` itself on the documented examples."""

from __future__ import annotations

import typer

from autopar_opt.calibration.reading import family_of
from autopar_opt.calibration.reading.run_schema import run_file_json_schema
from autopar_opt.cli import app


def test_the_family_rule_is_documented_and_is_the_readers():
    text = run_file_json_schema()["items"]["properties"]["id"]["description"]
    assert "first '_'-separated token" in text and "megatron_*" in text and "bloom*" in text
    assert family_of("mine_llama7b_run1", "") == "mine"
    assert family_of("megatron_readme2020_x", "") == "megatron_readme2020"
    assert family_of("bloom176b_production", "") == family_of("bloom_topology_x", "") == "bloom"
    command = typer.main.get_command(app).commands["calibrate"]
    (option,) = [p for p in command.params if "--cross-validate" in p.opts]
    assert "first '_'-separated token" in option.help
