"""Validate exported launch files with the frameworks' own code (issue 29).

Each validator reads one exported file and runs what the framework itself runs
on it before training starts, on this CPU machine; the frameworks come from the
optional ``frameworks`` test extra (``requirements-frameworks.lock``). They raise
whatever the framework raises (AssertionError, ValueError, RuntimeError), so a
test that calls them fails with the framework's own message.

What each covers, and what it cannot:

* **Megatron** (``megatron-core`` 0.17.1, the first release whose package ships
  Megatron-LM's ``megatron/training``): Megatron-LM's own ``parse_args(
  ignore_unknown_args=False)`` and ``validate_args`` (:func:`validate_megatron_lm`),
  as ``pretrain_gpt.py`` runs them, with ``WORLD_SIZE`` the plan's device count and
  the file's ``# env:`` lines: every flag's name and type, and every rule of
  ``validate_args`` (world size divisible by tp·pp·cp and the data-parallel size it
  derives, sequence length divisible by 2·cp, layers over pipeline stages and
  virtual stages, experts divisible by ep, MLA without GQA, recomputation flags,
  precision, Megatron-FSDP's ``--ckpt-format fsdp_dtensor`` and
  ``CUDA_DEVICE_MAX_CONNECTIONS``; the global batch over micro-batch·dp is
  Megatron-Core's micro-batch calculator, below). Its two
  device queries are answered with the plan's GPU generation, not a GPU:
  ``torch.cuda.get_device_capability`` (``--moe-grouped-gemm`` needs 8.0 or more)
  and ``get_device_arch_version`` (before Blackwell, tp or cp without FSDP needs
  ``CUDA_DEVICE_MAX_CONNECTIONS=1``). Transformer Engine is not installed, so
  ``validate_args``' TE version checks (FP8/FP4 parameter gathers, some fusions) see
  none. Then Megatron-Core: the parallel layout through
  ``parallel_state.initialize_model_parallel`` on a fake process group of the
  plan's world size (the tensor/context/data grid and the expert grid
  ``etp·ep·edp``, its RankGenerators and asserts), the batch through
  ``ConstantNumMicroBatchesCalculator``, the model and parallel settings through
  ``TransformerConfig`` / ``MLATransformerConfig.__post_init__`` (heads, GQA groups,
  MoE, recomputation, pipeline layout, uneven first/last stages, virtual stages)
  and ``DistributedDataParallelConfig``; the transformer layers every pipeline
  rank and virtual stage builds through ``get_num_layers_to_build`` (its
  divisibility asserts). Not run: the interleaved schedule's micro-batch rule
  (``forward_backward_pipelining_with_interleaving``: M a multiple of pp), which
  Megatron-Core checks only after allocating on a GPU; the exporter follows it. The
  argument names are mapped to those fields by their destinations (dashes to
  underscores, Megatron-LM's renames ``--num-experts`` → ``num_moe_experts``,
  ``--swiglu`` → ``gated_linear_unit``, ...).
* **torchtitan** (0.3.0): the exported config module is loaded by torchtitan's
  ``ConfigManager.parse_args(["--module", ..., "--config", ...])``; then
  ``ParallelDims.from_config`` (world size), the model config's
  ``update_from_config`` (tp divides the heads and key/value heads, weight tying
  with pipelining) and ``ParallelDims.build_mesh`` on a fake process group (the
  dense and the expert meshes). Not verified: the pipeline stage split against a
  built model (it needs the model on a device).
* **DeepSpeed** (0.19.8): ``DeepSpeedConfig`` (batch assertion against the
  data-parallel size, every section's schema) and AutoEP's
  ``validate_autoep_config`` (folding rules against world, pp, tp, ZeRO stage);
  the expert count against ``autoep_size`` as ``validate_autoep_post_detection``
  does after detecting the layers (it needs the model). ``PipelineModule``
  settings are code, not config.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import shlex
import sys
import warnings
from pathlib import Path
from typing import Any
from unittest import mock


def _fake_world(world: int) -> None:
    """A fake torch.distributed process group of ``world`` ranks (this process is rank 0)."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        if dist.get_world_size() == world:
            return
        try:
            from megatron.core import parallel_state
            parallel_state.destroy_model_parallel()
        except ImportError:
            pass
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)


# ------------------------------------------------------------------ Megatron
def launch_argv(text: str) -> list[str]:
    """The arguments ``pretrain_gpt.py`` receives when the file's own ``# launch:`` line
    is run by bash: the file written to disk, ``THIS_FILE`` its path, ``torchrun ...
    pretrain_gpt.py`` a Python that prints its argv, the trailing ``--data-path ...``
    left out (the user's). What the shell makes of the file's backslashes and quotes
    is what Megatron parses."""
    import re
    import subprocess
    import tempfile

    launch = next(line for line in text.splitlines() if line.startswith("# launch:"))
    command = launch[len("# launch:"):].strip()
    command = re.sub(r"torchrun .*? pretrain_gpt\.py",
                     shlex.quote(sys.executable) + " -c 'import json, sys; print(json.dumps(sys.argv[1:]))'",
                     command)
    command = command.replace(" --data-path ...", "")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "megatron_args.txt"
        path.write_text(text)
        run = subprocess.run(["bash", "-c", command.replace("THIS_FILE", shlex.quote(str(path)))],
                             capture_output=True, text=True, check=True)
    return json.loads(run.stdout)


def megatron_lm_flags() -> list[str]:
    """Every ``--flag`` of the installed Megatron-LM's ``parse_args`` (its argparse parser,
    caught as ``parse_args`` is about to run), underscores written as dashes, sorted."""
    import argparse

    warnings.filterwarnings("ignore")
    from megatron.training import arguments as mlm

    caught: dict[str, argparse.ArgumentParser] = {}

    def stop(self, *_a, **_k):
        caught["parser"] = self
        raise SystemExit(0)

    with mock.patch.object(argparse.ArgumentParser, "parse_args", stop), \
            mock.patch.object(argparse.ArgumentParser, "parse_known_args", stop), \
            mock.patch.object(sys, "argv", ["pretrain_gpt.py"]):
        with contextlib.suppress(SystemExit):
            mlm.parse_args(ignore_unknown_args=False)
    return sorted({o.replace("_", "-") for a in caught["parser"]._actions
                   for o in a.option_strings if o.startswith("--")})


def read_megatron(text: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The exported arguments as ``{dest: value}`` (flags without a value: True) and
    the environment the file states (``# env: KEY=VALUE`` lines)."""
    env = {}
    for line in text.splitlines():
        if line.startswith("# env:"):
            k, v = line[len("# env:"):].strip().split("=", 1)
            env[k] = v
    argv = shlex.split(text.replace("\\\n", " "), comments=True)
    args: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        name = argv[i].lstrip("-").replace("-", "_")
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            args[name] = argv[i + 1]
            i += 2
        else:
            args[name] = True
            i += 1
    return args, env


def _int(args: dict, key: str, default: int | None = None) -> int | None:
    return int(args[key]) if key in args else default


def validate_megatron(text: str, world: int) -> dict[str, Any]:
    """Run Megatron-Core's checks on an exported Megatron-LM argument file (see the
    module docstring); returns the sizes Megatron-Core derived."""
    import torch
    warnings.filterwarnings("ignore")
    from megatron.core import parallel_state as ps
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator
    from megatron.core.transformer import MLATransformerConfig, TransformerConfig

    args, _ = read_megatron(text)
    tp, pp = _int(args, "tensor_model_parallel_size", 1), _int(args, "pipeline_model_parallel_size", 1)
    cp, ep = _int(args, "context_parallel_size", 1), _int(args, "expert_model_parallel_size", 1)
    etp = _int(args, "expert_tensor_parallel_size")
    vp = _int(args, "num_virtual_stages_per_pipeline_rank")
    instances = _int(args, "num_distributed_optimizer_instances", 1)
    _fake_world(world)
    ps.destroy_model_parallel()
    ps.initialize_model_parallel(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
                                 context_parallel_size=cp, expert_model_parallel_size=ep,
                                 expert_tensor_parallel_size=etp,
                                 virtual_pipeline_model_parallel_size=vp,
                                 num_distributed_optimizer_instances=instances,
                                 create_gloo_process_groups=False)
    dp = ps.get_data_parallel_world_size()
    edp = ps.get_expert_data_parallel_world_size()
    # hybrid sharding: the ranks of one distributed-optimizer instance (its shard group)
    shard = ps.get_data_parallel_world_size(with_context_parallel=True, partial_data_parallel=True)
    ps.destroy_model_parallel()
    calc = ConstantNumMicroBatchesCalculator(int(args["global_batch_size"]),
                                             int(args["micro_batch_size"]), dp, False, 0)
    dtype = torch.bfloat16 if args.get("bf16") else torch.float16 if args.get("fp16") else torch.float32
    fields: dict[str, Any] = dict(
        num_layers=int(args["num_layers"]), hidden_size=int(args["hidden_size"]),
        num_attention_heads=int(args["num_attention_heads"]),
        ffn_hidden_size=_int(args, "ffn_hidden_size"),
        tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp, context_parallel_size=cp,
        expert_model_parallel_size=ep, expert_tensor_parallel_size=etp or tp,
        sequence_parallel=bool(args.get("sequence_parallel")),
        virtual_pipeline_model_parallel_size=vp,
        gated_linear_unit=bool(args.get("swiglu")),
        add_bias_linear=not args.get("disable_bias_linear"),
        add_qkv_bias=bool(args.get("add_qkv_bias")),
        qk_layernorm=bool(args.get("qk_layernorm")),
        normalization=args.get("normalization", "LayerNorm"),
        bf16=bool(args.get("bf16")), fp16=bool(args.get("fp16")), params_dtype=dtype,
        pipeline_dtype=dtype if pp > 1 else None,
        recompute_granularity=args.get("recompute_granularity"),
        recompute_method=args.get("recompute_method"),
        recompute_num_layers=_int(args, "recompute_num_layers"),
        pipeline_model_parallel_layout=args.get("pipeline_model_parallel_layout"),
        num_layers_in_first_pipeline_stage=_int(args, "decoder_first_pipeline_num_layers"),
        num_layers_in_last_pipeline_stage=_int(args, "decoder_last_pipeline_num_layers"),
    )
    if args.get("group_query_attention"):
        fields["num_query_groups"] = int(args["num_query_groups"])
    if "kv_channels" in args:
        fields["kv_channels"] = int(args["kv_channels"])
    if "num_experts" in args:        # Megatron-LM: kw_args['num_moe_experts'] = args.num_experts
        fields.update(num_moe_experts=int(args["num_experts"]),
                      moe_router_topk=int(args["moe_router_topk"]),
                      moe_ffn_hidden_size=_int(args, "moe_ffn_hidden_size"),
                      moe_token_dispatcher_type=args.get("moe_token_dispatcher_type", "allgather"),
                      moe_grouped_gemm=bool(args.get("moe_grouped_gemm")))
        if "moe_shared_expert_intermediate_size" in args:
            fields["moe_shared_expert_intermediate_size"] = int(args["moe_shared_expert_intermediate_size"])
        if "moe_layer_freq" in args:  # Megatron-LM's moe_freq_type evaluates the expression
            fields["moe_layer_freq"] = eval(args["moe_layer_freq"], {"__builtins__": {}})  # noqa: S307
    cls = TransformerConfig
    if args.get("multi_latent_attention"):
        cls = MLATransformerConfig
        fields.update(kv_lora_rank=int(args["kv_lora_rank"]), qk_head_dim=int(args["qk_head_dim"]),
                      qk_pos_emb_head_dim=int(args["qk_pos_emb_head_dim"]),
                      v_head_dim=int(args["v_head_dim"]),
                      q_lora_rank=_int(args, "q_lora_rank"))
    config = cls(**{k: v for k, v in fields.items() if v is not None or k in
                    ("pipeline_dtype", "recompute_granularity")})
    from megatron.core.transformer.transformer_block import get_num_layers_to_build

    # every pipeline rank's layers, summed over its virtual stages (asserts inside)
    # (a layout string reads the rank from parallel_state: not counted here)
    per_rank = None if config.pipeline_model_parallel_layout is not None else [
        sum(get_num_layers_to_build(config, vp_stage=v if vp else None, pp_rank=r)
            for v in range(vp or 1)) for r in range(pp)]
    fsdp = bool(args.get("use_megatron_fsdp"))
    ddp = DistributedDataParallelConfig(
        use_distributed_optimizer=bool(args.get("use_distributed_optimizer")) or fsdp,
        use_megatron_fsdp=fsdp,
        data_parallel_sharding_strategy=args.get("data_parallel_sharding_strategy", "no_shard"),
        num_distributed_optimizer_instances=instances)
    return {"dp": dp, "edp": edp, "microbatches": calc.get(), "config": config, "ddp": ddp,
            "layers_per_rank": per_rank, "shard_group": shard}


#: CUDA compute capability (major) of each GPU generation of the hardware catalog
#: (``DeviceType.arch``): what ``torch.cuda`` reports on that GPU
ARCH_MAJOR = {"volta": 7, "ampere": 8, "hopper": 9, "blackwell": 10}


def validate_megatron_lm(text: str, world: int, arch: str) -> argparse.Namespace:
    """Megatron-LM's own ``parse_args`` and ``validate_args`` on an exported argument
    file, as ``pretrain_gpt.py`` runs them at start-up (module docstring).

    ``sys.argv`` is what the file's own launch line passes (:func:`launch_argv`); the
    environment is ``WORLD_SIZE`` (the plan's
    device count), ``RANK`` 0 and the file's ``# env:`` lines, nothing else of
    ``CUDA_DEVICE_MAX_CONNECTIONS``. Two device queries are answered with the plan's
    GPU generation ``arch`` (``ARCH_MAJOR``) instead of a GPU: ``torch.cuda.
    get_device_capability`` (``--moe-grouped-gemm`` needs compute capability 8 or
    more) and ``megatron.training.utils.get_device_arch_version`` (before Blackwell,
    tensor or context parallelism without FSDP needs ``CUDA_DEVICE_MAX_CONNECTIONS=1``).
    An unknown flag or bad value (argparse exits) is raised as ``ValueError`` with
    argparse's message; ``validate_args``' own refusals raise as it raises them
    (``AssertionError``, ``ValueError``)."""
    import torch
    warnings.filterwarnings("ignore")
    from megatron.training import arguments as mlm

    _, env = read_megatron(text)
    argv = launch_argv(text)
    major = ARCH_MAJOR[arch]
    environ = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
    environ.update(env, WORLD_SIZE=str(world), RANK="0")
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.object(sys, "argv", ["pretrain_gpt.py", *argv]), \
            mock.patch.dict(os.environ, environ, clear=True), \
            mock.patch.object(torch.cuda, "get_device_capability", lambda *_a, **_k: (major, 0)), \
            mock.patch.object(mlm, "get_device_arch_version", lambda: major), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            args = mlm.parse_args(ignore_unknown_args=False)
        except SystemExit:
            raise ValueError(f"Megatron-LM's parse_args refused the arguments: "
                             f"{err.getvalue().strip()}") from None
        mlm.validate_args(args)
    return args


# ------------------------------------------------------------------ torchtitan
def validate_torchtitan(text: str, world: int, tmp: Path) -> Any:
    """Load an exported torchtitan 0.3 config module through torchtitan's
    ConfigManager and check it as training start-up does (module docstring)."""
    warnings.filterwarnings("ignore")
    from torchtitan.config.manager import ConfigManager
    from torchtitan.distributed.parallel_dims import ParallelDims

    (tmp / "autopar_job.py").write_text(text)
    sys.path.insert(0, str(tmp))
    try:
        sys.modules.pop("autopar_job", None)
        importlib.invalidate_caches()
        config = ConfigManager().parse_args(["--module", "autopar_job", "--config", "autopar_plan"])
    finally:
        sys.path.remove(str(tmp))
    dims = ParallelDims.from_config(config.parallelism, world)
    config.model_spec.model.update_from_config(config=config)
    if config.parallelism.pipeline_parallel_degree > 1:
        local = config.training.local_batch_size
        mbs = config.parallelism.pipeline_parallel_microbatch_size
        if local % mbs:       # torchtitan's _build_pipeline_schedule check
            raise ValueError(f"Batch size {local} must be divisible by microbatch_size {mbs}.")
    _fake_world(world)
    dims.build_mesh()
    return config


# ------------------------------------------------------------------ DeepSpeed
class _MPU:
    """The model-parallel unit DeepSpeed asks for group sizes (its ``mpu`` protocol)."""

    def __init__(self, dp: int, tp: int, pp: int) -> None:
        self.dp, self.tp, self.pp = dp, tp, pp

    def get_data_parallel_world_size(self) -> int:
        return self.dp

    def get_model_parallel_world_size(self) -> int:
        return self.tp

    def get_pipeline_model_parallel_world_size(self) -> int:
        return self.pp

    def get_data_parallel_rank(self) -> int:
        return 0


def validate_deepspeed(text: str, world: int, pp: int, num_experts: int = 0) -> Any:
    """``DeepSpeedConfig`` of an exported JSON with the plan's data-parallel size,
    and AutoEP's validation of its ``expert_parallel`` section (module docstring)."""
    warnings.filterwarnings("ignore")
    config = json.loads(text)
    tp = config.get("tensor_parallel", {}).get("autotp_size", 1)
    _fake_world(world)
    import deepspeed.comm as dist
    if not dist.is_initialized():
        # DeepSpeed's CPU backend builds its shared-memory all-reduce kernel
        # (deepspeed_shm_comm, a C++ op compiled on first use: ~45 s on 2 cores, again
        # whenever ~/.cache/torch_extensions was built for another Python environment);
        # no collective runs here, so the backend starts without it, as on a GPU
        with mock.patch("deepspeed.comm.torch.build_shm_op", return_value=None):
            dist.init_distributed(dist_backend="fake", auto_mpi_discovery=False)
    from deepspeed.module_inject.auto_ep_config import validate_autoep_config
    from deepspeed.runtime.config import DeepSpeedConfig

    ds = DeepSpeedConfig(config, mpu=_MPU(world // (tp * pp), tp, pp))
    ep = ds.expert_parallel_config
    if ep.enabled:
        validate_autoep_config(ep, world, pp, tp, 1, zero_stage=ds.zero_optimization_stage)
        # validate_autoep_post_detection's expert-count rules, without a detected model
        if ep.autoep_size > num_experts or num_experts % ep.autoep_size:
            raise ValueError(f"autoep_size={ep.autoep_size} must divide num_experts={num_experts}")
    return ds
