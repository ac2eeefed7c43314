"""The text summary of `autopar place` folds empty devices (QA round 12): 65,536
accelerators on a 3-node graph printed 65,536 device lines, all but one "0 nodes".
Past 16 empty devices one line counts them; placement.json still lists every device.

Oracle: the --json answer of the same command (the devices that hold nodes, and how
many hold none)."""

from __future__ import annotations

import json

from support.cli import run_cli
from support.placement_cases import public_chain

GRAPH = public_chain(fpga_size=100, fpgas=64, cost=5)


def test_idle_devices_are_counted_in_one_line(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(GRAPH))
    code, text = run_cli("place", path)
    assert code == 0, text
    code, js = run_cli("place", path, "--json")
    devices = json.loads(js)["devices"]
    used = [d["device"] for d in devices if d["nodes"]]
    shown = [line.split(":")[0].strip() for line in text.splitlines() if " nodes  load " in line]
    assert shown == used
    idle = len(devices) - len(used)
    assert f"({idle:,} more devices hold no node" in text
    assert len(text.splitlines()) < 20
