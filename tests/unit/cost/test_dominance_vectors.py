"""The one definition of what strategy pruning compares (``cost/tables.py``
``DOMINANCE_FIELDS``, read by ``prune_layer_strategies`` and ``CostTables.dominating_kept``).

Oracles: the ``LayerCost`` attributes themselves, read one by one, and the table
arrays the formulations read (``time``, ``sync``, ``weight_bytes``, ``act_bytes``,
``working_bytes``, docs/DESIGN.md §3 and the ``stage_memory`` rows): each row of the
cost-side vectors equals the table-side row of the same strategy, in the same order,
so pruning and the warm-start mapping judge exactly the numbers the solvers use.
"""

from __future__ import annotations

import numpy as np

from autopar_opt.cost.context import LayerCost
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import DOMINANCE_FIELDS, build_cost_tables, dominance_vectors
from autopar_opt.model_zoo.transformer import decoder_lm
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training


def test_fields_are_the_five_terms_the_tables_store() -> None:
    assert DOMINANCE_FIELDS == (("time_s", "time"), ("sync_s", "sync"),
                                ("weight_bytes", "weight_bytes"), ("act_bytes", "act_bytes"),
                                ("working_bytes", "working_bytes"))
    names = {f.name for f in LayerCost.__dataclass_fields__.values()}
    assert {f for f, _ in DOMINANCE_FIELDS} <= names


def test_cost_and_table_vectors_agree_row_by_row() -> None:
    graph = decoder_lm("tiny", 2, 256, 256, 4, 1024, 1000)
    training = Training(global_batch_size=16, seq_len=256)
    space = SearchSpace(zero_levels=(0, 3), recompute=(Recompute.none, Recompute.full))
    t = build_cost_tables(graph, small_cluster(1, 4), training, space, default_params(), 2, 4,
                          Schedule.one_f_one_b, prune_dominated=False)
    ctx = t.stage_context()
    for u, layer in enumerate(graph.layers):
        costs = [layer_cost(layer, s, ctx) for s in t.strategies[u]]
        by_hand = np.array([[c.time_s, c.sync_s, c.weight_bytes, c.act_bytes, c.working_bytes]
                            for c in costs])
        assert np.array_equal(dominance_vectors(costs), by_hand)
        assert np.array_equal(t.dominance_vectors(u), by_hand)
    assert dominance_vectors([]).shape == (0, 5)
