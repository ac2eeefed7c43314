"""The per-mesh solve: bound fixing keeps the optimum and a valid bound; replicated
sub-meshes make more devices never worse; the certificate's bound is the least over meshes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autopar_opt.cost.operators.tables import build_tables, unary_bound
from autopar_opt.ir.mesh import Mesh, logical_meshes
from autopar_opt.model_zoo.operator_graphs import alexnet
from autopar_opt.opspace.solve import solve_operator_space, solve_tables
from support.opspace_cases import brute_force, context, random_graph


@pytest.mark.parametrize("seed", range(6))
def test_bound_fixing_keeps_the_optimum_and_bounds_validly(seed):
    g = random_graph(np.random.default_rng(seed), 5)
    t = build_tables(g, context(4), Mesh((2, 2), 4))
    best, _ = brute_force(t)
    above = solve_tables(t, "dp", incumbent=best * 1.0001)       # the optimum beats it: found exactly
    assert above.status == "optimal" and above.value == pytest.approx(best, rel=1e-12)
    below = solve_tables(t, "dp", incumbent=best * 0.999)        # nothing beats it: pruned, bound valid
    assert below.status == "pruned" and below.value is None
    assert unary_bound(t) <= below.lower_bound <= best * (1 + 1e-12)


def test_more_devices_are_never_worse():
    g = alexnet(32)
    values = [solve_operator_space(g, context(n, gpus_per_node=4, batch=32), n).value for n in (4, 8, 16)]
    assert values[1] <= values[0] * (1 + 1e-12) and values[2] <= values[1] * (1 + 1e-12)


def test_sub_meshes_are_replicated_2d_shapes_of_divisors():
    meshes = logical_meshes(16, 8)
    full = [m.shape for m in meshes if m.replicas == 1]
    assert full == [(1, 16), (2, 8), (4, 4), (8, 2)]
    subs = {(m.shape, m.replicas) for m in meshes if m.replicas > 1}
    assert subs == {((2, 2), 4), ((2, 4), 2), ((4, 2), 2)}


def test_certificate_bound_is_the_least_over_meshes():
    r = solve_operator_space(alexnet(32), context(8, batch=32), 8)
    assert r.lower_bound == min(o.lower_bound for o in r.outcomes)
    assert r.status(1e-9) == "optimal" and math.isclose(r.lower_bound, r.value, rel_tol=1e-9)


def test_the_cli_summary_says_which_memory_is_usable():
    """The summary's capacity is the usable memory (73.2 GiB of an A100-80GB), said so,
    as solve's capacity, not a bare "of 73.2 GiB" beside solve's "/80.0 GiB". Oracle: the
    figure equals plan.json's capacity_bytes, which is below the device's HBM."""
    import json

    from support.cli import run_cli
    from support.paths import REPO
    code, text = run_cli("solve", REPO / "examples" / "operator_sharding" / "alexnet.yaml")
    assert code == 0, text
    code, raw = run_cli("solve", REPO / "examples" / "operator_sharding" / "alexnet.yaml", "--json")
    cap = json.loads(raw)["metrics"]["capacity_bytes"] / 2**30
    assert cap < 80 and f"of {cap:.3g} GiB usable per device" in text
    assert " GiB usable per device (its memory less the user's and the runtime's reserve" in \
        " ".join(text.split())
