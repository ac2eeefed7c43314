"""The reader of JSON whose bulk is arrays of numbers (core/numeric_json.py, issue 35).

Oracle: ``json.loads`` of the same text: every value equal (the arrays under the
array keys as float64 arrays of the same numbers, bit for bit; everything else
identical, ints staying ints), and every syntax error reported at the line and
column ``json.loads`` gives for the original text.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from autopar_opt.core import numeric_json
from autopar_opt.core.errors import SpecError
from autopar_opt.core.reading import PASE


def _read(text: str | bytes, **limits) -> object:
    raw = text.encode() if isinstance(text, str) else text
    opts = dict(array_keys=("cost",), max_values=10**7, max_containers=10**6,
                max_skeleton_bytes=1 << 20, values_fix="give fewer")
    opts.update(limits)
    return numeric_json.load_numeric_json(raw, "t.json", PASE, **opts)


def _same(ours, ref, under_cost: bool = False) -> None:
    if under_cost and isinstance(ref, list) and np.asarray(ref).dtype != object \
            and np.asarray(ref).size >= 16:               # a block of numbers: float64
        arr = np.asarray(ref, dtype=np.float64)
        assert isinstance(ours, np.ndarray) and ours.dtype == np.float64
        assert ours.shape == arr.shape and np.array_equal(ours, arr)
        return
    assert type(ours) is type(ref), (ours, ref)
    if isinstance(ref, dict):
        assert list(ours) == list(ref)
        for k in ref:
            _same(ours[k], ref[k], k == "cost")
    elif isinstance(ref, list):
        assert len(ours) == len(ref)
        for a, b in zip(ours, ref):
            _same(a, b, under_cost)
    else:
        assert ours == ref


def _number(rng: random.Random):
    kind = rng.randrange(4)
    if kind == 0:
        return rng.randrange(-10**6, 10**6)
    if kind == 1:
        return rng.uniform(-1e12, 1e12)
    if kind == 2:
        return rng.choice([0.1, 1e-300, 5e300, -2.5e-7, 0.0])
    return float(rng.randrange(10**9))


def _document(rng: random.Random) -> dict:
    n = rng.randrange(1, 40)
    rows = rng.randrange(1, 6)
    doc = {
        "name": rng.choice(["plain", 'with "quotes" and [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, '
                            '13, 14, 15, 16, 17] inside', "\\u0041 [" + "0," * 20 + "0]"]),
        "vertices": [{"id": i, "cost": [_number(rng) for _ in range(n)],
                      "configs": [[rng.randrange(1, 9) for _ in range(rng.choice([3, 20]))]
                                  for _ in range(2)]} for i in range(3)],
        "edges": [{"src": 0, "dst": 1, "cost": [[_number(rng) for _ in range(n)]
                                                for _ in range(rows)]}],
        "other": [rng.randrange(100) for _ in range(rng.randrange(30))],
    }
    return doc


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("piece", [1 << 22, 40])
def test_values_equal_json_loads(monkeypatch, seed, piece):
    """Random tables, compact and indented, whole and cut into pieces of 40 bytes."""
    monkeypatch.setattr(numeric_json, "PIECE_BYTES", piece)
    rng = random.Random(seed)
    doc = _document(rng)
    for text in (json.dumps(doc), json.dumps(doc, indent=rng.choice([1, 2]))):
        _same(_read(text), json.loads(text))


def test_a_string_holding_an_array_stays_a_string():
    inner = "[" + ", ".join(["1"] * 20) + "]"
    text = json.dumps({"a": inner, "b": 'x\\" ' + inner, "cost": [1.5] * 20})
    out = _read(text)
    assert out["a"] == inner and out["b"] == 'x\\" ' + inner
    assert isinstance(out["cost"], np.ndarray) and out["cost"].tolist() == [1.5] * 20


def test_a_matrix_whose_rows_differ_stays_rows():
    text = json.dumps({"cost": [[1.0] * 20, [2.0] * 21]})
    out = _read(text)["cost"]
    assert [len(r) for r in out] == [20, 21]


def _json_position(text: str) -> tuple[int, int]:
    with pytest.raises(json.JSONDecodeError) as info:
        json.loads(text)
    return info.value.lineno, info.value.colno


@pytest.mark.parametrize("text", [
    '{"cost": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 1.2.3]}',
    '{"a": 1,\n "cost": [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],\n'
    '  [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,, 16]]}',
    '{"cost": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17] "b": 2}',
    '{"x": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19],\n'
    ' "cost": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17], "y": tru}',
    '{"cost": [+1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]}',
    '{"cost": [01, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]}',
])
def test_syntax_errors_name_the_line_and_column_json_gives(text):
    line, col = _json_position(text)
    with pytest.raises(SpecError, match=rf"JSON syntax error at line {line}, column {col}:"):
        _read(text)


def test_an_integer_beyond_a_float_in_a_block_is_json_s_value():
    """orjson refuses 10**400; json reads it (an int), so the caller's check names its key."""
    text = '{"cost": [' + ", ".join(["1"] * 20) + ", " + str(10**400) + "]}"
    out = _read(text)["cost"]
    assert isinstance(out, list) and out[-1] == 10**400


def test_a_long_array_with_an_integer_beyond_a_float_is_refused(monkeypatch):
    """Cut into pieces (too long for one), the array is no one value the caller could name."""
    monkeypatch.setattr(numeric_json, "PIECE_BYTES", 40)
    text = '{"cost": [' + ", ".join(["1"] * 40) + ", " + str(10**400) + ", 2, 3]}"
    with pytest.raises(SpecError, match=r"line 1, column \d+ holds a value beyond float64"):
        _read(text)
    rows = '{"cost": [' + ", ".join(["[" + ", ".join(["1"] * (20 + i)) + "]" for i in range(4)]) + "]}"
    out = _read(rows)["cost"]                      # rows that differ: one array per row
    assert [len(r) for r in out] == [20, 21, 22, 23]


def test_the_count_comes_before_the_parse():
    text = json.dumps({"cost": [0] * 1000})
    with pytest.raises(SpecError, match=r"holds up to 1,00[0-9] JSON values .* over the limit "
                                        r"of 500"):
        _read(text, max_values=500)
    with pytest.raises(SpecError, match=r"over the limit of 10 for a PaSE table"):
        _read(json.dumps([{}] * 20), max_containers=10)


def test_the_rest_of_the_text_is_bounded():
    text = json.dumps({"names": ["n" * 50] * 100, "cost": [0.5] * 10_000})
    assert isinstance(_read(text, max_skeleton_bytes=6000)["cost"], np.ndarray)
    with pytest.raises(SpecError, match="besides its arrays of numbers"):
        _read(text, max_skeleton_bytes=4000)
    plain = json.dumps({"configs": [list(range(20))] * 100})      # lifted, then put back as JSON
    assert _read(plain)["configs"][0] == list(range(20))
    with pytest.raises(SpecError, match="besides its arrays of costs"):
        _read(plain, max_skeleton_bytes=2000)


def test_the_placeholder_character_is_refused_not_confused():
    text = json.dumps({"cost": [1.0] * 20, "name": "\u00000"})
    with pytest.raises(SpecError, match="U\\+0000"):
        _read(text)
