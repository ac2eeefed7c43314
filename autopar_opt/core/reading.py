"""Reading a user's file within limits: what the path is, how big, how packed, how deep.

Every command reads files a user hands it — specs, Hugging Face configs, peer
instances (Piper, PaSE), placement graphs, run files, ``plan.json`` — and a
hostile or mistaken file must give a clear error, never a traceback, a hang or
an exhausted memory (issue 33). This module is the one place that:

1. says what a path is when it is not a regular file (a directory, a device such
   as ``/dev/zero``, a FIFO, a socket, missing) instead of "does not exist";
2. refuses a file above its kind's size (:class:`ReadLimits`, checked on ``stat``
   and again while reading, since a file may grow or lie about its size);
3. unpacks gzip in bounded chunks, stopping at the kind's unpacked limit or at an
   expansion ratio no real table reaches (a 2 MB file that inflates to 2 GiB stops
   after ``max_ratio`` × 2 MB, not after 2 GiB);
4. parses JSON turning a ``RecursionError`` (deep nesting), a ``MemoryError``, an
   integer beyond Python's 4,300 digits and a syntax error into one
   :class:`~autopar_opt.core.errors.SpecError` naming the file, the rule and the fix.

The structure of specs and small configs is then walked by
:func:`autopar_opt.core.limits.structure_problems`; large tables (a placement graph of a
million nodes, PaSE tables) are checked by their own readers, which validate every
value they use.
"""

from __future__ import annotations

import json
import os
import re
import stat
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from autopar_opt.core.errors import SpecError, SpecProblem

MIB = 1 << 20
#: Bytes unpacked per step of a gzip stream.
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ReadLimits:
    """The limits of one kind of input file.

    Attributes
    ----------
    kind : what the file is, in messages ("Piper instance").
    max_bytes : largest file on disk.
    what : what such a file holds and how large it usually is (for fixes).
    max_unpacked_bytes : largest unpacked text of a ``.gz`` file (0: not allowed packed).
    max_ratio : largest unpacked / packed size of a ``.gz`` file.
    """

    kind: str
    max_bytes: int
    what: str
    max_unpacked_bytes: int = 0
    max_ratio: int = 200


#: Piper's instance JSON (the shipped ones: 73-161 KB, at most 177 nodes).
PIPER = ReadLimits("Piper instance", 16 * MIB, "a Piper instance as github.com/msr-fiddle/piper "
                   "ships it (the bundled ones are under 200 KB)")
#: PaSE's cost tables (the shipped ones: up to 123 KB packed, 4.9 MB unpacked, ratio <= 40;
#: PaSE's Transformer on 64 devices: 5.8 MB packed, 212.8 MB unpacked, ratio 36.6). Their
#: numbers are read by :mod:`autopar_opt.core.numeric_json` within
#: :data:`autopar_opt.peers.pase.format.MAX_VALUES`, which bounds the memory of the read.
PASE = ReadLimits("PaSE table", 256 * MIB, "PaSE cost tables as PaSE's scheduler writes them "
                  "(its Transformer on 64 devices: 213 MB unpacked, about 37 times its "
                  "packed size)", max_unpacked_bytes=256 * MIB, max_ratio=100)
#: A placement graph in the public format (10^6 nodes: about 200 MB).
PLACEMENT = ReadLimits("placement graph", 256 * MIB, "a graph in the public placement format "
                       "(about 200 bytes per node; the bundled ones are under 3 MB)")
#: A Hugging Face ``config.json`` (a few kilobytes; the spec limit).
HF_CONFIG = ReadLimits("Hugging Face config", MIB, "the model's config.json as published on the "
                       "Hugging Face hub (a few kilobytes)")
#: A human expert's split of a placement graph (``place --expert``).
EXPERT_SPLIT = ReadLimits("expert split", 64 * MIB, 'a split as the public format writes it: '
                          '{"fpgas": [{"nodes": [ids]}, ...], "cpus": [{"nodes": [...]}]}')
#: Documents the tool writes and reads back: plan.json, placement.json, capacity.json.
DOCUMENT = ReadLimits("result document", 64 * MIB, "the plan.json, placement.json or "
                      "capacity.json an autopar command wrote (usually well under 1 MB)")

#: An ONNX model: protobuf serialises no message over 2 GiB (``2**31 - 1`` bytes, its
#: signed 32-bit sizes), which is why ONNX keeps the weights of larger models in external
#: data files (onnx/docs/ExternalData.md). Only the graph is read: external data never is.
ONNX = ReadLimits("ONNX model", (2 << 30) - 1, "an .onnx model as torch.onnx.export or onnx.save "
                  "writes it, under protobuf's 2 GiB limit (save a larger model's weights as "
                  "external data: onnx.save(model, path, save_as_external_data=True); only the "
                  "graph is read)")
#: A GDP policy of ``autopar pretrain`` (the default network, hidden 64: 477 KB measured;
#: 64 MiB holds the weights of hidden 512, 27 MiB, but not of hidden 1024, 108 MiB).
POLICY = ReadLimits("GDP policy", 64 * MIB, "a policy file written by "
                    "`autopar pretrain SPEC... --out FILE` (the default network: well under 1 MB)")


def _problem(path: Path | str, rule: str, fix: str) -> SpecError:
    return SpecError([SpecProblem(_shown(path), "", None, rule, fix)])


def _shown(path: Path | str) -> str:
    text = str(path).replace("\x00", "\\x00")
    return text if len(text) <= 300 else text[:300] + "..."


def describe_path(path: Path | str) -> str | None:
    """None when ``path`` is a regular file (after links); else what it is instead:
    "is a directory", "is a character device (like /dev/zero), not a file", ..."""
    if "\x00" in str(path):
        return "name contains a NUL character"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "does not exist"
    except (OSError, ValueError) as exc:      # name too long, permission denied on a parent
        return f"cannot be opened ({exc.__class__.__name__}: {str(exc)[:120]})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device file (such as /dev/zero), not a regular file"
    if stat.S_ISFIFO(mode):
        return "is a pipe (FIFO), not a file"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a file"
    return "is not a regular file"


def files_in(folder: Path | str, suffixes: tuple[str, ...], limit: int = 5) -> list[str]:
    """Up to ``limit`` regular files in ``folder`` with one of ``suffixes`` (sorted), for a
    fix that names what the user probably meant when they gave a directory."""
    try:
        names = sorted(p.name for p in Path(folder).iterdir()
                       if p.suffix.lower() in suffixes and p.is_file())
    except OSError:
        return []
    return names[:limit]


def read_bytes(path: Path | str, limits: ReadLimits) -> bytes:
    """The file's bytes (unpacked when it is gzip), within ``limits``; raises SpecError."""
    path = Path(path)
    what = describe_path(path)
    if what is not None:
        fix = f"give the path of {limits.what}"
        if what == "is a directory":
            found = files_in(path, (".json", ".gz", ".yaml", ".yml", ".toml"))
            if found:
                fix += f"; this directory holds {', '.join(found)}"
        raise _problem(path, f"the {limits.kind} file {what}", fix)
    try:
        size = os.stat(path).st_size
        if size > limits.max_bytes:
            raise _too_big(path, size, limits)
        with open(path, "rb") as handle:
            raw = handle.read(limits.max_bytes + 1)
    except OSError as exc:
        raise _problem(path, f"cannot read the {limits.kind} file ({exc.strerror or exc})",
                       f"give a readable file: {limits.what}") from None
    if len(raw) > limits.max_bytes:                   # grew after stat
        raise _too_big(path, len(raw), limits)
    if raw[:2] == b"\x1f\x8b":
        return unpack_gzip(raw, path, limits)
    return raw


def _too_big(path: Path, size: int, limits: ReadLimits) -> SpecError:
    article = "an" if limits.kind[:1].lower() in "aeiou" else "a"
    return _problem(path, f"the file has {size:,} bytes, over the limit of {limits.max_bytes:,} "
                    f"bytes for {article} {limits.kind}", f"give {limits.what}")


def unpack_gzip(raw: bytes, path: Path | str, limits: ReadLimits) -> bytes:
    """Unpack gzip ``raw`` (several members allowed, as ``gzip`` reads them) in bounded
    steps; refuses more than ``limits.max_unpacked_bytes`` or ``limits.max_ratio`` times
    the packed size, and a damaged stream."""
    if limits.max_unpacked_bytes <= 0:
        raise _problem(path, f"a gzip-packed {limits.kind} is not read",
                       f"give the file unpacked: {limits.what}")
    cap = min(limits.max_unpacked_bytes, max(limits.max_ratio * len(raw), 16 * MIB))
    parts: list[bytes] = []
    total = 0
    data = raw
    try:
        while data:
            unpacker = zlib.decompressobj(16 + zlib.MAX_WBITS)
            chunk = unpacker.decompress(data, _CHUNK)
            while True:
                total += len(chunk)
                if total > cap:
                    raise _problem(path, f"the gzip stream unpacks to more than {cap:,} bytes "
                                   f"({len(raw):,} bytes packed; the limit is "
                                   f"{limits.max_unpacked_bytes:,} bytes or {limits.max_ratio} "
                                   "times the packed size)", f"give {limits.what}")
                parts.append(chunk)
                if not unpacker.unconsumed_tail:
                    break
                chunk = unpacker.decompress(unpacker.unconsumed_tail, _CHUNK)
            rest = unpacker.flush()
            total += len(rest)
            parts.append(rest)
            if not unpacker.eof:
                raise _problem(path, "the gzip stream is cut short", f"give {limits.what}")
            data = unpacker.unused_data.lstrip(b"\x00")   # next member (or trailing padding)
    except zlib.error as exc:
        raise _problem(path, f"not a valid gzip file ({exc})", f"give {limits.what}") from None
    if total > cap:
        raise _problem(path, f"the gzip stream unpacks to more than {cap:,} bytes",
                       f"give {limits.what}")
    return b"".join(parts)


def read_text(path: Path | str, limits: ReadLimits) -> str:
    """:func:`read_bytes` decoded as UTF-8; a leading byte-order mark (Windows editors
    write one) is dropped, as ``utf-8-sig`` does, not a JSON or YAML syntax error."""
    raw = read_bytes(path, limits)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _problem(path, f"not UTF-8 text (byte {exc.start:,}: {exc.reason})",
                       f"give {limits.what}") from None


_LONG_DIGITS = re.compile(r"\d{4301,}")


def huge_integer_line(text: str) -> int | None:
    """Line (1-based) of the first run of more than 4,300 digits in ``text``, or None."""
    match = _LONG_DIGITS.search(text)
    return None if match is None else text.count("\n", 0, match.start()) + 1


class _RepeatedKey(ValueError):
    """A JSON object that gives one key twice (:func:`unique_pairs`)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` refusing a repeated key: ``json`` keeps its last value without
    a word, so a hand-edited plan.json, placement graph or expert split with a key given
    twice was read as whichever came last (QA round 34: ``{"maxFPGAs": 1, ..., "maxFPGAs":
    6}`` placed on 6 devices). The spec loader and the Hugging Face reader refuse it too.
    ``dict`` does the work in C; the loop runs only for an object that repeats a key."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)
    return out


def parse_json(text: str, path: Path | str, limits: ReadLimits,
               where: Callable[[int], tuple[int, int]] | None = None, **hooks: Any) -> Any:
    """``json.loads(text, **hooks)`` with every failure a SpecError naming the file; a key
    repeated inside one object is refused (:func:`unique_pairs`) unless ``hooks`` bring
    their own ``object_pairs_hook`` or ``object_hook``.

    ``where`` maps an offset of ``text`` to the (line, column) to report, when
    ``text`` is not the file itself (:mod:`autopar_opt.core.numeric_json` parses the
    file with its arrays of numbers lifted out)."""
    if not text.strip():
        raise _problem(path, "the file is empty", f"give {limits.what}")
    if "object_pairs_hook" not in hooks and "object_hook" not in hooks:
        hooks = {**hooks, "object_pairs_hook": unique_pairs}
    try:
        return json.loads(text, **hooks)
    except json.JSONDecodeError as exc:
        line, col = (exc.lineno, exc.colno) if where is None else where(exc.pos)
        raise _problem(path, f"JSON syntax error at line {line}, column {col}: "
                       f"{exc.msg}", f"fix the JSON syntax, or give {limits.what}") from None
    except _RepeatedKey as exc:
        raise _problem(path, f"key {exc.key!r} appears more than once in one JSON object "
                       "(JSON readers keep the last value; which one was meant is not known)",
                       f"keep one value for it; give {limits.what}") from None
    except RecursionError:          # json's decoder recurses once per nesting level
        raise _problem(path, "nested too deeply to be read (a JSON value inside about 1,000 "
                       f"others); a {limits.kind} nests a few levels", f"give {limits.what}") from None
    except MemoryError:
        raise _problem(path, f"too large to hold in memory ({len(text):,} characters)",
                       f"give {limits.what}") from None
    except ValueError as exc:       # an integer of more than 4,300 digits
        match = _LONG_DIGITS.search(text)
        if match is None:
            line = None
        else:
            line = (text.count("\n", 0, match.start()) + 1 if where is None
                    else where(match.start())[0])
        where_text = f" at line {line}" if line else ""
        raise _problem(path, f"an integer of more than 4,300 digits{where_text} "
                       f"({str(exc)[:80]})", "write numbers of a realistic size "
                       "(a count, a size in bytes or a time)") from None


def read_json(path: Path | str, limits: ReadLimits, **hooks: Any) -> Any:
    """Read and parse a JSON (or gzip-packed JSON) file within ``limits``."""
    return parse_json(read_text(path, limits), path, limits, **hooks)


def refuse_empty_path(path: Path | str) -> None:
    """A :class:`SpecError` for an empty (or blank) path given as text: ``Path("")`` is
    ``"."``, so an empty argument (an unset shell variable) was read as the current
    directory: "the file is a directory; give one of its files, e.g. pyproject.toml"
    (QA round 12). Called by every reader of a command's input file before ``Path()``;
    here, not in the spec loader, so that a reader without YAML does not load it."""
    if isinstance(path, str) and not path.strip():
        raise SpecError([SpecProblem(repr(path), "", None, "is an empty path (an unset shell "
                                     "variable?)", "give the file's path, e.g. "
                                     "examples/quickstart.yaml")])
