"""``model.norm`` is read for Mixture-of-Experts records only, and ``schema --runs`` says so
(QA round 11: it described the key for every model, and a dense record's prediction and memory
are the same for layernorm and rmsnorm)."""

from __future__ import annotations

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.compare import predict
from autopar_opt.calibration.reading import read_record
from autopar_opt.calibration.reading.run_schema import run_file_json_schema
from autopar_opt.cost.params import default_params
from support.runs import tiny_record


def test_a_dense_record_prices_both_norms_alike_and_the_schema_says_so():
    both = [predict(build_run(read_record(tiny_record(model__norm=n))), default_params())
            for n in ("layernorm", "rmsnorm")]
    assert both[0] == both[1]
    text = run_file_json_schema()["$defs"]["Model"]["properties"]["norm"]["description"]
    assert "Mixture-of-Experts" in text and "dense model's blocks are priced alike" in text
