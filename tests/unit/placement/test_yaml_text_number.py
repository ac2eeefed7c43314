"""A placement spec's device memory written as ``8.6e10`` reaches the reader as text (YAML
1.1, which PyYAML implements, needs the exponent's sign), and the refusal says why and how to
write it (QA round 13: it was refused as "must be a positive, finite number" with no word on
the cause)."""

from __future__ import annotations

import pytest

from autopar_opt.placement.importers.spec import load_placement
from autopar_opt.core.errors import SpecError

SPEC = """\
placement:
  graph: {{zoo: synthetic_transformer, nodes: 40}}
  devices:
    - {{type: A100-80GB, count: 2, memory_bytes: {mem}}}
"""


def test_an_unsigned_exponent_is_refused_with_its_cause(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(SPEC.format(mem="4.3e10"))
    with pytest.raises(SpecError) as err:
        load_placement(path)
    text = str(err.value)
    assert "placement.devices[0].memory_bytes = '4.3e10'" in text
    assert "YAML read 4.3e10 as text: its exponent needs a sign, 4.3e+10" in text


def test_the_signed_exponent_reads_as_the_number(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(SPEC.format(mem="4.3e+10"))
    problem, _ = load_placement(path)
    assert problem.device_types[0].memory_bytes == pytest.approx(4.3e10)
