"""An interval of a plan priced with a spec's own cost-model parameters says that its residuals
are the shipped calibration's (QA round 11: `cost_model: my_fit.yaml` moved the quickstart plan
from 1.39 s to 2.12 s and its 80% interval still read as "how far the cost model has been from
comparable published runs"). Oracle: the residual file is measured with the shipped parameters
(autopar_opt/cost/intervals.yaml's header); a spec without cost_model keeps its interval text."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli
from support.paths import REPO

QUICKSTART = (REPO / "examples" / "quickstart.yaml").read_text()
SAID = "priced with the spec's cost-model parameters, not the shipped calibration"


def _estimate(tmp_path, text: str) -> tuple[str, dict]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    code, out = run_cli("estimate", spec)
    assert code == 0, out
    code, js = run_cli("estimate", spec, "--json")
    assert code == 0, js
    return " ".join(out.split()), json.loads(js)["metrics"]["interval"]


def test_own_parameters_are_said_in_the_text_and_the_json(tmp_path):
    own = QUICKSTART.replace("plan:", "cost_model: {efficiency_half_us: 60.0}\nplan:", 1)
    text, interval = _estimate(tmp_path, own)
    assert SAID in interval["text"] and SAID in text
    plain_text, plain = _estimate(tmp_path, QUICKSTART)
    assert SAID not in plain["text"] and SAID not in plain_text
    # the interval is the same multiple of the prediction: the same residuals
    # (to rounding: value·e^q / value is e^q within an ulp or two, not bit for bit)
    assert interval["low"] / interval["value"] == pytest.approx(plain["low"] / plain["value"],
                                                                 rel=1e-12)
