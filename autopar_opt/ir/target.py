"""The framework that will launch the plan, and what it can run (issue 29).

A :class:`Target` names the training framework and version that will run the
plan. The search space is then exactly what that framework can express,
written as rules on the one formulation (not as an outer enumeration of
uniform settings):

* **admission** (:meth:`Target.strategy_problem`): a strategy the framework
  cannot run on a layer at all is not enumerated (torchtitan has no ZeRO-1
  form; DeepSpeed has no context or Megatron-style sequence parallelism; a
  Megatron MoE layer with ``tp > 1`` needs sequence parallelism; ...);
* **uniformity** (:func:`uniform_key`): the frameworks take *one*
  tensor-, context-, expert- and expert-tensor-parallel degree, one sequence
  parallelism switch, one ZeRO/FSDP form (with one replica count under hybrid
  sharding: torchtitan's ``data_parallel_replicate_degree``, Megatron's
  ``--num-distributed-optimizer-instances``)
  and one recomputation setting for the whole model. Every strategy has a key per :data:`UNIFORM_DIMS`, with
  :data:`ANY` where the setting changes nothing on that layer (ZeRO on a layer
  without parameters or without data parallelism, sequence parallelism at
  ``tp = 1``, expert settings on dense layers, recomputation outside the
  transformer blocks: the same rule as :func:`autopar_opt.export.view.plan_view`).
  A plan is runnable iff one value per dimension matches every layer's key;
  the MILP/MIQP state it as rows (``formulations/families.py::uniform_choice``),
  the DP as a label rule (``solvers/dp/uniform.py``);
* **pipeline rules**: schedules (:meth:`Target.schedules`), whether the stage
  split is fixed (DeepSpeed ``partition_method="uniform"``,
  :meth:`Target.fixed_split`), whether ``pp > 1`` is allowed with a tied
  embedding (torchtitan raises ``NotImplementedError``);
* **interleaving** (Megatron's virtual pipeline, :func:`vp_problem`,
  :func:`interleaved_split`): ``v`` model chunks per pipeline rank on
  Megatron's default even split, every rank's transformer layers divisible
  by ``v`` and the micro-batches a multiple of ``pp``. An interleaved outer
  configuration fixes its stage split to that one, in every space (the free
  space's interleaved configurations too, so the free bound stays a bound on
  the runnable space).

Sources for every rule are cited where it is stated. ``target: none`` keeps
the free per-layer space.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from autopar_opt.ir.graph import Layer, LayerGraph, LayerKind

#: Frameworks a target may name (``none``: the free per-layer space).
FRAMEWORKS = ("megatron", "torchtitan", "deepspeed", "none")

#: torchtitan versions: "0.3" the current configuration system (Python
#: ``config_registry`` + command-line overrides, torchtitan 0.3.0), "0.2" the
#: previous TOML job files (``--job.config_file``, torchtitan 0.2.2).
TORCHTITAN_VERSIONS = ("0.3", "0.2")

#: Runtime name -> framework of the default target.
RUNTIME_FRAMEWORK = {"megatron-lm": "megatron", "megatron-core": "megatron",
                     "megatron-bridge": "megatron", "torchtitan": "torchtitan",
                     "deepspeed": "deepspeed"}

#: The settings every framework takes once for the whole model, in key order.
UNIFORM_DIMS = ("tp", "cp", "sp", "zero", "replicas", "ep", "etp", "recompute")

#: Key value of a setting that changes nothing on a layer (matches any value).
ANY = -1

#: Layer kinds the frameworks build as transformer layers (their layer counts).
BLOCK_KINDS = (LayerKind.transformer_block, LayerKind.moe_block)

#: Why torchtitan runs no ZeRO-0 (DDP) plan with context parallelism (the target's
#: admission and the export's rules say the same).
CP_SHARDS = ("with context parallelism torchtitan shards the parameters over its FSDP mesh "
             "dp_shard x cp (ParallelDims.fsdp_enabled: dp_shard or cp > 1), so it runs no "
             "ZeRO-0 (DDP) plan with cp > 1: ZeRO-2/3 over dp x cp (or hybrid sharding)")

#: Why DeepSpeed runs no tensor parallelism (AutoTP) in a pipeline (DeepSpeed 0.19.8):
#: AutoTP builds a 2-D data x tensor mesh over every rank (``engine.
#: _configure_tensor_parallel_states``: ``groups._init_tp_mesh_device``, data-parallel
#: size world / tp, across the pipeline stages), and a ``PipelineModule(num_stages=)``
#: builds ``PipeDataParallelTopology(num_pp, num_dp=world / num_stages)``, with no tensor
#: axis, whose data-parallel size the batch check then uses.
AUTOTP_PIPELINE = ("AutoTP (tensor_parallel.autotp_size) builds a data x tensor mesh over all "
                   "ranks with no pipeline axis, and PipelineModule's topology has no tensor "
                   "axis: DeepSpeed runs tensor parallelism with pp = 1 only")

#: Layer kinds a framework pipeline can hold: embedding, transformer layers, head.
RUNNABLE_KINDS = BLOCK_KINDS + (LayerKind.embedding, LayerKind.lm_head)

_RECOMPUTE_CODE = {"none": 0, "selective": 1, "full": 2, "op": 3}

#: The recomputation column of a :func:`uniform_key`.
RECOMPUTE_DIM = UNIFORM_DIMS.index("recompute")


def recompute_code(mode: str) -> int:
    """The :func:`uniform_key` code of a recomputation mode (its ``value``: ``"none"``,
    ``"full"``, ...), for the readers of the keys' recomputation column."""
    return _RECOMPUTE_CODE[mode]


@dataclass(frozen=True)
class Target:
    """The framework (and version) that will launch the plan.

    ``source`` says where the choice came from (``target``,
    ``training.runtime``, ``--runnable-by``), for the outputs.
    """

    framework: str = "none"
    version: str = ""
    source: str = "target"

    @property
    def free(self) -> bool:
        """The free per-layer space (no framework rules)."""
        return self.framework == "none"

    def label(self) -> str:
        if self.free:
            return "none (free per-layer space)"
        return self.framework + (f" {self.version}" if self.version else "")

    def to_dict(self) -> dict:
        return {"framework": self.framework, "version": self.version, "source": self.source}

    # ------------------------------------------------------------------ rules
    def schedules(self) -> tuple[str, ...] | None:
        """Pipeline schedules the framework runs (None: no restriction). Megatron-LM:
        1F1B and interleaved 1F1B, no GPipe (``megatron/core/pipeline_parallel/
        schedules.py``: ``forward_backward_pipelining_without_interleaving`` /
        ``..._with_interleaving``); DeepSpeed's ``PipelineEngine`` runs 1F1B
        (``TrainSchedule``); torchtitan takes the single-stage-per-rank
        ``torch.distributed.pipelining`` schedules (``ScheduleGPipe``,
        ``Schedule1F1B``); its multi-stage ones (``ScheduleInterleaved1F1B``) place
        stages by its own rules, which the exporter does not write, so the interleaved
        schedule is not in its space."""
        return {"megatron": ("1f1b", "interleaved"), "deepspeed": ("1f1b",),
                "torchtitan": ("gpipe", "1f1b")}.get(self.framework)

    def default_schedules(self) -> tuple[str, ...]:
        """The schedules searched when the spec states no ``search.schedules``: every
        schedule the framework runs that can change the optimum under the cost model.
        Megatron: 1F1B and interleaved 1F1B (its virtual pipeline shrinks the bubble by
        ``v``, :func:`autopar_opt.cost.evaluate.pipeline_latency`). torchtitan also runs
        GPipe, but a GPipe plan is never better than the 1F1B plan of the same stages:
        the pipeline time does not depend on the order of the two (``pipeline_latency``)
        and GPipe holds all ``c >= pp - i`` micro-batches' activations at the peak
        (:func:`autopar_opt.ir.pipeline.inflight_microbatches`), so leaving it out loses
        no optimum. DeepSpeed runs 1F1B only. The free space (``none``) takes 1F1B: the
        interleaved schedule is Megatron's and fixes the stage split, and GPipe is
        dominated as above."""
        return tuple(x for x in (self.schedules() or ("1f1b",)) if x != "gpipe")

    def searches_blocks(self, recompute: tuple = ()) -> bool:
        """Whether the target's space holds Megatron-LM's partial recomputation
        (``--recompute-method block --recompute-num-layers N``: full recomputation of
        the first N transformer layers of every model chunk, none of the others;
        Megatron-Core ``transformer_block.py`` ``_checkpointed_forward``) beside its one
        recomputation setting for the model: Megatron with both ``none`` and ``full`` in
        the space's ``recompute`` modes. Every configuration searches it, as block
        families of the DP's key families (:func:`solvers.dp.uniform.block_families`):
        fixed per-layer sets where the stage of every layer is known (one stage, the
        interleaved schedule's fixed split:
        :meth:`autopar_opt.cost.tables.CostTables.block_stages`), a rule the labels carry
        where the split is free (1F1B with ``pp > 1``:
        :mod:`autopar_opt.solvers.dp.stage_prefix`); the MIP routes solve them beside
        their uniformity rows (:func:`autopar_opt.search.inner.with_block_families`). The
        one rule read by the cost tables, the engine's warm-start check
        (:func:`autopar_opt.search.engine.runs_plan`) and the exporter's pattern test."""
        modes = {getattr(m, "value", m) for m in recompute}
        return self.framework == "megatron" and {"none", "full"} <= modes

    def unsearched(self) -> str:
        """What the framework runs that its target space leaves out, for the outputs
        beside the certificate ("" when nothing is known to be left out). Nothing is at
        present: Megatron-LM's partial recomputation (:meth:`searches_blocks`), once
        left out in a 1F1B pipeline of several stages, is searched in every
        configuration; the outputs keep the line (``runnability.unsearched``) for
        documents that carry one."""
        return ""

    def fixed_split(self) -> bool:
        """Whether the framework decides the stage split itself: DeepSpeed's
        ``PipelineModule(partition_method="uniform")`` balances layer counts
        (``deepspeed/runtime/pipe/module.py``, ``ds_utils.partition_uniform``).
        Megatron-LM (``--pipeline-model-parallel-layout``) and torchtitan
        (``module_fqns_per_model_part``) take any contiguous split."""
        return self.framework == "deepspeed"

    def config_problem(self, pp: int, tied: bool) -> str | None:
        """Why no plan with ``pp`` stages runs (None: some may). torchtitan's
        decoder raises ``NotImplementedError("Weight tying is not supported with
        Pipeline Parallel.")`` (``torchtitan/models/common/decoder.py``,
        ``update_from_config``)."""
        if self.framework == "torchtitan" and tied and pp > 1:
            return "torchtitan does not pipeline a model whose output layer is tied to its embedding"
        return None

    def microbatch_problem(self, pp: int, microbatches: int, schedule) -> str | None:
        """Why the framework runs no pipeline of ``pp`` stages with ``microbatches``
        micro-batches under ``schedule`` (a :class:`~autopar_opt.ir.training.Schedule` or its
        value; None: it may). torchtitan's 1F1B is ``torch.distributed.pipelining``'s
        ``Schedule1F1B``, whose constructor raises "Number of microbatches (c) must be
        greater than or equal to the number of stages (pp)" (torch 2.13
        ``pipelining/schedules.py``; torchtitan's ``build_pipeline_schedule`` only warns
        before it); its GPipe, Megatron-LM's and DeepSpeed's 1F1B run any count."""
        if self.framework == "torchtitan" and pp > 1 and microbatches < pp \
                and getattr(schedule, "value", schedule) == "1f1b":
            return (f"torchtitan's 1F1B (torch.distributed.pipelining Schedule1F1B) needs at "
                    f"least as many micro-batches as pipeline stages: {microbatches} < pp = {pp}")
        return None

    def admitted(self, layer: Layer, strategies: list, pp: int,
                 seq_len: int | None = None) -> list:
        """The strategies of ``layer`` the framework runs, in order: on a layer that is
        not a transformer block, recomputation becomes none (every framework recomputes
        transformer layers only, so such a layer runs without it: a space that lists
        only ``recompute: [full]`` still has its embedding and head), then
        :meth:`strategy_problem` and, with the training's ``seq_len``,
        :func:`sequence_split_problem` filter."""
        if layer.kind not in BLOCK_KINDS:
            strategies = list(dict.fromkeys(
                s if s.recompute.value == "none" else replace(s, recompute=type(s.recompute)("none"))
                for s in strategies))
        return [s for s in strategies if self.strategy_problem(layer, s, pp) is None
                and sequence_split_problem(self.framework, s.tp, s.cp, s.sp, seq_len,
                                           self.version) is None]

    def strategy_problem(self, layer: Layer, s, pp: int) -> str | None:
        """Why the framework cannot run strategy ``s`` on ``layer`` in a pipeline
        of ``pp`` stages (None: it can). The degrees' divisibility (``tp`` of
        the heads, ``ep`` of the experts, ``etp·ep`` of the stage's devices) is
        the enumeration's (:func:`autopar_opt.ir.strategies.enumerate_strategies`)."""
        fw = self.framework
        if fw == "none":
            return None
        etp = s.expert_tp
        sharded = layer.params > 0 and s.dp * s.cp > 1
        if s.recompute.value != "none" and layer.kind not in BLOCK_KINDS:
            # Megatron --recompute-*, torchtitan activation_checkpoint and DeepSpeed's
            # activation_checkpoint_interval all act on transformer layers only
            return "only transformer layers are recomputed"
        if fw == "megatron":
            # hybrid sharding of every ZeRO level: --num-distributed-optimizer-instances
            # (distributed optimizer, or Megatron-FSDP's enable_hsdp); the expert data-parallel
            # size must divide by it (parallel_state: "Expert data parallel size should be
            # divisible by partial DistOpt shard factor"), which the enumeration ensures
            # TransformerConfig.__post_init__: "When using MoE and tensor parallelism,
            # sequence parallelism must be used" (expert TP > 1 or TP > 1)
            if layer.is_moe and s.tp > 1 and not s.sp:
                return "MoE with tp > 1 needs sequence parallelism"
            if s.recompute.value == "op":
                # --recompute-granularity full | selective (attention core, or the
                # --recompute-modules list); no per-op save list like torchtitan's
                return "no op-level selective checkpointing (--recompute-granularity full or selective)"
            return None
        if fw == "torchtitan":
            if s.hybrid and s.zero_group % s.cp:
                return "the FSDP mesh is dp_shard x cp: the shard group must hold whole cp groups"
            if sharded and s.zero == 1:
                return "no ZeRO-1 form (FSDP2 shards parameters, gradients and state, or DDP)"
            if layer.params > 0 and s.cp > 1 and s.zero == 0:
                # ParallelDims.fsdp_enabled is dp_shard or cp: with cp > 1 torchtitan always
                # shards the parameters over its fsdp mesh dp_shard x cp (the llama3/qwen3
                # parallelize apply_fsdp_to_decoder), so no DDP (ZeRO-0) plan runs with cp
                return CP_SHARDS
            if s.recompute.value == "selective":
                return "activation checkpointing is 'full' or 'none' here (its 'selective' is op-level)"
            if layer.is_moe and s.ep == 1 and etp != s.tp:
                # expert parallelism off: the experts are sharded like the dense layers
                # ("No effect for non-MoE models, or when ep = 1", job_config.py)
                return "with ep = 1 the experts take the model's tp"
            if self.version == "0.2":
                if s.tp > 1 and not s.sp:
                    return "torchtitan 0.2 always shards the norms' sequence with tensor parallelism"
                if layer.is_moe and s.ep > 1 and etp not in (1, s.tp):
                    # ParallelDims._validate: "Currently we only support ETP=TP or ETP=1"
                    return "expert TP must be 1 or tp"
                shard = dp_shard_degree(s)
                if layer.is_moe and s.ep > 1:
                    # expert mesh (pp, dp_replicate, efsdp, ep, etp), efsdp = fsdp*tp/(etp*ep)
                    if (shard * s.cp * s.tp) % (etp * s.ep):
                        return "etp*ep must divide dp_shard*cp*tp"
                return None
            if layer.is_moe and s.ep > 1 and etp != 1:
                # 0.3 expert mesh (pp, dp_replicate, efsdp, ep): experts are not TP-sharded
                return "torchtitan 0.3 does not shard experts by tensor parallelism (etp = 1)"
            shard = dp_shard_degree(s)
            if layer.is_moe and s.ep > 1 and (shard * s.cp * s.tp) % s.ep:
                return "ep must divide dp_shard*cp*tp (efsdp = fsdp*tp/ep)"
            return None
        # DeepSpeed: PipelineModule + ZeRO + AutoTP + AutoEP
        if s.cp > 1:
            return "no context parallelism (DeepSpeed-Ulysses is a different scheme)"
        if s.tp > 1 and s.sp:
            return "no Megatron-style sequence parallelism (AutoTP shards weights only)"
        if s.recompute.value in ("selective", "op"):
            return "activation checkpointing is per layer, all or nothing"
        if pp > 1 and sharded and s.zero >= 2:
            return "the pipeline engine supports ZeRO stage 0 and 1 only"
        if pp > 1 and s.tp > 1:
            return AUTOTP_PIPELINE
        if s.hybrid:
            # MiCS (mics_shard_size), DeepSpeed's hybrid sharding, was removed in 0.19
            # (runtime/config.py _REMOVED_ZERO_CONFIG_KEYS: "MiCS ZeRO-3 sharding has been
            # removed", deepspeedai/DeepSpeed#8489); ZeRO++'s hpZ shards only the gathered weights
            return "no hybrid sharding (MiCS was removed in DeepSpeed 0.19)"
        if layer.is_moe:
            if s.ep == 1 and etp != s.tp:
                return "without AutoEP the experts are sharded like the dense layers (etp = tp)"
            if s.ep > 1 and etp != 1:
                # auto_ep_folding.validate_folding_global: "expert_tensor_parallel_size=... is not
                # supported yet"
                return "AutoEP runs experts without tensor parallelism (expert_tensor_parallel_size = 1)"
            if s.ep > 1 and s.tp > 1 and pp > 1:
                return "AutoEP with AutoTP folding supports pp = 1 only"
            if s.ep > 1 and (s.dp * s.tp) % s.ep:
                return "ep must divide dp*tp"
        return None


def sequence_split_problem(framework: str, tp: int, cp: int, sp: bool,
                           seq_len: int | None, version: str = "") -> str | None:
    """Why ``framework`` cannot split a ``seq_len``-token sequence over ``cp`` context-
    and, with sequence parallelism ``sp``, ``tp`` tensor-parallel ranks (None: it can).
    Megatron-Core splits each rank's ``seq_len / cp`` tokens over tp
    (``tensor_parallel/mappings.py`` ``_split_along_first_dim``: "First dimension of the
    tensor should be divisible by tensor parallel size"); torchtitan 0.3.0's trainer
    refuses a ``seq_len`` not divisible by ``tp`` (with sequence parallelism) times ``2·cp``
    (``trainer.py``: "Training sequence length ... must be divisible by ..."; not
    checked for ``version`` 0.2, whose source is not at hand). DeepSpeed runs no sequence
    parallelism; the free space has no such rule. The ``2·cp`` rule of
    load-balanced context parallelism itself is the enumeration's
    (:func:`~autopar_opt.ir.strategies.cp_degree_ok`)."""
    if not seq_len or not sp or tp <= 1:
        return None
    if framework == "megatron" and (seq_len % cp or (seq_len // cp) % tp):
        return (f"sequence parallelism splits each context-parallel rank's {seq_len}/{cp} "
                f"tokens over tp = {tp} (Megatron-Core _split_along_first_dim): seq_len must "
                f"be a multiple of cp*tp = {cp * tp}")
    divisor = tp * (2 * cp if cp > 1 else 1)
    if framework == "torchtitan" and version != "0.2" and seq_len % divisor:
        return (f"torchtitan's trainer needs seq_len {seq_len} divisible by tp"
                + (" x 2cp" if cp > 1 else "") + f" = {divisor} with sequence parallelism")
    return None


def dp_shard_degree(x) -> int:
    """torchtitan's ``data_parallel_shard_degree`` of a strategy or a plan view (anything
    with ``zero``, ``dp`` and ``replicas``): the data-parallel ranks of one FSDP shard
    group, ``dp / replicas`` (all ``dp`` without hybrid sharding; under it the shard
    group ``dp_shard × cp`` holds ``zero_group / cp`` of them); 1 without FSDP (ZeRO-0/1)."""
    return x.dp // x.replicas if x.zero >= 2 else 1


def block_count(layers: list[Layer]) -> int:
    """The transformer layers of a model (Megatron's ``--num-layers``)."""
    return sum(1 for layer in layers if layer.kind in BLOCK_KINDS)


def interleaved_split(layers: list[Layer], pp: int) -> list[int] | None:
    """The stage of every layer under Megatron's default split, the one it takes
    with virtual pipeline stages (``TransformerConfig`` without
    ``num_layers_in_first/last_pipeline_stage`` or a layout: ``num_layers / pp``
    transformer layers per rank, the embedding with the first, the output layer
    with the last; ``megatron/core/transformer/transformer_block.py``
    ``get_num_layers_to_build``); None when the model is not embedding, blocks,
    head in that order or the blocks do not divide by ``pp``."""
    kinds = [layer.kind for layer in layers]
    blocks = block_count(layers)
    if pp < 1 or not blocks or blocks % pp:
        return None
    per = blocks // pp
    out, seen = [], 0
    for pos, kind in enumerate(kinds):
        if kind in BLOCK_KINDS:
            out.append(seen // per)
            seen += 1
        elif kind is LayerKind.embedding and seen == 0:
            out.append(0)
        elif kind is LayerKind.lm_head and seen == blocks and pos == len(kinds) - 1:
            out.append(pp - 1)
        else:
            return None
    return out


def vp_problem(layers: list[Layer], pp: int, vp: int, microbatches: int) -> str | None:
    """Why Megatron-Core cannot run ``vp`` virtual stages per rank here (None: it
    can). Megatron-Core 0.17.1: ``TransformerConfig.__post_init__`` wants every
    rank's layers divisible by ``virtual_pipeline_model_parallel_size``;
    ``forward_backward_pipelining_with_interleaving`` wants
    ``microbatch_group_size_per_vp_stage`` (default ``pp``) in ``[pp, M]`` and
    ``M mod pp`` 0 or at least ``pp`` ("dependency bubbles"), i.e. ``M`` a
    multiple of ``pp``; Megatron-LM ``validate_args``: interleaving needs ``pp > 1``."""
    if vp < 2:
        return None
    if pp < 2:
        return "interleaving needs more than one pipeline stage"
    if interleaved_split(layers, pp) is None:
        return f"the {block_count(layers)} transformer layers are not split evenly over {pp} stages"
    if (block_count(layers) // pp) % vp:
        return (f"{block_count(layers) // pp} transformer layers per stage do not divide into "
                f"{vp} virtual stages")
    if microbatches % pp:
        return f"{microbatches} micro-batches are not a multiple of pp = {pp}"
    return None


def vp_degrees(layers: list[Layer], pp: int, allowed: tuple[int, ...] | None) -> list[int]:
    """Virtual stages per rank (``>= 2``) the split allows at ``pp`` stages (the
    micro-batch rule aside): divisors of the layers per rank, within ``allowed``."""
    if pp < 2 or interleaved_split(layers, pp) is None:
        return []
    per = block_count(layers) // pp
    return [v for v in range(2, per + 1) if per % v == 0 and (allowed is None or v in allowed)]


def uniform_key(layer: Layer, s) -> tuple[int, ...]:
    """The key of strategy ``s`` on ``layer`` per :data:`UNIFORM_DIMS`, :data:`ANY`
    where the setting changes nothing on this layer (see the module docstring)."""
    sp = int(s.sp) if s.tp > 1 and layer.supports_sp else ANY
    sharded = layer.params > 0 and s.dp * s.cp > 1
    zero = s.zero if sharded else ANY
    replicas = s.replicas if sharded else ANY
    ep = s.ep if layer.is_moe else ANY
    etp = s.expert_tp if layer.is_moe else ANY
    rc = _RECOMPUTE_CODE[s.recompute.value] if layer.kind in BLOCK_KINDS else ANY
    return (s.tp, s.cp, sp, zero, replicas, ep, etp, rc)


def keeps_uniform_rule(keys) -> bool:
    """Whether the :func:`uniform_key` rows ``keys`` (one per layer) take one value per
    dimension over the model, :data:`ANY` aside: a target's uniformity rule."""
    seen: dict[int, int] = {}
    for key in keys:
        for d, v in enumerate(key):
            if int(v) != ANY and seen.setdefault(d, int(v)) != int(v):
                return False
    return True


def describe_key(key: tuple[int, ...]) -> str:
    """``tp4 cp1 sp z1 ep8 etp1 rc-full`` (settings that matter nowhere left out;
    ``hybrid-shard xR`` for ``R`` replicas of hybrid sharding)."""
    names = {v: k for k, v in _RECOMPUTE_CODE.items()}
    parts = []
    for dim, value in zip(UNIFORM_DIMS, key):
        if value == ANY:
            continue
        if dim == "sp":
            parts.append("sp" if value else "no-sp")
        elif dim == "zero":
            parts.append(f"z{value}")
        elif dim == "replicas":
            if value > 1:
                parts.append(f"hybrid-shard x{value}")
        elif dim == "recompute":
            parts.append(f"rc-{names[value]}")
        else:
            parts.append(f"{dim}{value}")
    return " ".join(parts)


def target_for_runtime(runtime_name: str) -> Target:
    """The default target of a runtime (``training.runtime``): the framework it
    names, or ``none`` for plain PyTorch stacks (``pytorch-ddp``,
    ``pytorch-fsdp``), which take per-module settings in user code."""
    fw = RUNTIME_FRAMEWORK.get(runtime_name)
    if fw is None:
        return Target("none", "", "training.runtime")
    return Target(fw, "0.3" if fw == "torchtitan" else "", "training.runtime")


#: The catalog runtime that prices each framework's own semantics.
FRAMEWORK_RUNTIME = {"megatron": "megatron-core", "torchtitan": "torchtitan", "deepspeed": "deepspeed"}


def pricing_notice(framework: str, runtime_name: str, source: str) -> str:
    """What the output says when plans restricted to ``framework``'s rules (by ``source``:
    ``target`` or ``--runnable-by``) are priced with another stack's runtime: the runtime
    decides the overlaps, kernels and gradient reduction the cost model prices, the target
    only which plans count. Empty when the runtime is the framework's own (or the target
    is the free space)."""
    if framework not in FRAMEWORK_RUNTIME or RUNTIME_FRAMEWORK.get(runtime_name) == framework:
        return ""
    return (f"{source} {framework}: the plans follow {framework}'s rules but are priced with "
            f"training.runtime {runtime_name} (its overlaps, kernels and gradient reduction); "
            f"set training.runtime: {FRAMEWORK_RUNTIME[framework]} to price {framework}'s own")


def launch_notice(framework: str, runtime_name: str) -> str:
    """What ``export --to framework`` says of a plan priced with another stack's runtime
    (QA round 5, M5: a Qwen3-4B plan priced under megatron-core at 5.48 s runs 6.26 s
    priced under deepspeed's runtime): the launched framework's overlaps, kernels and
    gradient reduction are not the ones priced. Empty when they are."""
    if framework not in FRAMEWORK_RUNTIME or RUNTIME_FRAMEWORK.get(runtime_name) == framework:
        return ""
    own = FRAMEWORK_RUNTIME[framework]
    return (f"export --to {framework}: the plan was priced with training.runtime {runtime_name} "
            f"(its overlaps, kernels and gradient reduction), not {framework}'s own: estimate it "
            f"with training.runtime: {own} for {framework}'s time (or solve with target: "
            f"{framework} and training.runtime: {own})")


def optimizer_notice(framework: str, optimizer: str, dtype: str = "bf16") -> str:
    """What ``export --to framework`` says of a plan priced with an optimizer other than
    mixed-precision Adam: the exported files set no optimizer, so each framework trains
    its default, Adam on 16-bit weights with an fp32 master copy and fp32 moments
    (Megatron-LM ``--optimizer adam`` with ``--bf16``/``--fp16``; DeepSpeed's
    ``BF16_Optimizer``/ZeRO optimizer around the client's Adam; torchtitan's AdamW on
    FSDP2's fp32 sharded parameters), 2 + 2 + 12 bytes per parameter, and its memory
    and step are not the ones priced. Empty for ``adam_mixed``, and for ``adam_fp32`` in
    fp32/tf32 training, where each framework's default is Adam on its fp32 weights (no
    16-bit flag: Megatron-LM and DeepSpeed keep fp32 parameters; torchtitan's export sets
    ``mixed_precision_param = "float32"``), 4 + 4 + 8 bytes (QA round 9)."""
    from autopar_opt.ir.training import FP32_DTYPES, OPTIMIZER_BYTES   # training imports this

    def bytes_of(key: str) -> str:
        return " + ".join(f"{b:g}" for b in OPTIMIZER_BYTES[key])

    default = "adam_fp32" if dtype in FP32_DTYPES else "adam_mixed"
    if optimizer == default:
        return ""
    what = ("Adam on its fp32 weights" if default == "adam_fp32"
            else "Adam with an fp32 master copy")
    return (f"export --to {framework}: the plan was priced with training.optimizer {optimizer} "
            f"({bytes_of(optimizer)} bytes per parameter of weights, gradients and optimizer "
            f"state); the file sets no optimizer, so {framework} trains its default, {what} "
            f"({bytes_of(default)} bytes): estimate it with training.optimizer: {default} for "
            "the memory and step time it runs with")


#: Why Megatron-LM's flags cannot state a Gemma model (its GeGLU and post-norms;
#: ``megatron/training/arguments.py``: ``--swiglu``, ``--quick-geglu``).
GEMMA_BLOCK = ("Gemma's block (a GeGLU MLP and norms after the attention and the MLP): "
               "Megatron-LM's flags cannot state it (--swiglu gates with SiLU, --quick-geglu "
               "with another function; no flag adds the post-norms); Megatron-Bridge builds "
               "Gemma from its own model providers, which autopar does not export")


def unstated_block(arch) -> str:
    """Why Megatron-LM's flags cannot state the block ``arch`` has (:data:`GEMMA_BLOCK`
    word for word for Gemma 2 and 3): a gated MLP whose
    activation is not SiLU (named as :func:`~autopar_opt.ir.arch.describe` names it),
    norms after the attention and the MLP, or both. QA round 34: Gemma 1 (no post-norms)
    and a Llama config with ``hidden_act`` gelu or relu were refused as "Gemma's block (a
    GeGLU MLP and norms after the attention and the MLP)", naming norms they do not have."""
    from autopar_opt.ir.arch import GATED_NAMES

    gemma = arch.family.startswith("gemma")
    what, why = [], []
    if arch.gated and arch.activation != "silu":
        what.append(f"a {GATED_NAMES.get(arch.activation, arch.activation + '-gated')} MLP")
        why.append("--swiglu gates with SiLU, --quick-geglu with another function")
    if arch.post_norms:
        what.append("norms after the attention and the MLP")
        why.append("no flag adds the post-norms")
    bridge = ("; Megatron-Bridge builds Gemma from its own model providers, which autopar "
              "does not export") if gemma else ""
    return (f"{'Gemma' if gemma else 'the model'}'s block ({' and '.join(what)}): Megatron-LM's "
            f"flags cannot state it ({'; '.join(why)}){bridge}")


#: Families whose Megatron settings the Megatron exports do not write (OLMo 2's norm
#: placement; Granite's multipliers; gpt-oss:
#: Megatron-Core's ``softmax_type='learnable'``, biased experts,
#: ``activation_func_clamp_value``, YaRN), by Hugging Face ``model_type``.
MEGATRON_UNWRITTEN = {
    "olmo2": ("OLMo 2's norms after the attention and the MLP (none before them) and its QK-norm "
              "over the whole projections: Megatron-LM's flags cannot state them "
              "(--qk-layernorm normalises each head, the layer norms come first)"),
    "granite": ("Granite's scalar multipliers (embedding_multiplier, residual_multiplier, "
                "logits_scaling, attention_multiplier): Megatron-LM's flags cannot state them"),
    "granitemoe": ("Granite's scalar multipliers (embedding_multiplier, residual_multiplier, "
                   "logits_scaling, attention_multiplier): Megatron-LM's flags cannot state "
                   "them"),
    "glm": ("GLM-4's RoPE on interleaved pairs of half of each head: autopar's Megatron "
            "exports do not write --rotary-interleaved (GlmConfig, transformers' GLM "
            "rotate_half on adjacent pairs)"),
    "olmoe": ("OLMoE's QK-norm over the whole projections: Megatron-LM's flags cannot state "
              "it (--qk-layernorm normalises each head)"),
    "phimoe": ("Phi-3.5-MoE's SparseMixer router and biased output layer: Megatron-LM's "
               "flags cannot state them"),
    "glm4_moe": ("GLM-4.5's Q/K/V biases with RoPE on half of each head and its router "
                 "(sigmoid, expert bias): autopar's Megatron exports do not write GLM-4.5's "
                 "settings"),
    "gpt_oss": ("gpt-oss's attention sinks, biased experts and clamped SwiGLU: autopar's "
                "Megatron exports do not write them (Megatron-Core's softmax_type "
                "'learnable', activation_func_clamp_value; Megatron-Bridge's GPT-OSS "
                "provider sets them)")}


#: What Megatron-LM's flags cannot build (``megatron/training/arguments.py``: the MLP
#: is GELU, ``--swiglu``, ``--squared-relu`` or ``--quick-geglu``;
#: ``--position-embedding-type`` takes learned_absolute, rope, yarn, mrope, relative or
#: none; Megatron-Core's GPT layer runs attention, then the MLP).
RELU_MLP = ("a ReLU MLP (OPT): Megatron-LM's MLP activations are GELU, --squared-relu, "
            "--swiglu and --quick-geglu")
#: The plain (two-matrix) MLP activations Megatron-LM's flags state: its default GELU
#: and ``--squared-relu`` (Nemotron-4), by :class:`ModelArch` ``activation``.
MEGATRON_PLAIN_ACTIVATIONS = {"gelu": (), "relu2": ("--squared-relu",)}
ALIBI = ("ALiBi positions (BLOOM, MPT): Megatron-LM's --position-embedding-type takes "
         "learned_absolute, rope, yarn, mrope, relative or none")
PARALLEL_BLOCK = ("attention and MLP in parallel (Falcon, GPT-NeoX, Phi-2, Command R): Megatron-Core's GPT "
                  "layer runs the MLP after the attention")


def megatron_model_problem(arch) -> str | None:
    """Why the Megatron exports cannot state ``arch`` (a :class:`ModelArch`; None: they
    can): Gemma's block (:data:`GEMMA_BLOCK`), a ReLU MLP or another plain-MLP activation
    Megatron-LM has no flag for, ALiBi, a parallel block, or a family of
    :data:`MEGATRON_UNWRITTEN`."""
    if arch is None:
        return None
    if (arch.gated and arch.activation != "silu") or arch.post_norms:
        return unstated_block(arch)
    if not arch.gated and arch.activation == "relu":
        return RELU_MLP
    if not arch.gated and arch.activation not in MEGATRON_PLAIN_ACTIVATIONS:
        return (f"a plain MLP with the {arch.activation!r} activation: Megatron-LM's MLP "
                "activations are GELU, --squared-relu, --swiglu and --quick-geglu")
    if arch.alibi:
        return ALIBI
    if arch.attn_bias or arch.mlp_bias:
        return (f"{'attention (Q, K, V, O)' if arch.attn_bias else 'MLP'} biases alone: "
                "Megatron-LM's flags put biases on every linear layer (the default without "
                "--disable-bias-linear) or on Q, K and V only (--add-qkv-bias)")
    if arch.parallel_block:
        return PARALLEL_BLOCK
    return MEGATRON_UNWRITTEN.get(arch.family)


#: Transformer Engine's rule for context parallelism over sliding windows
#: (``attn_forward_func_with_cp``: "Context parallelism does not support sliding window
#: attention with cp_comm_type='p2p'").
TE_RING_WINDOW = ("Transformer Engine runs sliding-window attention with context parallelism "
                  "only by all_gather or a2a")


def megatron_window_problem(windows) -> str | None:
    """Why Megatron-Core cannot run these per-layer sliding windows (0: none; None: it
    can): ``TransformerConfig.window_size`` is one size per model."""
    sizes = sorted({w for w in windows if w})
    if len(sizes) <= 1:
        return None
    return (f"sliding windows of {len(sizes)} sizes ({', '.join(map(str, sizes))}): "
            "Megatron-Core takes one window_size per model")


def torchtitan_window_problem(windows) -> str | None:
    """Why the torchtitan export cannot build a model with these sliding windows (None:
    it has none): its Llama 3, Qwen3 and DeepSeek-V3 models have no window."""
    sizes = sorted({w for w in windows if w})
    if not sizes:
        return None
    return (f"sliding-window attention ({sizes[0]} keys per query): autopar's torchtitan "
            "export builds its Llama 3, Qwen3 and DeepSeek-V3 models, which have no attention "
            "window (torchtitan's gpt-oss model, which has one, is not exported)")


def framework_model_problem(framework: str, graph: LayerGraph | None,
                            windows: list[int]) -> str | None:
    """Why ``framework`` cannot build ``graph``'s model, whose attention layers have
    ``windows`` (None: it can, as far as its architecture says): Megatron-LM's flags, a
    closed set, state one window size per model and no Gemma, OPT, BLOOM or Falcon block
    (:func:`megatron_model_problem`,
    :func:`megatron_window_problem`, also ``export/megatron.py``'s
    rules); torchtitan's models are code a user extends (a model without one of the
    export's flavours keeps its target: the plan follows torchtitan's parallelism rules,
    and the export says it has no flavour), but the Llama 3, Qwen3 and DeepSeek-V3
    models autopar exports have no sliding window
    (:func:`torchtitan_window_problem`); DeepSpeed runs the
    Hugging Face model, whose config carries them all. A model without a recorded
    architecture (a layer list) is judged by its windows only."""
    if graph is None:
        return None
    if framework == "megatron":
        return megatron_model_problem(graph.arch) or megatron_window_problem(windows)
    if framework == "torchtitan":
        return torchtitan_window_problem(windows)
    return None


def model_problem(layers: list[Layer], chain: bool) -> str | None:
    """Why no framework target can run this model (None: a chain of embedding,
    transformer layers and head, which all three build)."""
    if not chain:
        return "it is not a chain of layers (the frameworks pipeline decoder/encoder chains)"
    odd = sorted({layer.kind.value for layer in layers if layer.kind not in RUNNABLE_KINDS})
    if odd:
        return (f"it has {', '.join(odd)} layers (the frameworks build embedding, transformer "
                "layers and head)")
    return None
