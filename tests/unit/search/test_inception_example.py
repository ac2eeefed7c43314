"""examples/inception_v3_8gpu.yaml (a 124-node DAG, one stage) solves with
``--solver dp`` and with ``--solver highs`` to the same optimum.

The HiGHS run uses ``--no-warm-start`` so that it neither starts from nor
borrows a bound from the DP: the two optima are found and proven independently.
"""

from __future__ import annotations

import json

import pytest

from autopar_opt.cli.solve import solve_command
from support import paths

EXAMPLE = paths.REPO / "examples" / "inception_v3_8gpu.yaml"


def _solve(tmp_path, capsys, solver: str, **kw) -> dict:
    code = solve_command(str(EXAMPLE), solver=solver, json_output=True, quiet=True,
                         out_dir=str(tmp_path / solver), gap=1e-6, **kw)
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_dp_and_highs_agree_on_inception(tmp_path, capsys):
    dp = _solve(tmp_path, capsys, "dp")
    mip = _solve(tmp_path, capsys, "highs", warm_start=False)
    for doc in (dp, mip):
        cert = doc["certificate"]
        assert cert["exact"] and cert["gap"] <= 1e-6
        assert [r["status"] for r in cert["configurations"]] == ["optimal"]
    assert dp["solver"]["name"] == "dp" and mip["solver"]["name"] == "highs"
    assert "dp_warm" not in mip["certificate"]["configurations"][0].get("timings", {})
    assert mip["certificate"]["primal"] == pytest.approx(dp["certificate"]["primal"], rel=1e-6)
