"""A Megatron-LM command line whose recomputation flags Megatron-Core refuses is refused
by the import too (QA round 11: ``--recompute-granularity full`` alone was priced as full
recomputation of every layer, 4.83 s for Llama-3-8B on 16 H100s, a run Megatron-LM never
starts). Oracle: Megatron-Core's own ``TransformerConfig`` where it is installed (the
frameworks lock), else the rule as its 0.17.1 ``__post_init__`` states it."""

from __future__ import annotations

import pytest

from autopar_opt.export.megatron import MegatronArgsError, parse_megatron_args
from autopar_opt.export.megatron_import import plan_from_megatron
from support.export_cases import CLUSTER, GRAPH, TRAINING

BASE = "--tensor-model-parallel-size 1 --micro-batch-size 1 --global-batch-size 16 "
CASES = [("--recompute-granularity full", False, {"recompute_granularity": "full"}),
         ("--recompute-granularity full --recompute-method uniform", False,
          {"recompute_granularity": "full", "recompute_method": "uniform"}),
         ("--recompute-granularity full --recompute-num-layers 1", False,
          {"recompute_granularity": "full", "recompute_num_layers": 1}),
         ("--recompute-granularity selective --recompute-num-layers 1", False,
          {"recompute_granularity": "selective", "recompute_num_layers": 1}),
         ("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
          True, {"recompute_granularity": "full", "recompute_method": "uniform",
                 "recompute_num_layers": 1}),
         ("--recompute-granularity selective", True, {"recompute_granularity": "selective"})]


@pytest.mark.parametrize("flags,runs,config", CASES)
def test_megatron_core_and_the_import_agree(flags, runs, config):
    try:
        from megatron.core.transformer.transformer_config import TransformerConfig
    except ImportError:
        TransformerConfig = None
    if TransformerConfig is not None:        # the framework itself, where installed
        if runs:
            TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, **config)
        else:
            with pytest.raises(ValueError, match="recompute"):
                TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, **config)
    args = parse_megatron_args(BASE + flags)
    if runs:
        assert plan_from_megatron(args, GRAPH, CLUSTER, TRAINING).stages
    else:
        with pytest.raises(MegatronArgsError, match="Megatron-Core refuses it"):
            plan_from_megatron(args, GRAPH, CLUSTER, TRAINING)


def test_selective_recomputation_of_other_modules_is_said():
    """``--recompute-modules`` picks what selective recomputation recomputes (Megatron-Core
    default ``["core_attn"]``); the price is the attention core's, so other modules are
    said (QA round 11: ``--recompute-modules mlp moe_act`` was priced silently as the
    attention core)."""
    from autopar_opt.export.megatron_import import runtime_flag_notes

    def notes(flags):
        return [n for n in runtime_flag_notes(parse_megatron_args(BASE + flags), TRAINING)
                if "--recompute-modules" in n]
    said = notes("--recompute-granularity selective --recompute-modules mlp moe_act")
    assert len(said) == 1 and "mlp and moe_act instead" in said[0]
    assert "layernorm as well" in notes("--recompute-granularity selective "
                                        "--recompute-modules core_attn layernorm")[0]
    assert notes("--recompute-granularity selective --recompute-modules core_attn") == []
    assert notes("--recompute-granularity selective") == []
    args = parse_megatron_args(BASE + "--recompute-granularity selective --recompute-modules mlp")
    assert args.recompute_modules == ["mlp"]
