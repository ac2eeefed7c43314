"""Megatron-Bridge's own checks on exported ConfigContainer overrides, run in the Bridge
environment (a subprocess started by tests/support/bridge.py; see there for why).

Reads a JSON list of cases on stdin, ``{"name", "path", "world", "gpus_per_node",
"recipe"}``, and writes a JSON list of results on stdout: for each case either
``{"ok": true, "derived": {...}}`` (what Bridge and Megatron-Core derived) or
``{"ok": false, "error": "<ExceptionType>: <message>"}``. For each case, as a
Bridge launch does it:

1. a pre-training recipe (``"recipe"``): ``megatron.bridge.recipes.common.
   _pretrain_common()`` with ``cfg.model`` a ``GPTModelProvider`` (``MLAModelProvider``
   where the overrides set ``multi_latent_attention``) and the NullTokenizer, as
   Bridge's own recipes build theirs (``"pretrain_common"``), or Bridge's published
   GPT-3 175B recipe ``gpt3_175b_pretrain_config()`` (``"gpt3_175b"``: TP 4, PP 8, VP 6,
   sequence parallelism, TP communication overlap), whose settings the overrides must
   replace (the other model recipes load a Hugging Face config over the network);
2. the exported file merged with Bridge's ``process_config_with_overrides(cfg,
   config_filepath=...)`` (``training/utils/omegaconf_utils.py``). Bridge only logs a
   warning for a key the container does not have, or a value it could not set; here
   such a warning is an error, so an override Bridge would drop cannot pass;
3. ``runtime_config_update(cfg)`` with ``WORLD_SIZE`` the plan's device count, what
   ``pretrain()`` runs first: the mixed-precision recipe applied to model, optimizer
   and DDP settings, the data-parallel size from the world size, and
   ``ConfigContainer.validate()`` (every sub-config's ``finalize``, among them
   Megatron-Core's ``TransformerConfig.__post_init__`` / ``DistributedDataParallelConfig``
   / ``OptimizerConfig`` checks, the distributed-optimizer sync, Megatron-FSDP's
   checkpoint format, sequence length against 2·cp and against the dataset's);
4. what ``initialize_megatron`` does next before it needs a GPU: Megatron-Core's
   ``init_num_microbatches_calculator`` with the config's batch sizes and data-parallel
   size, then Bridge's own ``_initialize_distributed`` (which calls
   ``parallel_state.initialize_model_parallel`` with the model's tp/pp/vp/cp/ep/etp)
   on a fake process group of the plan's world size, with ``torch.cuda.device_count``
   answering the plan's GPUs per node (there is no GPU; its ``torch.distributed``
   start-up is skipped because the fake group is already up);
5. the transformer layers each pipeline rank and virtual stage builds
   (``get_num_layers_to_build``, its divisibility asserts).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
import traceback
import types
import warnings
from unittest import mock

from support import te_shim


class _Refusals(logging.Handler):
    """Bridge's override utility logs, and skips, what it cannot apply: collect it."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if "not found in config object" in msg or "Could not set attribute" in msg \
                or "Failed to instantiate" in msg:
            self.messages.append(msg)


def _fake_world(world: int) -> None:
    import torch.distributed as dist
    from megatron.core import parallel_state
    from torch.testing._internal.distributed.fake_pg import FakeStore

    parallel_state.destroy_model_parallel()
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)


def _recipes_package() -> None:
    """Make ``megatron.bridge.recipes.common`` importable without the package's
    ``__init__``, which imports every model family's recipes, the vision-language ones
    through ``megatron-energon`` (a data loader with S3 and webdataset dependencies,
    not needed for configuration): the package is registered with its real path and
    its modules load from Bridge's own files."""
    import megatron.bridge

    name = "megatron.bridge.recipes"
    if name not in sys.modules:
        pkg = types.ModuleType(name)
        pkg.__path__ = [os.path.join(os.path.dirname(megatron.bridge.__file__), "recipes")]
        pkg.__package__ = name
        sys.modules[name] = pkg


def check(case: dict) -> dict:
    """One exported file through Bridge's launch-time checks (module docstring)."""
    import torch
    from megatron.bridge.models import GPTModelProvider
    from megatron.bridge.models.mla_provider import MLAModelProvider
    from megatron.bridge.recipes.common import _pretrain_common
    from megatron.bridge.recipes.utils.tokenizer_utils import DEFAULT_NULL_TOKENIZER_VOCAB_SIZE
    from megatron.bridge.training import initialize
    from megatron.bridge.training.config import runtime_config_update
    from megatron.bridge.training.utils.omegaconf_utils import process_config_with_overrides
    from megatron.core import num_microbatches_calculator as nmc
    from megatron.core import parallel_state as ps
    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    from megatron.core.transformer.utils import is_layer_window_attention

    import yaml

    world = int(case["world"])
    os.environ.update(WORLD_SIZE=str(world), RANK="0", LOCAL_RANK="0")
    mla = bool((yaml.safe_load(open(case["path"])).get("model") or {}).get("multi_latent_attention"))
    if case["recipe"] == "gpt3_175b":      # a published recipe: TP4 PP8 VP6 SP, comm overlap
        from megatron.bridge.recipes.gpt.gpt3_175b import gpt3_175b_pretrain_config
        cfg = gpt3_175b_pretrain_config()
        # its TP communication overlap needs Transformer Engine's userbuffers, and its
        # embedding-wgrad deferral needs gradient-accumulation fusion (a fused CUDA kernel
        # Bridge switches off without one): neither can run here, so it is dropped
        cfg.comm_overlap = None
    else:
        cfg = _pretrain_common()
        cfg.model = MLAModelProvider() if mla else GPTModelProvider()
        cfg.tokenizer.tokenizer_type = "NullTokenizer"
        cfg.tokenizer.tokenizer_model = None
        cfg.tokenizer.vocab_size = DEFAULT_NULL_TOKENIZER_VOCAB_SIZE

    before = {"tp": cfg.model.tensor_model_parallel_size, "pp": cfg.model.pipeline_model_parallel_size,
              "vp": cfg.model.virtual_pipeline_model_parallel_size,
              "sequence_parallel": cfg.model.sequence_parallel,
              "position_embedding_type": cfg.model.position_embedding_type}
    refusals = _Refusals()
    log = logging.getLogger("megatron.bridge.training.utils.omegaconf_utils")
    log.addHandler(refusals)
    try:
        process_config_with_overrides(cfg, config_filepath=case["path"])
    finally:
        log.removeHandler(refusals)
    if refusals.messages:
        raise ValueError("Bridge's process_config_with_overrides skipped overrides: "
                         + "; ".join(refusals.messages))

    import torch.distributed as dist
    if dist.is_initialized():              # get_world_size_safe: the group's size first
        ps.destroy_model_parallel()
        dist.destroy_process_group()
    runtime_config_update(cfg)

    nmc.destroy_num_microbatches_calculator()
    nmc.init_num_microbatches_calculator(0, cfg.train.rampup_batch_size, cfg.train.global_batch_size,
                                         cfg.train.micro_batch_size, cfg.data_parallel_size,
                                         cfg.train.decrease_batch_size_if_needed)
    _fake_world(world)
    # the fake backend cannot create Gloo groups (CPU-side copies of the same rank sets,
    # used by checkpointing): built without them, after validate() ran with Bridge's default
    cfg.dist.use_gloo_process_groups = False
    with mock.patch.object(torch.cuda, "device_count", lambda: int(case["gpus_per_node"])):
        initialize._initialize_distributed(
            model_config=cfg.model, dist_config=cfg.dist,
            num_distributed_optimizer_instances=cfg.ddp.num_distributed_optimizer_instances,
            get_embedding_ranks=None, get_position_embedding_ranks=None)
    m = cfg.model
    vp = m.virtual_pipeline_model_parallel_size
    per_rank = None if m.pipeline_model_parallel_layout is not None else [
        sum(get_num_layers_to_build(m, vp_stage=v if vp else None, pp_rank=r) for v in range(vp or 1))
        for r in range(m.pipeline_model_parallel_size)]
    derived = {
        "tp": ps.get_tensor_model_parallel_world_size(), "pp": ps.get_pipeline_model_parallel_world_size(),
        "cp": ps.get_context_parallel_world_size(), "dp": ps.get_data_parallel_world_size(),
        "ep": ps.get_expert_model_parallel_world_size(),
        "etp": ps.get_expert_tensor_parallel_world_size(),
        "edp": ps.get_expert_data_parallel_world_size(),
        "vp": ps.get_virtual_pipeline_model_parallel_world_size(),
        # hybrid sharding: one distributed-optimizer instance's ranks (its shard group)
        "shard_group": ps.get_data_parallel_world_size(with_context_parallel=True,
                                                       partial_data_parallel=True),
        "instances": cfg.ddp.num_distributed_optimizer_instances,
        "cfg_dp": cfg.data_parallel_size, "microbatches": nmc.get_num_microbatches(),
        "micro_batch_size": nmc.get_micro_batch_size(),
        "global_batch_size": nmc.get_current_global_batch_size(),
        "sequence_parallel": m.sequence_parallel,
        "use_distributed_optimizer": cfg.ddp.use_distributed_optimizer,
        "optimizer_distributed": cfg.optimizer.use_distributed_optimizer,
        "use_megatron_fsdp": cfg.ddp.use_megatron_fsdp, "dist_megatron_fsdp": cfg.dist.use_megatron_fsdp,
        "sharding": cfg.ddp.data_parallel_sharding_strategy, "ckpt_format": cfg.checkpoint.ckpt_format,
        "recompute_granularity": m.recompute_granularity, "recompute_method": m.recompute_method,
        "recompute_num_layers": m.recompute_num_layers, "recompute_modules": m.recompute_modules,
        "seq_length": m.seq_length, "dataset_seq_length": cfg.dataset.seq_length,
        "num_layers": m.num_layers, "hidden_size": m.hidden_size, "ffn_hidden_size": m.ffn_hidden_size,
        "num_attention_heads": m.num_attention_heads, "num_query_groups": m.num_query_groups,
        "num_moe_experts": m.num_moe_experts, "moe_router_topk": m.moe_router_topk,
        "moe_ffn_hidden_size": m.moe_ffn_hidden_size,
        "multi_latent_attention": m.multi_latent_attention,
        "bf16": m.bf16, "fp16": m.fp16, "fp8": m.fp8, "params_dtype": str(m.params_dtype),
        "layers_per_rank": per_rank, "vocab_size": m.vocab_size,
        "position_embedding_type": m.position_embedding_type, "rotary_base": m.rotary_base,
        "kv_lora_rank": getattr(m, "kv_lora_rank", None), "recipe_before": before,
        "window_size": list(m.window_size) if m.window_size else None,
        "dropout": [m.hidden_dropout, m.attention_dropout],
        "activation": f"{m.activation_func.__module__}.{m.activation_func.__name__}",
        "gated_linear_unit": m.gated_linear_unit, "normalization": m.normalization,
        "zero_centered_gamma": m.layernorm_zero_centered_gamma, "rotary_percent": m.rotary_percent,
        # the MoE router and MLA's YaRN as Bridge's provider holds them (None: no such field)
        "router": {k: getattr(m, k, None) for k in (
            "moe_router_score_function", "moe_router_pre_softmax", "moe_router_enable_expert_bias",
            "moe_router_bias_update_rate", "moe_router_topk_scaling_factor", "moe_router_num_groups",
            "moe_router_group_topk", "moe_shared_expert_gate", "rope_type", "rotary_scaling_factor",
            "mscale", "mscale_all_dim", "original_max_position_embeddings", "beta_fast", "beta_slow")},
        "windowed_layers": [bool(is_layer_window_attention(m.window_size, m.window_attn_skip_freq,
                                                           i + 1)) for i in range(m.num_layers)],
    }
    ps.destroy_model_parallel()
    return derived


def main() -> int:
    warnings.filterwarnings("ignore")
    logging.disable(logging.NOTSET)
    cases = json.load(sys.stdin)
    te_shim.install()
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):
        import megatron.bridge.training.config  # noqa: F401  (the import the shim serves)
        te_shim.purge()
        _recipes_package()
        from importlib.metadata import version

        import megatron.core
        versions = {"megatron-bridge": version("megatron-bridge"), "megatron-core": version("megatron-core"),
                    "megatron.core path": os.path.dirname(megatron.core.__file__),
                    "transformer_engine in sys.modules": "transformer_engine" in sys.modules}
        try:
            import transformer_engine  # noqa: F401  (as any module but Bridge's PEFT ones)
            versions["transformer_engine importable"] = True
        except ImportError:
            versions["transformer_engine importable"] = False
        results = []
        for case in cases:
            try:
                results.append({"ok": True, "derived": check(case)})
            except Exception as exc:   # noqa: BLE001 - reported to the test, which asserts on it
                results.append({"ok": False, "error": f"{type(exc).__name__}: {exc}",
                                "traceback": traceback.format_exc(limit=4)})
    json.dump({"versions": versions, "results": results}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
