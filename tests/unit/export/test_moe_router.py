"""The MoE router and MLA's YaRN a Hugging Face config states reach the launch files
(QA round 5, H3 and M6).

Oracles: the models' routers as their code runs them (``transformers`` 4.57
``DeepseekV3TopkRouter``, ``Qwen2MoeSparseMoeBlock``, DeepSeek-V2's ``MoEGate``), read by
Megatron-LM's own ``parse_args`` / ``validate_args`` and ``core_transformer_config_from_args``
(megatron-core 0.17.1: the ``TransformerConfig`` / ``MLATransformerConfig`` a launch builds,
its ``__post_init__`` checks included), and by Megatron-Bridge 0.3.1's own merge and
validation of the overrides (tests/support/bridge_check.py). Megatron's DeepSeek-R1 script
(``examples/post_training/modelopt/conf/deepseek-ai/DeepSeek-R1.sh``) and Bridge's
``DeepSeekV3ModelProvider`` / ``MoonlightModelProvider16B`` state the same settings."""

from __future__ import annotations

import json

import pytest

from support.hf_specs import write_hf_spec
from support.paths import REPO
from autopar_opt.export import export_plan
from autopar_opt.spec import load_spec

HF = REPO / "model_zoo" / "hf"
#: DeepSeek-V2's published rope_scaling (deepseek-ai/DeepSeek-V2 config.json)
V2_YARN = {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
           "beta_fast": 32, "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707}
#: Moonlight-16B-A3B's router (moonshotai/Moonlight-16B-A3B config.json, model_type deepseek_v3)
MOONLIGHT = {"scoring_func": "sigmoid", "topk_method": "noaux_tc", "n_group": 1, "topk_group": 1,
             "routed_scaling_factor": 2.446, "norm_topk_prob": True}


def _spec(tmp_path, name: str, plan: str, **changes):
    config = json.loads((HF / f"{name}.json").read_text())
    config.update(changes)
    return load_spec(write_hf_spec(tmp_path, config, plan))


def _dsv3(tmp_path, **changes):       # DeepSeek-V3: 3 dense layers, then MoE
    return _spec(tmp_path, "deepseek-v3", "tp: 1, pp: 1, ep: 8, etp: 1, zero: 1, "
                 "recompute: full, micro_batch_size: 1", num_hidden_layers=4, **changes)


def _qwen15(tmp_path):                # Qwen1.5-MoE-A2.7B: norm_topk_prob left out (false)
    return _spec(tmp_path, "qwen1.5-moe-a2.7b", "tp: 1, pp: 1, ep: 4, etp: 1, zero: 1, "
                 "micro_batch_size: 1", num_hidden_layers=4)


def _dsv2(tmp_path):                  # DeepSeek-V2's router and YaRN on V2-Lite's shapes
    return _spec(tmp_path, "deepseek-v2-lite", "tp: 1, pp: 1, ep: 8, etp: 1, zero: 1, "
                 "recompute: full, micro_batch_size: 1", num_hidden_layers=4, rope_scaling=V2_YARN,
                 topk_method="group_limited_greedy", n_group=8, topk_group=3,
                 routed_scaling_factor=16.0)


def _export(spec, target: str):
    return export_plan(spec.plan, spec.graph, spec.cluster, spec.training, target)


def _megatron_config(text: str, world: int):
    """Megatron-LM's parse_args + validate_args, then the TransformerConfig its launch builds."""
    pytest.importorskip("megatron.training.arguments")
    from megatron.training.arguments import core_transformer_config_from_args

    from support.frameworks import validate_megatron_lm
    args = validate_megatron_lm(text, world, "hopper")
    args.apply_rope_fusion = False      # Transformer Engine's fused RoPE: no TE here
    return args, core_transformer_config_from_args(args)


def test_the_architecture_carries_and_says_the_router(tmp_path):
    from autopar_opt.ir.arch import Router, describe
    a = _dsv3(tmp_path).graph.arch
    assert a.router == Router(score="sigmoid", renormalise=True, expert_bias=True, scaling=2.5,
                              groups=8, group_topk=4, group_rank_top=2)
    assert ("(sigmoid router, top-k weights renormalised, expert-bias choice (auxiliary-loss-free), "
            "4 of 8 expert groups (each ranked by its top-2 sum), weights x2.5)") in describe(a)
    q = _qwen15(tmp_path).graph.arch
    assert q.router == Router(renormalise=False) and q.shared_gate
    assert ("+ shared 5632 with a sigmoid gate (softmax router over all experts, top-k weights "
            "not renormalised)") in describe(q)
    plain = _spec(tmp_path, "qwen3-30b-a3b", "tp: 1, pp: 1, ep: 8, etp: 1, zero: 1, "
                  "micro_batch_size: 1", num_hidden_layers=2).graph.arch
    assert plain.router is None and "router" not in describe(plain)    # norm_topk_prob true
    v2 = _dsv2(tmp_path).graph.arch
    assert v2.router == Router(renormalise=False, scaling=16.0, groups=8, group_topk=3,
                               group_rank_top=1)
    assert v2.yarn == (0.707, 0.707, 32.0, 1.0)


def test_a_router_the_models_code_does_not_run_is_refused(tmp_path):
    from autopar_opt.core.errors import SpecError
    with pytest.raises(SpecError, match="scoring_func = 'softmax'.*routes with scoring_func "
                                            "'sigmoid'"):
        _dsv3(tmp_path, scoring_func="softmax")
    with pytest.raises(SpecError, match="routed_scaling_factor = -1 must be a positive"):
        _dsv3(tmp_path, routed_scaling_factor=-1)
    with pytest.raises(SpecError, match="norm_topk_prob = 'yes'"):
        _dsv3(tmp_path, norm_topk_prob="yes")


def test_deepseek_v3_router_reaches_megatron_lm(tmp_path):
    spec = _dsv3(tmp_path)
    out = _export(spec, "megatron")
    args, config = _megatron_config(out.text, spec.cluster.num_devices)
    assert args.moe_router_score_function == config.moe_router_score_function == "sigmoid"
    assert args.moe_router_enable_expert_bias and config.moe_router_enable_expert_bias
    assert config.moe_router_bias_update_rate == 1e-3
    assert config.moe_router_topk_scaling_factor == 2.5
    assert (config.moe_router_num_groups, config.moe_router_group_topk) == (8, 4)
    assert not config.moe_router_pre_softmax and not config.moe_shared_expert_gate
    assert not any("router" in n or "group" in n for n in out.notes)   # all of it expressed


def test_moonlight_router_reaches_megatron_lm(tmp_path):
    spec = _dsv3(tmp_path, **MOONLIGHT)
    args, config = _megatron_config(_export(spec, "megatron").text, spec.cluster.num_devices)
    assert config.moe_router_score_function == "sigmoid" and config.moe_router_enable_expert_bias
    assert config.moe_router_topk_scaling_factor == 2.446
    assert config.moe_router_num_groups is None          # one group: no group-limited routing


def test_qwen_moe_without_renormalisation_reaches_megatron_lm(tmp_path):
    spec = _qwen15(tmp_path)
    args, config = _megatron_config(_export(spec, "megatron").text, spec.cluster.num_devices)
    assert config.moe_router_pre_softmax and config.moe_router_score_function == "softmax"
    assert config.moe_shared_expert_gate and config.moe_shared_expert_intermediate_size == 5632
    assert config.moe_router_topk_scaling_factor is None and not config.moe_router_enable_expert_bias


def test_mla_yarn_and_deepseek_v2_router_reach_megatron_lm(tmp_path):
    spec = _dsv2(tmp_path)
    out = _export(spec, "megatron")
    args, config = _megatron_config(out.text, spec.cluster.num_devices)
    assert type(config).__name__ == "MLATransformerConfig"
    assert (config.rope_type, config.rotary_scaling_factor, config.mscale, config.mscale_all_dim) == \
        ("yarn", 40.0, 0.707, 0.707)
    assert (config.original_max_position_embeddings, config.beta_fast, config.beta_slow) == (4096, 32, 1)
    said = " ".join(out.notes)
    assert "RoPE scaling" not in said and "Llama 3.x" not in said      # M6's false note is gone
    assert config.moe_router_pre_softmax and config.moe_router_topk_scaling_factor == 16.0
    assert (config.moe_router_num_groups, config.moe_router_group_topk) == (8, 3)
    # DeepSeek-V2 ranks a group by its best score, Megatron-Core by its top-2 sum: said
    assert "ranks a group by its best score; Megatron-Core ranks it by the sum of its top " \
           "topk // group_topk = 2 scores" in said


def test_a_yarn_constant_megatron_lm_fixes_is_said(tmp_path):
    spec = _spec(tmp_path, "deepseek-v2-lite", "tp: 1, pp: 1, ep: 8, etp: 1, zero: 1, "
                 "micro_batch_size: 1", num_hidden_layers=4,
                 rope_scaling=dict(V2_YARN, original_max_position_embeddings=8192))
    said = " ".join(_export(spec, "megatron").notes)
    assert "original length 8192" in said and "MLATransformerConfig fixes 4096" in said
    assert not _export(spec, "megatron-bridge").notes or \
        "original length" not in " ".join(_export(spec, "megatron-bridge").notes)


def test_deepspeed_and_torchtitan_say_what_their_router_does(tmp_path):
    spec = _dsv3(tmp_path)
    said = " ".join(_export(spec, "deepspeed").notes)
    assert "never updates it" in said and "supports_expert_bias=False" in said
    from types import SimpleNamespace

    from autopar_opt.export.torchtitan import flavour_router_note
    # the 671B flavour routes as DeepSeek-V3's config: nothing to say
    assert flavour_router_note(SimpleNamespace(arch=_dsv3(tmp_path).graph.arch)) == []
    qwen3 = _spec(tmp_path, "qwen3-30b-a3b", "tp: 1, pp: 1, ep: 8, etp: 1, zero: 1, "
                  "micro_batch_size: 1", num_hidden_layers=2).graph.arch
    said = flavour_router_note(SimpleNamespace(arch=qwen3))
    assert said and "expert-bias choice" in said[0] and "load_balance_coeff 1e-3" in said[0]


def test_bridge_takes_the_router_and_yarn(tmp_path):
    from support.bridge import bridge_missing, validate_bridge
    if bridge_missing():
        pytest.skip(bridge_missing())
    cases, specs = [], {}
    for sub in "abc":
        (tmp_path / sub).mkdir()
    for name, spec in (("dsv3", _dsv3(tmp_path / "a")), ("qwen15", _qwen15(tmp_path / "b")),
                       ("dsv2", _dsv2(tmp_path / "c"))):
        path = tmp_path / f"{name}.yaml"
        path.write_text(_export(spec, "megatron-bridge").text)
        specs[name] = spec
        cases.append({"name": name, "path": str(path), "world": spec.cluster.num_devices,
                      "gpus_per_node": spec.cluster.gpus_per_node, "recipe": "pretrain_common"})
    _, results = validate_bridge(cases)
    for name, r in results.items():
        assert r["ok"], name + ": " + r.get("error", "") + "\n" + r.get("traceback", "")
    v3, q, v2 = (results[k]["derived"]["router"] for k in ("dsv3", "qwen15", "dsv2"))
    assert (v3["moe_router_score_function"], v3["moe_router_enable_expert_bias"],
            v3["moe_router_topk_scaling_factor"], v3["moe_router_num_groups"],
            v3["moe_router_group_topk"]) == ("sigmoid", True, 2.5, 8, 4)
    assert (v3["rope_type"], v3["rotary_scaling_factor"]) == ("yarn", 40.0)  # the config's
    assert q["moe_router_pre_softmax"] and q["moe_shared_expert_gate"]
    assert q["moe_router_score_function"] == "softmax" and not q["moe_router_enable_expert_bias"]
    assert (v2["rope_type"], v2["rotary_scaling_factor"], v2["mscale"], v2["mscale_all_dim"],
            v2["original_max_position_embeddings"], v2["beta_fast"], v2["beta_slow"]) == \
        ("yarn", 40.0, 0.707, 0.707, 4096, 32.0, 1.0)
    assert v2["moe_router_pre_softmax"] and v2["moe_router_topk_scaling_factor"] == 16.0
