"""Every file a spec reads: the top file, its included section files
(``model: model.yaml``, :func:`autopar_opt.spec.loader.resolve_includes`), a
Hugging Face ``model.hf_config`` (a ``config.json`` or a directory holding
one, relative to the model section's file, as ``build_model._hf_graph``
reads it) and a ``cost_model.file`` (relative to the top file, as
``build_run.build_cost_params`` reads it).

Commands that write an output next to what they read (``export -o``) check
the output against all of them (:func:`autopar_opt.core.files.check_output_file`),
so naming an included file as the output cannot overwrite it.
"""

from __future__ import annotations

from pathlib import Path

from autopar_opt.core.errors import SpecError
from autopar_opt.spec.loader import read_mapping, resolve_includes


def spec_input_files(path: str | Path) -> tuple[str, ...]:
    """The files the spec at ``path`` reads, the top file first. A file that
    cannot be read or parsed contributes only itself (loading the spec then
    reports its problem)."""
    top = Path(path)
    try:
        data = read_mapping(top)
    except SpecError:
        return (str(top),)
    merged, files, _problems = resolve_includes(data, top)
    found = [str(top), *files.values()]
    model = merged.get("model")
    hf = model.get("hf_config") if isinstance(model, dict) else None
    if isinstance(hf, str) and hf and "\x00" not in hf:
        cfg = Path(hf) if Path(hf).is_absolute() else Path(files.get("model", top)).parent / hf
        found += [str(cfg), str(cfg / "config.json")]
    cost = merged.get("cost_model")
    file = cost if isinstance(cost, str) else cost.get("file") if isinstance(cost, dict) else None
    if isinstance(file, str) and file and "\x00" not in file:
        found.append(str(Path(file) if Path(file).is_absolute() else top.parent / file))
    return tuple(found)
