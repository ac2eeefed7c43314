"""Run the ``autopar`` command line in-process (typer's runner), for tests that need
no fresh interpreter, and check that it never ends in a traceback."""

from __future__ import annotations


def run_cli(*args: str) -> tuple[int, str]:
    """Exit code and stdout+stderr of ``autopar ARGS``; fails on a traceback or an
    exception other than SystemExit."""
    from typer.testing import CliRunner

    from autopar_opt.cli.commands import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    text = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert "Traceback" not in text
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, text


def first_json(text: str) -> dict:
    """The first JSON document a command printed (``--json``), whatever follows it."""
    import json

    return json.JSONDecoder().raw_decode(text[text.index("{\n"):])[0]


def write_spec(folder, name: str, template: str, **fill: str):
    """``template`` with each ``KEY`` replaced by ``fill[KEY]``, written to ``folder/name``."""
    for key, value in fill.items():
        template = template.replace(key, value)
    path = folder / name
    path.write_text(template)
    return path


def communication_table(text: str) -> dict[str, list[float]]:
    """``estimate``'s ``communication, critical path`` table: row name -> [total, hidden,
    exposed, interference] seconds, as printed."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("communication, critical"))
    rows = {}
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        *name, total, hidden, exposed, interference = line.split()
        rows[" ".join(name)] = [float(x) for x in (total, hidden, exposed, interference)]
    return rows


def export_estimate(folder, estimate: dict, to: str, name: str, *options: str) -> str:
    """``estimate`` (a successful ``estimate --json`` document) written to ``folder/est.json``
    and exported with ``autopar export --to TO [OPTIONS] --out folder/NAME``; the written
    file's text. Fails the test if the export does."""
    import json

    (folder / "est.json").write_text(json.dumps(estimate))
    code, text = run_cli("export", folder / "est.json", "--to", to, *options,
                         "--out", folder / name)
    assert code == 0, text
    return (folder / name).read_text()
