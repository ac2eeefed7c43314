"""Memory of a MILP on the matrix path, per non-zero and per row or column (issue 35).

Measures what :data:`autopar_opt.core.memory_budget.BYTES_PER_NONZERO` and
``BYTES_PER_LINE`` state. Each case runs in a fresh process: a random sparse
MILP (``rows`` rows, ``cols`` binary columns, ``per_row`` non-zeros per row) is
built as numpy COO triplets -> CSR, handed to highspy as CSC, and HiGHS runs for
``--seconds`` (presolve, root LP, first nodes); the peak resident memory of the
process above its baseline (numpy, scipy, highspy imported) is the model's
memory. The two constants are the least-squares solution of
``peak = a * nonzeros + b * (rows + cols)`` over the cases, printed with each
case's residual. Writes RESULTS.md next to this file.

Usage: python benchmarks/memory/run.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from clitime import commit, load_average  # noqa: E402

CASES = [(100_000, 100_000, 10), (200_000, 100_000, 20), (400_000, 400_000, 10),
         (50_000, 300_000, 40)]

CHILD = r'''
import resource, sys, numpy as np, scipy.sparse as sp, highspy
rows, cols, per_row, seconds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
def rss(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
base = rss()
rng = np.random.default_rng(0)
r = np.repeat(np.arange(rows), per_row); c = rng.integers(0, cols, rows * per_row)
A = sp.csr_array((rng.random(rows * per_row), (r, c)), shape=(rows, cols)); A.sum_duplicates()
del r, c
h = highspy.Highs(); h.setOptionValue("output_flag", False); h.setOptionValue("threads", 1)
h.setOptionValue("time_limit", seconds)
lp = highspy.HighsLp(); lp.num_col_, lp.num_row_ = cols, rows
lp.col_cost_ = rng.random(cols); lp.col_lower_ = np.zeros(cols); lp.col_upper_ = np.ones(cols)
lp.row_lower_ = np.full(rows, -np.inf); lp.row_upper_ = np.full(rows, per_row / 3)
csc = A.tocsc(); lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = csc.indptr, csc.indices, csc.data
lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = cols, rows
lp.integrality_ = [highspy.HighsVarType.kInteger] * cols
h.passModel(lp); del lp, csc
h.run()
print(A.nnz, rss() - base)
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    began, load0 = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), load_average()
    rows = []
    for r, c, k in CASES:
        out = subprocess.run([sys.executable, "-c", CHILD, str(r), str(c), str(k), str(args.seconds)],
                             capture_output=True, text=True, check=True).stdout.split()
        rows.append({"rows": r, "cols": c, "nonzeros": int(out[0]), "peak_bytes": int(out[1])})
        print(json.dumps(rows[-1]), flush=True)
    X = np.array([[x["nonzeros"], x["rows"] + x["cols"]] for x in rows], dtype=float)
    y = np.array([x["peak_bytes"] for x in rows], dtype=float)
    (a, b), *_ = np.linalg.lstsq(X, y, rcond=None)
    lines = ["# Memory of a MILP on the matrix path", "",
             f"Recorded {began} (commit {commit()}), load {load0} before, {load_average()} after; "
             f"`python benchmarks/memory/run.py --seconds {args.seconds:g}`. Peak RSS of a fresh "
             "process above its baseline after building the matrix (numpy COO -> CSR), passing it "
             f"to highspy (CSC) and {args.seconds:g} s of HiGHS (presolve, root LP, first nodes).", "",
             "| rows | columns | non-zeros | peak MiB | fit MiB | residual |", "|---|---|---|---|---|---|"]
    for x in rows:
        fit = a * x["nonzeros"] + b * (x["rows"] + x["cols"])
        lines.append(f"| {x['rows']:,} | {x['cols']:,} | {x['nonzeros']:,} | "
                     f"{x['peak_bytes'] / 2**20:.0f} | {fit / 2**20:.0f} | "
                     f"{(x['peak_bytes'] - fit) / x['peak_bytes']:+.1%} |")
    lines += ["", f"Least squares: **{a:.0f} bytes per non-zero + {b:.0f} bytes per row or column** "
              "(`autopar_opt/core/memory_budget.py` states 70 and 408: this fit, recorded "
              "2026-11-29 at load 12)."]
    (HERE / "RESULTS.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
