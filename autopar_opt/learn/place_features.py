"""Features of a :class:`~autopar_opt.learn.place_graph.UnitGraph` for the GDP placement policy.

Every feature is scale-free (times divided by the *fair share*: total accelerator time
over the number of accelerators; sizes by the smallest memory), so one policy serves
graphs of any size and unit and transfers to unseen ones (GDP §3.3).

* node (per unit, in ``σ`` order): time on its fastest accelerator, on its fastest host
  (log), size, transfer weight it touches, its compute-prefix fraction along ``σ`` before
  and after it, its position, in/out degree, host-only flag, number of accelerators,
  log of the number of units, and the transfer weight crossing the cut before and after
  it (the hyperedges spanning that position of ``σ``: where a device switch is cheap);
* device: its index among the accelerators (centred), host flag, memory relative to the
  smallest, total size over total accelerator memory, a constant;
* pair (unit, device): how far the device is from where a compute-balanced split along
  ``σ`` would put the unit (``k·mid(u) − (j + ½)``, ``mid`` = prefix fraction at the
  unit's centre), log of the unit's time on the device over its fastest accelerator
  time, and whether the unit can run there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autopar_opt.learn.place_graph import UnitGraph

NODE_DIM = 14
DEVICE_DIM = 5
PAIR_DIM = 3


@dataclass
class PlaceFeatures:
    """Feature arrays of one graph (float32) and the undirected edge list for GraphSAGE."""

    node: np.ndarray          # (m, NODE_DIM)
    device: np.ndarray        # (D, DEVICE_DIM)
    pair: np.ndarray          # (m, D, PAIR_DIM)
    edges: np.ndarray         # (E, 2) positions
    fair: float               # fair share: total accelerator time / accelerators


def _cut_profile(g: UnitGraph) -> np.ndarray:
    """Weight of the hyperedges that span the boundary just before each position."""
    m = g.num_units
    diff = np.zeros(m + 1)
    if len(g.h_w):
        starts = g.h_ptr[:-1]
        lo = np.minimum.reduceat(g.h_pos, starts)
        hi = np.maximum.reduceat(g.h_pos, starts)
        np.add.at(diff, lo + 1, g.h_w)
        np.add.at(diff, hi + 1, -g.h_w)
    return np.cumsum(diff)[:m]


def place_features(g: UnitGraph) -> PlaceFeatures:
    """The features of the module docstring."""
    m, D = g.time.shape
    acc = g.pays
    k = max(int(acc.sum()), 1)
    def fastest(on: np.ndarray) -> np.ndarray:
        t = np.where(on, g.time, np.inf).min(axis=1) if on.any() else np.zeros(m)
        return np.where(np.isfinite(t), t, 0.0)

    t_acc, t_host = fastest(acc), fastest(~acc)
    total = max(float(t_acc.sum()), 1e-30)
    fair = total / k
    host_only = ~(np.isfinite(g.time) & acc).any(axis=1)
    touch = np.zeros(m)
    if len(g.h_w):
        np.add.at(touch, g.h_pos, np.repeat(g.h_w, np.diff(g.h_ptr)))
    prefix = (np.cumsum(t_acc) - t_acc) / total
    indeg = np.diff(g.pred_ptr)
    outdeg = np.bincount(g.pred_pos, minlength=m)
    caps = g.cap[np.isfinite(g.cap)]
    cap = float(caps.min()) if len(caps) else 1.0
    cut = _cut_profile(g)
    node = np.stack([t_acc / fair * 10, np.log1p(t_host / fair * 10), g.size / cap * k,
                     touch / fair * 10, prefix, prefix + t_acc / total,
                     np.arange(m) / max(m - 1, 1), indeg / 4, outdeg / 4,
                     host_only.astype(float), np.full(m, k / 8), np.full(m, np.log10(max(m, 1)) / 5),
                     np.log1p(cut / fair * 10), np.log1p(np.r_[cut[1:], 0.0] / fair * 10)], axis=1)
    index = np.cumsum(acc) - 1
    device = np.stack([np.where(acc, (index + 0.5) / k, 0.0), (~acc).astype(float),
                       np.where(np.isfinite(g.cap), g.cap / cap, 0.0),
                       np.full(D, g.size.sum() / (cap * k)), np.ones(D)], axis=1)
    mid = (prefix + t_acc / total / 2)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(np.isfinite(g.time), g.time / np.maximum(t_acc, 1e-30)[:, None], 0.0)
    pair = np.stack([np.where(acc, mid * k - (index + 0.5), 0.0) / 2,
                     np.clip(np.log1p(rel), 0.0, 5.0), np.isfinite(g.time).astype(float)], axis=2)
    dst = np.repeat(np.arange(m), np.diff(g.pred_ptr))
    edges = np.stack([g.pred_pos, dst], axis=1) if len(dst) else np.zeros((0, 2), dtype=np.int64)
    if len(g.in_pos):            # read edges too (the non-contiguous variant has no precedence)
        rd = np.stack([g.in_pos, np.repeat(np.arange(m), np.diff(g.in_ptr))], axis=1)
        edges = np.unique(np.concatenate([edges, rd]), axis=0)
    return PlaceFeatures(node.astype(np.float32), device.astype(np.float32),
                         pair.astype(np.float32), edges.astype(np.int64), fair)
