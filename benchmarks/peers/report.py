"""Turn ``benchmarks/peers/{piper,pase}_results.json`` (run.py) into the Markdown of RESULTS.md."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _f(x, digits: int = 6) -> str:
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return "-" if x is None else str(x)


def _yes(flag) -> str:
    return "yes" if flag else "**no**"


def table(path: Path) -> str:
    data = json.loads(path.read_text())
    piper = data["which"] == "piper"
    head = (["instance", "k", "GiB"] if piper else ["table", "held out"])
    cols = head + ["status", "optimum", "gap", "ours s", "ours CPU s", "ours MiB", "peer s",
                   "peer CPU s", "peer value", "ours/peer", "targets (proven, <= max(peer, 1 s), "
                   "<= 10 s, <= 2 GiB)", "load"]
    out = [f"`{path.name}`: {data['started']}, commit {data['commit']}, {data['cpus']} CPUs, load "
           f"{data['load_before']} before / {data['load_after']} after; ours: `{data['command']}`; "
           f"peer: {data['peer']}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    met = 0
    for r in data["rows"]:
        o, p, t = r["ours"], r.get("peer") or {}, r["targets"]
        key = [r["instance"], str(r["k"]), _f(r["memory_gib"])] if piper else \
            [r["table"], "yes" if r["held_out"] else "no"]
        peer_s = (("> " if p.get("timed_out") else "") + _f(p.get("wall_s"), 4)) if p else "not run"
        value = p.get("tps") if piper else p.get("total_cost")
        ok = all(t[k] for k in ("proven", "within_peer_or_1s", "within_10s", "within_2gib"))
        met += ok
        out.append("| " + " | ".join(key + [
            o.get("status", "error"), _f(o.get("primal")), _f(o.get("gap"), 3), _f(o["wall_s"], 4),
            _f(o["cpu_s"], 4), _f(o["peak_rss_mib"], 5), peer_s, _f(p.get("cpu_s"), 4), _f(value),
            _f(t["ratio_to_peer"], 3),
            " ".join(_yes(t[k]) for k in ("proven", "within_peer_or_1s", "within_10s", "within_2gib")),
            r["load_before"]]) + " |")
    out.append("")
    out.append(f"All four targets met on {met} of {len(data['rows'])} rows.")
    return "\n".join(out)


if __name__ == "__main__":
    print("\n\n".join(table(Path(p)) for p in sys.argv[1:]))
