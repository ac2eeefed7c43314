"""The report's "how to launch" lines: the ``autopar export`` commands for the plan's target.

The report named the framework a plan is runnable by but not how to get its launch files
(QA round 36: no command, no file name anywhere in report.html). The commands and file
names are README's "Runnable plans and export" ones (``autopar export plan.json --to
megatron [--out args.txt]`` ...); ``export`` itself checks the plan against the framework
and refuses what it cannot run, so the lines promise no more than that command does.
"""

from __future__ import annotations

#: target framework -> (``--to`` value, suggested ``--out`` file, what it writes)
_EXPORTS = {
    "megatron": [("megatron", "args.txt", "Megatron-LM command-line flags"),
                 ("megatron-bridge", "overrides.txt", "Megatron-Bridge ConfigContainer overrides")],
    "torchtitan": [("torchtitan", "job.py", "torchtitan 0.3 Python config module")],
    "deepspeed": [("deepspeed", "ds.json", "DeepSpeed JSON config")],
}


def launch_section(doc: dict) -> dict:
    """``{"commands": [{"command", "what"}], "note"}`` for the plan's target (the search
    space's ``target.framework``); a free-space plan gets every exporter and the note that
    ``export`` refuses what a framework cannot run; a model that is not a chain (a DAG,
    ``spec.model.is_chain`` false) gets none and the reason."""
    target = (doc.get("search_space") or {}).get("target") or {}
    framework = str(target.get("framework") or "none")
    if (doc.get("spec") or {}).get("model", {}).get("is_chain") is False:
        # a DAG: no target can be stated (README), so "solve with a target" would mislead
        return {"commands": [], "note": "No launch files: this model's layer graph is not a "
                "chain of layers, which Megatron-LM, torchtitan and DeepSpeed pipeline, so "
                "autopar export refuses it (the search kept the free per-layer space)."}
    version = str(target.get("version") or "")
    rows = _EXPORTS.get(framework)
    searched = rows is not None
    if rows is None:
        rows = [r for rs in _EXPORTS.values() for r in rs]
    out = []
    for to, name, what in rows:
        if to == "torchtitan" and version.startswith("0.2"):
            name, what = "job.toml", "torchtitan 0.2 TOML job file"
        out.append({"command": f"autopar export plan.json --to {to} --out {name}", "what": what})
    note = (f"The search was restricted to what {framework} can launch, so its export applies."
            if searched else
            "The plan was searched in the free per-layer space (target: none): each export "
            "checks the plan against its framework and refuses what that framework cannot run; "
            "solve with a target (training.runtime, target: or --runnable-by) for a plan one runs.")
    return {"commands": out, "note": note + " The spec is read from the path plan.json records "
            "(--spec SPEC to name another)."}
