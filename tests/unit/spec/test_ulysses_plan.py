"""A hand-written plan under Ulysses context parallelism (runtime cp_comm_type a2a) keeps
the rule the search keeps: tp*cp divides a layer's key/value heads (Transformer Engine's
a2a splits each tp rank's heads over cp and asserts it). QA round 11: Llama-3-8B (8
key/value heads) at tp 4 x cp 4 was priced by estimate although the search never offers
it and the Megatron export refuses it. Oracle: the search's own strategy enumeration."""

from __future__ import annotations

import pytest
import yaml

from autopar_opt.ir.strategies import enumerate_strategies
from autopar_opt.ir.training import SearchSpace
from autopar_opt.spec import SpecError, load_spec


def _spec(tmp_path, tp: int, cp: int, comm: str):
    data = {"model": {"zoo": "llama3-8b"},
            "cluster": {"nodes": 2, "gpus_per_node": 8, "device": "H100-SXM-80GB"},
            "training": {"global_batch_size": 16, "seq_len": 8192, "runtime": "megatron-core",
                         "runtime_options": {"cp_comm_type": comm}},
            "plan": {"tp": tp, "pp": 1, "cp": cp, "microbatches": 16 // (16 // (tp * cp)),
                     "sequence_parallel": True}}
    path = tmp_path / f"u_{tp}_{cp}_{comm}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_search_never_offers_it(tmp_path):
    spec = load_spec(_spec(tmp_path, 2, 4, "a2a"))
    block = next(layer for layer in spec.graph.layers if layer.name == "block000")
    got = {(s.tp, s.cp) for s in enumerate_strategies(
        block, 16, 2, SearchSpace(cp_degrees=(1, 2, 4)), 8, 8192, head_split_cp=True)}
    assert (2, 4) in got and (4, 4) not in got


def test_a_plan_whose_tp_cp_does_not_divide_the_heads_is_refused(tmp_path):
    with pytest.raises(SpecError) as err:
        load_spec(_spec(tmp_path, 4, 4, "a2a"))
    text = str(err.value)
    assert "plan.cp = 4" in text and "tp*cp = 16 must divide" in text and "8 key/value heads" in text
    assert "cp_comm_type p2p" in text


def test_the_ring_splits_the_sequence_and_takes_it(tmp_path):
    assert load_spec(_spec(tmp_path, 4, 4, "p2p")).plan is not None
