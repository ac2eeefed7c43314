"""A Megatron-LM command line as the spec's plan runs Megatron's own defaults where it
states no context-parallel exchange (``--cp-comm-type``: p2p), token dispatcher
(``--moe-token-dispatcher-type``: allgather) or expert GEMM layout (``--moe-grouped-gemm``:
off); the price is the runtime's. QA round 11: the three were priced as the runtime's
without a word (the overlaps and the attention backend already were said). Oracle:
Megatron-LM 0.17.1's defaults (``arguments.py`` and ``TransformerConfig``, read where
installed) and the flags the Megatron export writes, which must say nothing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autopar_opt.export import export_plan
from autopar_opt.export.megatron import parse_megatron_args
from autopar_opt.export.megatron_import import exchange_notes
from autopar_opt.ir.runtime import runtime_named
from support.export_cases import CLUSTER, GRAPH, TRAINING, make_plan

CORE = replace(TRAINING, runtime=runtime_named("megatron-core"))


def _notes(flags: str, training=CORE, moe=True) -> list[str]:
    return exchange_notes(parse_megatron_args(flags), training, moe)


def test_megatron_defaults_are_the_ones_said():
    config = pytest.importorskip("megatron.core.transformer.transformer_config")
    fields = config.TransformerConfig.__dataclass_fields__
    assert fields["moe_token_dispatcher_type"].default == "allgather"
    assert fields["moe_grouped_gemm"].default is False


def test_left_out_settings_are_said():
    said = _notes("--tensor-model-parallel-size 2 --context-parallel-size 2")
    assert CORE.runtime.cp_comm_type == "p2p" and len(said) == 2      # p2p: as priced
    assert any("--moe-token-dispatcher-type allgather (Megatron-Core's default)" in n
               and "no runtime option prices it" in n for n in said)
    assert any("no --moe-grouped-gemm" in n for n in said)
    gather = replace(CORE, runtime=runtime_named("megatron-core", cp_comm_type="all_gather"))
    assert _notes("--context-parallel-size 2", gather, moe=False) == [
        "--cp-comm-type p2p (Megatron-LM's default): the context-parallel exchange priced is "
        "training.runtime megatron-core's all_gather; set training.runtime_options: "
        "{cp_comm_type: p2p} to price it"]
    assert _notes("--context-parallel-size 2 --cp-comm-type allgather", gather, moe=False) == []
    a2a = _notes("--context-parallel-size 2 --cp-comm-type a2a --moe-token-dispatcher-type flex "
                 "--moe-grouped-gemm")
    assert any("{cp_comm_type: a2a}" in n for n in a2a)
    assert any("{moe_dispatcher: deepep}" in n for n in a2a)
    assert _notes("--context-parallel-size 1", moe=False) == []


def test_the_megatron_export_says_nothing_when_read_back():
    plan = make_plan([8], dp=4, tp=2, sp=True, ep=2, c=2)
    text = export_plan(plan, GRAPH, CLUSTER, CORE, "megatron").text
    flags = " ".join(line.rstrip(" \\") for line in text.splitlines() if not line.startswith("#"))
    assert _notes(flags) == []


def test_multi_token_prediction_is_said():
    """QA round 11: the layout's ``m`` stages were dropped and ``--mtp-num-layers`` ignored
    silently; the MTP layers are not modelled, and the price says so."""
    said = _notes("--mtp-num-layers 1 --moe-token-dispatcher-type alltoall --moe-grouped-gemm")
    assert said == ["multi-token prediction (--mtp-num-layers 1): autopar does not model the MTP "
                    "layers: their compute, memory and communication are not in the price"]
    assert "m in --pipeline-model-parallel-layout" in _notes(
        "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout Et*3|t*3mL", moe=False)[0]
