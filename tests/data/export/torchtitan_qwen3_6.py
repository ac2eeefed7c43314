"""torchtitan job config, autopar-opt plan for qwen3-6 on debug-2x4 (8 x A100-40GB): pp=2 tp=2 cp=1 dp=2 ep=2 etp=1

torchtitan 0.3 job configuration written by autopar-opt. Run it from the folder of
this file (on PYTHONPATH) as
    torchrun ... -m torchtitan.train --module autopar_job --config autopar_plan
(the file saved as autopar_job.py). Model: torchtitan's qwen3 30B-A3B flavour.
"""

from torchtitan.models.qwen3 import model_registry
from torchtitan.models.qwen3.config_registry import qwen3_30b_a3b as _base
from torchtitan.distributed.activation_checkpoint import FullAC


def autopar_plan():
    config = _base()
    config.model_spec = model_registry('30B-A3B', attn_backend="varlen")
    config.model_spec.model.layers = config.model_spec.model.layers[:6]   # the model's first 6 layers
    config.parallelism.data_parallel_replicate_degree = 1
    config.parallelism.data_parallel_shard_degree = 2
    config.parallelism.tensor_parallel_degree = 2
    config.parallelism.context_parallel_degree = 1
    config.parallelism.pipeline_parallel_degree = 2
    config.parallelism.fsdp_reshard_after_forward = 'always'
    config.parallelism.pipeline_parallel_schedule = '1F1B'
    config.parallelism.pipeline_parallel_microbatch_size = 2
    config.parallelism.module_fqns_per_model_part = [['tok_embeddings', 'layers.0', 'layers.1'], ['layers.2', 'layers.3', 'layers.4', 'layers.5', 'norm', 'output']]
    config.parallelism.expert_parallel_degree = 2
    config.parallelism.enable_sequence_parallel = True
    config.training.global_batch_size = 16
    config.training.local_batch_size = 8
    config.training.seq_len = 128
    config.training.disable_cuda_graphs = True
    config.training.mixed_precision_param = "bfloat16"
    config.activation_checkpoint = FullAC.Config()
    return config
