"""``autopar report`` on the plan.json of a peer problem (Piper, PaSE).

Before: the command judged it against our plan format and listed thirteen to
sixteen "missing keys" (spec.model, metrics, ...). Such a plan.json has its
own report, the one ``autopar solve SPEC --out DIR`` writes as
DIR/report.html, so ``report`` now renders that one.

Oracles: the HTML ``report`` writes is byte-identical to the report.html
that ``solve --out`` wrote from the same document; a damaged peer document
(a certificate without its primal) exits 2 naming the file, the peer format
and the command that writes a readable one, with no traceback and no output.
"""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli as _cli
from support import paths

EXAMPLES = paths.REPO / "examples" / "peers"


@pytest.mark.parametrize("spec", ["piper_gnmt_k8.yaml", "pase_inception3_p8.yaml"])
def test_report_of_a_peer_plan_is_the_peer_report(tmp_path, spec):
    out = tmp_path / "out"
    code, text = _cli("solve", EXAMPLES / spec, "--out", out, "--quiet")
    assert code == 0, text
    html = tmp_path / "again.html"
    code, text = _cli("report", out / "plan.json", "-o", html)
    assert code == 0, text
    assert "missing key" not in text
    assert html.read_bytes() == (out / "report.html").read_bytes()


def test_damaged_peer_plan_is_a_clear_error(tmp_path):
    out = tmp_path / "out"
    code, text = _cli("solve", EXAMPLES / "pase_inception3_p8.yaml", "--out", out, "--quiet")
    assert code == 0, text
    doc = json.loads((out / "plan.json").read_text())
    del doc["certificate"]["primal"]
    bad = tmp_path / "peer.json"
    bad.write_text(json.dumps(doc))
    html = tmp_path / "r.html"
    code, text = _cli("report", bad, "-o", html)
    assert code == 2, text
    assert str(bad) in text and "pase peer-problem plan.json" in text and "primal" in text
    assert "autopar solve SPEC --out DIR" in text and "missing key 'spec.model'" not in text
    assert not html.exists()


@pytest.mark.parametrize("spec,name", [("piper_gnmt_k8.yaml", "Piper"),
                                       ("pase_inception3_p8.yaml", "PaSE")])
def test_export_of_a_peer_plan_says_it_has_none(tmp_path, spec, name):
    """Before: 'the spec it was solved from is not readable; pass it with --spec',
    and with --spec the peer spec's missing model/cluster/training keys."""
    out = tmp_path / "out"
    code, text = _cli("solve", EXAMPLES / spec, "--out", out, "--quiet")
    assert code == 0, text
    args = tmp_path / "args.txt"
    for extra in ([], ["--spec", EXAMPLES / spec]):
        code, text = _cli("export", out / "plan.json", "--to", "megatron", "-o", args, *extra)
        assert code == 2, text
        assert str(out / "plan.json") in text and f"plan.json of a {name} peer problem" in text
        assert "no --to megatron export" in text and "autopar report" in text
        assert "--spec SPEC" not in text and "required key missing" not in text
        assert not args.exists()

