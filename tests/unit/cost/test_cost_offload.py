"""CPU activation offload (issue 10): memory leaves the device, copies cost time
only where they outlast the compute beside them.

Source: Transformer Engine ``transformer_engine/pytorch/cpu_offload.py``
(``get_cpu_offload_context``; Megatron-Core ``--cpu-offloading-num-layers``):
a layer's saved activations go to host memory during the next layer's forward
and come back during the following layer's backward. Every expected value is
derived by hand in the test's docstring.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autopar_opt.calibration.calibrate import model_records
from autopar_opt.calibration.reading import load_run_file
from autopar_opt.cost.compute import compute_time
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.memory import activation_bytes
from autopar_opt.cost.offload import transfer_time
from autopar_opt.cost.params import default_params
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.ir.hardware import DEVICE_CATALOG, host_link_gb_per_s, make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.spec import SpecError
from autopar_opt.spec.spec import load_spec
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training
from model_zoo.transformer import embedding, transformer_block
from support import paths

H100 = DEVICE_CATALOG["H100-SXM-80GB"]
#: The layout of Megatron-Bridge's GB200 Llama-3-70B FP8 recipe
#: (scripts/performance/configs/llama3/workload_base_configs.py, LLAMA3_70B_GB200_FP8_CS_BASE_CONFIG:
#: Megatron-FSDP over 64, mbs 2, cpu_offloading_num_layers 40), as a record with an
#: arbitrary measured time: the test reads and prices the offload, it checks no throughput
#: (the recipe's published throughput is an exam source, issue 28 point 8).
GB200_70B = {
    "id": "gb200_llama3_70b_offload_recipe", "record_type": "end_to_end_training_throughput",
    "model": {"name": "LLAMA3_70B", "arch": "Llama 3 (GQA 8, SwiGLU, RoPE, no dropout)",
              "num_layers": 80, "hidden_size": 8192, "num_attention_heads": 64, "num_kv_heads": 8,
              "ffn_hidden_size": 28672, "vocab_size": 128256, "seq_len": 8192},
    "hardware": {"gpu_type": "GB200", "num_gpus": 64},
    "parallelism": {"tp": 1, "pp": 1, "dp": 64, "cp": 1, "sequence_parallel": False,
                    "vp_chunks": 1, "ep": 1, "fsdp": "FSDP (sharding group 64)"},
    "training": {"precision": "FP8-CS", "micro_batch_size": 2, "global_batch_size": 256,
                 "cpu_offloading_num_layers": 40, "framework": "Megatron-Bridge / NeMo 25.11"},
    "measured": {"iteration_time_s": 10.0}}     # a rate the GPUs can run (28% of the FP8 peak)
RUNS = paths.DATA / "published_runs.yaml"


def test_transfer_is_exposed_only_beyond_its_window():
    """64 GB over the H100's PCIe Gen5 x16 host link (64 GB/s per direction) is
    t = 1 s each way: raw 2 s. Forward window 0.25 s leaves 0.75 s exposed; a
    backward window of 2 s hides the reload: exposed 0.75 s."""
    assert host_link_gb_per_s(H100) == 64.0
    raw, exp = transfer_time(64e9, H100, 0.25, 2.0)
    assert raw == pytest.approx(2.0)
    assert exp == pytest.approx(0.75)
    assert transfer_time(0.0, H100, 0.0, 0.0) == (0.0, 0.0)


def _ctx(training: Training) -> StageContext:
    return StageContext(make_cluster("c", 1, 8, "H100-SXM-80GB"), training, default_params(), 8, 2)


def test_offloaded_share_leaves_the_device_and_the_embedding_stays():
    """f = 0.25 of a transformer block's saved activations A: the device keeps
    0.75·A per micro-batch; the copies m = 0.25·A each way take m / 64 GB/s,
    exposed as max(0, t - fwd) + max(0, t - bwd) with the block's own compute
    as the window. An embedding is outside the offload context: unchanged."""
    block = transformer_block("b", 2048, 4096, 32, 16384, flash_attention=True)
    emb = embedding("e", 2048, 4096, 50304)
    s = Strategy(dp=8, tp=1)
    rt = runtime_named("megatron-core")
    on, off = Training(16, 2048, runtime=rt, activation_offload=0.25), Training(16, 2048, runtime=rt)
    a = activation_bytes(block, s, 2, training=off)
    assert layer_cost(block, s, _ctx(on)).act_bytes == pytest.approx(0.75 * a)
    assert layer_cost(emb, s, _ctx(on)).act_bytes == pytest.approx(layer_cost(emb, s, _ctx(off)).act_bytes)
    comp = compute_time(block, s, _ctx(on))
    t = 0.25 * a / 64e9
    expect = max(0.0, t - comp.fwd_s) + max(0.0, t - comp.bwd_s)
    cost_on, cost_off = layer_cost(block, s, _ctx(on)), layer_cost(block, s, _ctx(off))
    assert cost_on.offload_exposed_s == pytest.approx(expect)
    assert cost_on.time_s - cost_off.time_s == pytest.approx(expect)


def test_slow_host_link_exposes_the_copies():
    """The same block with f = 0.9 on a 1 GB/s host link (a spec device not in
    the catalog gets PCIe Gen4's 32 GB/s; here the transfer is priced directly):
    m = 0.9·A, t = m / 1 GB/s is far above the block's forward and backward, so
    exposed = 2t − fwd − bwd."""
    block = transformer_block("b", 2048, 4096, 32, 16384, flash_attention=True)
    s = Strategy(dp=8, tp=1)
    tr = Training(16, 2048, runtime=runtime_named("megatron-core"), activation_offload=0.9)
    comp = compute_time(block, s, _ctx(tr))
    m = 0.9 * activation_bytes(block, s, 2, training=tr)
    slow = type(H100)("slow", dict(H100.peak_tflops), 80.0, 3350.0)
    assert host_link_gb_per_s(slow) == 32.0
    t = m / 32e9
    raw, exp = transfer_time(m, slow, comp.fwd_s, comp.bwd_s)
    assert raw == pytest.approx(2 * t)
    assert exp == pytest.approx(max(0.0, t - comp.fwd_s) + max(0.0, t - comp.bwd_s))


def test_published_offload_recipe_is_read_and_priced():
    """Megatron-Bridge's GB200 Llama-3-70B recipe (FP8, FSDP over 64, mbs 2, pp 1):
    ``cpu_offloading_num_layers = 40`` of the 80 layers of its one pipeline
    rank is f = 40/80 = 0.5. The stage's activations without the output layer
    are the 80 blocks' plus the embedding's: offloading halves the blocks'
    part only, so with B = blocks' and E = embedding's bytes the ratio is
    (0.5·B + E) / (B + E)."""
    (run,), _ = model_records([GB200_70B])
    assert run.training.activation_offload == pytest.approx(0.5)
    p = default_params()
    with_off = evaluate(run.plan, run.graph, run.cluster, run.training, p)
    plain_tr = Training(run.training.global_batch_size, run.training.seq_len, run.training.dtype,
                        run.training.optimizer, run.training.memory_reserve_gib, run.training.runtime)
    plain = evaluate(run.plan, run.graph, run.cluster, plain_tr, p)
    ctx = StageContext(run.cluster, plain_tr, p, run.strategy.devices, run.microbatch_samples)
    blocks = sum(layer_cost(layer, run.strategy, ctx).act_bytes for layer in run.graph.layers
                 if layer.name.startswith("block"))
    other = sum(layer_cost(layer, run.strategy, ctx).act_bytes for layer in run.graph.layers
                if layer.kind.value == "embedding")
    ratio = with_off.stages[0].activation_gib / plain.stages[0].activation_gib
    assert ratio == pytest.approx((0.5 * blocks + other) / (blocks + other), rel=1e-9)
    assert with_off.stages[0].peak_memory_gib < plain.stages[0].peak_memory_gib


def _spec(tmp_path: Path, offload) -> Path:
    spec = {"model": {"zoo": "debug"},
            "cluster": {"name": "c4", "nodes": 1, "gpus_per_node": 4, "device": "A100-40GB"},
            "training": {"global_batch_size": 16, "activation_offload": offload}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_spec_setting_reaches_training_and_is_checked(tmp_path):
    """``training.activation_offload`` flows into :class:`Training`; a fraction
    of 1 (every activation on the host) is rejected naming the key."""
    assert load_spec(_spec(tmp_path, 0.5)).training.activation_offload == 0.5
    with pytest.raises(SpecError, match=r"training\.activation_offload"):
        load_spec(_spec(tmp_path, 1.0))


def test_fsdp_reduces_gradients_in_fp32_under_composer_default():
    """ZeRO-3 over dp = 8 GPUs of one H100 node, no prefetch, one block of P
    parameters (12·h² + biases): two ring all-gathers of 2P bytes and one
    reduce-scatter of the gradient. Ring time per collective: 7·α + 7/8 · bytes / β with
    α = 5 µs, β = 450 GB/s · comm_efficiency. With ``fp32_grad_reduce`` (FSDP
    reduce_dtype float32: Composer ``mixed_precision: DEFAULT``) the
    reduce-scatter moves 4P bytes instead of 2P: the difference is
    7/8 · 2P / β exactly (the latency terms cancel)."""
    layer = transformer_block("b", 2048, 4096, 32, 16384, flash_attention=True)
    p = default_params()
    beta = 450e9 * p.comm_efficiency
    s = Strategy(dp=8, tp=1, zero=3)
    times = {}
    for fp32 in (False, True):
        rt = runtime_named("pytorch-fsdp", fsdp_prefetch=False, fp32_grad_reduce=fp32)
        ctx = StageContext(make_cluster("c", 1, 8, "H100-SXM-80GB"), Training(16, 2048, runtime=rt),
                           p, 8, 8)
        times[fp32] = layer_cost(layer, s, ctx).zero_exposed_s
    assert times[True] - times[False] == pytest.approx(7 / 8 * 2 * layer.params / beta, rel=1e-9)


def test_composer_mixed_precision_text_sets_the_reduce_dtype():
    """llm-foundry records state Composer's FSDP mixed precision: DEFAULT
    (fp32 reduce) on the H100 table, PURE (bf16 reduce) on the A100-40GB one."""
    ids = {"llmfoundry_h100_80gb_mpt7b_seq2048_8gpu": True,
           "llmfoundry_a100_40gb_mpt7b_seq2048_8gpu": False}
    runs, _ = model_records([r for r in load_run_file(RUNS) if r["id"] in ids])
    assert {r.id: r.training.runtime.fp32_grad_reduce for r in runs} == ids
