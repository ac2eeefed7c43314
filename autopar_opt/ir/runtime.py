"""Training runtimes: what the software stack overlaps, fuses and shards.

A runtime is a spec setting (``training.runtime``), not a fitted factor: it
names documented capabilities, each of which switches a piece of physics in
the cost model on or off. Nothing here scales throughput.

Capabilities and their sources
------------------------------
flash_attention
    Fused attention kernel that never stores the ``5·a·s²`` score/softmax
    activations (FlashAttention, Dao et al. 2022; FlashAttention-2, Dao 2023;
    Transformer Engine ``DotProductAttention``; PyTorch SDPA).
fp32_attention_softmax
    An unfused attention core (no ``flash_attention``) keeps its softmax in fp32
    and a 16-bit copy of it for the ``softmax·V`` GEMM: Hugging Face's
    ``eager_attention_forward`` (``nn.functional.softmax(attn_weights, dim=-1,
    dtype=torch.float32).to(query.dtype)``, ``src/transformers/models/llama/
    modeling_llama.py``, and the families that copy it), and any plain PyTorch
    softmax under ``torch.autocast`` (``softmax`` is on autocast's "CUDA Ops that
    can autocast to float32" list; ``training.autocast`` implies it). The
    softmax's backward saves its fp32 output (4 bytes per score), the GEMM the
    16-bit cast (2): ``6·a·s²`` bytes per sample without dropout, ``7·a·s²`` with
    it (the cast feeds the dropout, whose mask, 1, and 16-bit output, 2, are
    kept instead of the cast). Off: one 16-bit softmax output kept, shared by its
    backward and the GEMM: Megatron's ``FusedScaleMaskSoftmax``
    (``megatron/core/fusions/fused_softmax.py``: ``ScaledUpperTriangMaskedSoftmax``
    saves ``softmax_results`` and returns them; Megatron-LM's
    ``--masked-softmax-fusion`` is on by default; ``DotProductAttention`` feeds
    them, through the dropout, to ``torch.bmm``), and a plain softmax on a
    16-bit model (HF GPT-2's eager attention under DeepSpeed's or Colossal-AI's
    fp16 engines): ``2·a·s²``, or Korthikanti et al. 2022's ``5·a·s²`` with
    dropout (softmax 2, mask 1, dropout output 2). On for ``pytorch-ddp`` and
    ``pytorch-fsdp`` (plain PyTorch around a Hugging Face-style model), off
    elsewhere; stated with every plan that prices an unfused core
    (:mod:`autopar_opt.cost.scores`).
hopper_attention
    The fused attention kernel uses Hopper/Blackwell-native instructions
    (FlashAttention-3, cuDNN fused attention behind Transformer Engine and
    PyTorch SDPA on H100): priced as cuDNN fused attention on a Hopper or
    Blackwell GPU, FlashAttention-2 elsewhere; the efficiencies of both are the
    published measurements of :mod:`autopar_opt.cost.attention` (FlashAttention-2
    on H100 runs at 0.14-0.34 of the peak forward+backward, cuDNN at 0.19-0.57).
flash_v2_attention
    The fused attention kernel is FlashAttention-2-class (FlashAttention-2,
    or a later kernel: FlashAttention-3, cuDNN fused attention, PyTorch SDPA's
    flash backend since PyTorch 2.2, whose release post says "SDPA now
    supports FlashAttention-2, yielding around 2x speedups compared to
    previous versions"). False = a FlashAttention-1-class
    kernel: FlashAttention-1 (CUDA), or the pre-MLIR Triton kernel
    ``flash_attn_triton`` of the flash-attention repository, whose docstring
    says "Triton forward is generally faster than CUDA forward, while Triton
    backward is generally slower than CUDA backward. Overall Triton forward +
    backward is slightly slower than CUDA forward + backward" (CUDA =
    FlashAttention-1 then; ``flash_attn/flash_attn_triton.py``, vendored by
    llm-foundry as ``llmfoundry/models/layers/flash_attn_triton.py``; the
    slight difference is not quantified there and not modelled: the
    FlashAttention-2 paper's A100 figure puts FlashAttention-1 and the Triton
    kernel within 10% of each other). Such a kernel is priced with the
    FlashAttention-1 rows of :mod:`autopar_opt.cost.attention` (the
    FlashAttention-2 paper's A100 and H100 figures: 0.10-0.35 of the peak
    forward+backward). A FlashAttention-1-class kernel is never Hopper-native:
    with this off, ``hopper_attention`` is ignored. Read only with
    ``flash_attention``.
tp_comm_overlap
    Tensor-parallel all-gather/reduce-scatter split into chunks and pipelined
    with the GEMMs that consume/produce them (Megatron-Core
    ``--tp-comm-overlap`` with Transformer Engine userbuffers; Wang et al.
    2022, "Overlap communication with dependent computation via decomposition").
    Without it TP collectives sit on the critical path (Shoeybi et al. 2019).
async_dgrad
    Megatron's asynchronous input-gradient collective: in the backward pass of a
    column-parallel linear layer (QKV, first MLP GEMM) the all-reduce of the input
    gradient (Shoeybi et al. 2019's ``f``), or its reduce-scatter under sequence
    parallelism, is launched with ``async_op=True`` before the weight-gradient GEMM
    and waited for after it (Megatron-Core ``tensor_parallel/layers.py``,
    ``LinearWithGradAccumulationAndAsyncCommunication.backward``; ordered by
    ``CUDA_DEVICE_MAX_CONNECTIONS=1``), so the weight-gradient GEMM is its window.
    Megatron-Core and Megatron-Bridge always run it; Megatron-LM has run it by default
    since commit 3f652469 (2021-09-02, ``--no-async-tensor-model-parallel-allreduce`` to
    turn it off), but the ``megatron-lm`` runtime stands for the stack of Narayanan et
    al. 2021 before it (commit 6985e58, 2021-08-18) and keeps it off: a spec or run
    record of a later Megatron-LM states ``runtime_options: {async_dgrad: true}``.
    Megatron-DeepSpeed and PyTorch's DTensor tensor parallelism do not run it. Read
    where the TP collectives are not overlapped otherwise (no ``tp_comm_overlap``, or
    user buffers without sequence parallelism). (QA round 12; session 33.)
sp_input_regather
    Under sequence parallelism a column-parallel linear layer (QKV, first MLP GEMM) saves
    only its sequence-sharded input and all-gathers it again in the backward pass for its
    weight gradient, asynchronously behind the input-gradient GEMM (Korthikanti et al.
    2022, Sec. 4.2.2: "we store only the sequence-parallel input ... an extra all-gather
    in the backward pass"; Megatron-Core ``tensor_parallel/layers.py``
    ``LinearWithGradAccumulationAndAsyncCommunication.backward``: ``handle =
    dist_all_gather_func(..., async_op=True)`` before ``grad_output.matmul(weight)``;
    Transformer Engine ``LayerNormLinear``/``Linear`` the same, or its user buffers'
    ``qkv_dgrad``/``fc1_dgrad`` bulk overlap; Megatron-DeepSpeed's copy of the layer).
    On for the Megatron stacks and DeepSpeed; off for PyTorch's DTensor tensor
    parallelism (``pytorch-fsdp``, ``torchtitan``, ``pytorch-ddp``), whose all-gather
    output is the tensor the matmul saves: no backward gather
    (``cost.comm.sp_regather_time``).
grad_reduce_overlap
    Bucketed gradient all-reduce / reduce-scatter launched as soon as a
    bucket's gradients are ready in the last micro-batch's backward
    (PyTorch DDP, Li et al. 2020, Sec. 3.2.3; Megatron-Core
    ``--overlap-grad-reduce``). Megatron-LM's ``LocalDDP`` reduces after the
    backward pass (no overlap).
param_gather_overlap
    Distributed-optimizer parameter all-gather overlapped with the next
    forward pass (Megatron-Core ``--overlap-param-gather``).
fsdp_prefetch
    ZeRO-3/FSDP gathers the next layer's parameters while the current layer
    computes (PyTorch FSDP ``forward_prefetch``/``backward_prefetch``, Zhao
    et al. 2023, Sec. 3.3; FSDP2 in torchtitan, Liang et al. 2024).
zero3_gather_per_module
    DeepSpeed ZeRO-3 gathers a layer's parameters module by module: its
    ``PartitionedParameterCoordinator.fetch_sub_module`` issues one
    ``all_gather_coalesced`` per submodule about to run (and per prefetched
    submodule; parameters under ``stage3_param_persistence_threshold``, 1e5
    elements, the norms and biases alone, stay gathered), so a transformer layer
    runs one all-gather per linear module (``deepspeed/runtime/zero/
    partitioned_param_coordinator.py``), each a collective over the whole ZeRO
    group with its own latency (:func:`autopar_opt.cost.comm.zero3_gather_calls`).
    PyTorch FSDP gathers one flat parameter per wrapped unit (the layer): off.
fsdp2_copies
    PyTorch's per-parameter FSDP (FSDP2, ``fully_shard``) copies each gathered
    flat buffer into the unsharded parameters and each unsharded gradient into the
    reduce-scatter's flat buffer on the compute stream, and accumulates unsharded
    gradients in the reduce dtype with sync off
    (``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``
    ``foreach_all_gather_copy_out``, ``foreach_reduce_scatter_copy_in``; priced by
    :mod:`autopar_opt.cost.fsdp_copies`). On for torchtitan (FSDP2 only) and for
    records whose stack is FSDP2 (KempnerForge, a text naming FSDP2 or
    ``fully_shard``); off for the FlatParameter FSDP (FSDP1: Composer, fms-fsdp),
    which gathers into the flat parameter the original parameters view.
fsdp_no_sync_accumulation
    ZeRO-3/FSDP with gradient synchronisation off on every micro-batch but the
    last (FSDP2 ``set_requires_gradient_sync(False)``, FSDP1 ``no_sync()``):
    each layer's gradient stays unsharded on every rank, accumulated in the
    reduce dtype, from its first micro-batch's backward until the last
    micro-batch's reduce-scatter, which runs once per iteration instead of
    once per micro-batch. Memory: the unsharded gradient of every local
    parameter, in the reduce dtype (PyTorch 2.13
    ``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py``
    ``post_backward``: ``if not self.reduce_grads: ... to_accumulated_grad_if_needed()``,
    which in ``_fsdp_param.py`` replaces the unsharded ``.grad`` by
    ``unsharded_grad.to(self.reduce_dtype)``; set by
    ``FSDPModule.set_requires_gradient_sync``). Off by default: torchtitan
    reduce-scatters every micro-batch (its trainer never turns sync off);
    KempnerForge turns it off (``kempnerforge/training/grad.py``
    ``maybe_no_sync``: ``model.set_requires_gradient_sync(False)`` unless
    ``micro_step + 1 == grad_accum_steps``).
distributed_optimizer
    Optimizer state sharded over the data-parallel group (= ZeRO-1;
    Megatron-Core ``--use-distributed-optimizer``; Rajbhandari et al. 2020).
fp32_grad_buffer
    Gradients accumulated and reduced in an fp32 buffer in 16-bit training:
    Megatron-LM forces ``--accumulate-allreduce-grads-in-fp32`` for bf16,
    Megatron-Core keeps fp32 ``main_grad`` buffers, DeepSpeed's BF16_Optimizer
    accumulates in fp32: 4 bytes of gradient per parameter (Megatron-LM
    ``docs/source/distrib_optimizer.md``: 18 bytes/parameter without the
    distributed optimizer). Applies to bf16/FP8 runs; an fp16 run keeps its
    gradients and reduction in fp16 unless ``fp16_fp32_grads``.
fp16_fp32_grads
    An fp16 run on a runtime with ``fp32_grad_buffer`` accumulates and
    all-reduces its gradients in fp32 too: Megatron-LM's
    ``--accumulate-allreduce-grads-in-fp32`` given with ``--fp16`` (off by
    default: ``arguments.py`` forces it only for bf16, "bfloat16 requires
    gradient accumulation and all-reduce to be done in fp32"; without it the
    ``main_grad`` buffer has the parameters' dtype, Megatron-LM
    ``docs/source/distrib_optimizer.md``: "fp16 param, fp16 grads"). DeepSpeed
    likewise reduces fp16 gradients in fp16 unless told otherwise
    (``DeepSpeedEngine.communication_data_type``: ``torch.float16`` when fp16
    is enabled and ``communication_data_type`` is unset,
    ``deepspeed/runtime/engine.py``).
fp32_grad_reduce
    ZeRO-3/FSDP reduce-scatters gradients in fp32 although parameters are
    gathered in 16 bits: PyTorch FSDP ``MixedPrecision(param_dtype=bf16,
    reduce_dtype=float32)``, which Composer/llm-foundry's ``mixed_precision:
    DEFAULT`` selects (``get_mixed_precision``: DEFAULT -> reduce_dtype
    ``torch.float32``; PURE -> the 16-bit dtype). Moves 4 bytes per parameter
    in the reduce-scatter instead of 2; memory is unchanged (FSDP keeps the
    sharded fp32 parameter and its gradient either way).
fused_optimizer
    Multi-tensor fused Adam (Apex/PyTorch ``fused=True``): the step streams
    the state once (HBM-bound); unfused, each element-wise op re-reads it.
lp_grad_copy
    The 16-bit ``.grad`` of every parameter lives beside the fp32 gradient
    accumulator: DeepSpeed's ``BF16_Optimizer`` (bf16 with fp32 gradient
    accumulation at ZeRO stage 0/1, as in BigScience's Megatron-DeepSpeed;
    at ZeRO-2/3 the same runtime runs the ZeRO optimizer, 16-bit gradients
    only: :func:`autopar_opt.cost.state.bf16_optimizer_active`) adds each ``lp.grad`` into the whole-size
    ``fp32_groups_gradients_flat`` after the backward and frees it only at the
    start of the next backward (``clear_lp_grads``), so both are resident at
    the peak: 2 + 4 bytes of gradient per parameter
    (``deepspeed/runtime/bf16_optimizer.py``). Megatron-LM/Core accumulate
    straight into ``main_grad`` (gradient-accumulation fusion): 4 bytes.
    Time, below ZeRO-2: the same optimizer adds the 16-bit gradients into the
    fp32 ones after every micro-batch's backward pass (``update_hp_grads``:
    ``hp_grad.add_(lp.grad.to(float32))``, called per micro-batch by the
    ``PipelineEngine``'s ``_exec_backward_pass`` and by
    ``BF16_Optimizer.backward``), 18 bytes of HBM traffic per local parameter
    and micro-batch on the compute stream
    (:data:`autopar_opt.cost.state.HP_GRAD_ACCUMULATE_BYTES`,
    :func:`autopar_opt.cost.compute.grad_accumulate_time`); Megatron's
    fused weight-gradient GEMM accumulates into ``main_grad`` with no such
    pass.
zero_grad_all_reduce
    ZeRO-1/2 reduces the gradients with an all-reduce of each bucket, every rank
    keeping its own partition of the result, then all-gathers the updated
    parameters after the step: twice a reduce-scatter's bytes. DeepSpeed, both
    through ``BF16_Optimizer`` (``DeepSpeedEngine.allreduce_gradients`` ->
    ``buffered_allreduce_fallback``) and through its ZeRO optimizer
    (``deepspeed/runtime/zero/stage_1_and_2.py`` ``average_tensor``:
    ``allreduce_and_scatter`` while ``use_multi_rank_bucket_allreduce``, True by
    default in the pinned 0.19.8; DeepSpeed issue #7059: "comm op: all_reduce" with
    ``reduce_scatter: true`` at stage 2; ``dist.reduce`` to each partition's owner,
    a reduce-scatter's bytes, where it was False: DeepSpeed 0.12-0.15, PR #4946,
    issue #6463). InternEvo's ZeRO-1 all-reduces its buckets as well
    (``hybrid_zero_optim.py``: ``reduce_rank=None``). Megatron's distributed
    optimizer and FSDP reduce-scatter.
zero2_microbatch_reduce
    ZeRO-2 reduces each micro-batch's gradients as the backward produces them, not
    once per iteration: a partitioned gradient cannot accumulate whole
    (``DeepSpeedEngine.allreduce_gradients``: "ZeRO stage >= 2 communicates during
    non gradient accumulation boundaries as well"; ``stage_1_and_2.py``
    ``reduce_ready_partitions_and_remove_grads`` reduces whenever
    ``partition_gradients``), exposed unless ``grad_reduce_overlap``
    (``overlap_comm``, off by default below stage 3).
zero2_forward_gather
    ZeRO-2 as PyTorch FSDP's ``SHARD_GRAD_OP`` (FSDP2 ``reshard_after_forward=False``):
    each unit's parameters are all-gathered in the forward pass (prefetched with
    ``fsdp_prefetch``, behind the neighbouring unit's forward), kept to the
    backward and freed after it whenever gradients are synchronised, so every
    micro-batch gathers again and reduce-scatters its gradients in its backward
    pass; under ``fsdp_no_sync_accumulation`` they stay gathered until the last
    micro-batch (``torch/distributed/fsdp/_runtime_utils.py``
    ``_should_free_in_backward``: ``state._sync_gradients or`` a strategy that
    reshards after forward; ``SHARD_GRAD_OP`` is not one). Off: the gather of the
    updated parameters after the optimizer step (Megatron-Core's distributed
    optimizer, DeepSpeed ZeRO-1/2), hidden only with ``param_gather_overlap``.
fused_swiglu
    SwiGLU as one fused kernel that keeps only its ``2f``-wide input for
    backward (Megatron-Core ``bias_swiglu_impl``, on by default with
    ``--swiglu``: ``megatron/core/fusions/fused_bias_swiglu.py``): gated-MLP
    activations ``6·s·f`` bytes instead of eager PyTorch's ``8·s·f``
    (``model_zoo.transformer.transformer_block``). Read when a published run
    is modelled; the model zoo's spec models keep the eager (larger) count.
fused_cross_entropy
    The loss kernel reads the 16-bit logits of the output GEMM and keeps them
    (with one fp32 log-sum-exp per token) instead of an fp32 copy: 2 bytes
    per logit instead of 4. llm-foundry's ``ComposerMPTCausalLM`` defaults to
    ``loss_fn: fused_crossentropy`` (flash-attn ``CrossEntropyLoss``, the
    xentropy kernel, gradient written in place; ``llmfoundry/models/mpt/
    modeling_mpt.py``).
loss_grad_cast
    The unfused output-layer loss computes the logits' gradient in fp32 and
    that gradient is cast back to the 16-bit dtype of the logits while the
    fp32 one is alive: 2 bytes per logit transient in the backward pass, on
    top of the 4 kept (``cost.memory.loss_grad_cast_bytes``). Megatron's
    ``_VocabParallelCrossEntropy`` (Megatron-Core
    ``megatron/core/tensor_parallel/cross_entropy.py``; Megatron-LM and
    BigScience's Megatron-DeepSpeed ``megatron/mpu/cross_entropy.py``, called
    as ``vocab_parallel_cross_entropy(output.float(), labels)``). Off where
    the loss is plain PyTorch (``eager_cross_entropy``) or fused
    (``fused_cross_entropy``: no cast).
eager_cross_entropy
    The loss is plain PyTorch ``F.cross_entropy`` on the logits (Hugging Face
    models, PyTorch Lightning modules, torchtitan): ``log_softmax`` then
    ``nll_loss``. ``log_softmax`` saves its result, the log-probabilities
    (``tools/autograd/derivatives.yaml``, ``_log_softmax``: ``self:
    _log_softmax_backward_data(grad, result, dim, self.scalar_type())``;
    ``nll_loss_forward`` saves ``self``, the same tensor), so the output layer
    keeps one log-probability per logit, in the dtype the loss computes in:
    fp32 under ``torch.autocast`` (``cross_entropy``, ``log_softmax`` and
    ``nll_loss`` are on autocast's "CUDA Ops that can autocast to float32"
    list, PyTorch AMP docs) or after an explicit upcast
    (``loss_fp32_upcast``), else the 16-bit dtype of the logits (DeepSpeed's
    and Colossal-AI's fp16/bf16 engines cast the model, and
    ``log_softmax`` keeps its input's dtype). Its backward allocates
    ``nll_loss_backward``'s gradient (a zero-filled tensor of the
    log-probabilities' shape) and ``_log_softmax_backward_data``'s output
    while the saved log-probabilities are alive: 2 more such tensors at the
    peak (``cost.memory.eager_loss_bytes``). Takes precedence over
    ``loss_grad_cast``; a fused loss (``fused_cross_entropy``) over both.
loss_fp32_upcast
    With ``eager_cross_entropy``: the loss casts the logits to fp32 itself
    before ``F.cross_entropy``, whatever the training dtype: torchtitan
    ``cross_entropy_loss`` (``torchtitan/components/loss.py``:
    ``F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))``);
    Hugging Face Transformers ``ForCausalLMLoss`` (``logits = logits.float()``,
    ``src/transformers/loss/loss_utils.py``), on every Trainer/accelerate
    backend (``calibration.stacks.huggingface``).
loss_parallel
    The output layer's logits stay split over the tensor-parallel group
    through the loss: Megatron's vocabulary-parallel cross-entropy
    (``_VocabParallelCrossEntropy``, Megatron-Core
    ``tensor_parallel/cross_entropy.py``), torchtitan's ``loss_parallel``
    (on unless ``parallelism.disable_loss_parallel``). Off: the output GEMM's
    column-parallel logits are all-gathered to every tensor-parallel rank
    (DTensor ``ColwiseParallel(output_layouts=Replicate())``), which keeps and
    computes the loss over the whole vocabulary: the logits' memory and loss
    traffic are not divided by ``tp``, and each micro-batch's forward
    all-gathers the 16-bit logits over the group (its backward takes the local
    chunk of the replicated gradient: no communication). KempnerForge
    (``kempnerforge/distributed/tensor_parallel.py``: "Output head:
    ColwiseParallel (split vocab, gather to Replicate for loss)").
tp_embedding
    The input embedding is vocabulary-parallel over the tensor-parallel group
    (Megatron ``VocabParallelEmbedding``; torchtitan ``RowwiseParallel`` on
    ``tok_embeddings``). Off: every tensor-parallel rank holds (its ZeRO/FSDP
    shard of) the whole table (KempnerForge ``kempnerforge/distributed/
    tensor_parallel.py`` ``apply_tensor_parallel``: "Token embedding stays
    replicated"; :mod:`autopar_opt.cost.tp_replicated`).
tp_head_in_pipeline
    In a pipeline stage (``pp > 1``) the output head is tensor-parallel as it is
    without pipelining. Off: every tensor-parallel rank of the last stage holds
    and computes the whole head (KempnerForge builds pipeline stages without
    SequenceParallel, ``seq_parallel = not is_pp_stage and not tie``, and shards
    the output head only ``if seq_parallel``, same function).
pipeline_reduce_after_schedule
    Under pipelining the schedule turns FSDP's gradient sync off for every
    micro-batch and reduce-scatters all of a stage's gradients after its last
    backward, with nothing left to hide them (``torch.distributed.pipelining``:
    ``PipelineStage.backward_maybe_with_nosync``, and ``perform_reduce_grad``,
    "scheduled after all microbatches W, B actions", ``torch/distributed/
    pipelining/stage.py``). On for torchtitan and KempnerForge, which pipeline
    with it (:func:`autopar_opt.cost.comm.zero3_sync`).
zero_param_broadcast
    ZeRO-1/2's updated parameters reach the other data-parallel ranks as one NCCL
    broadcast per rank of that rank's partition, issued one after another on the
    communicator's stream, not as one all-gather (InternEvo ``HybridZeroOptimizer.
    broadcast_params``, ``internlm/solver/optimizer/hybrid_zero_optim.py``): each
    broadcast pays the chain's fill across the whole group
    (:func:`autopar_opt.cost.comm.param_broadcast_time`). Off for every catalog runtime.
fp8_primary_weights
    In FP8 training the model keeps its GEMM weights in FP8 only (1 byte,
    plus the transposed FP8 copy Transformer Engine caches for the backward
    GEMMs on Hopper: 2 bytes together); the fp32 master weights live in the
    optimizer state. Megatron-Core ``--fp8-param-gather`` / TE
    ``fp8_model_init``; Megatron-Bridge sets ``fp8_param_gather = True`` in
    its ``bf16_with_fp8_current_scaling_mixed`` precision recipe
    (``src/megatron/bridge/training/mixed_precision.py``). Without it a
    16-bit weight and a cached FP8 copy + transpose coexist (2 + 2 bytes).
fused_projections
    The model code runs the attention's Q, K and V projections as one GEMM and
    a gated MLP's gate and up projections as one GEMM: Megatron-Core
    ``SelfAttention.linear_qkv`` and ``MLP.linear_fc1`` (gate and up
    concatenated, ``megatron/core/transformer/attention.py``, ``mlp.py``), so a
    dense block launches 4 forward GEMM kernels (QKV, output projection, fc1,
    fc2). Off where the model code keeps them separate: Hugging Face
    Transformers Llama (``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``,
    ``gate_proj``, ``up_proj``, ``down_proj``: ``LlamaAttention``/``LlamaMLP``
    in ``src/transformers/models/llama/modeling_llama.py``; the same in
    Mistral, Qwen2/3, Mixtral and DeepSeek's attention/MLP, and separate
    ``query``/``key``/``value`` in BERT, ViT and T5) and torchtitan's Llama
    (``wq``, ``wk``, ``wv``, ``wo``, ``w1``, ``w2``, ``w3``:
    ``torchtitan/models/llama/model.py``): 7 forward GEMM kernels per gated
    block (3 more forward, 6 more backward: input and weight gradient of each),
    each paying the per-kernel latency (``cost.compute.gemm_kernels``,
    ``Layer.gemm_kernels_unfused``). Models whose own code fuses QKV keep
    their fused count on any stack (HF GPT-2 ``c_attn``, GPT-NeoX
    ``query_key_value``, llm-foundry MPT ``Wqkv``). Off for ``torchtitan`` and
    for the Hugging Face Trainer/accelerate stacks
    (``calibration.stacks.huggingface``); plain ``pytorch-ddp``/
    ``pytorch-fsdp`` say nothing about the model code and keep it on (a spec
    sets ``runtime_options: {fused_projections: false}`` for an HF or
    hand-written model with separate projections).
tp_input_per_projection
    Each column-parallel projection of a block redistributes its own input: DTensor
    ``ColwiseParallel`` on every projection with no ``PrepareModuleInput`` on the
    attention or MLP module (KempnerForge ``distributed/tensor_parallel.py``
    ``_build_block_tp_plan``: ``q_proj``, ``k_proj``, ``v_proj``, ``gate_proj`` and
    ``up_proj`` each ``ColwiseParallel(input_layouts=Shard(1))``, beside
    ``SequenceParallel`` norms). DTensor redistributes per module, so with sequence
    parallelism a block all-gathers its normed input once per column-parallel GEMM (5
    in a gated block with separate projections, 2 fused) in the forward pass and
    reduce-scatters each of their input gradients in the backward; without it, each
    input gradient is all-reduced. Megatron-Core (one gather per sub-block,
    ``ColumnParallelLinear`` on the fused QKV and fc1) and torchtitan
    (``PrepareModuleInput`` on ``attention`` and ``feed_forward``) keep it off
    (``cost.comm.tp_comm_time``).
moe_grouped_gemm
    A Mixture-of-Experts layer runs its local experts' up and down projections
    as two grouped GEMM kernels per pass (Megatron-Core ``--moe-grouped-gemm``:
    ``GroupedMLP``/``TEGroupedMLP``, ``megatron/core/transformer/moe/experts.py``),
    the layout the Megatron export writes. Off, the experts run one after the
    other (``SequentialMLP``: ``for expert in self.local_experts``, the default
    while ``--moe-grouped-gemm`` is not given): two GEMM kernels per local
    expert and pass, each paying the per-kernel latency
    (``cost.compute.gemm_kernels``). A record whose text says it ran without
    grouped GEMM turns it off (``calibration.reading.moe.moe_stack``).
    How many kernels a grouped GEMM launches is ``moe_expert_kernels``.
ddp_bucket_copy
    PyTorch DDP's reducer copies each gradient into its all-reduce bucket,
    a separate flat buffer of the gradient's dtype, unless
    ``gradient_as_bucket_view=True`` (default ``False``) makes the ``.grad``
    tensors views into the buckets: "This can reduce peak memory usage, where
    the saved memory size will be equal to the total gradients size"
    (``torch.nn.parallel.DistributedDataParallel`` docstring). One extra
    gradient's bytes per parameter of every layer DDP reduces (data-parallel
    degree > 1, ZeRO-0/1). Only ``pytorch-ddp``: Megatron's DDP accumulates
    into its contiguous ``main_grad`` buffer, which is the bucket storage
    (``megatron/core/distributed/param_and_grad_buffer.py``); FSDP and
    DeepSpeed ZeRO reduce their own flat buffers. A spec sets
    ``runtime_options: {ddp_bucket_copy: false}`` for a DDP run with
    ``gradient_as_bucket_view=True``.

Choices (string options, :data:`CHOICES`; cost model v3, issue 28):

attention_kernel
    The fused attention kernel, priced from published microbenchmarks
    (:mod:`autopar_opt.cost.attention`): ``auto`` (from the flags above and the
    GPU: :func:`autopar_opt.cost.attention.kernel_for`), or one of
    ``flash_attention_1``, ``flash_attention_2``, ``flash_attention_3``,
    ``cudnn`` as stated.
tp_overlap
    The mechanism that overlaps tensor-parallel collectives with GEMMs when
    ``tp_comm_overlap`` is on (:mod:`autopar_opt.cost.overlap`):
    ``te_userbuffers`` (Megatron-Core ``--tp-comm-overlap``, Transformer Engine
    ``initialize_ub`` defaults) or ``async_tp`` (PyTorch micro-pipelining,
    torchtitan ``enable_async_tensor_parallel``).
cp_comm_type
    Context parallelism's K/V exchange: ``p2p`` (ring attention, Megatron-Core /
    Transformer Engine default ``cp_comm_type="p2p"``), ``all_gather``
    (gather K/V, then local attention: Transformer Engine ``all_gather``, the
    Llama 3 paper's variant; PyTorch ``context_parallel``'s default rotation
    ``allgather``) or ``a2a`` (DeepSpeed-Ulysses, Jacobs et al. 2023, arXiv
    2309.14509; Transformer Engine ``cp_comm_type="a2a"``: all-to-alls trade the
    sequence split for a head split around the attention core, which then runs
    the whole sequence on ``heads/cp`` heads).
moe_expert_kernels
    The kernels behind Megatron-Core's grouped expert GEMM (``--moe-grouped-gemm``):
    ``per_expert`` (``TEGroupedMLP``, Megatron-Core 0.8 and later with Transformer
    Engine: TE's ``GroupedLinear`` runs ``general_grouped_gemm`` ->
    ``nvte_multi_tensor_gemm`` -> ``multi_stream_cublas_gemm``, one cuBLAS GEMM per
    local expert, round-robin over 4 compute streams, ``transformer_engine/common/
    gemm/cublaslt_gemm.cu``, TE 1.8, 2024-06, #853; still the default: TE's
    native grouped-tensor path needs ``use_grouped_tensor`` / Megatron
    ``moe_use_grouped_tensor``, off by default) or ``grouped`` (one kernel per
    grouped GEMM: the legacy ``GroupedMLP`` on the ``grouped_gemm`` CUTLASS
    package, Megatron-Core 0.7 and earlier; TE's CUTLASS grouped GEMM on Hopper,
    ``NVTE_USE_CUTLASS_GROUPED_GEMM=1``, which the Megatron export then sets).
    torchtitan runs ``grouped``: its ``GroupedExperts`` calls ``torch._grouped_mm``
    once per projection for every local expert (``torchtitan/models/common/moe.py``,
    0.3.0). Priced per kernel (``cost.compute.per_expert_kernels``); the 4 streams'
    concurrency is not credited (stated).
moe_dispatcher
    The token dispatcher of expert parallelism: ``alltoall`` (Megatron-Core
    ``--moe-token-dispatcher-type alltoall``: every routed copy of a token sent to
    its expert's rank) or ``deepep`` (``flex`` with DeepEP: a token crosses the
    network once per target node and is forwarded to that node's target GPUs over
    NVLink, DeepSeek-V3 arXiv 2412.19437 Sec. 3.2.2; DeepEP README, "asymmetric-
    domain bandwidth forwarding"; ``cost.moe.deepep_node_factor``).
reshard_after_forward
    FSDP2/FSDP ``reshard_after_forward``: ``default`` (the framework's own rule:
    torchtitan ``not pp_enabled``, ``torchtitan/distributed/fsdp.py``
    ``get_fsdp_reshard_after_forward_policy``; True elsewhere: FSDP
    ``FULL_SHARD``, DeepSpeed ZeRO-3), ``always`` or ``never``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class Runtime:
    """One software stack's capabilities (see the module docstring for sources)."""

    name: str = "megatron-core"
    flash_attention: bool = True
    fp32_attention_softmax: bool = False
    hopper_attention: bool = True
    flash_v2_attention: bool = True
    tp_comm_overlap: bool = True
    async_dgrad: bool = True
    sp_input_regather: bool = True
    grad_reduce_overlap: bool = True
    param_gather_overlap: bool = True
    fsdp_prefetch: bool = True
    zero3_gather_per_module: bool = False
    fsdp_no_sync_accumulation: bool = False
    fsdp2_copies: bool = False
    distributed_optimizer: bool = True
    fp32_grad_buffer: bool = True
    fp16_fp32_grads: bool = False
    fp32_grad_reduce: bool = False
    fused_optimizer: bool = True
    lp_grad_copy: bool = False
    zero_grad_all_reduce: bool = False
    zero2_microbatch_reduce: bool = False
    zero2_forward_gather: bool = False
    fused_swiglu: bool = False
    fused_cross_entropy: bool = False
    loss_grad_cast: bool = False
    eager_cross_entropy: bool = False
    loss_fp32_upcast: bool = False
    loss_parallel: bool = True
    tp_embedding: bool = True
    tp_head_in_pipeline: bool = True
    pipeline_reduce_after_schedule: bool = False
    zero_param_broadcast: bool = False
    fp8_primary_weights: bool = False
    ddp_bucket_copy: bool = False
    fused_projections: bool = True
    tp_input_per_projection: bool = False
    moe_grouped_gemm: bool = True
    attention_kernel: str = "auto"
    tp_overlap: str = "te_userbuffers"
    cp_comm_type: str = "p2p"
    reshard_after_forward: str = "default"
    moe_expert_kernels: str = "per_expert"
    moe_dispatcher: str = "alltoall"
    source: str = ""

    def capabilities(self) -> dict[str, bool]:
        """The boolean capabilities by name (what reports print)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.type in (bool, "bool")}

    def choices(self) -> dict[str, str]:
        """The string options by name (:data:`CHOICES`)."""
        return {name: getattr(self, name) for name in CHOICES}

    @property
    def cp_splits_heads(self) -> bool:
        """Whether context parallelism splits the heads, not the sequence, around the
        attention core (``cp_comm_type`` ``a2a``, Ulysses): the kernel runs the whole
        sequence on ``heads/cp`` heads and ``tp·cp`` must divide the heads."""
        return self.cp_comm_type == "a2a"

    def reshards_after_forward(self, pipelined: bool) -> bool:
        """Whether ZeRO-3/FSDP frees a layer's gathered parameters after its
        forward pass (and gathers them again for the backward): the
        ``reshard_after_forward`` option (``always``/``never``), else the
        framework's default: torchtitan ``not pp_enabled``
        (``torchtitan/distributed/fsdp.py`` ``get_fsdp_reshard_after_forward_policy``:
        "For PP, by default do not reshard after forward to avoid per-microbatch
        all-gathers"), True for every other stack (FSDP ``FULL_SHARD``, DeepSpeed
        ZeRO-3)."""
        if self.reshard_after_forward != "default":
            return self.reshard_after_forward == "always"
        return not (self.name == "torchtitan" and pipelined)


#: Named runtimes with their documented defaults.
RUNTIMES: dict[str, Runtime] = {r.name: r for r in [
    Runtime("megatron-lm", async_dgrad=False,
            flash_attention=False, hopper_attention=False, tp_comm_overlap=False,
            grad_reduce_overlap=True, param_gather_overlap=False, fsdp_prefetch=False,
            distributed_optimizer=False, fused_optimizer=True, loss_grad_cast=True,
            source="Megatron-LM 2020-22 (Shoeybi et al. 2019; Narayanan et al. 2021): torch DDP "
                   "buckets, Apex FusedAdam, unfused softmax attention"),
    Runtime("megatron-core", flash_attention=True, tp_comm_overlap=True,
            grad_reduce_overlap=True, param_gather_overlap=True, fsdp_prefetch=True,
            distributed_optimizer=True, fused_optimizer=True, fused_swiglu=True,
            loss_grad_cast=True,
            source="Megatron-Core with Transformer Engine, performance flags on "
                   "(--tp-comm-overlap --overlap-grad-reduce --overlap-param-gather "
                   "--use-distributed-optimizer; custom FSDP prefetches; NVIDIA Megatron-Core docs)"),
    Runtime("megatron-bridge", flash_attention=True, tp_comm_overlap=True,
            grad_reduce_overlap=True, param_gather_overlap=True, fsdp_prefetch=True,
            distributed_optimizer=True, fp32_grad_buffer=False, fused_optimizer=True,
            fused_swiglu=True, fp8_primary_weights=True, loss_grad_cast=True,
            source="NVIDIA Megatron-Bridge / NeMo performance recipes (Megatron-Core + TE, "
                   "distributed optimizer, TP/DP communication overlap; Megatron-FSDP with "
                   "double-buffered prefetch; bf16 gradient reduction: "
                   "set_llama3_common_configs / set_llama31_common_configs set "
                   "ddp.grad_reduce_in_fp32 = False, scripts/performance/configs; "
                   "FP8 weights: fp8_param_gather = True in the FP8 current-scaling recipe)"),
    Runtime("deepspeed", async_dgrad=False,
            flash_attention=False, hopper_attention=False, tp_comm_overlap=False,
            zero3_gather_per_module=True,
            grad_reduce_overlap=False, param_gather_overlap=False, fsdp_prefetch=True,
            distributed_optimizer=False, fused_optimizer=True, lp_grad_copy=True,
            loss_grad_cast=True, zero_grad_all_reduce=True, zero2_microbatch_reduce=True,
            source="Megatron-DeepSpeed + DeepSpeed ZeRO (Rajbhandari et al. 2020; BF16_Optimizer "
                   "gradient buffers). Gradient reduction after the backward pass: the "
                   "PipelineEngine turns enable_backward_allreduce off and runs ReduceGrads "
                   "after the last micro-batch (deepspeed/runtime/pipe/schedule.py "
                   "TrainSchedule.steps), and zero_optimization.overlap_comm defaults to false "
                   "below stage 3 (deepspeed/runtime/zero/config.py)"),
    Runtime("pytorch-fsdp", async_dgrad=False, sp_input_regather=False, fp32_attention_softmax=True,
            flash_attention=True, hopper_attention=False, tp_comm_overlap=False,
            grad_reduce_overlap=True, param_gather_overlap=False, fsdp_prefetch=True,
            zero2_forward_gather=True,
            distributed_optimizer=False, fp32_grad_buffer=False, fused_optimizer=True,
            fused_cross_entropy=True,
            source="PyTorch FSDP (Zhao et al. 2023) as used by Composer/llm-foundry: "
                   "prefetching, a fused non-Hopper-native FlashAttention-2-class kernel, "
                   "fused cross-entropy. llm-foundry's 2023 benchmark tables ran attn_impl: "
                   "triton (the pre-MLIR Triton kernel flash_attn_triton, FlashAttention-1-"
                   "class: scripts/train/benchmarking/submit_benchmarks.py @a7c75677, "
                   "llm-foundry v0.3.0, and the MosaicGPT-era script before it); their records "
                   "set flash_v2_attention off (calibration.reading.runtime.runtime_of). "
                   "fused_optimizer stays on for other FSDP stacks; Composer records turn it "
                   "off: llm-foundry's "
                   "decoupled_adamw is Composer's DecoupledAdamW, a per-parameter Python "
                   "loop (composer/optim/decoupled_weight_decay.py, runtime_of)"),
    Runtime("torchtitan", async_dgrad=False, sp_input_regather=False, flash_attention=True,
            tp_comm_overlap=False, tp_overlap="async_tp",
            cp_comm_type="all_gather", moe_expert_kernels="grouped",
            grad_reduce_overlap=True, param_gather_overlap=False, fsdp_prefetch=True,
            zero2_forward_gather=True, fsdp2_copies=True, pipeline_reduce_after_schedule=True,
            distributed_optimizer=False, fp32_grad_buffer=False, fp32_grad_reduce=True,
            fused_optimizer=True, fused_projections=False, eager_cross_entropy=True,
            loss_fp32_upcast=True,
            source="torchtitan (Liang et al. 2024): FSDP2 prefetch, SDPA flash attention; "
                   "async TP off by default (enable_async_tensor_parallel = False; when on, "
                   "PyTorch micro-pipelining: tp_overlap async_tp); context parallelism rotates "
                   "K/V by all-gather (context_parallel_rotate_method = 'allgather', "
                   "torchtitan/config_manager.py @ 9a8cb98); gradients "
                   "reduce-scattered in fp32 (training.mixed_precision_reduce = 'float32', "
                   "MixedPrecisionPolicy(reduce_dtype=float32)); fused AdamW "
                   "(optimizer.implementation = 'fused'); separate wq/wk/wv and w1/w3 GEMMs "
                   "(torchtitan/models/llama/model.py); loss F.cross_entropy on the logits "
                   "cast to fp32 (components/loss.py cross_entropy_loss); experts as one "
                   "torch._grouped_mm per projection for every local expert "
                   "(models/common/moe.py GroupedExperts, 0.3.0: moe_expert_kernels grouped). "
                   "torchtitan 0.3's language models run FlexAttention with block-causal "
                   "document masks (models/common/config_utils.py get_attention_config: "
                   "'sdpa is no longer supported for language models'); it is priced as the "
                   "FlashAttention-2-class kernel on full causal sequences, no FlexAttention "
                   "measurement being at hand (stated with every plan)"),
    Runtime("pytorch-ddp", async_dgrad=False, sp_input_regather=False, fp32_attention_softmax=True,
            flash_attention=True, hopper_attention=False, tp_comm_overlap=False,
            grad_reduce_overlap=True, param_gather_overlap=False, fsdp_prefetch=False,
            distributed_optimizer=False, fp32_grad_buffer=False, fused_optimizer=False,
            ddp_bucket_copy=True, eager_cross_entropy=True,
            source="PyTorch DDP (Li et al. 2020), SDPA attention, foreach (unfused) Adam; "
                   "gradients copied into the reducer's buckets (gradient_as_bucket_view=False, "
                   "the default); plain F.cross_entropy loss"),
]}

#: String options of a runtime and the values each takes (module docstring).
CHOICES: dict[str, tuple[str, ...]] = {
    "attention_kernel": ("auto", "flash_attention_1", "flash_attention_2", "flash_attention_3",
                         "cudnn"),
    "tp_overlap": ("te_userbuffers", "async_tp"),
    "cp_comm_type": ("p2p", "all_gather", "a2a"),
    "reshard_after_forward": ("default", "always", "never"),
    "moe_expert_kernels": ("per_expert", "grouped"),
    "moe_dispatcher": ("alltoall", "deepep"),
}

#: Capability names a spec may override (booleans), then the choices.
CAPABILITIES: tuple[str, ...] = tuple(RUNTIMES["megatron-core"].capabilities()) + tuple(CHOICES)


def runtime_named(name: str, **overrides: bool | str) -> Runtime:
    """The catalog runtime ``name`` with capability ``overrides`` (booleans, or
    one of :data:`CHOICES`' values for a string option).

    Raises KeyError naming the known runtimes or capabilities, ValueError for a
    choice outside its values.
    """
    key = name.strip().lower().replace("_", "-")
    if key not in RUNTIMES:
        raise KeyError(f"unknown runtime {name!r} (known: {', '.join(RUNTIMES)})")
    bad = sorted(set(overrides) - set(CAPABILITIES))
    if bad:
        raise KeyError(f"unknown runtime capability {bad[0]!r} (known: {', '.join(CAPABILITIES)})")
    for k, v in overrides.items():
        if k in CHOICES and v not in CHOICES[k]:
            raise ValueError(f"runtime option {k} = {v!r} is not one of {', '.join(CHOICES[k])}")
        if k not in CHOICES and not isinstance(v, bool):
            raise ValueError(f"runtime option {k} = {v!r} must be true or false")
    return replace(RUNTIMES[key], **overrides) if overrides else RUNTIMES[key]
