"""JSON whose bulk is arrays of numbers, read into numpy within a stated memory bound.

PaSE's cost tables (:mod:`autopar_opt.peers.pase.format`) are JSON files of up
to a few hundred megabytes that are almost entirely numbers: the Transformer on
64 devices unpacks to 212.8 MB holding 14.8 million numbers, and under 2 MB of
everything else (keys, names, configurations). ``json.loads`` makes a Python
float and a list slot of each number (about 32 bytes each: 1.0 GB for that
table, 3.6 s); a hostile 256 MiB of ``0,0,0,...`` makes 134 million of them
(2.8 GiB measured, issue 33). This reader instead:

1. **counts before parsing** (``bytes.count``, about 0.1 s per 100 MB): every
   JSON value but the first follows a comma or an opening bracket, so
   ``commas + brackets + 1`` bounds the values, and a file over ``max_values``
   is refused before any is made; ``[``, ``{`` and ``"`` bound the containers
   and strings by ``max_containers``;
2. **lifts every block of numbers** out of the text: an innermost array of at
   least ``min_run`` plain numbers, or an array of such rows (a matrix), outside
   any string. Each block is parsed by ``orjson`` (strict JSON, C speed) in
   pieces of at most :data:`PIECE_BYTES` of text and turned into a float64
   array at once, so the Python floats of at most one piece live at a time
   (8 bytes per number stay); a piece ``orjson`` refuses is parsed again by
   :func:`autopar_opt.core.reading.parse_json`, whose answer (or message) is the
   one every other reader gives;
3. parses the **rest** (the *skeleton*: each block replaced by a short
   placeholder string) with :func:`~autopar_opt.core.reading.parse_json`,
   refusing more than ``max_skeleton_bytes`` of it: ``json.loads`` makes at most
   about 32 bytes of Python objects per byte of JSON (``[{},{},...]``: a 64-byte
   dict and a slot per 3 bytes), so that bound holds whatever the text; its
   syntax errors name the line and column of the original file;
4. puts the blocks back: under the keys in ``array_keys`` as float64 arrays (a
   matrix whose rows differ in length as a list of its rows), elsewhere as the
   JSON lists they were, whose text counts towards ``max_skeleton_bytes``.

Memory of a read besides the text: 8 bytes per number, one piece's Python
objects, and the skeleton's; measured in ``benchmarks/peers/RESULTS.md``.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_right
from typing import Any

import numpy as np

from autopar_opt.core.errors import SpecError, SpecProblem

#: Text of one piece parsed at a time (its Python floats, about 32 bytes per number,
#: are the read's largest transient allocation: at most about 64 MiB of them).
PIECE_BYTES = 4 << 20

_ROW = rb"\[[-+0-9.eE,\s]*+\]"
#: A block of numbers: an innermost array of plain numbers, or an array of such rows.
_BLOCK = re.compile(rb"\[\s*+(?:" + _ROW + rb"(?:\s*+,\s*+" + _ROW + rb")*+\s*+\]|[-+0-9.eE,\s]*+\])")
_MARK = "\x00"          # a lifted block's placeholder is the string "\u0000<index>"


def _problem(path: str, value: Any, rule: str, fix: str) -> SpecError:
    return SpecError([SpecProblem(path, "", value, rule, fix)])


def _quotes(raw: bytes) -> list[int]:
    """Offsets of the unescaped double quotes of ``raw``, in order (the ends of its
    strings when the JSON is valid: a quote after an odd run of backslashes is escaped)."""
    out: list[int] = []
    i = raw.find(b'"')
    while i >= 0:
        k = i
        while k > 0 and raw[k - 1] == 0x5C:
            k -= 1
        if (i - k) % 2 == 0:
            out.append(i)
        i = raw.find(b'"', i + 1)
    return out


class _Blocks:
    """The blocks lifted out of the text: their spans and the skeleton."""

    def __init__(self) -> None:
        self.starts = array("q")        # offset of each block's "[" in the original
        self.ends = array("q")          # offset after its "]"
        self.skel_at = array("q")       # offset of its placeholder in the skeleton
        self.shift = array("q")         # original offset - skeleton offset after it
        self.skeleton = bytearray()

    def original(self, skel_offset: int) -> int:
        """The original file's offset of the skeleton's byte ``skel_offset`` (the
        block's ``[`` for a byte inside a placeholder)."""
        k = bisect_right(self.skel_at, skel_offset) - 1
        if k < 0:
            return skel_offset
        if skel_offset >= self.ends[k] - self.shift[k]:      # after placeholder k
            return skel_offset + self.shift[k]
        return self.starts[k]


def _lift(raw: bytes, min_run: int) -> _Blocks:
    quotes = _quotes(raw)
    blocks = _Blocks()
    skel = blocks.skeleton
    last = q = 0
    mv = memoryview(raw)
    for match in _BLOCK.finditer(raw):
        s, e = match.span()
        while q < len(quotes) and quotes[q] < s:
            q += 1
        if q % 2 or e - s < 2 * min_run or raw.count(b",", s, min(e, s + 64 * min_run)) + 1 < min_run:
            continue                    # inside a string (odd quotes before it), or short
        skel += mv[last:s]
        blocks.skel_at.append(len(skel))
        skel += f'"\\u0000{len(blocks.starts)}"'.encode()
        blocks.starts.append(s)
        blocks.ends.append(e)
        blocks.shift.append(e - len(skel))
        last = e
    skel += mv[last:]
    return blocks


def line_col(raw: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column (in bytes) of ``offset`` in ``raw``."""
    return raw.count(b"\n", 0, offset) + 1, offset - (raw.rfind(b"\n", 0, offset) + 1) + 1


def _pieces(raw: bytes, s: int, e: int) -> list[tuple[int, int, bool]]:
    """``raw[s:e]`` (one block) cut into pieces of about :data:`PIECE_BYTES`, each a
    valid JSON array on its own: ``(start, end, wrap)`` where ``wrap`` says that the
    piece is a run of elements to be wrapped in ``[...]``."""
    if e - s <= PIECE_BYTES:
        return [(s, e, False)]
    inner = raw.find(b"[", s + 1, e)
    row_end = b"]" if inner >= 0 else b","      # a matrix is cut after a row, a list at a comma
    out, at = [], s + 1
    while True:
        cut = raw.find(row_end, at + PIECE_BYTES, e - 1)
        if cut < 0:
            out.append((at, e - 1, True))
            return out
        if row_end == b"]":
            cut = raw.find(b",", cut, e - 1)
            if cut < 0:
                out.append((at, e - 1, True))
                return out
        out.append((at, cut, True))
        at = cut + 1


class _Reader:
    """Parses the blocks and puts them back into the parsed skeleton."""

    def __init__(self, raw: bytes, blocks: _Blocks, path: str, limits: Any,
                 array_keys: tuple[str, ...], max_skeleton_bytes: int) -> None:
        self.raw, self.blocks, self.path, self.limits = raw, blocks, path, limits
        self.keys, self.budget = array_keys, max_skeleton_bytes - len(blocks.skeleton)
        self.seen = np.zeros(len(blocks.starts), dtype=bool)

    def _json(self, s: int, e: int, wrap: bool) -> Any:
        """The JSON value of ``raw[s:e]`` (``[...]`` around it when ``wrap``)."""
        import orjson

        text = b"[" + self.raw[s:e] + b"]" if wrap else self.raw[s:e]
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
        from autopar_opt.core import reading        # the same answer (or message) as json's

        def where(pos: int) -> tuple[int, int]:
            return line_col(self.raw, s + pos - (1 if wrap else 0))
        return reading.parse_json(text.decode("ascii"), self.path, self.limits, where=where)

    def numbers(self, k: int) -> Any:
        """Block ``k`` as a float64 array (a list of row arrays when its rows differ in
        length; the JSON value itself when it holds what float64 cannot)."""
        parts = []
        for s, e, wrap in _pieces(self.raw, self.blocks.starts[k], self.blocks.ends[k]):
            value = self._json(s, e, wrap)
            try:
                parts.append(np.asarray(value, dtype=np.float64))
                continue
            except (TypeError, ValueError, OverflowError):
                if not wrap:
                    return value                # ragged or huge: the caller's checks say so
            try:                                # a piece of a long matrix whose rows differ
                parts.append([np.asarray(row, dtype=np.float64) for row in value])
            except (TypeError, ValueError, OverflowError):
                line, col = line_col(self.raw, s)
                raise _problem(self.path, None, f"the array of numbers at line {line}, column "
                               f"{col} holds a value beyond float64 (over 1.8e308)",
                               "write costs as numbers of a realistic size") from None
        if len(parts) == 1:
            return parts[0]
        if all(isinstance(p, np.ndarray) and p.ndim == parts[0].ndim
               and p.shape[1:] == parts[0].shape[1:] for p in parts):
            return np.concatenate(parts)
        return [row for p in parts for row in p]

    def plain(self, k: int) -> Any:
        """Block ``k`` as the JSON lists it was (its text counts towards the skeleton's)."""
        size = self.blocks.ends[k] - self.blocks.starts[k]
        self.budget -= size
        if self.budget < 0:
            raise _problem(self.path, None, f"the {self.limits.kind}'s text besides its arrays "
                           f"of costs is over the limit that keeps its read within memory",
                           f"give {self.limits.what}")
        return self._json(self.blocks.starts[k], self.blocks.ends[k], False)

    def index(self, value: Any) -> int | None:
        if not (isinstance(value, str) and value[:1] == _MARK):
            return None
        text = value[1:]
        k = int(text) if text.isdigit() and len(text) <= 12 else -1
        if not 0 <= k < len(self.seen) or self.seen[k]:
            raise _problem(self.path, value, "a string starting with the character U+0000 "
                           "(\\u0000), which this reader uses to mark arrays of numbers",
                           f"remove it: {self.limits.what} holds no such string")
        self.seen[k] = True
        return k

    def restore(self, value: Any) -> Any:
        """``value`` with its placeholders replaced (iteratively: no recursion limit)."""
        root = [value]
        stack: list[tuple[Any, Any, bool]] = [(root, 0, False)]
        while stack:
            holder, key, as_numbers = stack.pop()
            item = holder[key]
            k = self.index(item)
            if k is not None:
                holder[key] = self.numbers(k) if as_numbers else self.plain(k)
            elif isinstance(item, dict):
                stack.extend((item, name, name in self.keys) for name in item)
            elif isinstance(item, list):
                stack.extend((item, i, as_numbers) for i in range(len(item)))
        return root[0]


def count_values(raw: bytes) -> int:
    """An upper bound on the JSON values of ``raw`` (each but the first follows a comma
    or an opening bracket), from byte counts alone."""
    return raw.count(b",") + raw.count(b"[") + 1


def load_numeric_json(raw: bytes, path: str, limits: Any, *, array_keys: tuple[str, ...],
                      max_values: int, max_containers: int, max_skeleton_bytes: int,
                      values_fix: str, min_run: int = 16) -> Any:
    """Parse ``raw`` (see the module docstring). ``limits`` is the file kind's
    :class:`~autopar_opt.core.reading.ReadLimits` (its ``kind`` and ``what`` name it in
    errors); ``values_fix`` says how large real files are. Raises SpecError."""
    from autopar_opt.core import reading

    values = count_values(raw)
    if values > max_values:
        raise _problem(path, f"up to {values:,} values", f"the {limits.kind} holds up to "
                       f"{values:,} JSON values (counted by its commas and brackets before "
                       f"parsing), over the limit of {max_values:,} that keeps its read within "
                       "memory", values_fix)
    containers = raw.count(b"[") + raw.count(b"{") + raw.count(b'"') // 2
    if containers > max_containers:
        raise _problem(path, f"{containers:,} lists, objects and strings",
                       f"over the limit of {max_containers:,} for a {limits.kind}", values_fix)
    blocks = _lift(raw, min_run)
    if len(blocks.skeleton) > max_skeleton_bytes:
        raise _problem(path, f"{len(blocks.skeleton):,} bytes", f"the {limits.kind}'s text "
                       f"besides its arrays of numbers (keys, names, short lists) is over "
                       f"{max_skeleton_bytes:,} bytes, the limit that keeps its read within "
                       "memory", f"give {limits.what}")
    skeleton = bytes(blocks.skeleton)
    blocks.skeleton = bytearray()
    try:
        text = skeleton.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = line_col(raw, blocks.original(exc.start))
        raise _problem(path, None, f"not UTF-8 text (line {line}, column {col}: {exc.reason})",
                       f"give {limits.what}") from None
    del skeleton

    def where(pos: int) -> tuple[int, int]:
        return line_col(raw, blocks.original(len(text[:pos].encode("utf-8"))))
    data = reading.parse_json(text, path, limits, where=where)
    reader = _Reader(raw, blocks, path, limits, array_keys, max_skeleton_bytes)
    reader.budget = max_skeleton_bytes - len(text)
    return reader.restore(data)
