"""The default expert-parallel degrees are those README and ``autopar schema`` state
(``search.ep_degrees`` unset): for each expert tensor-parallel degree searched (tp and 1),
every ``ep`` with ``etp·ep`` dividing ``tp·cp·dp`` and dividing the routed experts, so on
``dp2 tp4`` experts without tensor parallelism reach ``ep = 8 > dp·cp``.

Oracle: the rule read literally, over every ``ep`` from 1 to the devices (brute force),
against :func:`enumerate_strategies` with the default space. The README used to say
"defaults to the degrees dividing dp·cp", which leaves out ``ep`` 4 and 8 at ``etp = 1`` here.
"""

from __future__ import annotations

from autopar_opt.ir.strategies import enumerate_strategies
from autopar_opt.ir.training import SearchSpace
from autopar_opt.model_zoo.registry import build_model


def test_default_ep_degrees_follow_the_documented_folding_rule():
    moe = next(layer for layer in build_model("debug-moe").layers if layer.is_moe)
    devices = 8
    got = {(s.dp, s.tp, s.ep, s.etp or s.tp) for s in enumerate_strategies(
        moe, devices, 8, SearchSpace(zero_levels=(0,), sequence_parallel=(False,)), 8)}
    want = set()
    for tp in (t for t in range(1, devices + 1) if devices % t == 0 and moe.max_tp % t == 0):
        dp = devices // tp
        for etp in {tp, 1}:
            for ep in range(1, devices + 1):
                if (tp * dp) % (etp * ep) == 0 and moe.num_experts % ep == 0:
                    want.add((dp, tp, ep, etp))
    assert got == want
    assert (2, 4, 8, 1) in got          # ep = 8 above dp·cp = 2, as README says
