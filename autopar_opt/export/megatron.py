"""Megatron-LM / Megatron-Core / Megatron-Bridge: plan → launch arguments, and arguments → plan.

Argument names and rules are Megatron-LM's (``megatron/training/arguments.py``
``parse_args`` / ``validate_args``). Verified by the frameworks' own code on every golden
export (tests/unit/export/test_framework_validation.py, tests/support/frameworks.py),
with the ``megatron-core`` 0.17.1 package, whose wheel ships Megatron-LM's
``megatron/training``: ``parse_args(ignore_unknown_args=False)`` (every flag's name and
type) and ``validate_args`` with ``WORLD_SIZE`` the plan's device count, then
Megatron-Core's ``initialize_model_parallel`` (fake process group), micro-batch
calculator, ``TransformerConfig`` and ``DistributedDataParallelConfig``. Not verified
there, for want of a GPU: the two device queries of ``validate_args`` are answered with
the plan's GPU generation (``torch.cuda.get_device_capability`` for
``--moe-grouped-gemm``, compute capability 8.0 or more; ``get_device_arch_version`` for
the ``CUDA_DEVICE_MAX_CONNECTIONS`` rule below, which holds before Blackwell); its
Transformer Engine version checks see no Transformer Engine; the interleaved schedule's
micro-batch rule (:func:`_vp_rules`) runs only inside the schedule on a GPU. The flags:

* model: ``--num-layers --hidden-size --ffn-hidden-size --num-attention-heads``,
  GQA ``--group-query-attention --num-query-groups``, ``--kv-channels``,
  ``--seq-length --max-position-embeddings``, ``--vocab-size`` (the model's
  vocabulary less the ``NullTokenizer``'s end-of-document token; give your tokenizer
  instead), ``--swiglu``,
  ``--normalization RMSNorm``, ``--position-embedding-type rope|learned_absolute``,
  ``--untie-embeddings-and-output-weights``, ``--disable-bias-linear``,
  ``--qk-layernorm``, ``--add-qkv-bias``; MoE ``--num-experts --moe-router-topk
  --moe-ffn-hidden-size --moe-shared-expert-intermediate-size --moe-layer-freq``, the
  config's router (``--moe-router-score-function --moe-router-pre-softmax
  --moe-router-enable-expert-bias --moe-router-topk-scaling-factor --moe-router-num-groups
  --moe-router-group-topk --moe-shared-expert-gate``: :func:`router_settings`, what they
  cannot say: :func:`router_notes`);
  MLA ``--multi-latent-attention --q-lora-rank --kv-lora-rank --qk-head-dim
  --qk-pos-emb-head-dim --v-head-dim``, its YaRN ``--rope-type yarn --rotary-scaling-factor
  --mscale --mscale-all-dim`` (:func:`mla_yarn`); sliding-window attention ``--window-size
  --window-attn-skip-freq`` (:func:`window_settings`); the config's dropout
  ``--hidden-dropout --attention-dropout`` (Megatron-LM's defaults are 0.1);
* parallelism: ``--tensor-model-parallel-size``, ``--pipeline-model-parallel-size``,
  ``--context-parallel-size``, ``--expert-model-parallel-size``,
  ``--expert-tensor-parallel-size`` (expert grid ``etp·ep·edp = tp·cp·dp`` per
  stage, ``parallel_state.initialize_model_parallel``), ``--sequence-parallel``;
  data parallelism is the rest of the world size;
* batch: ``--micro-batch-size`` (per data-parallel replica), ``--global-batch-size``
  (``global = micro · dp · num_microbatches``); ``--seq-length`` divisible by
  ``2·cp`` (load-balanced context parallelism);
* precision ``--bf16`` / ``--fp16`` / ``--bf16 --fp8-format hybrid --fp8-recipe delayed``;
* ZeRO: ``--use-distributed-optimizer`` (ZeRO-1); ZeRO-2/3 through Megatron-FSDP
  ``--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads`` /
  ``optim_grads_params``, which needs ``--ckpt-format fsdp_dtensor`` ("Megatron-FSDP
  requires the `fsdp_dtensor` checkpointing format.", arguments.py) and
  ``CUDA_DEVICE_MAX_CONNECTIONS`` other than 1 ("FSDP always requires
  CUDA_DEVICE_MAX_CONNECTIONS value large than one"); tensor or context
  parallelism without FSDP needs it set to 1 on Hopper and earlier; hybrid
  sharding (a shard group per node, replicated across nodes) is
  ``--num-distributed-optimizer-instances R`` for either form (the distributed
  optimizer's intra-partial groups, consecutive chunks of the dp-cp ranks, with
  an all-reduce across them; Megatron-FSDP's ``enable_hsdp``;
  ``parallel_state.initialize_model_parallel``);
* recomputation ``--recompute-granularity full|selective``, ``--recompute-method
  uniform|block``, ``--recompute-num-layers N`` (block: the first N layers of every
  pipeline stage);
* pipeline split: even by default, else ``--decoder-first-pipeline-num-layers`` /
  ``--decoder-last-pipeline-num-layers``, else ``--pipeline-model-parallel-layout``
  (``E`` embedding, ``t`` transformer layer, ``L`` loss/head, ``|`` between stages);
* schedules: 1F1B, or interleaved with ``--num-virtual-stages-per-pipeline-rank``.

Megatron-Bridge takes the same settings as overrides of its ``ConfigContainer``
(``model.*`` is the ``GPTModelProvider``, a Megatron-Core ``TransformerConfig``;
``train``, ``ddp``, ``optimizer``, ``checkpoint``), merged into a recipe with
``process_config_with_overrides(config, config_filepath=...)``
(:func:`bridge_overrides`). A recipe has its own layout, so the overrides also write
what the plan leaves at the default (no virtual stages, no recomputation, no
Megatron-FSDP, RoPE where ``GPTModelProvider`` defaults to learned positions); Bridge
0.3.1 itself merges and validates every golden export in the tests
(tests/unit/export/test_bridge_validation.py).
"""

from __future__ import annotations

import argparse
import functools
import re
import shlex
from importlib import resources

from autopar_opt.core.errors import did_you_mean

from autopar_opt.export.view import PlanView, common_rules
from autopar_opt.ir.recompute_pattern import block_layers
from autopar_opt.ir.training import Recompute, Schedule
from autopar_opt.ir.target import (MEGATRON_PLAIN_ACTIVATIONS, TE_RING_WINDOW,
                                   megatron_model_problem, megatron_window_problem,
                                   sequence_split_problem)

_FSDP = {2: "optim_grads", 3: "optim_grads_params"}


def megatron_rules(view: PlanView, chain: bool) -> list[str]:
    """Every reason Megatron-LM cannot run the plan (empty: it can)."""
    out = common_rules(view, "Megatron-LM", chain)
    if view.schedule is Schedule.gpipe:
        out.append("the GPipe schedule: Megatron-LM runs 1F1B or interleaved 1F1B")
    if view.cp > 1 and view.seq_len and view.seq_len % (2 * view.cp):
        out.append(f"seq_len {view.seq_len} must be divisible by 2*cp = {2 * view.cp}")
    if view.cp > 1 and view.cp_comm_type == "a2a" and view.max_tp % (view.tp * view.cp):
        # Transformer Engine's all-to-all context parallelism (cp_comm_type a2a) splits each
        # tp rank's heads over cp: "The number of attention heads needs to be divisible by
        # CP size!" (attn_forward_func_with_cp, q and k heads); the search's rule too
        # (ir/strategies.py: tp*cp divides max_tp where context parallelism splits heads)
        out.append(f"Ulysses context parallelism (cp_comm_type a2a) splits each tp rank's "
                   f"attention heads over cp: tp*cp = {view.tp * view.cp} must divide the "
                   f"attention heads / key-value heads ({view.max_tp}) (Transformer Engine: "
                   "'The number of attention heads needs to be divisible by CP size!')")
    split = sequence_split_problem("megatron", view.tp, view.cp, view.sp, view.seq_len)
    if split:
        out.append(split)
    if view.has_moe and view.tp > 1 and not view.sp:
        # Megatron-Core 0.17.1 ModelParallelConfig.__post_init__ warns "When using expert
        # parallelism and tensor parallelism for training, sequence parallelism must be
        # used"; training/yaml_arguments.py asserts it for MoE with tp > 1, as the megatron
        # target's admission does (ir/target.py)
        out.append("MoE with tp > 1 without sequence parallelism: Megatron-Core requires "
                   "--sequence-parallel for training MoE with tensor parallelism (fix: price "
                   "the plan with sequence_parallel: true)")
    out += model_rules(view)
    odd = sorted({k for kinds in view.stage_kinds for k in kinds if k == "?"})
    if odd:
        out.append("layers other than embedding, transformer blocks and head have no place "
                   "in a Megatron-LM pipeline layout")
    if any(m is Recompute.op for stage in view.block_recompute for m in stage):
        out.append("op-level selective checkpointing (torchtitan's save list): Megatron-LM's "
                   "--recompute-granularity selective recomputes the attention core only")
    elif _recompute_args(view) is None:
        chunks = _virtual_chunks(view)
        out.append("per-layer recomputation other than 'the first N blocks of every stage' "
                   "(--recompute-method block)" + (
                       f"; with {chunks} virtual stages Megatron-LM recomputes the first N "
                       f"blocks of every virtual stage, so a stage's recomputed blocks must be "
                       f"a multiple of {chunks}" if chunks > 1 else ""))
    if view.vp_chunks > 1 and view.schedule is Schedule.interleaved:
        out += _vp_rules(view)
    return out


def model_rules(view: PlanView) -> list[str]:
    """Why Megatron-LM cannot run the plan's model: a block its flags cannot state
    (Gemma's GeGLU and post-norms), more than one sliding-window size
    (``TransformerConfig.window_size`` is one per model), and context parallelism
    over windowed layers by the ring (Transformer Engine
    ``attn_forward_func_with_cp``: "Context parallelism does not support sliding
    window attention with cp_comm_type='p2p'"; all-gather and all-to-all do)."""
    a = view.arch
    if a is None:
        return []
    out = [why for why in (megatron_model_problem(a), megatron_window_problem(a.windows)) if why]
    if a.window and view.cp > 1 and view.cp_comm_type == "p2p":
        out.append(f"context parallelism over sliding-window layers with the ring exchange "
                   f"(cp_comm_type p2p): {TE_RING_WINDOW} (fix: price the plan with "
                   "training.runtime_options.cp_comm_type all_gather or a2a)")
    return out


def _vp_rules(view: PlanView) -> list[str]:
    """Megatron-Core 0.17.1's rules for virtual pipeline stages: ``validate_args``
    (pp > 1), ``TransformerConfig.__post_init__`` (every rank's layers divisible by
    ``virtual_pipeline_model_parallel_size``) and
    ``forward_backward_pipelining_with_interleaving`` (``microbatch_group_size_per_vp_stage``,
    default pp, within ``[pp, M]`` and ``M mod pp`` 0 or at least pp: M a multiple of
    pp). An uneven split with virtual stages is not written (the exporter writes
    the default even split only)."""
    out = []
    if view.pp < 2:
        out.append("virtual pipeline stages with one pipeline stage")
    if _split_args(view):
        out.append("interleaving (virtual stages) with an uneven stage split")
    bad = sorted({n for n in view.blocks_per_stage if n % view.vp_chunks})
    if bad:
        out.append(f"{bad[0]} transformer layers on a pipeline rank do not divide into "
                   f"{view.vp_chunks} virtual stages")
    if view.microbatches % max(view.pp, 1):
        out.append(f"interleaving needs the micro-batches ({view.microbatches}) to be a "
                   f"multiple of the pipeline stages ({view.pp})")
    return out


def _virtual_chunks(view: PlanView) -> int:
    """Model chunks per pipeline rank (``--num-virtual-stages-per-pipeline-rank``, 1 without)."""
    return view.vp_chunks if view.schedule is Schedule.interleaved and view.vp_chunks > 1 else 1


def _recompute_args(view: PlanView) -> list[str] | None:
    """Recompute flags, or None when the per-block pattern is not expressible.

    ``--recompute-method block --recompute-num-layers N`` recomputes the first ``N``
    layers of every ``TransformerBlock`` (Megatron-Core 0.17.1 ``transformer_block.py``
    ``_checkpointed_forward``: ``range(self.num_layers_per_pipeline_rank)``, which is
    ``len(self.layers)``, the layers of one model chunk), so with ``v`` virtual stages
    a rank recomputes ``v·N`` blocks: a plan recomputing ``n`` blocks of a stage (the
    cost model prices a stage's blocks, not their chunk) is ``N = n / v``, and has no
    form where ``v`` does not divide ``n``."""
    modes = {m for stage in view.block_recompute for m in stage}
    if modes == {Recompute.none} or not modes:
        return []
    if modes == {Recompute.selective}:
        return ["--recompute-granularity", "selective"]
    if modes == {Recompute.full}:
        return ["--recompute-granularity", "full", "--recompute-method", "uniform",
                "--recompute-num-layers", "1"]
    n = block_layers(view.block_recompute, _virtual_chunks(view))   # the one rule (ir)
    if n is None:
        return None
    return ["--recompute-granularity", "full", "--recompute-method", "block",
            "--recompute-num-layers", str(n)]


def _layout(view: PlanView) -> str:
    parts = []
    for kinds in view.stage_kinds:
        text, t = "", kinds.count("t")
        if kinds and kinds[0] == "E":
            text += "E"
        if t:
            text += "t" if t == 1 else f"t*{t}"
        if kinds and kinds[-1] == "L":
            text += "L"
        parts.append(text)
    return "|".join(parts)


def _even_default(view: PlanView) -> bool:
    """Megatron's default split: blocks even over stages, E first, L last."""
    blocks = view.blocks_per_stage
    return len(set(blocks)) == 1 and _edges_ok(view)


def _edges_ok(view: PlanView) -> bool:
    kinds = view.stage_kinds
    return kinds[0][:1] == ["E"] and kinds[-1][-1:] == ["L"] and \
        all(k in ("t",) for stage in kinds for k in stage if k not in ("E", "L"))


def _split_args(view: PlanView) -> list[str]:
    """Stage-split flags (empty for Megatron's default even split)."""
    if _even_default(view):
        return []
    blocks = view.blocks_per_stage
    if view.pp >= 3 and len(set(blocks[1:-1])) == 1 and _edges_ok(view) and min(blocks) > 0:
        return ["--decoder-first-pipeline-num-layers", str(blocks[0]),
                "--decoder-last-pipeline-num-layers", str(blocks[-1])]
    return ["--pipeline-model-parallel-layout", _layout(view)]


#: Megatron-LM's default ``--make-vocab-size-divisible-by`` (``arguments.py``).
MEGATRON_VOCAB_MULTIPLE = 128


def null_tokenizer_vocab(vocab: int) -> int:
    """``--vocab-size`` that makes ``NullTokenizer`` build ``vocab`` tokens: it adds one
    end-of-document token (Megatron-Core 0.17.1
    ``megatron/core/tokenizers/text/libraries/null_tokenizer.py``: ``vocab_size`` is
    ``_vocab_size_without_eod + 1``; its checkpoint-converter tests pass 127 for 128)."""
    return max(vocab - 1, 1)


def padded_vocab(vocab: int, tp: int) -> int:
    """The vocabulary rows Megatron-LM builds: ``vocab`` rounded up to a multiple of
    ``make_vocab_size_divisible_by · tp`` (``_vocab_size_with_padding``)."""
    multiple = MEGATRON_VOCAB_MULTIPLE * max(tp, 1)
    return -(-vocab // multiple) * multiple


def bridge_vocab(vocab: int, tp: int) -> int:
    """The ``model.vocab_size`` a Bridge export writes: the model's vocabulary where tp
    divides it, else Megatron-LM's padding (:func:`padded_vocab`). Bridge keeps an
    explicit ``vocab_size`` unpadded (0.3.1 ``training/setup.py``
    ``_validate_and_set_vocab_size``: ``should_pad_vocab`` False), and Megatron-Core's
    ``VocabParallelEmbedding`` splits it over the tp ranks with ``divide`` (an assertion
    where tp does not divide it: GPT-2/GPT-3's 50,257 at tp 8)."""
    return vocab if vocab % max(tp, 1) == 0 else padded_vocab(vocab, tp)


def bridge_vocab_note(view: PlanView) -> list[str]:
    """What a Bridge export says of the vocabulary it pads (:func:`bridge_vocab`)."""
    a = view.arch
    if a is None or bridge_vocab(a.vocab, view.tp) == a.vocab:
        return []
    return [f"model.vocab_size {bridge_vocab(a.vocab, view.tp)}: tp {view.tp} does not divide "
            f"the model's {a.vocab} tokens, and Megatron-Bridge keeps an explicit vocab_size "
            "unpadded while Megatron-Core's VocabParallelEmbedding splits it evenly over the tp "
            f"ranks: written padded as Megatron-LM pads it (a multiple of "
            f"{MEGATRON_VOCAB_MULTIPLE} x tp); the plan was priced with {a.vocab}"]


def vocab_comment(view: PlanView) -> str:
    """The launch file's comment on the vocabulary: the ``NullTokenizer`` stands in for
    the user's tokenizer, and Megatron-LM pads the vocabulary the plan was priced with."""
    a = view.arch
    text = (f"# --tokenizer-type NullTokenizer --vocab-size {null_tokenizer_vocab(a.vocab)}: "
            f"{a.vocab} tokens (NullTokenizer adds an end-of-document token); replace with "
            "your tokenizer")
    rows = padded_vocab(a.vocab, view.tp)
    if rows != a.vocab:
        text += (f"; Megatron-LM pads the embedding and output layer to {rows} rows (a multiple "
                 f"of {MEGATRON_VOCAB_MULTIPLE} x tp {view.tp}), the plan was priced with "
                 f"{a.vocab}")
    return text


def model_args(view: PlanView) -> list[str]:
    """The architecture flags (empty when the model has no recorded architecture)."""
    a = view.arch
    if a is None:
        return []
    args = ["--num-layers", str(a.num_layers), "--hidden-size", str(a.hidden),
            "--ffn-hidden-size", str(a.ffn_hidden or 4 * a.hidden),
            "--num-attention-heads", str(a.heads)]
    if a.mla is None and a.kv_heads != a.heads:
        args += ["--group-query-attention", "--num-query-groups", str(a.kv_heads)]
    if a.mla is None and a.head_dim and a.head_dim * a.heads != a.hidden:
        args += ["--kv-channels", str(a.head_dim)]
    seq = view.seq_len or a.max_positions
    args += ["--seq-length", str(seq), "--max-position-embeddings", str(max(seq, a.max_positions)),
             "--tokenizer-type", "NullTokenizer", "--vocab-size", str(null_tokenizer_vocab(a.vocab))]
    if a.gated:
        args.append("--swiglu")
    else:
        args += list(MEGATRON_PLAIN_ACTIVATIONS.get(a.activation, ()))
    if a.norm == "rmsnorm":
        args += ["--normalization", "RMSNorm"]
    if a.zero_centered_norm:
        args.append("--apply-layernorm-1p")
    if a.learned_positions:
        args += ["--position-embedding-type", "learned_absolute"]
    else:
        args += ["--position-embedding-type", "rope"]
        if a.rope_theta:          # an int in Megatron-LM's parser (type=int)
            args += ["--rotary-base", str(int(round(a.rope_theta)))]
        if llama3_rope_factor(a) is not None:
            args += ["--use-rope-scaling", "--rope-scaling-factor", f"{llama3_rope_factor(a):g}"]
        if a.rotary_fraction != 1.0:
            args += ["--rotary-percent", f"{a.rotary_fraction:g}"]
    if norm_eps_differs(a):
        args += ["--norm-epsilon", f"{a.norm_eps:g}"]
    if not a.tied:
        args.append("--untie-embeddings-and-output-weights")
    if not a.biases:
        args.append("--disable-bias-linear")
    if a.qkv_bias:
        args.append("--add-qkv-bias")
    if a.qk_norm or a.mla is not None:
        # MLA: Megatron-Core builds the q/kv latent RMSNorms (DeepSeek's q_a_layernorm,
        # kv_a_layernorm) into linear_q_up_proj / linear_kv_up_proj only with qk_layernorm
        # (gpt_layer_specs.get_gpt_layer_with_transformer_engine_spec); Megatron-Bridge's
        # DeepSeek providers set it (deepseek_provider.py qk_layernorm = True)
        args.append("--qk-layernorm")
    args += _window_args(a)
    if a.dropout is not None:         # Megatron-LM's defaults are 0.1: the config's, as priced
        args += ["--hidden-dropout", f"{a.dropout[0]:g}", "--attention-dropout", f"{a.dropout[1]:g}"]
    if a.mla is not None:
        q, kv, nope, rope, v = a.mla
        args += ["--multi-latent-attention", "--kv-lora-rank", str(kv), "--qk-head-dim", str(nope),
                 "--qk-pos-emb-head-dim", str(rope), "--v-head-dim", str(v)]
        if q:
            args += ["--q-lora-rank", str(q)]
        found = mla_yarn(a)
        if found:
            args += ["--rope-type", "yarn", "--rotary-scaling-factor", f"{found['rotary_scaling_factor']:g}",
                     "--mscale", f"{found['mscale']:g}", "--mscale-all-dim", f"{found['mscale_all_dim']:g}"]
    if a.is_moe:
        args += ["--num-experts", str(a.num_experts), "--moe-router-topk", str(a.top_k),
                 "--moe-ffn-hidden-size", str(a.moe_ffn_hidden)]
        for key, value in DISPATCHER[view.moe_dispatcher].items():
            args += ["--" + key.replace("_", "-"), value]
        if view.moe_grouped_gemm:
            args.append("--moe-grouped-gemm")
        if a.shared_ffn:
            args += ["--moe-shared-expert-intermediate-size", str(a.shared_ffn)]
            if a.shared_gate:
                args.append("--moe-shared-expert-gate")
        if len(a.moe_layers) != a.num_layers:
            pattern = [1 if i in set(a.moe_layers) else 0 for i in range(a.num_layers)]
            args += ["--moe-layer-freq", _pattern_expr(pattern)]
        r = router_settings(a)
        if r["moe_router_score_function"] != "softmax":
            args += ["--moe-router-score-function", r["moe_router_score_function"]]
        if r["moe_router_pre_softmax"]:
            args.append("--moe-router-pre-softmax")
        if r["moe_router_enable_expert_bias"]:
            args += ["--moe-router-enable-expert-bias", "--moe-router-bias-update-rate",
                     f"{r['moe_router_bias_update_rate']:g}"]
        if r["moe_router_topk_scaling_factor"] is not None:
            args += ["--moe-router-topk-scaling-factor", f"{r['moe_router_topk_scaling_factor']:g}"]
        if r["moe_router_num_groups"] is not None:
            args += ["--moe-router-num-groups", str(r["moe_router_num_groups"]),
                     "--moe-router-group-topk", str(r["moe_router_group_topk"])]
    return args


#: Megatron-Core's default expert-bias update rate (``TransformerConfig.
#: moe_router_bias_update_rate``, "the same as that used in DeepSeekV3"), written with the
#: bias so that a recipe's other rate is replaced.
MEGATRON_BIAS_UPDATE_RATE = 1e-3


def router_settings(a) -> dict:
    """The MoE router of ``a`` (:class:`~autopar_opt.ir.arch.Router`) under Megatron-Core's
    ``TransformerConfig`` names, as ``topk_routing_with_score_function`` (Megatron-Core
    0.17.1 ``moe/moe_utils.py``) runs them: softmax without ``moe_router_pre_softmax`` is
    the softmax of the k largest logits (the renormalised top-k, Mixtral's); with it, the
    softmax over every expert, top-k, not renormalised (``norm_topk_prob: false``); sigmoid
    scores are always renormalised over the k chosen (k > 1), with the expert bias added
    for the choice only (``moe_router_enable_expert_bias``, sigmoid only); the factor
    multiplies the weights in every case; groups are ranked by the sum of their top
    ``topk // group_topk`` scores (``group_limited_topk``). What these cannot say is in
    :func:`router_notes`."""
    from autopar_opt.ir.arch import Router

    r = a.router or Router()
    grouped = r.groups > 1
    return {"moe_router_score_function": r.score,
            "moe_router_pre_softmax": r.score == "softmax" and not r.renormalise,
            "moe_router_enable_expert_bias": r.expert_bias,
            "moe_router_bias_update_rate": MEGATRON_BIAS_UPDATE_RATE,
            "moe_router_topk_scaling_factor": r.scaling if r.scaling != 1.0 else None,
            "moe_router_num_groups": r.groups if grouped else None,
            "moe_router_group_topk": r.group_topk if grouped else None,
            "moe_shared_expert_gate": bool(a.shared_ffn and a.shared_gate)}


def router_notes(a) -> list[str]:
    """What Megatron-Core's router settings (:func:`router_settings`) cannot state of the
    config's router: un-renormalised sigmoid weights, and groups ranked otherwise than by
    the sum of their top ``topk // group_topk`` scores (DeepSeek-V2's ``group_limited_greedy``
    ranks by the best score; DeepSeek-V3's code by the top two)."""
    if a is None or not a.is_moe or a.router is None:
        return []
    r, out = a.router, []
    if r.score == "sigmoid" and not r.renormalise and a.top_k > 1:
        out.append("the config's router does not renormalise its sigmoid top-k weights "
                   "(norm_topk_prob false); Megatron-Core always divides them by their sum "
                   "(topk_routing_with_score_function): the run's expert weights differ")
    if r.groups > 1 and a.top_k // r.group_topk != r.group_rank_top:
        rank = "its best score" if r.group_rank_top == 1 else f"the sum of its top {r.group_rank_top}"
        out.append(f"group-limited routing ({r.group_topk} of {r.groups} groups): the config's "
                   f"router ranks a group by {rank}; Megatron-Core ranks it by the sum of its top "
                   f"topk // group_topk = {a.top_k // r.group_topk} scores (group_limited_topk), "
                   "which no setting changes: the run may choose other groups")
    return out


#: Megatron-Core's normalisation epsilon default (``TransformerConfig.layernorm_epsilon``,
#: Megatron-LM ``--norm-epsilon``): 1e-5.
MEGATRON_NORM_EPS = 1e-5
#: Megatron-Core's Llama 3.x RoPE scaling (``RotaryEmbedding._apply_scaling``): the factor
#: is a flag (``--rope-scaling-factor``), the rest fixed at Llama 3.1's
#: (low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192).
MEGATRON_LLAMA3_SCALING = (1.0, 4.0, 8192)


def norm_eps_differs(a) -> bool:
    """Whether the architecture states an epsilon other than Megatron-Core's default."""
    return a.norm_eps is not None and abs(a.norm_eps - MEGATRON_NORM_EPS) > 1e-12


def llama3_rope_factor(a) -> float | None:
    """The factor of a Llama 3.x RoPE scaling Megatron-Core states with its flags (None
    without one, or for another scaling: :func:`rope_scaling_note`)."""
    r = a.rope_scaling
    if r is None or a.learned_positions or r[0] != "llama3" or r[2:] != MEGATRON_LLAMA3_SCALING:
        return None
    return r[1]


#: The YaRN constants Megatron-Core's ``MLATransformerConfig`` fixes where Megatron-LM has
#: no flag for them: (original_max_position_embeddings, beta_fast, beta_slow).
MEGATRON_MLA_YARN_FIXED = (4096, 32.0, 1.0)


def mla_yarn(a) -> dict:
    """An MLA model's YaRN scaling under Megatron-Core's ``MLATransformerConfig`` names
    (``rope_type`` yarn, ``rotary_scaling_factor``, ``mscale``, ``mscale_all_dim``,
    ``original_max_position_embeddings``, ``beta_fast``, ``beta_slow``: its
    ``YarnRotaryEmbedding``, DeepSeek-V2/V3's), from the config's ``rope_scaling``; empty
    for another model or scaling. Megatron-LM's flags are ``--rope-type yarn
    --rotary-scaling-factor --mscale --mscale-all-dim`` (``_add_mla_args``; its own
    DeepSeek-V2-Lite and DeepSeek-R1 scripts), the other three fixed
    (:data:`MEGATRON_MLA_YARN_FIXED`)."""
    r = a.rope_scaling
    if a.mla is None or r is None or r[0] != "yarn" or r[1] <= 0:
        return {}
    mscale, all_dim, fast, slow = a.yarn or (1.0, 0.0, 32.0, 1.0)
    return {"rope_type": "yarn", "rotary_scaling_factor": r[1], "mscale": mscale,
            "mscale_all_dim": all_dim, "original_max_position_embeddings": r[4] or 4096,
            "beta_fast": fast, "beta_slow": slow}


def rope_scaling_note(a, bridge: bool = False) -> str | None:
    """What a Megatron export says of a RoPE scaling its settings do not state: YaRN,
    linear, dynamic, or Llama 3 scaling with other constants without MLA (the file runs
    plain RoPE at ``--rotary-base`` unless the user adds it), and for an MLA model's YaRN
    (:func:`mla_yarn`, written) the constants Megatron-LM's flags fix otherwise (Bridge,
    ``bridge``, sets them all)."""
    if a is None or a.rope_scaling is None or a.learned_positions or llama3_rope_factor(a):
        return None
    kind, factor, low, high, orig = a.rope_scaling
    yarn = mla_yarn(a)
    if yarn:
        stated = (yarn["original_max_position_embeddings"], yarn["beta_fast"], yarn["beta_slow"])
        if bridge or stated == MEGATRON_MLA_YARN_FIXED:
            return None
        return (f"the config's YaRN scaling has original length {stated[0]}, beta_fast "
                f"{stated[1]:g}, beta_slow {stated[2]:g}; Megatron-LM has no flag for them and "
                "MLATransformerConfig fixes 4096, 32 and 1: the run's positions differ from the "
                "config's (Megatron-Bridge sets them: export --to megatron-bridge)")
    # LongRoPE has no single factor (per-channel short and long lists): its lengths instead
    stated = f"{kind}, original length {orig or '?'}, extended to {a.max_positions or '?'}" \
        if kind == "longrope" else (
            f"{kind}, factor {factor:g}"
            + (f", low/high frequency factors {low:g}/{high:g}" if low or high else "")
            + (f", original length {orig}" if orig else ""))
    words = f"the config's RoPE scaling ({stated}) is not written: "
    if a.mla is not None:
        return words + ("Megatron-Core's multi-latent attention takes YaRN scaling only "
                        "(--rope-type yarn); the run trains plain RoPE")
    return words + ("Megatron-LM's flags state Llama 3.x scaling with its fixed constants for "
                    "standard attention (--use-rope-scaling; --rope-type yarn is for multi-latent "
                    "attention only, validate_args); the run trains plain RoPE")


def window_settings(a) -> dict:
    """Megatron-Core's sliding-window settings of the architecture ``a``
    (``TransformerConfig.window_size``, ``window_attn_skip_freq``): a window of ``w``
    keys per query is ``window_size=(w-1, 0)`` (Transformer Engine: the query at ``i``
    attends to the keys ``i-(w-1)..i``; :mod:`autopar_opt.ir.window`), and where only
    some layers have it, the list pattern with 1 on each windowed layer
    (``megatron/core/transformer/utils.py`` ``is_layer_window_attention``); empty
    without windows. One window size per model (the only form Megatron-Core takes)."""
    if not a.window:
        return {}
    out: dict = {"window_size": (a.window - 1, 0)}
    if not all(a.windows):
        out["window_attn_skip_freq"] = [1 if w else 0 for w in a.windows]
    return out


def _window_args(a) -> list[str]:
    """:func:`window_settings` as Megatron-LM flags (``--window-size`` is parsed by
    ``tuple_type``: ``"4095,0"``; ``--window-attn-skip-freq`` by ``moe_freq_type``: a
    list expression)."""
    found = window_settings(a)
    args = []
    if "window_size" in found:
        left, right = found["window_size"]
        args += ["--window-size", f"{left},{right}"]
    if "window_attn_skip_freq" in found:
        args += ["--window-attn-skip-freq", _pattern_expr(found["window_attn_skip_freq"])]
    return args


def _pattern_expr(pattern: list[int]) -> str:
    """``--moe-layer-freq`` as Megatron's list expression: ``([0]*3+[1]*58)``."""
    runs: list[list[int]] = []
    for x in pattern:
        if runs and runs[-1][0] == x:
            runs[-1][1] += 1
        else:
            runs.append([x, 1])
    return "(" + "+".join(f"[{x}]*{n}" for x, n in runs) + ")"


def precision_args(dtype: str) -> list[str]:
    """Megatron-LM's precision flags for the plan's compute dtype."""
    return {"bf16": ["--bf16"], "fp16": ["--fp16"],
            "fp8": ["--bf16", "--fp8-format", "hybrid", "--fp8-recipe", "delayed"]}.get(dtype, [])


#: Megatron-Core's token-dispatcher settings of each runtime ``moe_dispatcher``: the
#: plain all-to-all, or the ``flex`` dispatcher on DeepEP (``moe_flex_dispatcher_backend``;
#: ``TransformerConfig.__post_init__`` accepts the backend only with ``flex``).
DISPATCHER = {"alltoall": {"moe_token_dispatcher_type": "alltoall"},
              "deepep": {"moe_token_dispatcher_type": "flex",
                         "moe_flex_dispatcher_backend": "deepep"}}

#: Megatron-LM's ``--cp-comm-type`` value of each runtime ``cp_comm_type``.
CP_COMM_TYPE = {"p2p": "p2p", "all_gather": "allgather", "a2a": "a2a"}


def megatron_env(view: PlanView) -> dict[str, str]:
    """Environment the arguments need (``validate_args``): FSDP wants
    ``CUDA_DEVICE_MAX_CONNECTIONS`` other than 1, tensor or context parallelism
    without it wants 1 (Hopper and earlier). A plan priced with one kernel per
    grouped expert GEMM (runtime ``moe_expert_kernels`` ``grouped``) turns on
    Transformer Engine's CUTLASS grouped GEMM (``NVTE_USE_CUTLASS_GROUPED_GEMM=1``,
    read by ``nvte_multi_tensor_gemm``; Hopper only, elsewhere TE falls back to one
    cuBLAS GEMM per expert)."""
    env: dict[str, str] = {}
    if view.zero >= 2 and view.dp * view.cp > 1:
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = "8"
    elif view.tp > 1 or view.cp > 1:
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    if view.has_moe and view.moe_grouped_gemm and view.moe_one_kernel:
        env["NVTE_USE_CUTLASS_GROUPED_GEMM"] = "1"
    return env


def overlap_args(view: PlanView) -> list[str]:
    """The overlap flags of the plan's pricing (Megatron-LM leaves all three off):
    ``--overlap-grad-reduce`` where gradients are reduced (``dp·cp`` > 1);
    ``--overlap-param-gather`` with it under the distributed optimizer or Megatron-FSDP
    (``validate_args``: "only supported with distributed optimizer, megatron fsdp, or
    dist_muon", "Must use --overlap-param-gather with --overlap-grad-reduce");
    ``--tp-comm-overlap`` (Transformer Engine user buffers) with sequence parallelism
    ("Tensor parallel communication/GEMM overlap can happen only when sequence
    parallelism is enabled"; without it the cost model exposes the all-reduces)."""
    args = []
    reduce = view.grad_reduce_overlap and view.dp * view.cp > 1
    if reduce:
        args.append("--overlap-grad-reduce")
    if reduce and view.param_gather_overlap and view.zero >= 1:
        args.append("--overlap-param-gather")
    if view.tp_comm_overlap and view.tp > 1 and view.sp:
        args.append("--tp-comm-overlap")
    return args


def megatron_args(view: PlanView) -> list[str]:
    """The complete Megatron-LM arguments of a runnable plan (architecture,
    parallelism, batch, precision, sharding, recomputation, pipeline split)."""
    args = model_args(view)
    args += ["--tensor-model-parallel-size", str(view.tp),
             "--pipeline-model-parallel-size", str(view.pp),
             "--context-parallel-size", str(view.cp)]
    if view.cp > 1 and view.cp_comm_type != "p2p":
        args += ["--cp-comm-type", CP_COMM_TYPE[view.cp_comm_type]]
    if view.has_moe:
        args += ["--expert-model-parallel-size", str(view.ep),
                 "--expert-tensor-parallel-size", str(view.etp)]
    if view.sp and view.tp > 1:
        args.append("--sequence-parallel")
    args += ["--micro-batch-size", str(view.micro_batch_size),
             "--global-batch-size", str(view.global_batch_size)]
    if view.seq_len and view.arch is None:
        args += ["--seq-length", str(view.seq_len)]
    args += precision_args(view.dtype)
    if view.zero == 1:
        args.append("--use-distributed-optimizer")
    elif view.zero >= 2:
        args += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", _FSDP[view.zero],
                 "--ckpt-format", "fsdp_dtensor"]
    if view.zero >= 1 and view.replicas > 1:
        args += ["--num-distributed-optimizer-instances", str(view.replicas)]
    args += overlap_args(view)
    args += _recompute_args(view) or []
    args += _split_args(view)
    if view.vp_chunks > 1:
        args += ["--num-virtual-stages-per-pipeline-rank", str(view.vp_chunks)]
    return args


#: The MLP activation under Bridge's names (``megatron.bridge.utils.activation_map``,
#: Bridge 0.4 and later: ``ACTIVATION_FUNC_MAP``, read back by ``str_to_callable``), by
#: :class:`ModelArch` ``activation``: the function Megatron-LM's flags select
#: (``--swiglu``: SiLU gating, default GELU, ``--squared-relu``; ``arguments.py``
#: ``core_transformer_config_from_args``).
BRIDGE_ACTIVATIONS = {"silu": "silu", "gelu": "gelu", "relu2": "squared_relu"}
#: Said with a Bridge export whose plan hides tensor-parallel traffic behind its GEMMs:
#: Bridge sets user-buffer overlap from the recipe's ``comm_overlap`` section
#: (``CommOverlapConfig.setup``), tuned per shape, which these overrides leave as it is.
BRIDGE_TP_OVERLAP_NOTE = (
    "tp_comm_overlap: the plan was priced with Transformer Engine's tensor-parallel "
    "communication overlap; Megatron-Bridge takes it from the recipe's comm_overlap "
    "(CommOverlapConfig(tp_comm_overlap=True, ...), as its Llama 3 performance recipes "
    "set it): merge into such a recipe, or the tensor-parallel collectives run exposed")
#: Said with every Bridge export: Bridge 0.3 keeps the recipe provider's function.
BRIDGE_ACTIVATION_NOTE = (
    "activation_func {name}: Megatron-Bridge 0.4 and later read it from this file; 0.3.x "
    "restores the recipe provider's activation_func after the overrides "
    "(omegaconf_utils._restore_excluded_fields), so with 0.3.x merge into a recipe whose "
    "provider runs {name} (GPTModelProvider runs gelu)")


def bridge_activation(a) -> str | None:
    """The activation a Bridge export states for ``a`` (None: no architecture)."""
    return None if a is None else BRIDGE_ACTIVATIONS.get(a.activation)


def _bridge_arch(a, moe_grouped_gemm: bool = True, dispatcher: str = "alltoall") -> dict:
    """The architecture under Bridge's ``model.*`` names (``GPTModelProvider`` /
    ``MLAModelProvider`` fields), the same settings as :func:`model_args`; fields a
    recipe may set differently are written even where they are the default."""
    model = dict(num_layers=a.num_layers, hidden_size=a.hidden,
                 ffn_hidden_size=a.ffn_hidden or 4 * a.hidden, num_attention_heads=a.heads,
                 vocab_size=a.vocab, gated_linear_unit=a.gated, add_bias_linear=a.biases,
                 add_qkv_bias=a.qkv_bias, qk_layernorm=a.qk_norm or a.mla is not None,
                 normalization="RMSNorm" if a.norm == "rmsnorm" else "LayerNorm",
                 share_embeddings_and_output_weights=a.tied,
                 # GPTModelProvider's default is learned_absolute
                 position_embedding_type="learned_absolute" if a.learned_positions else "rope")
    if not a.learned_positions and a.rope_theta:
        model["rotary_base"] = int(round(a.rope_theta))
    if not a.learned_positions:
        model["rotary_percent"] = a.rotary_fraction
    if llama3_rope_factor(a) is not None:
        model.update(rope_scaling=True, rope_scaling_factor=llama3_rope_factor(a))
    if norm_eps_differs(a):
        model["layernorm_epsilon"] = a.norm_eps
    model["layernorm_zero_centered_gamma"] = a.zero_centered_norm
    if bridge_activation(a):
        model["activation_func"] = bridge_activation(a)
    if not a.gated and (not a.biases or a.activation != "gelu"):
        # Megatron-LM: no bias turns bias_gelu_fusion off (validate_args), and Megatron-Core
        # fuses a bias only into GELU, SiLU or quick-GELU (TransformerConfig.__post_init__)
        model["bias_activation_fusion"] = False
    if a.mla is None:
        model["num_query_groups"] = a.kv_heads
        if a.head_dim and a.head_dim * a.heads != a.hidden:
            model["kv_channels"] = a.head_dim
    else:       # read by Bridge's MLAModelProvider (Megatron-Core's MLATransformerConfig)
        q, kv, nope, rope, v = a.mla
        model.update(multi_latent_attention=True, q_lora_rank=q or None, kv_lora_rank=kv,
                     qk_head_dim=nope, qk_pos_emb_head_dim=rope, v_head_dim=v)
        # MLATransformerConfig's YaRN defaults are DeepSeek-V3's (factor 40): the config's
        # scaling, or none (factor 1 with mscale 1: plain RoPE, as Bridge's DeepSeek bridges
        # set for a config without rope_scaling)
        model.update(mla_yarn(a) or {"rope_type": "yarn", "rotary_scaling_factor": 1.0,
                                     "mscale": 1.0, "mscale_all_dim": 1.0})
    if a.dropout is not None:
        model.update(hidden_dropout=a.dropout[0], attention_dropout=a.dropout[1])
    found = window_settings(a)
    if found:
        model.update(window_size=list(found["window_size"]),
                     window_attn_skip_freq=found.get("window_attn_skip_freq"))
    if a.is_moe:
        model.update(num_moe_experts=a.num_experts, moe_router_topk=a.top_k,
                     moe_ffn_hidden_size=a.moe_ffn_hidden, **DISPATCHER[dispatcher],
                     moe_grouped_gemm=moe_grouped_gemm)
        if a.shared_ffn:
            model["moe_shared_expert_intermediate_size"] = a.shared_ffn
        # every router setting, a recipe's own replaced (a DeepSeek recipe's sigmoid router)
        model.update(router_settings(a))
        if len(a.moe_layers) != a.num_layers:
            model["moe_layer_freq"] = [1 if i in set(a.moe_layers) else 0
                                       for i in range(a.num_layers)]
    else:
        model["num_moe_experts"] = None
    return model


def bridge_overrides(view: PlanView) -> dict[str, dict]:
    """The plan as Megatron-Bridge ``ConfigContainer`` overrides (YAML mapping of
    sections), the same settings as :func:`megatron_args` under Bridge's names.

    The file is merged into a recipe that has its own parallelism, recomputation,
    pipeline split and sharding, so every setting the plan decides is written, also
    where the plan takes the default (``virtual_pipeline_model_parallel_size: null``,
    ``recompute_granularity: null``, ``use_megatron_fsdp: false``, ...): what the recipe
    had there is replaced, not kept."""
    a = view.arch
    model: dict = _bridge_arch(a, view.moe_grouped_gemm, view.moe_dispatcher) if a is not None else {}
    if a is not None and bridge_vocab(a.vocab, view.tp) != a.vocab:
        model["vocab_size"] = bridge_vocab(a.vocab, view.tp)
    if a is not None or view.seq_len:
        model["seq_length"] = view.seq_len or a.max_positions
    model.update(tensor_model_parallel_size=view.tp, pipeline_model_parallel_size=view.pp,
                 context_parallel_size=view.cp, sequence_parallel=bool(view.sp and view.tp > 1),
                 expert_model_parallel_size=view.ep if view.has_moe else 1,
                 expert_tensor_parallel_size=view.etp if view.has_moe else None,
                 virtual_pipeline_model_parallel_size=view.vp_chunks if view.vp_chunks > 1 else None)
    if view.cp > 1:       # TransformerConfig.cp_comm_type: the exchange the plan was priced with
        model["cp_comm_type"] = CP_COMM_TYPE[view.cp_comm_type]
    rc = _recompute_args(view) or []
    # recompute_modules: the attention core, Megatron-Core's default and what "selective" is
    # priced as; a recipe's own list (Qwen3-Next's layernorm, moe, moe_act) is replaced
    model.update(recompute_granularity=rc[1] if rc else None,
                 recompute_method=rc[3] if len(rc) > 2 else None,
                 recompute_num_layers=int(rc[5]) if len(rc) > 2 else None,
                 recompute_modules=["core_attn"] if rc[1:2] == ["selective"] else None)
    split = _split_args(view)
    layout = split[1] if split and split[0] == "--pipeline-model-parallel-layout" else None
    first_last = (int(split[1]), int(split[3])) if split and layout is None else (None, None)
    model.update(pipeline_model_parallel_layout=layout,
                 num_layers_in_first_pipeline_stage=first_last[0],
                 num_layers_in_last_pipeline_stage=first_last[1])
    fsdp = view.zero >= 2
    out: dict[str, dict] = {
        "model": model,
        "train": {"micro_batch_size": view.micro_batch_size,
                  "global_batch_size": view.global_batch_size},
        # ConfigContainer.validate: the dataset's sequence length must equal the model's
        **({"dataset": {"seq_length": model["seq_length"]}} if "seq_length" in model else {}),
        "ddp": {"use_distributed_optimizer": view.zero == 1, "use_megatron_fsdp": fsdp},
        "optimizer": {"use_distributed_optimizer": view.zero == 1},
        # validate() turns Megatron-FSDP on for both when either section asks for it
        "dist": {"use_megatron_fsdp": fsdp},
        # Megatron-FSDP saves only fsdp_dtensor; that format is refused without it
        "checkpoint": {"ckpt_format": "fsdp_dtensor" if fsdp else "torch_dist"},
    }
    # the data-parallel overlaps as priced (Megatron-LM's flags: overlap_args)
    flags = overlap_args(view)
    out["ddp"].update(overlap_grad_reduce="--overlap-grad-reduce" in flags,
                      overlap_param_gather="--overlap-param-gather" in flags)
    if fsdp:
        out["ddp"]["data_parallel_sharding_strategy"] = _FSDP[view.zero]
    if view.zero >= 1 and view.replicas > 1:
        # initialize.py passes it to the parallel state (its intra/inter-partial groups)
        out["ddp"]["num_distributed_optimizer_instances"] = view.replicas
    if view.dtype in ("bf16", "fp16", "fp8"):
        # Bridge's registered recipes (training/mixed_precision.py); FP8 as its
        # performance recipes run it (current scaling)
        out["mixed_precision"] = {"bf16": "bf16_mixed", "fp16": "fp16_mixed",
                                  "fp8": "bf16_with_fp8_current_scaling_mixed"}[view.dtype]
    return out


# --------------------------------------------------------------------- import
@functools.cache
def megatron_lm_flags() -> tuple[str, frozenset[str]]:
    """(Megatron-LM version, every ``--flag`` of its ``parse_args``): the package data
    ``megatron_lm_flags.yaml``, read from Megatron-LM's own parser (its header)."""
    import yaml

    text = resources.files("autopar_opt.export").joinpath("megatron_lm_flags.yaml").read_text()
    data = yaml.safe_load(text)
    return str(data["megatron_core"]), frozenset(data["flags"])


def _positive_int(text: str) -> int:
    """A size or degree of the command line: a whole number of at least 1. Megatron-LM's
    validate_args asserts ``micro_batch_size > 0`` and ``global_batch_size > 0``
    (megatron/training/arguments.py, 0.17.1) and divides the world size by tp·pp·cp; a
    0 or a negative number was read before and priced as something else (QA round 34:
    ``--micro-batch-size 0`` was priced as 1 without a word)."""
    value = int(text)          # ValueError: argparse's "invalid _positive_int value"
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive integer (Megatron-LM "
                                         "runs none of 0 or fewer)")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse, except that a flag it cannot read raises :class:`MegatronArgsError` with
    argparse's own words (the flag, the value, why), instead of printing argparse's usage
    of the importer's parser on stderr and exiting (QA round 34: 40 lines of
    ``usage: autopar [--tensor-model-parallel-size ...]`` before the error, which said only
    "a flag has an invalid value")."""

    def error(self, message: str):  # type: ignore[override]
        raise MegatronArgsError(f"{message.replace('_positive_int', 'positive integer')} "
                                "(Megatron-LM's parse_args or validate_args would refuse it)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(add_help=False, allow_abbrev=False)
    for flag, default in (("--tensor-model-parallel-size", 1), ("--pipeline-model-parallel-size", 1),
                          ("--context-parallel-size", 1), ("--expert-model-parallel-size", 1),
                          ("--expert-tensor-parallel-size", None), ("--micro-batch-size", None),
                          ("--global-batch-size", None), ("--seq-length", None),
                          ("--num-virtual-stages-per-pipeline-rank", None),
                          ("--num-layers-per-virtual-pipeline-stage", None),
                          ("--num-layers", None), ("--num-distributed-optimizer-instances", 1)):
        p.add_argument(flag, type=_positive_int, default=default)
    for flag in ("--recompute-num-layers", "--decoder-first-pipeline-num-layers",
                 "--decoder-last-pipeline-num-layers"):
        p.add_argument(flag, type=int, default=None)
    # offloading: checked against training.activation_offload, or refused where the plan has
    # no term for it (export.megatron_import.offload_problems)
    p.add_argument("--cpu-offloading-num-layers", type=int, default=0)
    for flag in ("--optimizer-cpu-offload", "--fine-grained-activation-offloading"):
        p.add_argument(flag, action="store_true")
    for flag in ("--sequence-parallel", "--use-distributed-optimizer", "--use-megatron-fsdp",
                 "--use-torch-fsdp2", "--torch-fsdp2-no-reshard-after-forward",
                 "--recompute-activations", "--fp16", "--bf16",
                 "--group-query-attention", "--untie-embeddings-and-output-weights",
                 # the embedding / loss counted as a layer of the even stage split
                 # (export.megatron_import._block_counts)
                 "--account-for-embedding-in-pipeline-split",
                 "--account-for-loss-in-pipeline-split"):
        p.add_argument(flag, action="store_true")
    for flag in ("--hidden-size", "--num-attention-heads", "--ffn-hidden-size",
                 "--num-query-groups", "--num-experts", "--kv-channels",
                 "--vocab-size"):                            # checked against the model
        p.add_argument(flag, type=_positive_int, default=None)
    # runtime behaviour: priced from training.runtime, said where the command line differs
    # (export.megatron_import.runtime_flag_notes)
    for flag in ("--overlap-grad-reduce", "--overlap-param-gather", "--tp-comm-overlap",
                 "--use-flash-attn"):
        p.add_argument(flag, action="store_true")
    p.add_argument("--mtp-num-layers", type=int, default=None)
    p.add_argument("--cp-comm-type", nargs="+", default=None)
    p.add_argument("--moe-token-dispatcher-type", default=None)
    p.add_argument("--moe-flex-dispatcher-backend", default=None)
    p.add_argument("--moe-grouped-gemm", action="store_true")
    p.add_argument("--attention-backend", default=None)
    p.add_argument("--transformer-impl", default=None)
    p.add_argument("--fp8-format", default=None)
    # Megatron-Core's Fp8Recipe (enums.py); mxfp8 is checked against the device
    # (export.megatron_import.precision_reading)
    p.add_argument("--fp8-recipe", default="delayed",
                   choices=["tensorwise", "delayed", "mxfp8", "blockwise", "custom"])
    p.add_argument("--recompute-granularity", choices=["full", "selective"], default=None)
    p.add_argument("--recompute-method", choices=["uniform", "block"], default=None)
    p.add_argument("--recompute-modules", nargs="*", default=None)
    p.add_argument("--data-parallel-sharding-strategy", default="no_shard")
    p.add_argument("--pipeline-model-parallel-layout", default=None)
    return p


def cpu_offload_refusals(n: int, layers: int, pp: int, recompute: str | None) -> list[str]:
    """Why Megatron-Core 0.17.1 refuses ``--cpu-offloading-num-layers n`` (``n > 0``) on a
    model of ``layers`` transformer layers with ``pp`` pipeline stages and ``recompute``
    (the recomputation's name, or None), as ``TransformerConfig.__post_init__`` says it;
    empty where it runs. The Megatron export (:func:`autopar_opt.export.megatron_offload_layers`)
    and import (:func:`autopar_opt.export.megatron_import.offload_problems`) both hold to it."""
    rules = ((n >= layers, f"CPU offloading can be done only for layers less than {layers}"),
             (pp > 1, "there is no support for pipeline parallelism with CPU offloading "
                      f"(--pipeline-model-parallel-size {pp})"),
             (recompute is not None, "CPU offloading does not work when activation "
                                     f"recomputation ({recompute}) is enabled"))
    return [why for bad, why in rules if n > 0 and bad]


class MegatronArgsError(ValueError):
    """Arguments that cannot be read (an unparsable value or layout, an unknown flag, a
    flag the model or the spec contradicts); ``problems`` lists each one."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = problems or [message]
        super().__init__("; ".join(self.problems))


def _megatron_argv(argv: list[str]) -> list[str]:
    """The arguments ``pretrain_*.py`` receives: what follows the first ``*.py`` of a
    launch line (``torchrun --nproc-per-node 8 pretrain_gpt.py ...``: torchrun's own
    options are not Megatron's), the whole list when none is named."""
    script = next((i for i, a in enumerate(argv) if a.endswith(".py")), None)
    return argv if script is None else argv[script + 1:]


#: Short spellings people write for Megatron-LM's long flags (other launchers' names), which
#: the closest-spelling suggestion missed ("--tp": "did you mean '--sft'?"; QA round 10).
SHORT_FLAGS = {"--tp": "--tensor-model-parallel-size", "--pp": "--pipeline-model-parallel-size",
               "--cp": "--context-parallel-size", "--ep": "--expert-model-parallel-size",
               "--etp": "--expert-tensor-parallel-size", "--vp": "--num-virtual-stages-per-pipeline-rank",
               "--mbs": "--micro-batch-size", "--gbs": "--global-batch-size",
               "--sp": "--sequence-parallel"}


#: A line continuation (``\`` before the end of the line) as a folded or plain YAML scalar
#: writes it: ``24 \`` + newline + ``--hidden-size`` becomes ``24 \ --hidden-size``, which
#: shlex reads as one argument `` --hidden-size`` (an escaped space), not a flag: argparse
#: left it and its value unread, and the line was priced on Megatron's default without a
#: word (an export pasted into a spec lost ``--micro-batch-size 2``: 1.204 s, not 1.103 s).
#: A backslash before the end of a line, or before blanks and a ``-``, is a continuation.
_FOLDED_CONTINUATION = re.compile(r"\\[ \t]*(?:\r?\n|[ \t]+(?=-))")


def _mangled_flags(argv: list[str]) -> list[str]:
    """Arguments that are a flag argparse cannot see as one, each with why: leading
    whitespace (an escaped space before it), or an en or em dash where ``--`` belongs (a
    word processor's substitution). Megatron-LM's own parser refuses both as unrecognised
    arguments; here they would be left unread, their value with them."""
    out = []
    for a in argv:
        if a[:1].isspace() and a.lstrip().startswith("-"):
            out.append(f"{a!r}: a flag with whitespace before it (a backslash before a space "
                       "escapes the space); remove the backslash")
        elif a[:1] in ("\u2013", "\u2014"):
            out.append(f"{a!r}: starts with {a[0]!r}, not '--' (a word processor's dash); "
                       "write two hyphens")
    return out


def parse_megatron_args(text: str | list[str]) -> argparse.Namespace:
    """Read the parallelism, batch, recomputation and precision flags of a Megatron-LM
    command line, and the model dimensions it states (checked against the spec's model
    by :func:`~autopar_opt.export.megatron_import.plan_from_megatron`); the other flags of
    Megatron-LM (data, optimizer, logging, ...) do not change the price and are ignored.
    A flag Megatron-LM does not have (:func:`megatron_lm_flags`) is refused, every one
    named at once: Megatron-LM itself would refuse the command line."""
    try:
        argv = shlex.split(_FOLDED_CONTINUATION.sub(" ", text), comments=True) \
            if isinstance(text, str) else list(text)
    except ValueError as exc:        # shlex: "No closing quotation", "No escaped character"
        raise MegatronArgsError(f"cannot split the command line into arguments ({exc}); close "
                                "every quote") from None
    argv = _megatron_argv(argv)
    if mangled := _mangled_flags(argv):
        raise MegatronArgsError("", mangled)
    argv = [a.replace("_", "-") if a.startswith("--") else a for a in argv]
    version, known = megatron_lm_flags()
    unknown = list(dict.fromkeys(a.split("=", 1)[0] for a in argv
                                 if a.startswith("--") and a.split("=", 1)[0] not in known))
    if unknown:
        raise MegatronArgsError("", [f"{flag}: Megatron-LM {version} has no such argument (its "
                                     f"parse_args would refuse the command line)"
                                     + (f" (did you mean {SHORT_FLAGS[flag]!r}?)" if flag in SHORT_FLAGS
                                        else did_you_mean(flag, known)) for flag in unknown])
    if not argv:       # Megatron's defaults throughout: said, not assumed (QA round 10)
        raise MegatronArgsError("the command line is empty: give the run's Megatron-LM "
                                "arguments (at least --tensor-model-parallel-size, "
                                "--pipeline-model-parallel-size, --micro-batch-size)")
    args, _ = _parser().parse_known_args(argv)     # _Parser: MegatronArgsError, never an exit
    return args


def expand_layout(layout: str) -> list[list[str]]:
    """``--pipeline-model-parallel-layout`` → per-stage lists of E/t/L/m codes.

    Repeats ``x*N`` and ``(group)*N`` are expanded; ``,`` is ignored.
    """
    text = layout.replace(",", "").replace(" ", "")
    group = re.compile(r"\(([^()]*)\)\*(\d+)")
    while group.search(text):
        text = group.sub(lambda m: m.group(1) * int(m.group(2)), text)
    text = re.sub(r"([EtLm])\*(\d+)", lambda m: m.group(1) * int(m.group(2)), text)
    if re.search(r"[^EtLm|]", text):
        raise MegatronArgsError(f"pipeline layout {layout!r}: unknown symbols (expected E, t, "
                                "L, m, '|', 'x*N' and '(...)*N')")
    return [list(stage) for stage in text.split("|")]
