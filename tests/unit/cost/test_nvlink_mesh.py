"""Point-to-point NVLink boards (no NVSwitch): a group gets the links to its own members.

Oracle, by hand: on a 4-GPU board each GPU's NVLinks are split evenly over its 3 peers
(Perlmutter's 4-A100 nodes: "each GPU is connected to each other GPU", 4 of the 12
NVLink-3 links per pair, NERSC Perlmutter architecture; HGX H100/H200 4-GPU: 6 of 18). A
ring or all-to-all over m GPUs of the board can use the links between its own members
only: (m - 1)/3 of a GPU's bandwidth, a third for a pair. An NVSwitch node gives every
group all of it. The collective's bus bandwidth is that share of the switched figure
(450 GB/s x 0.80 on Hopper), and the plan's pipeline sends between two GPUs of the board
use one pair's links, in the cost tables as in ``evaluate``.
"""

from __future__ import annotations

import pytest

from autopar_opt.calibration.reading.device import read_cluster
from autopar_opt.cost.assumptions import cost_assumptions
from autopar_opt.cost.comm import collective, collective_group
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.cost.params import CostParams, default_params
from autopar_opt.formulations import build_formulation
from autopar_opt.formulations.base import price_assignment
from autopar_opt.ir.hardware import DEVICE_CATALOG, default_nvlink_mesh, make_cluster
from autopar_opt.ir.training import Schedule, Training
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.solvers.registry import get_backend
from autopar_opt.model_zoo.synthetic import random_chain
from support.mip_instances import SPACE, tables_for


def _ctx(cluster) -> StageContext:
    return StageContext(cluster, Training(8, 1024), CostParams(), cluster.num_devices, 8)


@pytest.mark.parametrize("device,gpn,mesh", [
    ("A100-40GB", 4, True), ("A100-80GB", 4, True), ("H100-SXM-80GB", 4, True),
    ("H200-141GB", 4, True), ("H200-141GB", 3, True),
    ("H100-SXM-80GB", 8, False),          # HGX 8-GPU: NVSwitch
    ("H100-SXM-80GB", 2, False),          # two GPUs: all links between them either way
    ("H100-PCIe-80GB", 4, False),         # no NVLink board
    ("GB200", 4, False),                  # a tray of an NVLink-switched rack
])
def test_default_wiring(device, gpn, mesh):
    assert default_nvlink_mesh(DEVICE_CATALOG[device], gpn) is mesh
    assert make_cluster("c", 1, gpn, device).nvlink_mesh is mesh


def test_share_by_hand():
    board = make_cluster("c", 2, 4, "H200-141GB")
    assert [board.intra_share(m) for m in (1, 2, 3, 4)] == pytest.approx([1.0, 1 / 3, 2 / 3, 1.0])
    switched = make_cluster("c", 2, 4, "H200-141GB", nvlink_mesh=False)
    assert [switched.intra_share(m) for m in (2, 3, 4)] == [1.0, 1.0, 1.0]
    assert board.intra_pair.bandwidth_gb_per_s == pytest.approx(450.0 / 3)
    assert board.intra_pair.name == board.intra_node.name     # the NVLink efficiency applies
    assert switched.intra_pair is switched.intra_node


def test_bus_bandwidth_by_hand():
    """tp=2 on a 4-GPU board: 450 x 0.80 / 3 = 120 GB/s; tp=4: 360; switched: 360 each."""
    board, switched = make_cluster("c", 1, 4, "H100-SXM-80GB"), \
        make_cluster("c", 1, 4, "H100-SXM-80GB", nvlink_mesh=False)
    assert collective_group(_ctx(board), 2, 1).bus_gb_per_s == pytest.approx(120.0)
    assert collective_group(_ctx(board), 3, 1).bus_gb_per_s == pytest.approx(240.0)
    assert collective_group(_ctx(board), 4, 1).bus_gb_per_s == pytest.approx(360.0)
    assert collective_group(_ctx(switched), 2, 1).bus_gb_per_s == pytest.approx(360.0)
    # a large all-gather is bandwidth bound: a pair of the board takes 3x the switched time
    big = 4e9
    ratio = (collective(_ctx(board), "all_gather", 2, 1, big)
             / collective(_ctx(switched), "all_gather", 2, 1, big))
    assert ratio == pytest.approx(3.0, rel=0.01)


def test_across_nodes_two_members_per_node():
    """A data-parallel group with 2 members on each of 2 nodes: min(NVLink pair share,
    their NICs) = min(120, 2 x 50 x 0.95 = 95): the network binds, as before."""
    board = make_cluster("c", 2, 4, "H100-SXM-80GB")
    g = collective_group(_ctx(board), 4, 2)
    assert g.bus_gb_per_s == pytest.approx(95.0)


def test_partial_board_run_keeps_its_board():
    """A published 2-GPU run on 4-GPU nodes sits on two GPUs of a 4-GPU board."""
    from autopar_opt.calibration.reading.schema import Hardware
    hw = Hardware.model_validate({"gpu_type": "H200 SXM 141GB", "num_gpus": 2, "gpus_per_node": 4})
    notes: list[str] = []
    facts = read_cluster(hw, "H200-141GB", 2, notes)
    assert (facts.gpus_per_node, facts.node_gpus) == (2, 4)
    assert any("NVLink point to point" in n and "1/3" in n for n in notes)    # said, not guessed
    cl = make_cluster("c", 1, 2, "H200-141GB", board_gpus=facts.node_gpus)
    assert cl.nvlink_board == 4 and cl.intra_share(2) == pytest.approx(1 / 3)
    assert make_cluster("c", 1, 2, "H200-141GB").intra_share(2) == 1.0


def test_said_in_assumptions():
    """The default says it is one and how to override it; a stated wiring says so; an
    8-GPU NVSwitch node, the common case, adds no line."""
    graph = random_chain(3, 2)

    def wiring(cluster) -> list[str]:
        return [ln for ln in cost_assumptions(graph, cluster, Training(8, 1024)) if "intra-node:" in ln]
    (default,) = wiring(make_cluster("c", 1, 4, "A100-80GB"))
    assert "point to point" in default and "a pair 0.33" in default
    assert "not stated: the default for 4 SXM GPUs" in default and "intra_node_topology: switch" in default
    (stated,) = wiring(make_cluster("c", 1, 4, "A100-80GB", nvlink_mesh=True))
    assert "stated: intra_node_topology: mesh or nvlink_board_gpus" in stated
    (switch,) = wiring(make_cluster("c", 1, 4, "A100-80GB", nvlink_mesh=False))
    assert "NVSwitch (stated" in switch
    assert wiring(make_cluster("c", 1, 8, "A100-80GB")) == []


def test_an_8_gpu_v100_node_says_it_is_priced_as_nvswitch():
    """QA round 12: 8 V100 SXM2 (DGX-1, the zoo's 1x8-v100-32) have no NVSwitch (a hybrid
    cube-mesh: a pair shares 1-2 of 6 NVLinks, NVIDIA WP-08437-002), yet a pair was priced at
    the full 150 GB/s without a word. Oracle: the pair's share priced (1.0, switched) and the
    line that now says it, with the override; a stated wiring and DGX-2's 16 GPUs say nothing
    of it."""
    graph = random_chain(3, 2)

    def wiring(cluster) -> list[str]:
        return [ln for ln in cost_assumptions(graph, cluster, Training(8, 1024)) if "intra-node:" in ln]
    dgx1 = make_cluster("c", 1, 8, "V100-32GB")
    assert dgx1.intra_share(2) == 1.0          # priced as switched: the guess to be said
    (line,) = wiring(dgx1)
    assert "priced as NVSwitch" in line and "not stated" in line and "hybrid cube-mesh" in line
    assert "intra_node_topology: mesh" in line
    assert not any("priced as NVSwitch" in ln
                   for ln in wiring(make_cluster("c", 1, 8, "V100-32GB", nvlink_mesh=True)))
    assert wiring(make_cluster("c", 1, 8, "V100-32GB", nvlink_mesh=False)) == []
    assert wiring(make_cluster("c", 1, 16, "V100-32GB")) == []


@pytest.mark.parametrize("cluster, words", [
    ("{nodes: 1, gpus_per_node: 4, device: A100-PCIe-80GB, intra_node_topology: mesh}",
     "intra-node link is pcie4 (32 GB/s), not NVLink"),
    ("{nodes: 1, gpus_per_node: 2, device: H100-SXM-80GB, intra_node_topology: mesh}",
     "a node of 2 GPU(s) has no NVLinks to split"),
    ("{groups: [{name: a, nodes: 1, gpus_per_node: 4, device: H100-PCIe-80GB, "
     "intra_node_topology: mesh}]}", "cluster.groups[0].intra_node_topology"),
])
def test_mesh_refused_where_it_describes_nothing(tmp_path, cluster, words):
    """QA round 8: mesh on a PCIe part was priced as an NVLink board, and on 2 GPUs per
    node it silently changed nothing."""
    from autopar_opt.spec import SpecError, load_spec
    spec = tmp_path / "s.yaml"
    spec.write_text(f"model: {{zoo: debug}}\ncluster: {cluster}\ntraining: {{global_batch_size: 8}}\n")
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    assert words in str(err.value) and "intra_node_topology" in str(err.value)


def test_a_record_naming_nvswitch_is_switched():
    """QA round 8: a 4-GPU record whose hardware.intra_node names NVSwitch was read as a
    point-to-point board."""
    from autopar_opt.calibration.reading.schema import Hardware
    hw = Hardware.model_validate({"gpu_type": "A100-SXM4 80GB", "num_gpus": 4, "gpus_per_node": 4,
                                  "intra_node": "NVLink3 + NVSwitch"})
    notes: list[str] = []
    facts = read_cluster(hw, "A100-80GB", 4, notes)
    assert facts.nvswitch and any("with NVSwitch" in n for n in notes)
    hw = Hardware.model_validate({"gpu_type": "A100-SXM4 80GB", "num_gpus": 4, "gpus_per_node": 4,
                                  "intra_node": "NVLink, no NVSwitch"})
    assert not read_cluster(hw, "A100-80GB", 4, []).nvswitch


def test_pipeline_send_priced_alike_in_tables_and_evaluate():
    """On a mesh board the cost tables price the pipeline boundary between two GPUs of a
    board on one pair's links as ``evaluate`` does (the solver's objective is
    evaluate(plan)), and that plan's boundary costs more than on a switched node."""
    graph, training = random_chain(7, 6), Training(16, 1024)
    mesh, switched = small_cluster(1, 4, nvlink_mesh=True), small_cluster(1, 4)
    t = tables_for(graph, mesh, training, SPACE, 2, 4, Schedule.gpipe)
    f = build_formulation(t, "milp")
    get_backend("highs").solve_model(f.matrix(), f.problem_class, time_limit_s=30, rel_gap=1e-9)
    p, o, g, _, _ = price_assignment(t, f.stage_assignment(), f.strategy_choice())
    total = sum(p) + sum(o) + (t.microbatches - 1) * max(p + o) + max(g)
    plan = f.decode()
    on_mesh = evaluate(plan, graph, mesh, training)
    assert total + default_params().iteration_overhead_s == pytest.approx(on_mesh.iteration_time_s, rel=1e-9)
    assert sum(o) > 0
    assert on_mesh.iteration_time_s > evaluate(plan, graph, switched, training).iteration_time_s


def test_two_gpus_of_a_four_gpu_board_can_be_stated(tmp_path):
    """nvlink_board_gpus: a job on 2 GPUs of a 4-GPU HGX board prices its pair at a third of
    the links (slower tensor parallelism than a bare 2-GPU node), says so, and is refused
    where it contradicts the node (a board smaller than the node; with NVSwitch)."""
    from autopar_opt.cost.evaluate import evaluate
    from autopar_opt.spec import SpecError, load_spec
    body = ("model: {{zoo: debug}}\ncluster: {{nodes: 1, gpus_per_node: 2, device: H100-SXM-80GB{extra}}}\n"
            "training: {{global_batch_size: 8}}\nplan: {{tp: 2, pp: 1, dp: 1, micro_batch_size: 1}}\n")
    times = {}
    for name, extra in (("board", ", nvlink_board_gpus: 4"), ("pair", "")):
        f = tmp_path / f"{name}.yaml"
        f.write_text(body.format(extra=extra))
        spec = load_spec(f)
        assert spec.cluster.nvlink_board == (4 if name == "board" else 0)
        times[name] = evaluate(spec.plan, spec.graph, spec.cluster, spec.training).iteration_time_s
    assert times["board"] > times["pair"]
    for extra, words in ((", nvlink_board_gpus: 1", "cannot hold the node's 2"),
                         (", nvlink_board_gpus: 4, intra_node_topology: switch", "drop one of the two")):
        f = tmp_path / "bad.yaml"
        f.write_text(body.format(extra=extra))
        with pytest.raises(SpecError) as err:
            load_spec(f)
        assert "cluster.nvlink_board_gpus" in str(err.value) and words in str(err.value)
