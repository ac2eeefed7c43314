"""A run file: a YAML (or JSON) list of record mappings, each with a unique ``id``.

Only the file's shape is checked here (:class:`RunFileError`, naming the file
and, where it applies, the record and key); what each record states is read
by :func:`autopar_opt.calibration.reading.record.read_record`.
"""

from __future__ import annotations

from pathlib import Path

from autopar_opt.calibration.reading.errors import RunFileError


#: What to do with a run file over its size limit (``core.limits.MAX_RUN_FILE_BYTES``,
#: 16 MiB: some 6,000 records of the shipped file's 2.8 kB each; a spec's 1 MiB held only
#: 370, less than a measurement campaign: QA round 13). QA round 12: the message gave a
#: spec's advice ("a spec is a few kilobytes; give large models as a zoo entry"), which a
#: run file cannot follow.
RUN_FILE_SIZE_FIX = ("split the records over several run files and calibrate each (a fit sees "
                     "the records of one file only), or shorten the records (comments, "
                     "free-text notes)")


def load_run_file(path: str | Path) -> list[dict]:
    """Read a run file into a list of record mappings.

    Raises :class:`RunFileError` naming the file and, where it applies, the
    record index and key: missing file, YAML error, not a list, an entry that
    is not a mapping, a missing or repeated ``id``.
    """
    from autopar_opt.core.limits import MAX_RUN_FILE_BYTES
    from autopar_opt.spec import SpecError
    from autopar_opt.spec.loader import read_document

    p = Path(path)
    try:
        data = read_document(path if isinstance(path, str) else p,   # "" is not "."
                             RUN_FILE_SIZE_FIX,   # nesting, keys, numbers: spec limits
                             max_bytes=MAX_RUN_FILE_BYTES)
    except SpecError as exc:
        raise RunFileError("; ".join(q.format() for q in exc.problems)) from None
    from autopar_opt.spec.doc_kinds import wrong_input

    wrong = wrong_input(data, p, "a list of run records (as in tests/data/published_runs.yaml)",
                        ())
    if wrong:
        raise RunFileError(wrong.format())
    if not isinstance(data, list):
        from autopar_opt.core.errors import kind_of

        # in words ("a mapping"), not Python's type name ("dict"; QA round 12)
        kind = kind_of(data) if data is not None else "an empty file"
        raise RunFileError(f"{p}: expected a list of run records at the top level, got {kind}",
                           fix="write the records as a list (- id: ...), as "
                               "tests/data/published_runs.yaml does")
    if not data:          # else a table of nothing and exit 0
        raise RunFileError(f"{p}: the list of run records is empty; add records (see "
                           "tests/data/published_runs.yaml for the format)")
    seen: dict[str, int] = {}
    for i, rec in enumerate(data, start=1):          # records counted from 1, as read
        if not isinstance(rec, dict):
            from autopar_opt.core.errors import kind_of

            kind = kind_of(rec)
            raise RunFileError(f"{p}: record {i} of {len(data)} is {kind}, "
                               "expected a mapping", key=f"[{i}]",
                               fix="write each record as a mapping with an id, as "
                                   "tests/data/published_runs.yaml does")
        rid = rec.get("id")
        if rid is None or str(rid).strip() == "":
            raise RunFileError(f"{p}: record {i} of {len(data)} has no 'id' key (every record "
                               "needs a unique id)", key=f"[{i}].id",
                               fix="add id: <a name no other record uses>")
        if isinstance(rid, (bool, dict, list)):
            raise RunFileError(f"{p}: record {i} of {len(data)}: id {rid!r} is not a name",
                               key=f"[{i}].id", value=rid,
                               fix="write the id as text, e.g. id: my_run_64gpu")
        if str(rid) != str(rid).strip():
            # ids that differ only by a space looked identical in every table (QA round 9)
            raise RunFileError(f"{p}: record {i} of {len(data)}: id {str(rid)!r} starts or ends "
                               "with a space", key=f"[{i}].id", value=rid,
                               fix=f"write it without the spaces: {str(rid).strip()!r}")
        rec["id"] = rid = str(rid)       # a number is a name too (QA round 9: 12345 crashed)
        if str(rid) in seen:
            raise RunFileError(f"{p}: record {i} of {len(data)}: id {rid!r} repeats record "
                               f"{seen[str(rid)]}'s", key=f"[{i}].id", value=rid,
                               fix=f"give record {i} an id of its own, or drop the copy")
        seen[str(rid)] = i
    return data
