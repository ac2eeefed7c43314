"""Write held-out PaSE cost tables (more devices than the shipped ones) with PaSE's own code.

PaSE's ``graph.CreateGraph(model, batch, 128, p, flops=10, bw=16)`` builds the graph
exactly as its ``scheduler.py`` does (tests/data/peers/pase/README.md: batch 128 for
alexnet and inception3, 64 for rnnlm and transformer); the node and edge attribute
``costs`` it computes are written in the format of the shipped tables. Nothing of
PaSE is stored here: ``--pase-src`` is a checkout of github.com/baidu-research/PaSE
(Apache 2.0) and ``--python`` an interpreter with numpy, pandas < 2 and networkx
(PaSE's requirements; pandas 2 removed an API its scheduler uses).

Checked on the shipped p4/p8 tables: the files this writes are equal to them, except
transformer p8 where 18 Einsum vertices list the same configurations in another order
(the same multiset of costs; the optimum is the same).

Usage: python benchmarks/peers/make_pase_tables.py --pase-src DIR --python PY --out DIR
       [--devices 32 64] [--models alexnet rnnlm inception3 transformer]
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

#: Run inside PaSE's interpreter (its modules on sys.path): MODEL P OUT.
WRITER = r'''
import contextlib, gzip, io, json, sys
import numpy as np
import graph, nn_ops
model, p, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
batch = 128 if model in ("alexnet", "inception3") else 64
with contextlib.redirect_stdout(io.StringIO()):
    G = graph.CreateGraph(model, batch, 128, p, 10.0, 16.0)
verts = []
for v in sorted(G.nodes):
    op = G.nodes[v]["op"]
    verts.append({"id": v, "name": f"{type(op).__name__}_{v}", "op": type(op).__name__,
                  "dom": [int(x) for x in op.dom],
                  "configs": [[int(x) for x in c] for c in op.dom_config_tuples],
                  "cost": [float(x) for x in G.nodes[v]["costs"].values]})
edges = []
for u, v in sorted(G.edges):
    c = np.asarray(G.edges[u, v]["costs"].values, dtype=float)
    edges.append({"src": u, "dst": v, "cost": c.reshape(len(verts[u]["cost"]),
                                                        len(verts[v]["cost"])).tolist()})
doc = {"source": "PaSE (Elango, IPDPS 2021), github.com/baidu-research/PaSE; tables = node/edge "
                 "attribute costs of graph.CreateGraph, as read by scheduler.Processor "
                 "(written by benchmarks/peers/make_pase_tables.py)",
       "model": model, "p": p, "batch": batch, "model_arg": 128, "flops_tflops": 10.0,
       "bw_gbytes_s": 16.0, "words_to_flops": 5000.0,
       "objective": "minimize over one configuration index c_v per vertex: sum_v "
                    "vertices[v].cost[c_v] + sum_e edges[e].cost[c_src][c_dst]",
       "vertices": verts, "edges": edges}
with gzip.open(out, "wt") as f:
    json.dump(doc, f)
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pase-src", type=Path, required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--devices", type=int, nargs="+", default=[32, 64])
    ap.add_argument("--models", nargs="+", default=["alexnet", "rnnlm", "inception3", "transformer"])
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for p in args.devices:
        for model in args.models:
            out = args.out / f"pase_{model}_p{p}.json.gz"
            subprocess.run([args.python, "-c", WRITER, model, str(p), str(out.resolve())],
                           cwd=args.pase_src, check=True)
            print(out, flush=True)


if __name__ == "__main__":
    main()
