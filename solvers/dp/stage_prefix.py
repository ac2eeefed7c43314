"""Megatron's block recomputation in a pipeline whose stage split is free: the rule the
chain DP's labels carry (:mod:`~autopar_opt.solvers.dp.chain`).

Megatron-LM's ``--recompute-granularity full --recompute-method block
--recompute-num-layers N`` recomputes fully the transformer layers ``j < N`` of every
stage (of every model chunk) and none of the others (Megatron-Core
``megatron/core/transformer/transformer_block.py`` ``TransformerBlock._checkpointed_forward``:
``if layer_idx < self.config.recompute_num_layers`` per chunk, one ``N`` for every stage).
Where the split is free (1F1B with ``pp > 1``) which layers are a stage's first ``N``
depends on the split, so a layer's strategy set depends on its position in its stage.
The DP carries per label the counter ``c = min(transformer layers of the stage so far,
N)``: a transformer layer takes the full key's strategies while ``c < N`` and the none
key's after; other layers take the none key's (Megatron checkpoints transformer layers
only). Two labels of different counters have different completions, so they never
dominate each other, and the ordering rule of identical layers is off (their sets differ
by position). Every plan of the rule is a block plan of this ``N`` (a stage of fewer
than ``N`` transformer layers recomputes all of them, as Megatron does), and every such
plan is a plan of the rule: the search over it is exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StagePrefix:
    """``--recompute-num-layers n`` over a free split: per layer, whether it is a
    transformer layer (``block``) and the strategies of the full and the none key
    (boolean masks over the layer's strategies, ``full`` and ``none``), and a floor under
    the largest stage time of its plans."""

    n: int
    block: np.ndarray
    full: list[np.ndarray]
    none: list[np.ndarray]
    #: a proven lower bound on every plan's largest stage time under the rule (0: none
    #: known; :func:`autopar_opt.solvers.dp.uniform.least_bottleneck`): the DP's floor
    bottleneck: float = 0.0

    def opened(self, u: int, ks: np.ndarray) -> tuple[np.ndarray, int]:
        """Layer ``u`` opening a stage: which of the strategies ``ks`` it may take and
        the counter after it."""
        if self.block[u]:
            return self.full[u][ks], 1
        return self.none[u][ks], 0

    def stayed(self, u: int, counter: np.ndarray, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Layer ``u`` after labels of counters ``counter`` in the same stage:
        ``[len(counter), len(ks)]`` which strategies each may take, and the counters
        after it."""
        if not self.block[u]:
            return np.broadcast_to(self.none[u][ks], (len(counter), len(ks))), counter
        recompute = counter < self.n
        ok = np.where(recompute[:, None], self.full[u][ks][None, :], self.none[u][ks][None, :])
        return ok, np.minimum(counter + 1, self.n)

    def holds(self, stage: list[int], choice: list[int]) -> bool:
        """Whether a plan (each layer's stage and strategy) keeps the rule."""
        count: dict[int, int] = {}
        for u, (i, k) in enumerate(zip(stage, choice)):
            if not self.block[u]:
                ok = self.none[u][k]
            else:
                ok = (self.full[u] if count.get(i, 0) < self.n else self.none[u])[k]
                count[i] = count.get(i, 0) + 1
            if not ok:
                return False
        return True


def stage_prefix(n: int, block: list[bool], full: list[np.ndarray], none: list[np.ndarray],
                 sizes: list[int]) -> tuple[StagePrefix, list[np.ndarray]]:
    """The rule of ``N = n`` from the full and the none key's strategy indices per layer
    (``sizes``: each layer's strategy count), and the union of the strategies a layer
    may take in some position (the search's ``allowed``: its bounds relax over it).
    Layers that share their index arrays share their masks."""
    memo: dict = {}

    def mask(idx: np.ndarray, size: int) -> np.ndarray:
        key = (id(idx), size)
        if key not in memo:
            out = np.zeros(size, dtype=bool)
            out[idx] = True
            memo[key] = (idx, out)
        return memo[key][1]

    fm = [mask(f, s) for f, s in zip(full, sizes)]
    nm = [mask(x, s) for x, s in zip(none, sizes)]
    unions: dict = {}
    allowed = []
    for u, (f, x) in enumerate(zip(full, none)):
        key = (id(f), id(x), bool(block[u]))
        if key not in unions:
            unions[key] = (f, x, np.union1d(f, x) if block[u] else x)
        allowed.append(unions[key][2])
    return StagePrefix(n, np.array(block, dtype=bool), fm, nm), allowed


__all__ = ["StagePrefix", "stage_prefix"]
