"""Which parameters ``torch.autocast`` casts in a tied language model.

The rule behind :func:`autopar_opt.ir.training.autocast_casts_weights` and
:func:`autopar_opt.cost.state.autocast_cast_params`, checked on CPU: a token
embedding (``nn.Embedding``), a ``nn.LayerNorm``, a ``nn.Linear`` and a tied
output GEMM (``F.linear(y, emb.weight)``) each run once under
``torch.autocast("cpu", dtype=torch.bfloat16)``. Reported per op: the output
dtype and every tensor autograd saves for the backward (caught with
``torch.autograd.graph.saved_tensors_hooks``): shape, dtype, and whether it is
a parameter itself or a new tensor (a cast, or an activation).

Expected from PyTorch's autocast op lists (``docs/source/amp.rst``, "Autocast
Op Reference"): ``linear`` / ``matmul`` cast their fp32 weight to 16 bits and
save the cast; ``F.embedding`` is on no list (fp32 output, only the indices
saved); ``layer_norm`` is on the float32 list (the fp32 weight saved as is).
Usage: ``python benchmarks/autocast/probe_embedding.py``; output recorded in
RESULTS.md beside this file.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    vocab, hidden = 16, 8
    emb, ln, lin = nn.Embedding(vocab, hidden), nn.LayerNorm(hidden), nn.Linear(hidden, hidden)
    names = {p.data_ptr(): f"{m}.{n}" for m, mod in (("emb", emb), ("ln", ln), ("lin", lin))
             for n, p in mod.named_parameters()}
    saved: list[tuple] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append((tuple(t.shape), str(t.dtype).removeprefix("torch."),
                      names.get(t.data_ptr(), "new tensor")))
        return t

    tokens = torch.tensor([[1, 2, 3]])
    with torch.autocast("cpu", dtype=torch.bfloat16), \
            torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        x = tokens
        for label, op in (("nn.Embedding", emb), ("nn.LayerNorm", ln), ("nn.Linear", lin),
                          ("tied output F.linear(y, emb.weight)", lambda y: F.linear(y, emb.weight))):
            saved.clear()
            x = op(x)
            print(f"{label}: output {str(x.dtype).removeprefix('torch.')}; saved {saved}")
    print(f"torch {torch.__version__}")


if __name__ == "__main__":
    main()
