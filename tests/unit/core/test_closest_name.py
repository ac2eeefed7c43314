"""Nearest-name suggestions keep a device's vendor and generation (issue 33).

Oracle: the catalog's own names; "H100-80GB" must not be sent to 'A100-80GB' (the
closer string) when an H100 exists.
"""

from __future__ import annotations

import pytest

from autopar_opt.core.errors import closest_name, did_you_mean
from autopar_opt.ir.hardware import DEVICE_CATALOG

NAMES = list(DEVICE_CATALOG)


@pytest.mark.parametrize("word,expected", [
    ("H100-80GB", "H100-SXM-80GB"),      # same chip beats the closer string A100-80GB
    ("h100 sxm", "H100-SXM-80GB"),
    ("H100", "H100-SXM-80GB"),
    ("A100-80G", "A100-80GB"),
    ("a10080gb", "A100-80GB"),
    ("A100-40", "A100-40GB"),
    ("B100", "B200"),                    # no B100: the same vendor letter first
    ("V100", "V100-32GB"),
    ("zzz", None),
])
def test_devices(word, expected):
    assert closest_name(word, NAMES) == expected


def test_keys_and_solvers_still_read_by_spelling():
    assert closest_name("pp_degree", ["pp_degrees", "tp_degrees", "zero_levels"]) == "pp_degrees"
    assert closest_name("gurobbi", ["highs", "gurobi", "scip", "dp"]) == "gurobi"
    assert did_you_mean("H100-80GB", NAMES) == " (did you mean 'H100-SXM-80GB'?)"
    assert did_you_mean("qqqq", NAMES) == ""


@pytest.mark.parametrize("word,expected", [
    ("2x8-a100", "2x8-a100-40"),         # was '2x8-h100': the node shape hid the chip
    ("1x8-a100", "1x8-a100-40"),
    ("2x8-v100", "2x8-v100-32"),
    ("dgx-a100", "dgx-a100-8"),
    ("h800-1024", "h800-2048"),
])
def test_cluster_names_keep_their_gpu(word, expected):
    """QA round 12: a zoo cluster name starts with its node shape ("2x8-"), so the chip head
    was not found and difflib sent "2x8-a100" to the H100 cluster. Oracle: the zoo's own
    cluster names; the suggestion keeps the GPU the user typed."""
    from autopar_opt.model_zoo.registry import cluster_names

    assert closest_name(word, cluster_names()) == expected
