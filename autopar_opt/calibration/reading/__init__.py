"""Reading a published-run file: a file of record mappings -> typed run records, once.

* :func:`load_run_file` checks the file's shape (a list of mappings with
  unique ids; :class:`RunFileError` otherwise);
* :class:`RawRecord` validates what each record states (types, limits);
* :func:`read_record` interprets every field and text the cost model depends
  on (framework, device, architecture, layout, precision, what was measured)
  into a :class:`RunRecord`, recording each default it takes as an
  assumption, or raises :class:`Unmodelable` with the reason;
* :func:`read_records` does both for a whole file's records.

The builders (:mod:`autopar_opt.calibration.build`) take :class:`RunRecord`
objects, never mappings or texts.
"""

from __future__ import annotations

from autopar_opt.calibration.reading.errors import RunFileError, Unmodelable
from autopar_opt.calibration.reading.file import load_run_file
from autopar_opt.calibration.reading.record import (
    Assumption, RunRecord, family_of, read_record)
from autopar_opt.calibration.reading.schema import RawRecord


def read_records(records: list[dict]) -> tuple[list[RunRecord], list[tuple[str, str]]]:
    """(read records, [(id, reason)] of the records that cannot be priced)."""
    out, skipped = [], []
    for rec in records:
        try:
            out.append(read_record(rec))
        except KeyError as exc:        # e.g. a dtype the device has no peak for
            skipped.append((str(rec["id"]), str(exc.args[0]) if exc.args else "KeyError"))
        except ValueError as exc:      # Unmodelable, or a catalog's refusal
            skipped.append((str(rec["id"]), str(exc)))
    return out, skipped


__all__ = ["Assumption", "RawRecord", "RunFileError", "RunRecord", "Unmodelable", "family_of",
           "load_run_file", "read_record", "read_records"]
