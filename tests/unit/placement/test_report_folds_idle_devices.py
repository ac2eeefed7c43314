"""report.html of a placement folds the devices that hold no node into one row, as the
terminal summary does (QA round 13: one table row per device made an 11 MB report for
65,536 accelerators on a 3-node graph).

Oracle: placement.json of the same run, which still lists every device: the devices
holding nodes are the report's rows, and the idle ones are counted in one line."""

from __future__ import annotations

import json
import re

from support.cli import run_cli
from support.placement_cases import public_chain

DEVICES = 4_096
GRAPH = public_chain(fpga_size=100, fpgas=DEVICES, cost=5)


def test_the_report_lists_the_used_devices_and_counts_the_idle_ones(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(GRAPH))
    code, text = run_cli("place", path, "--out", tmp_path / "out", "--quiet")
    assert code == 0, text
    doc = json.loads((tmp_path / "out" / "placement.json").read_text())
    html = (tmp_path / "out" / "report.html").read_text()
    assert len(doc["devices"]) == DEVICES            # the document keeps every device
    used = [d["device"] for d in doc["devices"] if d["nodes"]]
    idle = len(doc["devices"]) - len(used)
    assert idle > 16
    section = html.split('<section id="devices">')[1].split("</section>")[0]
    rows = re.findall(r"<tr(?: class=\"critical\")?><td>([^<(]+?)(?: \(critical\))?</td>", section)
    assert rows == used
    assert f"{idle:,} more devices hold no node" in section
    assert len(html) < 20_000                         # was one row per device: about 700 KB
