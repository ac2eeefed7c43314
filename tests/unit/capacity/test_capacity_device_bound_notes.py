"""A base cluster key that describes one device's hardware (its NVLink, memory, power cap,
board) is said when the sweep varies the device: every device is priced with the stated
value (QA round 35: an A100 base stating intra_node 600 GB/s priced B200 on it silently)."""

from __future__ import annotations

import yaml

from autopar_opt.capacity import load_sweep
from support import paths


def _scenarios(tmp_path, devices, **cluster):
    data = yaml.safe_load((paths.DATA / "capacity" / "tiny.yaml").read_text())
    data["base"]["cluster"].update(cluster)
    data["axes"] = {"device": devices}
    data["planning"]["prices"]["per_gpu_hour"]["B200"] = 5.0
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_sweep(path).scenarios


def test_a_stated_nvlink_is_said_for_every_device(tmp_path):
    """Oracle: the B200 scenario's built cluster has the stated 600 GB/s, not its own."""
    link = {"bandwidth_gb_per_s": 600.0, "latency_us": 5.0}
    scenarios = _scenarios(tmp_path, ["A100-80GB", "B200"], intra_node=link)
    b200 = next(s for s in scenarios if s.axes["device"] == "B200")
    assert b200.spec.cluster.intra_node.bandwidth_gb_per_s == 600.0
    for s in scenarios:
        assert any(n.startswith("base cluster.intra_node = ") and "A100-80GB, B200" in n
                   for n in s.notes), s.notes


def test_nothing_is_said_without_a_stated_key_or_a_device_axis(tmp_path):
    for s in _scenarios(tmp_path, ["A100-80GB", "B200"]):
        assert not any(n.startswith("base cluster.") for n in s.notes)
    for s in _scenarios(tmp_path, ["A100-80GB"], device_memory_gib=40):
        assert not any(n.startswith("base cluster.") for n in s.notes)
