"""The fleet report draws the groups and what runs where (issue 34, point 3).

Oracle: the plan itself, not the document the drawing reads. Every group is a box
whose width is proportional to its devices; every stage (of the pipeline, or of each
data-parallel class) is a box inside its group's box, at the ranks the plan gives it
(stages of one group take consecutive ranks in stage order), as wide as its devices,
titled with its layer count and range; a group the plan does not use says so.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from autopar_opt.ir.replicas import ReplicaPlan
from autopar_opt.ir.training import Recompute, SearchSpace, Training
from autopar_opt.model_zoo.synthetic import random_chain
from autopar_opt.search.engine import SearchOptions
from autopar_opt.search.fleet_document import build_fleet_document
from autopar_opt.search.mixed import run_fleet_search
from reports.fleet import fleet_svg
from support.fleets import NO_OVERHEAD, two_groups

NS = "{http://www.w3.org/2000/svg}"
SPACE = SearchSpace(zero_levels=(0, 3), recompute=(Recompute.none, Recompute.full),
                    microbatches=(1, 2, 4), schedules=("1f1b",))


def _drawn(link_gb_per_s: float, fast: tuple[int, int]):
    fleet = two_groups(slow=(1, 2), fast=fast, link_gb_per_s=link_gb_per_s)
    graph, training = random_chain(4, 3), Training(global_batch_size=128, seq_len=1024)
    options = SearchOptions(solver="dp", rel_gap=0.0, time_limit_s=120)
    res = run_fleet_search(graph, fleet, training, SPACE, NO_OVERHEAD, options, split_parts=8)
    doc = build_fleet_document("x.yaml", graph, fleet, training, SPACE, NO_OVERHEAD, options, res, 16)
    return fleet, graph, res.plan, ET.fromstring(fleet_svg(doc))


def _expected(fleet, graph, plan) -> list[tuple[int, int, int, str]]:
    """(group, first rank, devices, title) of every stage, from the plan."""
    classes = plan.classes if isinstance(plan, ReplicaPlan) else [None]
    out = []
    for t, c in enumerate(classes):
        p = plan if c is None else c.plan
        used: dict[int, int] = {}
        for i, (st, g, d) in enumerate(zip(p.stages, p.stage_groups, p.stage_devices)):
            first = used.get(g, 0)
            used[g] = first + d
            title = f"s{i}: {len(st.layers)} layers"
            if c is not None:
                title = f"class {t} (batch {c.batch}) " + title
            out.append((g, first, d, f"{title}: {st.layers[0]}..{st.layers[-1]}"))
    return out


@pytest.mark.parametrize("link,fast,shape", [(25.0, (1, 2), ReplicaPlan), (0.5, (1, 2), None)])
def test_every_stage_is_drawn_inside_its_group_at_its_ranks(link, fast, shape) -> None:
    fleet, graph, plan, svg = _drawn(link, fast)
    assert plan is not None
    if shape is not None:
        assert isinstance(plan, shape)
    rects = svg.findall(f"{NS}rect")
    boxes = rects[:len(fleet.groups)]                     # the groups' boxes come first
    stages = [r for r in rects[len(fleet.groups):] if r.find(f"{NS}title") is not None]
    unit = float(boxes[0].get("width")) / fleet.groups[0].num_devices
    for box, grp in zip(boxes, fleet.groups):
        assert float(box.get("width")) == pytest.approx(grp.num_devices * unit, rel=1e-3)
    want = _expected(fleet, graph, plan)
    assert len(stages) == len(want)
    for rect, (g, first, d, title) in zip(stages, want):
        box = boxes[g]
        x0, y0 = float(box.get("x")), float(box.get("y"))
        x, y = float(rect.get("x")), float(rect.get("y"))
        assert y0 < y < y0 + float(box.get("height"))               # in its group's row
        assert x == pytest.approx(x0 + first * unit, abs=0.11)      # at its first rank
        assert float(rect.get("width")) == pytest.approx(d * unit, abs=0.11)
        assert rect.find(f"{NS}title").text == title
    unused = set(range(len(fleet.groups))) - {g for g, _, _, _ in want}
    assert unused == (set() if shape is ReplicaPlan else {0})   # the slow link: the A100s idle
    text = " ".join(t.text or "" for t in svg.iter(f"{NS}text"))
    assert text.count("not used by the plan") == len(unused)


@pytest.mark.parametrize("seq_len", [1024, None])
def test_the_fleet_headline_writes_tokens_per_second_once(seq_len):
    """With a sequence, "N tokens/s"; without one (a CNN), the no-sequence text alone, not
    "none (no sequence length) tokens/s" (QA round 10's fix, as first written)."""
    import copy

    from autopar_opt.reports.formatting import NO_TOKENS
    from reports.fleet import render_fleet_html

    fleet = two_groups(slow=(1, 2), fast=(1, 2), link_gb_per_s=25.0)
    graph, training = random_chain(4, 3), Training(global_batch_size=128, seq_len=1024)
    options = SearchOptions(solver="dp", rel_gap=0.0, time_limit_s=120)
    res = run_fleet_search(graph, fleet, training, SPACE, NO_OVERHEAD, options, split_parts=8)
    doc = copy.deepcopy(build_fleet_document("x.yaml", graph, fleet, training, SPACE, NO_OVERHEAD,
                                             options, res, 16))
    doc["spec"]["training"]["seq_len"] = seq_len
    html = render_fleet_html(doc)
    assert "tokens/s tokens/s" not in html and "length) tokens/s" not in html
    assert (NO_TOKENS in html) == (seq_len is None)
