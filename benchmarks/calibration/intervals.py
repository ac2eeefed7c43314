"""Leave-one-group-out by regime over both record files; the residual file of the error bars.

Issue 28 (point 6 and its targets). Over every record of
``tests/data/published_runs.yaml`` and ``benchmarks/calibration/holdout_runs.yaml``
that the cost model prices:

1. **Leave-one-group-out.** One fit per group, on every run outside it, then
   the group's runs predicted out of sample. The groups: each source family
   (one publication or table series, :func:`~autopar_opt.calibration.reading.family_of`)
   and each regime group (:mod:`autopar_opt.cost.regime`: every framework
   family, long context >= 32k, ZeRO-3/FSDP at >= 256 GPUs, FP8, MoE, every GPU
   generation). Per group with at least 5 runs: median and 90th percentile of
   |error| (targets 10% and 25%).
2. **The residual file** ``autopar_opt/cost/intervals.yaml``: per run, its
   regime labels and its out-of-sample residuals ``log(measured / predicted
   time)`` by leave-out, and the one of largest magnitude, from which
   :func:`autopar_opt.cost.interval.interval_for` takes its split-conformal
   quantiles; and the parameters of every leave-out fit (``fits``), so a test
   re-derives each residual by pricing the run with them. Written here, never
   by hand.
3. **Coverage.** For every run, the 80% interval from the residual file
   without its own source family (no run calibrates its own interval) is
   checked against the run's leave-own-family-out residual (a new source in
   a known regime: overall and per source family) and, per regime group,
   against its residual from the fit that left that group out (a regime the
   model has not seen).
4. In sample (the shipped parameters, fitted on ``published_runs.yaml`` by
   ``run.py``) and memory (every record that states memory, both files).

Writes ``REGIMES.md`` next to this file (figures, targets met or missed, the
date, the load and the command) and ``autopar_opt/cost/intervals.yaml``.

Usage: ``python benchmarks/calibration/intervals.py`` (one fit per group: a
few minutes on 2 cores).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from autopar_opt.calibration.calibrate import model_records
from autopar_opt.calibration.compare import compare, compare_memory, predict
from autopar_opt.calibration.fit import SCALARS, fit
from autopar_opt.calibration.reading import load_run_file
from autopar_opt.cost.interval import LEVEL, MIN_COMPARABLE, ResidualRun, interval_for
from autopar_opt.cost.params import RANGES, CostParams, default_params
from autopar_opt.cost.regime import regime_of

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FILES = (ROOT / "tests" / "data" / "published_runs.yaml", HERE / "holdout_runs.yaml")
OUT = ROOT / "autopar_opt" / "cost" / "intervals.yaml"
#: A group is held to the targets when it has at least this many runs (issue 28).
GROUP_MIN = 5
MEDIAN_TARGET, P90_TARGET = 0.10, 0.25


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


#: A hand-written reading of the figures (kept here so that a re-run keeps it; revise it
#: when the figures change).
READING = """\
## Reading

(Session 37, regenerated 2026-12-01; no change to the model's physics or parameters. Records:
the first held-out run on a power-limited part, CARAML's GPT 800M on one JEDI node of 4 GH200
at the superchip's 680 W TDP (`family:caraml2024`; FZJ-JSC/CARAML README, Megatron-LM of
2023-10 in fp16): the model is 62% fast on it left out with its family, 78% with the Hopper
group; FlagPerf's 13 Llama-3 records now state the architecture Megatron core_v0.6.0 built from
FlagPerf's script (learned positions, biases, tied embeddings, dropout 0.1: its
`pretrain_llama3.sh` passes none of the flags that build a Llama), which moves them by at most
0.3%. Leave-one-source-family-out over both files 7.3% / 24.3% -> 7.6% / 24.2%; leave-one-
group-out fits with a parameter at a bound 33 of 35 (the new groups `family:caraml2024` and
`power_limited:true` among them). A seventh regime label, `power_limited` (a stated cap
below the part's rating), is the last one a search for comparable runs gives up: as a
Hopper Megatron run, the CARAML residual had entered every Hopper Megatron interval (4,096
H100 for Llama-3-70B: 28.2-66.3 days -> 28.2-85.1; coverage 90.8% -> 92.1%, `family:flagperf`
76% -> 95%), though the capped clock is a formula no uncapped run measures. With the label:
coverage 90.4% (5 groups under 80%, as before). The residual file states each run's part,
form factor and power cap, and an interval for a capped or PCIe/NVL part counts and names
the published runs like it. `PINNING.md` (new, `pinning.py`) refits with the three fitted
scalars pinned at what the H200 measured: no variant meets every target.)

(Session 36, regenerated 2026-12-01 with no change to the model or the records: the Targets
table gains the row of issue 28's "no fitted parameter at a bound", which it lacked (an
audit of the issue found it): the shipped fit has none by the fit's own rule, but
`iteration_overhead_s` (host work per iteration, plausible range 0-0.05 s, no measurement
pins it) sits within 0.1% of its upper bound in 31 of the 33 leave-one-group-out fits behind
every out-of-sample figure and interval (0.0498 s shipped): the records want more fixed time
per iteration than the range allows, so the target is missed, and the range is not widened
without a source for it. `framework:megatron`'s fit also puts `efficiency_half_us` and
`elementwise_passes` at their upper bounds, `generation:ampere`'s `elementwise_passes`.)

(Session 35, regenerated 2026-12-01. Three physics changes and one reading moved figures.
(1) Vocabulary layers a stack leaves whole on every tensor-parallel rank
(`cost/tp_replicated.py`, runtime `tp_embedding`, `tp_head_in_pipeline`): KempnerForge keeps
its token embedding replicated over the TP ranks and, in a pipeline stage, its output head
too (`kempnerforge/distributed/tensor_parallel.py` `apply_tensor_parallel`: "Token embedding
stays replicated"; PP stages run without SequenceParallel and shard the head only with it),
so each rank holds its FSDP shard of the whole table and computes the whole head.
(2) `torch.distributed.pipelining` turns an FSDP stage's gradient sync off for every
micro-batch and reduce-scatters after the schedule's last backward (`stage.py`
`perform_reduce_grad`: "scheduled after all microbatches W, B actions"), exposed whole
(runtime `pipeline_reduce_after_schedule`, torchtitan and KempnerForge). (3) InternEvo's
ZeRO-1 optimizer sends its updated parameters as one NCCL broadcast per rank, one after
another (`hybrid_zero_optim.py` `broadcast_params`, runtime `zero_param_broadcast`), each
paying the chain's fill across the whole group (NCCL `src/device/broadcast.h`: n-1 links),
where an all-gather was priced: its 7B rows' errors had grown with the rank count (+66% at
1,024 GPUs). (4) The three KempnerForge config-validation pipeline rows compare memory on
the first stage (`measured.memory_rank: first`, their figure is rank 0's). 27 KempnerForge
records move (pipeline rows -9.7..-11.7%, +55/+45/+41% -> +37/+30/+28% too fast in sample;
the TP x FSDP rows -0.6..-6.0%, their memory +4..+10% toward the measured allocated
figures), 16 InternEvo records (-27.2% at 1,024 GPUs, -11.5% at 512). The refit moves
`efficiency_half_us` 45.3 -> 36.6 us and `memory_fragmentation` 8.1% -> 5.4%. Over both files
LOFO moves from 7.9% / 26.3% to 7.3% / 24.3%: **both targets met**; in sample 5.6% -> 5.3%
(p90 23.0% -> 20.3%); memory 7.9% / 9.2% -> 6.7% / 6.9%; `published_runs.yaml` alone
(RESULTS.md) leave-one-family-out 8.4% / 24.2% -> 7.9% / 21.3%. `family:internevo` meets its
targets (9.8% / 34.5% -> 8.8% / 19.8%), `family:kfcv2026` 26.6% / 49.3% -> 23.6% / 33.2%,
`family:kempnerforge` 16.2% / 23.1% -> 15.1% / 19.9%, `framework:deepspeed` 13.0% / 43.7% ->
12.0% / 41.0%, `generation:hopper` 14.5% -> 12.0%. Coverage 91.6% -> 90.8%; `family:bloom`
falls under 80% (100% -> 67% of 9): the framework family it shares with InternEvo has
smaller residuals now, so its intervals narrowed; 5 of 26 groups under 80%.)

(Session 34, regenerated 2026-12-01. One physics change moved predictions: PyTorch's
per-parameter FSDP (FSDP2, `fully_shard`) frames every collective with copies on the
compute stream, which the model now prices as HBM traffic at the measured copy bandwidth
(`cost/fsdp_copies.py`, runtime `fsdp2_copies`): the copy of each gathered buffer into the
parameters' own tensors (`foreach_all_gather_copy_out`, `split_with_sizes_copy`), the
concatenation of the unsharded gradients into the reduce-scatter buffer in the reduce dtype
(`foreach_reduce_scatter_copy_in`, `torch._chunk_cat`), and with gradient sync off the
unsharded gradient's cast and adds (`to_accumulated_grad_if_needed`,
`accumulate_unsharded_grad_if_needed`; `torch/distributed/fsdp/_fully_shard/`). FSDP1's
flat parameter (Composer, fms-fsdp) pays none. The 30 KempnerForge records move -1.4..-4.8%
(toward their measured figures on the TP x FSDP and pipeline rows, further on the 7B
FSDP-only rows and the 175B row, already too slow). Over both files LOFO moves from 7.9% /
27.0% to 7.9% / 26.3%, in sample from 5.7% to 5.6% (p90 24.3% -> 23.0%);
`family:kfmfu2026` meets its targets (10.2% / 19.7% -> 8.7% / 18.6%), `family:kempnerforge`
17.6% / 26.4% -> 16.2% / 23.1%, `family:kfcv2026` 30.2% -> 26.6%, `framework:fsdp` 11.9% /
27.5% -> 11.2% / 25.9%; `published_runs.yaml` alone (RESULTS.md), leave-one-family-out
8.7% / 26.1% -> 8.4% / 24.2%, both targets met on that file. Coverage 92.1% -> 91.6%,
the same 4 groups under 80%.)

(Session 33, regenerated 2026-12-01. Two changes moved predictions. (1) Physics: under
sequence parallelism Megatron's layers save their sharded QKV and MLP inputs and all-gather
them again behind the input-gradient GEMMs (runtime `sp_input_regather`; Korthikanti et al.
2022 Sec. 4.2.2; Megatron-Core `LinearWithGradAccumulationAndAsyncCommunication.backward`),
priced now: -0.2..-2.1% on 36 records, the most on the Megatron-LM README's H100 rows, whose
user buffers hold 16 SMs over those GEMMs too (further from their measured figures). (2) A
reading: a record may state `training.runtime_options`, and the Megatron-LM 2022-23 records
(Korthikanti et al. 2022, 15 in the fitting file; MegaScale's Megatron-LM baseline, commit
285068c8, 8 held out) state the asynchronous input-gradient all-reduce their release ran by
default (Megatron-LM commit 3f652469, 2021-09-02), which the 2020-22 runtime left off: +1.2..
+6.3%, toward the measured figure on all 23. The refit then moves `family:llmfoundry` to a
median of 10.0% (9.6% before), which misses the target by rounding. Over both files LOFO moves
from 8.5% / 27.4% to 7.9% / 27.0%, in sample from 6.6% to 5.7%; `family:korthikanti2022` 7.9%
-> 5.2%, `family:megascale2024` 4.6% -> 1.9%, `family:flagperf` coverage 71% -> 76%.)

(Session 32, regenerated 2026-12-01. Three kinds of change moved predictions. (1) A reading:
records state their pipeline split (`parallelism.pp_partition` / `pp_stage_layers`), and five
BLOOM topology-search records that wrote "embeddings as own slots" now split as they ran (70
layers + embedding + head = 72 slots over 12 stages): their predicted memory falls 13%, to
18-21% under nvidia-smi's figure, which takes the in-sample memory median from 5.7% to 7.9%;
the memory-only fit then wants the reserve at its 8 GiB bound (BOUNDS.md section 5), and NCCL's
own buffers (0.5-0.7 GiB per communicator, NVIDIA/nccl#964), not modelled, are one candidate.
(2) QA round 12's formula corrections (the output layer keeps 4·s·h, Korthikanti et al. 2022
Sec. 4.3; the vocabulary-parallel layers cross the TP group once each way; selective
recomputation re-runs an unfused core's softmax and dropout; the gather after a network send
runs at NVLink's efficiency). (3) Megatron-Core's asynchronous input-gradient TP collectives
hide behind the weight-gradient GEMMs (runtime `async_dgrad`): Nemotron-4 40.6% -> 37.8%,
flagperf 11.3% -> 12.0% (its interval coverage 81% -> 71%). Over both files LOFO moves from
8.3% / 27.7% to 8.5% / 27.4%, in sample from 6.4% to 6.6%.)

(Session 31, regenerated 2026-12-01: no change to the cost model's physics and no new runs.
QA round 11 corrected how run records are read (a framework text "Megatron Core" or
"megatron_core" is Megatron-Core; fp32/TF32 records train in fp32; a GPU text naming SXM
with 94 GB stays the SXM part; a memory in the GPU text is the stated memory; bf16 on Volta
and layouts no framework runs are refused) and made each record say what it assumed: no
record of either file changed its prediction, so every figure below is session 29's.)

(Session 30, regenerated 2026-12-01: no change to the cost model's physics and no new
runs: the figures are session 29's. Two leads examined, neither adopted. (1) DeepSpeed
ZeRO-3 at one or four samples per GPU (`family:dsazure2022`, +126% at 256 GPUs and +202%
at 1,024 with micro-batch 1): the model prices 6.3 s of ZeRO-3 collectives per step at 256
GPUs (two gathers and a reduce-scatter of 3.62 GB per block, 96 blocks; 2.7 s of it exposed
beside 3.66 s of compute), while the measured 16.1 s step leaves 12.4 s beyond compute even
with no overlap, about half the modelled bandwidth per 200 Gb/s NIC (a quarter at 1,024
GPUs). The time beyond the model's compute shrinks as the micro-batch grows (1,024 GPUs: 22 s
at micro-batch 1, 13.8 s at 4, 5.7 s at 16), so it acts as communication that compute partly
hides, not a fixed cost per step. Refuted: DeepSpeed 0.6.2's unpacking of a coalesced gather
(a Python loop over the world's partitions per parameter, `AllGatherCoalescedHandle.wait`)
is not on this path: with `stage3_param_persistence_threshold` 1e5 every bias and norm stays
resident, each module fetches one weight and takes the single-tensor path. No cause found in
the source. (2) Hopper's split by framework, each family left out of the fit (Megatron-LM's
README runs 4-35% too slow, Nemotron-4 34-41%; the FSDP stacks mostly too fast, up to
56%): the element-wise kernels, whose
fusion differs between Transformer Engine and eager PyTorch, are 2-12% of the modelled step
on every Hopper record and the residuals show no trend with that share, so per-framework
fusion cannot carry a 20% split. A reading change moves no prediction: a record that states
two throughput figures is compared on the first (as before) and now says when another gives
a rate more than 5% away; 46 records do, nearly all an MFU or TFLOP/s figure inverted with a
FLOP convention the record does not state (KempnerForge's MFU gives +6..+13% over its
measured time under Korthikanti et al.'s count; XTuner's TFLOP/s -23..+23%).)

(Session 29, regenerated 2026-12-01: no change to the cost model's physics and no new
runs: the figures are session 28's. Three reading changes move no record's prediction: a
record's stated zero_stage 0 is kept under a runtime with a distributed optimizer (none of
the 239 runs has that case with more than one data-parallel rank), a record whose tp does
not divide its heads (or whose heads do not divide its hidden size) is skipped with that
rule, and a GPU text whose chip name runs into another digit ("RTX A1000") is not that chip;
61 records now say that their unstated H100/A100 form factor is taken as the SXM part. A
finding not adopted, on InternEvo's loss of throughput with scale (`family:internevo`, tp 1:
+7.5% at 128 GPUs, +19% at 256, +33% at 512, +66% at 1,024): its HybridZeroOptimizer
broadcasts the updated parameters from each rank (`broadcast_params`: one `dist.broadcast`
per rank that holds parameters, over every data-parallel rank; `hybrid_zero_optim.py` at
InternLM/InternEvo c628a8c), and `_partition_param_list` gives each rank whole tensors,
greedily by size, so from 256 GPUs on every parameter tensor (227 to 291 for InternLM-7B: 7
or 9 per block, as its attention projections carry biases or not) is a broadcast of its own
over all the ranks; the model prices the gather as one all-gather. The measured time beyond
the model's, over those broadcasts, is 2.8-3.6 ms per broadcast at 256 ranks, 4.9-6.2 ms at
512 and 9.9-12.7 ms at 1,024: about 10-14 µs per rank of the chain, the order of NCCL's
per-hop network latency (tuning.cc `hwLat` NET, 14 µs for Simple) or of a 512 KiB Simple
slice crossing each hop. Pricing it needs a broadcast time NCCL's tuner does
not model (its ring broadcast pays one hop when its channels repeat: "waiting for proper
chunk modeling") and each stage's parameter tensors in the per-layer tables: a lead, not a
change.)

(Session 28, regenerated 2026-11-30: two readings, no new runs. (1) KempnerForge's SDPA
attention is cuDNN's on Hopper: every commit of its published benchmarks locks torch
2.11.0+cu128 with cuDNN 9.19.0.56, and PyTorch puts cuDNN first in SDPA's order on
sm90/sm100 when the runtime cuDNN is newer than 9.15 (`sdp_utils.cpp`
`check_prefer_cudnn_attention`), and its own H200 profile lists `aten::_cudnn_attention_backward`
(`benchmarks/profiling/13b_24gpu_profiling.md`); it was priced as FlashAttention-2, about 1.7x slower. Its
single-node runs without tensor parallelism move toward the measurements (kfmfu2026 7B on one
H200: -20.1% -> -15.4%), its multi-node rows, already too fast, get faster (70B at 32-160
GPUs: +22..+24% -> +24..+27%), and the refit raises `efficiency_half_us` 42.6 -> 50.2 µs:
the fit uses the per-kernel latency against KempnerForge's unfused 7-GEMM blocks to slow them,
a sign of the physics still missing on those rows (their inter-node network is not stated).
(2) 4-GPU SXM nodes are point-to-point NVLink boards without NVSwitch (HGX 4-GPU; cluster
`intra_node_topology`): a pair of GPUs has a third of a GPU's NVLinks. KempnerForge's
tensor-parallel pairs on its 4-GPU H200 nodes: 7B tp2 +21.6% -> +5.4%, tp2 x fsdp2 +22.6% ->
+4.8%; no fitting-file run uses a pair, so the fit does not move with it. Figures: LOFO over
both files 8.1% / 27.1% -> 8.3% / 27.7%; in sample 6.1% -> 6.4%; coverage 91.2% -> 92.1%,
groups under 80% 4 -> 3 (kfmfu2026 79% -> 93%); kfmfu2026 11.4% -> 10.2% median, kfcv2026
28.0% -> 30.2%, kempnerforge p90 24.4% -> 26.4%.)

(Session 27, regenerated 2026-11-30: 28 held-out runs (KempnerForge's MFU benchmark, family
`kfmfu2026`, 14 runs on 1-32 H200; its config-validation report, `kfcv2026`, 7 runs on 4-32
H200 with three pipeline-parallel runs, +57..+67% too fast; FlagPerf's Llama-3-8B layout
ablation on 8 A800, 6 runs, and its 440-GPU H100 run) and one model change found on the fitting file: KempnerForge trains
bf16 weights and AdamW moments with no fp32 master (optimizer `adam_bf16`, 2 + 2 + 4 bytes per
parameter; `model.to(dtype=param_dtype)`), which fixes the slope of its memory with the
data-parallel degree (70B, dp 2 to 40: 46.9 GiB priced against 45.6 measured, 107 before)
and the dp-2 70B run priced at 207.5 GiB on a 141 GB GPU; throughput moves by under 0.5%.
A second change, read from
KempnerForge's tensor-parallel plan: its q, k, v, gate and up projections are separate
GEMMs (`fused_projections` off, 7 kernels per block) and, without torch.compile, each
redistributes its own input (`tp_input_per_projection`: 5 all-gathers and 2 reduce-scatters
per block forward instead of 2 + 2; compiled, AOTAutograd's CSE merges the identical
gathers). Its pipeline runs move from +57..+67% to +46..+52%; the refit moves
`efficiency_half_us` 37.3 -> 42.6 µs and `elementwise_passes` 5.62 -> 5.39 (in sample 6.2% ->
6.1%, p90 24.3% -> 23.8%). Against session 25: 211 -> 239 runs; leave-one-family-out over both
files 7.9% / 25.3% -> 8.1% / 27.1%; coverage 87.7% -> 91.2%, missed in 4 groups of 26 (6 of
24); groups missing the accuracy targets 15 of 24 -> 17 of 26 (`family:kfmfu2026` 11.4% /
19.5% and `family:kfcv2026` 28.0% / 49.4% new; `family:llmfoundry` now meets;
`family:flagperf` 14.0% -> 11.5% with the ablation rows; `family:kempnerforge` 18.1% / 25.9%
-> 17.5% / 24.4%; `family:moezoo` 3.7% / 21.1% -> 7.9% / 29.6% and `framework:fsdp` 24.8% ->
25.3% p90: their leave-out fits move with the added rows). The layout ranking (`RANKING.md`, new): over 28 jobs (one model,
sequence, precision, global batch and machine) with two or more published layouts, the
model's first choice is the measured fastest in 26 (out of sample), mean regret 0.8%;
FlagPerf's seven A800 layouts in the measured order.)

(Session 25, regenerated 2026-11-30: 18 held-out runs from llm-foundry's "H100 80GB BF16
(Large Scale, >= 128 GPUs)" table (PR #838, January 2024; family `llmfoundry2024`, a table
series of its own: another llm-foundry, flash-attn 2.4.2, 128-512 GPUs), FULL_SHARD for
7B-70B (8 runs at 256-512 GPUs join `sharded_at_scale:true`) and SHARD_GRAD_OP for 1B/3B,
read with the kernel the PR's sweep.py names (13B/30B `attn_impl: triton`, the others
FlashAttention-2) and the table's MP Mode column (DEFAULT: fp32 reduce-scatter; sweep.py
passes PURE, so the runs did not use sweep.py's arguments as committed). With the shipped
parameters: median 13.7%, p90 21.9%: 13B/30B -3..+6%, 70B +9..+14%, 1B/3B/7B +13..+25%,
too fast, more so with more GPUs (the measured rate per GPU drops 5-8% from 128 to 512
GPUs; the model's is flat). Read with the Triton kernel throughout (submit_benchmarks.py's
default, as the MP Mode column is its default too) the same rows are within -4..+12%
(computed after seeing the first reading; not adopted: the sweep is the written record of
the kernel). Cost model changes of the session, found on these rows (they no longer check
them independently; each is FSDP's documented behaviour): ZeRO-2 on PyTorch FSDP is
SHARD_GRAD_OP, whose forward gathers each unit behind the neighbour's forward
(torch `_should_free_in_backward`), one reduce-scatter and one gather per unit (the flat
parameter, as at ZeRO-3; it was priced in DDP's 25 MB buckets, each paying NCCL's ring
latency over 512 ranks), in fp32 onto fp32 sharded parameters under DEFAULT/torchtitan
(2 + 16/dp bytes per parameter). 3B at 512 GPUs: -19.5% (exposed gather after the step,
13 bucketed calls per layer) -> +21.2%. No record of the fitting file has ZeRO-2 on FSDP:
the shipped parameters did not move. Against session 24: leave-one-family-out over both
files 7.0% / 26.2% -> 7.9% / 25.3%; `sharded_at_scale:true` 10 -> 18 runs, p90 134.6% ->
69.0%, coverage 70% -> 78%; `generation:hopper` 54 -> 72 runs, 14.5% / 33.8% -> 15.3% /
32.0%, coverage 72% -> 82%; `framework:fsdp` 45 -> 63 runs, coverage 67% -> 78%; interval
coverage 86.5% of 193 -> 87.7% of 211, missed in 6 groups of 24 (8 of 23); groups missing
the accuracy targets 14 of 23 -> 15 of 24 (the new family misses its median: 13.7%).)

(Session 24, regenerated 2026-11-30: a Megatron-Core record with selective recomputation and
FlashAttention now re-runs the fused core in the backward pass, as Megatron-Core's attention
checkpoints the core attention whatever its kernel; the legacy Megatron-LM model skips that
checkpoint for FlashAttention, which the build had applied to every stack. Only three held-out
FlagPerf rows have the case (Mixtral-8x7B +72.8% -> +70.6%, Qwen1.5-MoE bf16 +18.6% -> +13.1%,
fp16 +17.3% -> +11.8%); `family:flagperf` 19.9% -> 14.2% median, p90 27.1% unchanged; the other
groups move by 0.1-0.4 points through the leave-out fits that include those rows; the summary
figures below (7.0% / 26.2%, 14 groups missed, coverage 86.5%) are unchanged. Nothing else in
the cost model moved for a calibration record: Transformer Engine's user-buffer overlap now
hides nothing without sequence parallelism, and no record runs that case.)

(Hand-written with the regeneration of 2026-11-30, session 21: DeepSpeed's ZeRO-1/2 gradient
reduction is priced as the all-reduce it is (BF16_Optimizer's buffered_allreduce_fallback; the
ZeRO optimizer's allreduce_and_scatter, use_multi_rank_bucket_allreduce by default in 0.19.8)
and InternEvo is read as its own optimizer (all-reduced buckets behind the backward, as its
text states overlap_sync_grad=True; it was the DeepSpeed fallback with the reduction exposed).
Against session 20: in sample 6.2% (unchanged), leave-one-family-out on the published file
7.8% / 24.5% -> 8.6% / 24.8%, over both files 6.6% / 26.1% -> 7.0% / 26.2%, groups missing
the accuracy targets 13 -> 14 (`framework:fsdp` 10.0% -> 10.3% median, through the A100
efficiency the refit lowers, 0.681 -> 0.674), interval coverage 86.5% (8 groups missed, as
before); `family:internevo` 6.9% / 29.6% -> 9.7% / 34.5%: the overlap its text states hides
the reduction the fallback exposed, and its loss of throughput with scale (4 x 100 Gb RoCE,
fabric not stated) stays unexplained. BLOOM's, GPT-NeoX's, GLM's and FlagPerf's
Megatron-DeepSpeed rows move 0.1-0.4 points slower. Session 20: hybrid sharding is in the
strategy space, so the three HSDP/MiCS runs are modelled, fms-fsdp's Llama-2 7B and 13B on
128 A100 (ZeRO-3 inside each node, 16 replicas; in sample, +10.6% and +24.1%) and
BloombergGPT on 512 A100 (ZeRO-3 over 128-GPU groups, 4 replicas; held out, +7.7%); the
in-sample fit moved with them (median 5.8% -> 6.2%, `iteration_overhead_s` to its upper
bound 0.05, BOUNDS.md). The figures below are this regeneration's. Session 18's changes: Transformer
Engine's FP8 casts and transposes are priced (`autopar_opt/cost/fp8_casts.py`) and the H100
die's FP8 GEMM efficiency is pinned to the H200 run (0.637, fitted 0.555 before); MoE
layers pay one GEMM kernel per local expert where the stack launches one (Megatron-Core's
SequentialMLP and Transformer Engine's multi-stream GroupedLinear behind --moe-grouped-gemm;
the legacy one-kernel GroupedMLP of Megatron-Core 0.7 and earlier read from the text);
DeepEP's dispatch crosses the network once per target node; Ulysses context parallelism
(all-to-all of the heads) is priced; DeepSpeed ZeRO-3 gathers module by module;
InternEvo's FlashAttention-2, named in its
architecture text, is priced as the fused kernel its graph was built for; a die a GEMM
microbenchmark measures (Blackwell too) is pinned in every fit. Records: 15 held-out runs
added (DeepSpeed's ZeRO-3 on 128-1,024 A100 on Azure, `dsazure2022`; XTuner's Ulysses runs
at 32k-256k tokens, `xtuner2024`). Re-read it when the table above changes.)

- Leaving a whole regime out is harsher than leaving a source out: without any
  run of a framework family the fit has nothing to set what only that family
  exercises (FSDP's prefetch and unfused optimizers, DeepSpeed's ZeRO buckets and
  BF16 optimizer passes), and without a GPU generation its GEMM efficiency falls
  back to the other chips'. Under v3 the communication efficiencies, the
  attention kernels, the GEMM efficiencies of measured dies and the overlap
  slowdown are pinned by microbenchmarks and papers, not fitted, so no regime can
  pull them. `generation:ampere` meets 10% / 25% (5.9% / 19.8%), as do
  `long_context:true`, `framework:fsdp` (10.0% / 24.5%, narrowly: the HSDP runs joined it)
  and five source families; the largest misses are
  `sharded_at_scale:true` and `family:dsazure2022` (below), `framework:deepspeed`
  (BLOOM's Megatron-DeepSpeed runs, InternEvo's hybrid ZeRO-1 read as the DeepSpeed
  family, the Azure ZeRO-3 runs), `generation:hopper` and `fp8:true`.
- ZeRO-3/FSDP at >= 256 GPUs (`sharded_at_scale:true`, 10 runs: DeepSpeed's GPT-3 175B
  on 256-1,024 A100 on Azure, 8, KempnerForge's 175B on 360 H200 and BloombergGPT's MiCS
  run on 512 A100): median 6.8%, p90 134.9%. With 8-16k tokens per GPU and step the Azure runs are within -1..+6%; at
  micro-batch 4 (4k tokens) +43%, at micro-batch 1 +127% (256 GPUs) and +205% (1,024
  GPUs), with the shipped parameters: the blog's own point, that ZeRO-3 is
  communication-bound with little work per GPU, and the model prices that communication
  2-3x too cheap. DeepSpeed's gathers are priced module by module now (one all-gather per
  linear module, each with NCCL's latency over the whole group: `fetch_sub_module`), which
  took +145% / +230% down to +127% / +205%; what else binds there is not found (the
  model's exposed ZeRO-3 time at 1,024 GPUs and micro-batch 1 is 2.4 s of a predicted
  9.6 s step, against 29 s measured).
- Hopper left out (`generation:hopper`, 54 runs): median 14.2% (13.9% in session 18,
  14.6% in session 17, 15.4% in session 16, 8.4% in session 15), p90 33.8%. KempnerForge's 70B rows at 32-160
  H200 are 25-28% too fast (one fp32 reduce-scatter per iteration, as its trainer runs,
  instead of one per micro-batch, which had priced them within 2-6%: a compensating
  error), beside FlagPerf's Llama-3-8B rows (+27-31%, bf16 and FP8 alike) and the 8-GPU
  70B row (+86% in throughput; its published 128.5 GiB is below the sharded weights,
  gradients and Adam state alone, 70.6B x 16 B / 8 = 131.5 GiB: it did not run
  as stated). The per-GPU network rate is not in KempnerForge's report; its launch
  script names four ConnectX-7 NDR NICs per 4-GPU H200 node (one 400 Gb/s NIC per GPU,
  as priced).
- Mixture-of-Experts (`moe:true`, 14 runs: the Megatron MoE Model Zoo, 11, Qwen3-235B-A22B
  on 256 H100 and GB200, Mixtral-8x22B on 128 H100; FlagPerf, 3, Mixtral-8x7B on 32 H100
  and Qwen1.5-MoE on 8 A800, all experts on every rank). Median 5.8% (5.4% in session 18,
  21.3% in session 17), p90 31.2% (68.2% in session 17). With the
  shipped parameters the Model Zoo's H100 Qwen3 rows are within -8..+14% (-25 to +76%
  before): 16 local experts launch 16 GEMMs per projection under TE's GroupedLinear, and
  DeepEP sends a token once per node (0.45 of the plain all-to-all's network bytes for 128
  experts, top-8, on 4 nodes); its context-parallel rows within +0..+2%. Misses: FlagPerf's
  Mixtral-8x7B (+71% since session 24: Megatron-Core 0.6's all-gather dispatcher at tp 8 is not priced),
  its Qwen1.5-MoE rows (+12-13%), the GB200 bf16 row (-37%: its run captures the router and
  the dispatch preprocessing in CUDA graphs, which the model does not price, and its 16
  local experts' GEMMs pay the per-kernel latency fitted on A100/H100 runs) and the
  blockwise-FP8 Mixtral row (+25%). These mechanisms were found on held-out rows: the
  Qwen3 and Qwen1.5-MoE rows no longer check them independently (the physics is read
  from Transformer Engine's and DeepEP's sources, nothing was fitted to them).
- FP8 (`fp8:true`, 5 runs: FlagPerf 2, llm-foundry 1, MoE Model Zoo 2): median 23.2%,
  p90 25.7% (15.8% / 19.0% at session 18's first commit: the regime fit's other
  parameters moved with the added runs). The H100 FP8 GEMM efficiency is the H200 run's
  0.637 in every fit, and Transformer Engine's casts and transposes around each FP8 GEMM
  are priced as HBM traffic; fitted freely with them priced, the efficiency came to 0.627
  (0.555 without them). FlagPerf's FP8 over bf16 speed-up is predicted 1.30 against 1.29
  measured (Llama-3 8B on 8 H100); both its FP8 rows are too fast by as much as its bf16
  rows: a FlagPerf bias, not an FP8 one. The Model Zoo's Mixtral-8x22B FP8 row is 25%
  too fast: it runs the blockwise FP8 recipe (1x128 / 128x128 scales), whose GEMMs are not
  the per-tensor kernels the H200 run timed; llm-foundry's MPT-3B and the GB200 MXFP8 row
  are within -4..+1%.
- Long context >= 32k (`long_context:true`, 13 runs: llm-foundry 3 without context
  parallelism, MoE Model Zoo 4 with CP 2-8, XTuner 6 with Ulysses sequence parallelism 2-16):
  median 4.3%, p90 23.3%, target met (15.4% / 21.4% at session 18's first commit with 7
  runs). llm-foundry's MPT rows at 32k-64k are 19-24% too slow, XTuner's 256k rows 20-38%
  too fast.
- Regimes still with few published runs: no run on a non-SXM or power-capped part (the
  GH200 runs found, swiss-ai's Alps pull requests, give chart-read figures without the
  fabric or power limit). Below 5 runs no target applies; a plan in such a regime gets a
  wide interval that says how many runs share its regime. The exam sources of issue 28
  point 8 (NeMo's performance summaries, torchtitan's tables, ...) are not used.
- Coverage: 86.5% of 193 overall (85.8% of 190 in session 18, 88.6% of 175 in session 17). Each run contributes the
  range of its out-of-sample residuals (its family's leave-out fit and each regime
  group's) to the interval, the lower quantile over the lows and the upper over the highs
  (`autopar_opt/cost/interval.py`); each run's interval is taken without its own source,
  so a source unlike the others is not covered by design. Per group missed in 8 of 23:
  the Azure ZeRO-3 rows (67%) and `sharded_at_scale:true` they dominate (70%), flagperf
  (79%), kempnerforge (75%), llmfoundry (61%), fsdp (64%), hopper (72%), long context (77%).
- Hybrid sharding: the model prices the in-node gathers and reduce-scatters and one
  all-reduce of each rank's gradient shard across the replicas (FSDP2 / Megatron-Core).
  fms-fsdp's 13B row is 24% too fast at 48% MFU (6N + 12·l·h·s) against the 7B row's 57%
  and the fully-sharded 34B/70B rows' 55%/54% (both -8%): the model has it compute-bound, and the
  network of IBM's Vela cluster it ran on is not stated (catalog HDR 25 GB/s per GPU,
  stated); a slower one would make its per-layer all-reduce of a 1/8 shard over 16 nodes
  exposed.
- InternEvo runs are read as the `deepspeed` framework family (see above), so the
  `framework:deepspeed` group mixes DeepSpeed ZeRO proper with InternEvo.
"""


def _runs():
    runs, skipped = [], []
    for path in FILES:
        r, s = model_records(load_run_file(path))
        runs += r
        skipped += s
    return runs, skipped


def _groups(runs) -> dict[str, set[str]]:
    """group name -> ids of the throughput runs in it."""
    groups: dict[str, set[str]] = {}
    for run in runs:
        if run.memory_only:
            continue
        reg = regime_of(run.graph, run.cluster, run.training, run.plan, run.strategy)
        names = [f"family:{run.family}", f"framework:{reg.framework}",
                 f"generation:{reg.generation}"]
        names += [f"{k}:true" for k in ("long_context", "sharded_at_scale", "fp8", "moe",
                                        "power_limited") if getattr(reg, k)]
        for name in names:
            groups.setdefault(name, set()).add(run.id)
    return groups


def leave_groups_out(runs, groups):
    """(group -> {id: rel_error} predicted by the fit without the group,
    group -> the parameters of that fit)."""
    out, fits = {}, {}
    for name, ids in sorted(groups.items()):
        train = [r for r in runs if r.id not in ids]
        if not any(not r.memory_only for r in train):
            continue
        params = fit(train, CostParams()).params
        fits[name] = params.to_dict()
        out[name] = {r.id: compare(r, params).rel_error for r in runs if r.id in ids}
    return out, fits


def _stats(errors: list[float]) -> tuple[float, float]:
    a = np.abs(np.array(errors))
    return float(np.percentile(a, 50)), float(np.percentile(a, 90))


def main() -> str:
    load = os.getloadavg()
    t0 = time.perf_counter()
    runs, skipped = _runs()
    tput = [r for r in runs if not r.memory_only]
    groups = _groups(runs)
    logo, fits = leave_groups_out(runs, groups)
    elapsed = time.perf_counter() - t0
    regimes = {r.id: regime_of(r.graph, r.cluster, r.training, r.plan, r.strategy) for r in tput}

    records = []
    for r in tput:
        res = {g: math.log1p(e[r.id]) for g, e in logo.items() if r.id in e}
        worst = max(res.values(), key=abs)
        d = r.cluster.device
        records.append({"id": r.id, "family": r.family, "regime": regimes[r.id].labels(),
                        "device": {"name": d.name, "form": d.form, "tdp_w": d.tdp_w,
                                   "power_limit_w": d.power_limit_w if d.capped else None},
                        "residual": round(worst, 6),
                        "residuals": {g: round(v, 6) for g, v in sorted(res.items())}})
    doc = {"generated_on": _dt.date.today().isoformat(),
           "generated_by": "python benchmarks/calibration/intervals.py",
           "method": ("per run: log(measured / predicted time) out of sample, from the fit that "
                      "left out its source family and from each fit that left out a regime group it "
                      "belongs to; 'residual' is the one of largest magnitude; an interval takes each run's range "
                      "of them (autopar_opt/cost/interval.py)"),
           "records_files": {p.name: _sha(p) for p in FILES},
           "runs": records,
           "fits": fits}
    OUT.write_text("# Written by benchmarks/calibration/intervals.py from leave-one-group-out "
                   "residuals; do not edit.\n" + yaml.safe_dump(doc, sort_keys=False, width=120))
    pool = tuple(ResidualRun(d["id"], d["family"], d["regime"], d["residual"], d["residuals"])
                 for d in records)
    return _report(runs, tput, skipped, groups, logo, regimes, pool, elapsed, load, fits)


#: The fit's own rule for "at a bound" (``autopar_opt/calibration/fit.py``): within this share
#: of a parameter's plausible range of either end.
AT_BOUND = 1e-3


def bound_hits(params: dict) -> list[str]:
    """The fitted scalars (``fit.SCALARS`` and ``memory_fragmentation``) of a parameter
    mapping that sit at a bound of their plausible range, by the fit's own rule."""
    out = []
    for name in (*SCALARS, "memory_fragmentation"):
        lo, hi, _ = RANGES[name]
        span = hi - lo
        if params[name] <= lo + AT_BOUND * span or params[name] >= hi - AT_BOUND * span:
            out.append(name)
    return out


def _bounds_row(fits: dict) -> str:
    """The Targets row of issue 28's "no fitted parameter at a bound": the shipped fit and
    the leave-one-group-out fits behind every out-of-sample figure and interval."""
    shipped = bound_hits(default_params().to_dict())
    per_fit = {g: bound_hits(p) for g, p in fits.items()}
    hit = {g: h for g, h in per_fit.items() if h}
    counts: dict[str, int] = {}
    for h in hit.values():
        for name in h:
            counts[name] = counts.get(name, 0) + 1
    near = ", ".join(f"`{n}` {default_params().to_dict()[n]:.4g} of {RANGES[n][0]:g}-"
                     f"{RANGES[n][1]:g}" for n in SCALARS)
    return (f"| no fitted parameter at a bound (within {AT_BOUND:.1%} of its range's span) | none | "
            f"shipped fit: {', '.join(shipped) or 'none'} ({near}); leave-one-group-out fits: "
            + (f"**{len(hit)} of {len(fits)}** put one at a bound ("
               + ", ".join(f"`{n}` in {c}" for n, c in sorted(counts.items(), key=lambda x: -x[1]))
               + ")" if hit else f"none of {len(fits)}") + " |")


def _coverage(tput, regimes, pool, logo):
    """(overall {target: [hits]}, per group {group: [hits]}) of the 80% intervals."""
    by_id = {p.id: p for p in pool}
    own, per_group = [], {}
    for r in tput:
        iv = interval_for(regimes[r.id], 1.0, runs=pool, exclude_family=r.family)
        lo, hi = math.log(iv.low), math.log(iv.high)
        target = by_id[r.id].residuals[f"family:{r.family}"]
        own.append(lo <= target <= hi)
        per_group.setdefault(f"family:{r.family}", []).append(lo <= target <= hi)
        for g, res in by_id[r.id].residuals.items():
            if g.startswith("family:"):
                continue
            per_group.setdefault(g, []).append(lo <= res <= hi)
    return own, per_group


def _coverage_misses(per_group: dict[str, list[bool]]) -> str:
    held = {g: v for g, v in per_group.items() if len(v) >= GROUP_MIN}
    low = [f"{g} ({np.mean(v):.0%} of {len(v)})" for g, v in sorted(held.items())
           if np.mean(v) < LEVEL]
    return (f"met in all {len(held)}" if not low else
            f"missed in {len(low)} of {len(held)}: " + "; ".join(low))


def _report(runs, tput, skipped, groups, logo, regimes, pool, elapsed, load, fits) -> str:
    params = default_params()
    fitting = {x.id for x in model_records(load_run_file(FILES[0]))[0]}
    insample = [compare(r, params).rel_error for r in tput if r.id in fitting]
    mem, mem_fit = [], []
    for r in runs:
        err = None
        if r.memory_only:
            err = abs(compare_memory(r, params).memory_rel_error)
        elif r.measured_memory_gib:
            pred = predict(r, params)[1]
            if pred is not None:
                err = abs(pred / r.measured_memory_gib - 1)
        if err is not None:
            mem.append(err)
            if r.id in fitting:
                mem_fit.append(err)
    own, per_group = _coverage(tput, regimes, pool, logo)
    lines = [
        "# Leave-one-group-out by regime, and the 80% intervals (cost model v3 targets)\n",
        f"Records: `{FILES[0].name}` + `{FILES[1].name}`: {len(tput)} runs with a measured "
        f"throughput, {sum(r.memory_only for r in runs)} memory-only, {len(skipped)} not modelled. "
        f"Generated by `python benchmarks/calibration/intervals.py` on "
        f"{_dt.date.today().isoformat()} ({len(logo)} fits, {elapsed:.0f} s on a shared 2-core "
        f"machine, load average {load[0]:.1f}).\n",
        "Each group is left out of the fit and predicted (`rel. error = predicted/measured - 1` "
        "on samples/s). Targets of issue 28 apply to groups of at least "
        f"{GROUP_MIN} runs: median |error| <= {MEDIAN_TARGET:.0%}, p90 <= {P90_TARGET:.0%}.\n",
        "| group | runs | median | p90 | max | target met | 80% interval coverage |",
        "|---|---|---|---|---|---|---|"]
    missed = []
    for g in sorted(logo):
        errs = list(logo[g].values())
        med, p90 = _stats(errs)
        held = len(errs) >= GROUP_MIN
        met = (med <= MEDIAN_TARGET and p90 <= P90_TARGET) if held else None
        if held and not met:
            missed.append(f"{g} (median {med:.1%}, p90 {p90:.1%})")
        cov = per_group.get(g)
        covtxt = f"{np.mean(cov):.0%} of {len(cov)}" if cov else "-"
        lines.append(f"| `{g}` | {len(errs)} | {med:.1%} | {p90:.1%} | {max(map(abs, errs)):.1%} | "
                     f"{'-' if met is None else 'yes' if met else '**no**'} | {covtxt} |")
    allr = [e for g, d in logo.items() if g.startswith("family:") for e in d.values()]
    med_all, p90_all = _stats(allr)
    ins_med = float(np.median(np.abs(insample)))
    mem_med = float(np.median(mem)) if mem else float("nan")
    mem_fit_med = float(np.median(mem_fit)) if mem_fit else float("nan")
    cov_all = float(np.mean(own))
    lines += [
        "",
        "## Targets\n",
        "| figure | target | measured |", "|---|---|---|",
        f"| every group of >= {GROUP_MIN} runs, median / p90 | <= 10% / <= 25% | "
        f"{'all met' if not missed else 'missed in ' + str(len(missed)) + ': ' + '; '.join(missed)} |",
        f"| leave-one-source-family-out over both files, median / p90 | <= 10% / <= 25% | "
        f"{med_all:.1%} / {p90_all:.1%} |",
        f"| in-sample median (shipped parameters, `{FILES[0].name}`) | <= 5% | {ins_med:.1%} |",
        f"| memory median, shipped parameters, records of `{FILES[0].name}` that state memory "
        f"({len(mem_fit)}, in sample) | <= 10% | {mem_fit_med:.1%} |",
        f"| memory median, shipped parameters, records of both files that state memory "
        f"({len(mem)}) | <= 10% | {mem_med:.1%} |",
        f"| 80% interval covers the run's leave-own-family-out residual, overall | >= 80% | "
        f"{cov_all:.1%} of {len(own)} |",
        f"| 80% interval coverage per group of >= {GROUP_MIN} runs | >= 80% each | "
        f"{_coverage_misses(per_group)} |",
        _bounds_row(fits),
        "",
        f"Intervals: split-conformal quantiles (`autopar_opt/cost/interval.py`) of the residuals "
        f"of comparable runs (all regime labels shared; labels given up in a fixed order while "
        f"fewer than {MIN_COMPARABLE} match), each run's interval computed without its own "
        f"source family. Level {LEVEL:.0%}.",
        "",
        "Not modelled (with the reason):\n"]
    lines += [f"- `{rid}`: {why}" for rid, why in skipped]
    text = "\n".join(lines) + "\n\n" + READING
    (HERE / "REGIMES.md").write_text(text)
    return text


if __name__ == "__main__":
    sys.stdout.write(main())
