"""Number formatting for the report: units always shown, infinities spelled out."""

from __future__ import annotations

import math

from autopar_opt.core.ranges import range_text


def fmt_time(seconds: float | None) -> str:
    """``0.0123`` -> ``"12.30 ms"``; ``2.5`` -> ``"2.500 s"``; None -> ``"—"``.

    A time that rounds to zero at the shown precision (below 0.05 µs, and −0.0 from
    round-off: "bubble −0.0 µs", issue 33) is written ``"0 µs"``."""
    if seconds is None:
        return "—"
    if math.isinf(seconds):
        return "∞" if seconds > 0 else "−∞"
    if abs(seconds) < 5e-8:
        return "0 µs"
    if abs(seconds) >= 1.0:
        return f"{seconds:.3f} s"
    if abs(seconds) >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


#: Relative differences below this are the rounding of two separately computed times
#: (a gap of 2.4e-16 printed as "2.4e-14%" beside the summary's "0.000%", QA round 5):
#: written as 0.
ROUNDING = 1e-9


def fmt_pct(fraction: float | None, digits: int = 2) -> str:
    """``0.1234`` -> ``"12.34%"``; infinite -> ``"∞"``; None -> ``"—"``; below
    :data:`ROUNDING` -> ``"0.00%"``."""
    if fraction is None:
        return "—"
    if math.isinf(fraction):
        return "∞"
    if abs(fraction) < ROUNDING:
        fraction = 0.0
    if 0 < abs(fraction) < 10 ** -(digits + 2) * 5:    # would print as 0.0…%: keep 2 significant digits
        return f"{fraction * 100:.2g}%"
    return f"{fraction * 100:.{digits}f}%"


def idle_gpus_mfu_note(mfu, stage_devices, num_devices) -> str:
    """`` (over all 12 GPUs of the cluster; 42.5% over the 8 the plan uses)`` after the MFU of
    a plan with free stage sizes that leaves GPUs idle; empty otherwise. MFU divides by the
    whole cluster's peak (``cost.evaluate``: the cluster utilisation a capacity planner
    pays for); the plan's own utilisation is said beside it (QA round 12: "MFU 28.36%" for
    a plan on 8 of 12 GPUs, 42.5% over those 8, with no word of which)."""
    if not isinstance(mfu, (int, float)) or not stage_devices or not num_devices:
        return ""
    used = sum(stage_devices)
    if used >= num_devices or used <= 0:
        return ""
    return (f" (over all {num_devices} GPUs of the cluster; {fmt_pct(mfu * num_devices / used, 1)} "
            f"over the {used} the plan uses)")


def fleet_idle_mfu_note(mfu, groups: list[dict], placement: list[dict]) -> str:
    """`` (over all 1024 GPUs of the fleet; 78.9% over the 512 the plan uses)`` after the
    MFU of a fleet plan leaving groups (or part of them) idle; empty otherwise. The fleet's
    MFU divides by every group's GPUs at their own device's peak
    (``cost.evaluate.fleet_peak_flops``); the plan's own utilisation divides by the peaks of
    the GPUs its stages run on (plan.json ``placement`` rows), not by their count, since the
    groups' devices differ. Both are written by :func:`fmt_pct` (digits 1), so a small
    utilisation keeps two significant digits beside the MFU it follows (QA round 36: "MFU
    0.019% (over all 6 GPUs of the fleet; 0.0% over the 4 the plan uses)", 0.022% over those 4)."""
    if not isinstance(mfu, (int, float)) or not groups or not placement:
        return ""
    peak = {g["name"]: g["peak_tflops"] for g in groups}
    total = sum(g["num_devices"] * g["peak_tflops"] for g in groups)
    used = sum(row["devices"] * peak[row["group"]] for row in placement)
    if used <= 0 or used >= total * (1 - 1e-12):
        return ""
    n_all = sum(g["num_devices"] for g in groups)
    n_used = sum(row["devices"] for row in placement)
    return (f" (over all {n_all} GPUs of the fleet; {fmt_pct(mfu * total / used, 1)} over the "
            f"{n_used} the plan uses)")


def causal_mfu_note(mfu: float | None, mfu_causal: float | None) -> str:
    """`` (49.7% counting causal attention's computed half)`` after an MFU, where that
    count is a point or more below it; empty otherwise. MFU counts each attention core
    whole, as published MFUs do (``cost.compute.uncomputed_attention_share``); a causal
    kernel computes half of it, which at long context is a large share of the work."""
    if not isinstance(mfu, (int, float)) or not isinstance(mfu_causal, (int, float)) \
            or not mfu_causal or mfu - mfu_causal < 0.01:
        return ""
    return f" ({100 * mfu_causal:.1f}% counting causal attention's computed half)"


#: Below this share of free device memory a plan that fits is "tight" (the report's badge
#: and the solve summary): allocator fragmentation and framework buffers the model does
#: not itemise can take that much.
TIGHT_HEADROOM = 0.05
#: What a tight plan's headroom must also hold that the modelled peak leaves out: NCCL's
#: own buffers (``cudaMalloc`` outside PyTorch's allocator, not in the measured 0.763 GiB
#: runtime reserve), 544 MB for a two-rank and 688 MB for a larger communicator after one
#: all-reduce on 4 NVLink A100s (NVIDIA/nccl issue #964), more with more channels.
NCCL_BUFFERS_WORDS = ("NCCL's own buffers, about 0.5-0.7 GiB per communicator on A100 "
                      "(NVIDIA/nccl#964), are outside the modelled peak")


def tight_note(peak_gib: float, capacity_gib: float) -> str:
    """`` (tight: 1.3 GiB, under 5% headroom; NCCL's own buffers ...)`` for a plan that fits
    with little room; empty otherwise (and for one that does not fit, which says so itself).
    The NCCL words say what else the headroom must hold (session 32: the runtime reserve's
    messages called it "CUDA context, NCCL buffers" while the measured 0.763 GiB holds no
    NCCL buffer)."""
    if not capacity_gib or peak_gib > capacity_gib + 1e-9 \
            or (capacity_gib - peak_gib) / capacity_gib >= TIGHT_HEADROOM:
        return ""
    return (f" (tight: {capacity_gib - peak_gib:.1f} GiB free, under "
            f"{100 * TIGHT_HEADROOM:.0f}% headroom; {NCCL_BUFFERS_WORDS})")


def usable_note(capacity_gib: float, hbm_gib: float | None) -> str:
    """`` usable (80.0 GiB less the 4.0 GiB of training.memory_reserve_gib)`` after a
    capacity below the device's memory; empty otherwise. The capacity every memory figure
    is held against is the HBM less the reserve the spec sets (``cost.evaluate``); the
    terminal printed ``74.4/76.0 GiB`` for an 80 GiB H100, where the report said "76.00 GiB
    usable", so the 76 read as the device's memory."""
    if not isinstance(hbm_gib, (int, float)) or hbm_gib - capacity_gib <= 1e-9:
        return ""
    return (f" usable ({hbm_gib:.4g} GiB less the {hbm_gib - capacity_gib:.4g} GiB of "
            "training.memory_reserve_gib)")


def fmt_pct_up(fraction: float, digits: int = 2) -> str:
    """Percentage rounded *up* at ``digits`` decimals, so a bound stays a bound."""
    scale = 10 ** digits
    value = math.ceil(fraction * 100 * scale - 1e-9) / scale
    return f"{value:.{digits}f}%"


def fmt_rate(value: float | None, unit: str) -> str:
    """Thousands-separated rate with 3 significant decimals below 100."""
    if value is None:
        return "—"
    text = f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
    return f"{text} {unit}"


def fmt_money(value: float | None) -> str:
    """An amount of money: thousands-separated whole units from 1,000 (``1,167,590``),
    3 significant digits below (``4.26``, ``71.3``): whole units made 4.26 and 4.45 USD
    both "4" beside an answer that proves one cheaper (QA round 11)."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def fmt_beside(value: float, threshold: float | None, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, or more where fewer would put it on the
    other side of ``threshold`` (or on it) than it is: an answer decided against a
    threshold (a deadline, a throughput target) must not be contradicted by the rounding
    of the figure shown beside it. QA round 35: a time to train of 0.059320 days was shown
    as "0.0593 - 0.0593" beside the requirement "within 0.0593 days" and the verdict "no";
    it is now "0.05932". Returned as Python's ``g`` format writes it."""
    shown = format(value, f".{digits}g")
    if threshold is None or not math.isfinite(value) or value == threshold:
        return shown
    side = value > threshold
    for more in range(digits + 1, 18):
        if (float(shown) > threshold) == side and float(shown) != threshold:
            break
        shown = format(value, f".{more}g")
    return shown


#: What a model without a sequence (a CNN; ``training.seq_len`` unset) shows for tokens/s:
#: its "tokens" would be samples (QA round 10: Inception-v3 printed 3244 tokens/s).
NO_TOKENS = "tokens/s: none (no sequence length)"

def some_ids(ids: list[str], shown: int) -> str:
    """``a, b, c and 4 more``: the first ``shown`` ids and how many are left out."""
    return ", ".join(ids[:shown]) + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


def scenario_notes(doc: dict, shown: int = 12) -> list[dict]:
    """What the sweep changed or kept for some scenarios (a search degree left out where it
    does not fit, a fleet group not swept, a sweep of the base alone), each note once with
    the scenarios it concerns: the terminal summary prints them, and the report a person
    forwards must say them too (QA round 11: capacity.html left them out). ``shown``: ids
    listed per note before "and N more"."""
    said: dict[str, list[str]] = {}
    for e in doc["scenarios"]:
        for note in e.get("notes") or []:
            said.setdefault(note, []).append(e["id"])
    return [{"text": note, "ids": some_ids(ids, shown)} for note, ids in said.items()]


#: What a summary says after a plan's 80% interval (solve's and a fleet's summaries).
INTERVAL_GLOSS = ("(how far the cost model has been from comparable published runs; the "
                  "certificate is exact under the model)")


def has_sequence(doc: dict) -> bool:
    """Whether a plan.json's training states a sequence length (tokens/s means something);
    True for a document that does not say (written before the field)."""
    training = (doc.get("spec") or {}).get("training")
    return not isinstance(training, dict) or "seq_len" not in training \
        or training.get("seq_len") is not None


def tokens_rate(tokens_per_s: float | None, sequence: bool) -> str:
    """``"12,345 tokens/s"``, or :data:`NO_TOKENS` without a sequence."""
    return fmt_rate(tokens_per_s, "tokens/s") if sequence else NO_TOKENS


def runs_behind(model_error: dict) -> str:
    """``"23 runs"`` (``", wide"`` added for a wide interval): the comparable published runs a
    capacity scenario's model-error interval stands on (QA round 10: capacity.json alone
    said it)."""
    wide = ", wide" if model_error.get("wide") else ""
    return f"{model_error.get('comparable_runs', '?')} runs{wide}"


def fmt_time_range(low: float | None, high: float | None) -> str:
    """Both ends of a time interval in one unit, the larger end's (``0.87-1.14 s``, not
    ``866.72 ms – 1.140 s``: QA round 10), written by the one rule every output uses
    (:func:`autopar_opt.core.ranges.range_text`: one precision for both ends, three
    significant digits on the larger; it was ``0.864 – 1.138 s`` here beside the
    terminal's and plan.json's ``0.864-1.14 s``)."""
    if low is None or high is None:
        return "—"
    top = max(abs(low), abs(high))
    scale, unit = (1.0, "s") if top >= 1.0 else (1e3, "ms") if top >= 1e-3 else (1e6, "µs")
    return range_text(low * scale, high * scale, unit)


def fmt_gib(value: float | None) -> str:
    """``12.345`` -> ``"12.35 GiB"``."""
    return "—" if value is None else f"{value:.2f} GiB"


def fmt_value(value: object) -> str:
    """A search-space or parameter value as text (lists joined, None as ``all``; an empty
    string inside a mapping as ``not stated``: the target row read "version: , source: ...",
    QA round 36)."""
    if value is None:
        return "all valid values"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt_value(v) for v in value) if value else "(none)"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {fmt_value(v) if v != '' else 'not stated'}" for k, v in value.items())
    return str(value)


def show(value: object) -> str:
    """A value as a reader wants it: none as a dash, booleans as yes/no, infinity as ∞,
    numbers to 6 significant digits, lists item by item."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str) and value.strip().lower() in ("inf", "+inf", "infinity"):
        return "∞"
    if isinstance(value, float):
        return "∞" if value == float("inf") else f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return str(value)


def label(key: str) -> str:
    """A document key as a column or row label (``time_s`` -> ``time s``)."""
    return str(key).replace("_", " ")


def columns(rows: list[dict]) -> list[str]:
    """Every key of ``rows`` in first-seen order (a pruned configuration has no
    ``replicas``: its cells must not shift under the wrong heading), less ``stats``."""
    out: list[str] = []
    for r in rows:
        out += [k for k in r if k != "stats" and k not in out]
    return out


def doc_table_env(env):
    """``env`` with :func:`show` and :func:`label` as filters and :func:`columns` as a
    global: the small reports that print a document's values as tables."""
    env.filters.update(show=show, label=label)
    env.globals["columns"] = columns
    return env


def alone_words(primal_text: str | None, statuses, bound_text: str) -> str:
    """What a fleet's summary and report say of one group searched alone: its best plan,
    or why it has none (proven infeasible; pruned by the fleet's plan; not decided), with
    the bound it carries where that bound is a number (QA rounds 5-6: a group proven
    infeasible read "its bound already exceeds the fleet's plan" and "proven >= inf s")."""
    seen = set(statuses or ())
    # a bound of -inf is no bound (QA round 9: "proven >= -inf s" after a time limit)
    proven = ("no bound proven" if bound_text in ("-inf", "none", "—", "-")
              else f"proven >= {bound_text} s")
    if primal_text is not None:
        return f"best {primal_text} s, {proven}"
    if seen == {"infeasible"}:
        return "no plan fits (proven)"
    if seen <= {"pruned", "infeasible"}:
        return f"pruned: no plan of it alone can beat the fleet's, {proven}"
    return f"no plan found ({', '.join(sorted(seen))}), {proven}"
