"""Resource limits on user files (specs, run files, model configs), checked before any work.

A spec is user input: a hostile or mistaken file must give a clear error in
well under a second, never a hang, a ``RecursionError`` or an exhausted
memory. Three layers, each cheap and each naming the limit it enforces:

1. **The file** (:func:`check_file_size`): at most :data:`MAX_FILE_BYTES`
   bytes, checked on ``stat`` before the file is read.
2. **The parsed structure** (:func:`structure_problems`): nesting depth, the
   number of values (after YAML aliases are expanded: a "billion laughs" file
   stops here), string and key lengths, list lengths, integer magnitudes and
   finite floats. One iterative walk with a value budget, so it is linear in
   the file and never recursive.
3. **The sizes that set the amount of work** (devices, nodes, GPUs per node,
   layers, global batch, sequence length, degrees): declared as bounds on the
   schema fields (``le=``), so pydantic reports them with the key, the value
   and the limit in the same pass as every other problem.

This module depends on nothing in the project (readers in ``spec``,
``model_zoo`` and ``calibration`` all use it); problems are plain
:class:`Breach` tuples that each reader turns into its own error type.

The limits are far above any real training job (the largest published runs
use about 10^5 GPUs, a global batch of a few thousand sequences and a few
hundred layers) and far below where the search or the estimate would hang.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, NamedTuple

#: Largest spec file (bytes): a 2,048-layer explicit model in YAML is ~0.3 MB;
#: 1 MiB of YAML parses in ~1.7 s of CPU (libyaml scanner, Python composer).
MAX_FILE_BYTES = 1024 * 1024
#: Largest run file of ``autopar calibrate`` (bytes): a measurement campaign is a list of
#: records, about 2.8 kB each in the shipped tests/data/published_runs.yaml (with its
#: comments), so 16 MiB holds some 6,000 of them (1 MiB held 370: QA round 13). Its YAML
#: parses at about 0.22 s per MiB (measured: 4.1 MiB of 6,016 records in 0.91 s of CPU,
#: 88 MiB resident), so the largest file is read in a few seconds. The value limit
#: (:data:`MAX_VALUES`, 62 per shipped record: some 8,000 records) binds first only for
#: records much terser than the shipped ones.
MAX_RUN_FILE_BYTES = 16 * 1024 * 1024
#: Deepest nesting of mappings and lists (a spec needs 5 levels).
MAX_DEPTH = 32
#: Most values (mappings, lists, scalars) in one file, aliases expanded.
MAX_VALUES = 500_000
#: Longest string value (descriptions included) and longest mapping key.
MAX_STRING_CHARS = 4096
MAX_KEY_CHARS = 256
#: Most items in one list or mapping.
MAX_ITEMS = 20_000
#: Largest integer magnitude anywhere in a spec (about 10^15; FLOPs are floats).
MAX_INT = 10**15
#: Largest float magnitude anywhere in a spec.
MAX_FLOAT = 1e30
#: Smallest non-zero float magnitude (smaller ones underflow to 0 in the cost
#: model's ratios, e.g. FLOPs / peak FLOP/s, and divide by zero).
MIN_FLOAT = 1e-30
#: Most problems reported from the structure walk (the rest are counted).
MAX_REPORTED = 20

# Sizes that set the amount of work (bounds on schema fields).
#: Nodes in a cluster.
MAX_NODES = 100_000
#: GPUs per node (NVL72 racks have 72; NVL576 would have 576).
MAX_GPUS_PER_NODE = 1024
#: Devices in a cluster (nodes x GPUs per node).
MAX_DEVICES = 1_048_576
#: Layers of a model (explicit, or built by the zoo with overrides).
MAX_LAYERS = 2048
#: Samples per optimizer step.
MAX_GLOBAL_BATCH = 16_777_216
#: Tokens per sample.
MAX_SEQ_LEN = 16_777_216
#: Any parallel degree, micro-batch count or chunk count.
MAX_DEGREE = MAX_DEVICES
#: Micro-batches per iteration.
MAX_MICROBATCHES = MAX_GLOBAL_BATCH
#: Devices of one operator placement (``autopar place``): every device type's
#: count, and their sum. Each device costs O(nodes) memory and time in the
#: placement search (measured: 10^5 devices on a 100-node graph, 10.7 s and
#: 0.66 GB; 10^9 exhausts memory); published placement instances use at most
#: a few dozen devices.
MAX_PLACEMENT_DEVICES = 65_536
#: Scenarios of one capacity sweep (the product of its axes' lengths). Each is a
#: certified solve (seconds to minutes) and each is built and validated before
#: the sweep starts (measured: 2.9 ms per scenario, 1,000 in 2.9 s; 400,000
#: hung the load); the shipped example has 84.
MAX_SCENARIOS = 4096
#: Operators of a generated zoo operator graph (``placement.graph.zoo``);
#: the placement benchmarks go up to 50,000.
MAX_OP_NODES = 1_000_000


def bounded_number(value: Any, maximum: float = MAX_FLOAT) -> float | None:
    """``value`` as a float when it is a number (not a bool) of magnitude at most
    ``maximum``, finite; else None. Integers are compared before any conversion:
    ``float(10**400)`` and ``math.isfinite(10**400)`` raise ``OverflowError``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int):
        return float(value) if abs(value) <= maximum else None
    return value if math.isfinite(value) and abs(value) <= maximum else None


def resource_limits() -> dict[str, int]:
    """The size limits declared on schema fields, by name (used to word their errors)."""
    return {"MAX_NODES": MAX_NODES, "MAX_GPUS_PER_NODE": MAX_GPUS_PER_NODE,
            "MAX_DEVICES": MAX_DEVICES, "MAX_LAYERS": MAX_LAYERS,
            "MAX_GLOBAL_BATCH": MAX_GLOBAL_BATCH, "MAX_SEQ_LEN": MAX_SEQ_LEN,
            "MAX_DEGREE": MAX_DEGREE, "MAX_MICROBATCHES": MAX_MICROBATCHES}


class Breach(NamedTuple):
    """One broken limit: where (dotted key, empty for the whole file), the value
    (shortened for messages), the rule naming the limit, and the fix."""

    key: str
    value: Any
    rule: str
    fix: str


#: The fix of a spec file over :data:`MAX_FILE_BYTES`.
SPEC_SIZE_FIX = ("a spec is a few kilobytes; give large models as a zoo entry with overrides, "
                 "or split off the model section into its own file")


def check_file_size(path: Path, fix: str = SPEC_SIZE_FIX,
                    max_bytes: int = MAX_FILE_BYTES) -> Breach | None:
    """A breach when ``path`` is larger than ``max_bytes`` (from ``stat``; a spec's
    :data:`MAX_FILE_BYTES` by default, a run file's :data:`MAX_RUN_FILE_BYTES`); ``fix``
    says what to do for the kind of file read (a spec's by default)."""
    try:
        size = os.stat(path).st_size
    except (OSError, ValueError):
        return None      # the read reports it
    if size > max_bytes:
        return Breach("", None,
                      f"the file has {size:,} bytes, over the limit of {max_bytes:,} bytes",
                      fix)
    return None


def _join(key: str, part: Any) -> str:
    if isinstance(part, int):
        return f"{key}[{part}]"
    return f"{key}.{part}" if key else str(part)


class HugeInt:
    """Stands for an integer literal of more digits than a file may hold: the parsers'
    integer hook returns it instead of calling ``int()`` (which refuses more than
    4,300 digits with a message about ``sys.set_int_max_str_digits``), so that
    :func:`structure_problems` names the key holding it."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"<an integer of {self.digits:,} digits>"


#: Integer literals longer than this are read as :class:`HugeInt` (the limit itself,
#: 10^15, has 16 digits; a sign and leading zeros make a few more).
MAX_INT_DIGITS = 64


def read_int(text: str) -> "int | HugeInt":
    """The integer hook of the JSON and YAML readers (see :class:`HugeInt`)."""
    if len(text) > MAX_INT_DIGITS:
        return HugeInt(len(text.lstrip("+-")))
    return int(text)


def _scalar_problem(value: Any) -> tuple[str, str] | None:
    """(rule, fix) when a scalar breaks a limit, else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, HugeInt):
        return (f"an integer of {value.digits:,} digits exceeds the limit of {MAX_INT:.0e} "
                "in magnitude", "use a realistic size (see `autopar schema` for each field's range)")
    if isinstance(value, str):
        if len(value) > MAX_STRING_CHARS:
            return (f"a string of {len(value):,} characters exceeds the limit of "
                    f"{MAX_STRING_CHARS} characters", "shorten it")
        return None
    if isinstance(value, int):
        if abs(value) > MAX_INT:
            digits = int(abs(value).bit_length() * math.log10(2)) + 1
            return (f"an integer of about {digits} digits exceeds the limit of {MAX_INT:.0e} "
                    "in magnitude",
                    "use a realistic size (see `autopar schema` for each field's range)")
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return "not a finite number", "write a finite number"
        if abs(value) > MAX_FLOAT:
            return (f"exceeds the limit of {MAX_FLOAT:.0e} in magnitude",
                    "use a realistic value (FLOPs per sample, bytes, GB/s)")
        if 0 < abs(value) < MIN_FLOAT:
            return (f"is below the limit of {MIN_FLOAT:.0e} in magnitude (it would underflow)",
                    "write 0, or a realistic value")
    return None


def _short(value: Any) -> Any:
    """A value small enough to show in a message (long strings/ints cut)."""
    if isinstance(value, HugeInt):
        return value
    if isinstance(value, str) and len(value) > 40:
        return value[:40] + "..."
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        return "<huge integer>"
    if isinstance(value, (dict, list, tuple)):
        return None
    return value


def structure_problems(data: Any) -> list[Breach]:
    """Every limit the parsed value ``data`` breaks (at most :data:`MAX_REPORTED`).

    Iterative (no recursion), and stops after :data:`MAX_VALUES` values, so
    its cost is bounded whatever the input (YAML aliases may make a small file
    describe an exponentially large tree).
    """
    problems: list[Breach] = []

    def add(key: str, value: Any, rule: str, fix: str) -> None:
        problems.append(Breach(key, _short(value), rule, fix))

    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    count = 0
    while stack and len(problems) < MAX_REPORTED:
        value, key, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            add("", None, f"the file holds more than {MAX_VALUES:,} values (YAML anchors and "
                "aliases are expanded)", "write each value once; a spec holds a few hundred values")
            break
        if isinstance(value, (dict, list, tuple, set)):
            if depth >= MAX_DEPTH:
                add(key, None, f"nesting deeper than the limit of {MAX_DEPTH} levels",
                    "a spec nests at most a few levels: section, list, item")
                continue
            if len(value) > MAX_ITEMS:
                add(key, None, f"{len(value):,} items exceed the limit of {MAX_ITEMS:,} items",
                    "shorten the list")
                continue
            items = list(value.items() if isinstance(value, dict) else enumerate(value))
            for part, item in reversed(items):      # popped in file order
                if isinstance(part, str) and len(part) > MAX_KEY_CHARS:
                    add(key, _short(part), f"a key of {len(part):,} characters exceeds the limit "
                        f"of {MAX_KEY_CHARS} characters", "use the key names of `autopar schema`")
                    continue
                stack.append((item, _join(key, part), depth + 1))
            continue
        broken = _scalar_problem(value)
        if broken:
            add(key, value, *broken)
    return problems[:MAX_REPORTED]
