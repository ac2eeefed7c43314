"""The output layer's stored activations (QA round 12).

Oracle: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models", Sec. 4.3: beside the embedding, the final layer norm stores
``2·s·b·h/t``, the output projection ``2·s·b·h/t`` and the cross-entropy its fp32
logits ``4·s·b·v/t``: ``4·s·b·h/t · (1 + v/h)`` with sequence parallelism (also
Megatron-LM ``megatron/training/theoretical_memory_usage.py``, the output-layer term
``4·s·b·h·(1 + V/h)``). The model kept one ``2·s·h`` only (the norm's output), so
the last block's output, which the final norm reads in its backward pass and no
block stores, was in no layer's activations."""

import pytest

from autopar_opt.cost.memory import activation_bytes
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training
from autopar_opt.model_zoo.transformer import lm_head

S, H, V, B = 2048, 4096, 32000, 4


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_korthikanti_output_layer_term(tp):
    head = lm_head("head", S, H, V, tied=False)
    tr = Training(global_batch_size=B, seq_len=S, runtime=runtime_named("megatron-core"))
    got = activation_bytes(head, Strategy(dp=1, tp=tp, sp=tp > 1), B, training=tr)
    assert got == pytest.approx(4 * S * B * H / tp * (1 + V / H))
    # without sequence parallelism the norm's input and output stay whole on every rank
    if tp > 1:
        whole = activation_bytes(head, Strategy(dp=1, tp=tp), B, training=tr)
        assert whole == pytest.approx(4 * S * B * H + 4 * S * B * V / tp)
