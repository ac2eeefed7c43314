"""The per-node device decoder: one device per unit, masked to the feasible placements.

GDP's placer emits a device for every node (Zhou et al. 2019, §3.2). Here it walks
the units in the fixed topological order ``σ`` of :class:`~autopar_opt.learn.place_graph.UnitGraph`
and, for unit ``σ_i``, allows device ``d`` only if

* the unit can run on ``d`` (finite time; colour classes are already units);
* ``d`` has memory left for it;
* (contiguous variant) adding the edges ``dev(p) → d`` for the placed predecessors
  ``p`` keeps the device quotient graph acyclic: ``d`` must not reach a device that
  holds a predecessor, other than ``d`` itself. Reachability is kept as a transitive
  closure, one int64 bit mask per device, updated when an edge is added.

**Sound**: a placement completed without a dead end is feasible (the quotient is acyclic
by induction, memory and device support by the masks). **Complete**: every feasible
placement can be emitted, because decoding it with its own devices never meets a mask
(its partial quotients are subgraphs of its acyclic quotient, its partial memory sums at
most its final ones). So the decoder's space is the exact search's and its ceiling is the
proven optimum (tests enumerate tiny instances). **Dead ends**: when every device the
contiguity mask leaves open is out of memory, or cannot run a host-only unit, there is no
allowed device; deciding in advance whether a partial placement can be completed is bin
packing, so it is not attempted. The unit then goes to the best device that ignores the
failing rule, and the sample is flagged ``dead`` (infeasible, never reported).

A sample draws ``argmax_d (score[i, d] + gumbel)`` over the allowed devices (Gumbel-max:
a draw from the masked softmax). ``state_weights`` ``W`` adds state terms ``s(i, d) · W``
computed on the way (our addition to GDP's placer), recorded so that the log-probability
of a sample can be recomputed exactly. All three are divided by the fair share (total
accelerator time / accelerators): ``s1`` the transfer weight unit ``i`` reads from units
on devices other than ``d`` (the cost of switching), ``s2`` the compute already on ``d``,
``s3 = max(0, s2 + t(i, d)/fair − 1)`` how far ``d`` would go past its fair share.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autopar_opt.learn.place_graph import UnitGraph
from autopar_opt.placement.evaluate import MEM_RTOL

#: Number of state terms per (unit, device) (module docstring).
STATE_TERMS = 3


@dataclass
class Decoded:
    """A batch of ``B`` decoded placements.

    Attributes
    ----------
    dev : ``(B, m)`` device per position of ``σ``.
    masks : ``(B, m, D)`` the allowed devices at each step (for the log-probabilities).
    dead : ``(B,)`` samples that met a dead end (infeasible).
    state : ``(B, m, D, STATE_TERMS)`` the state terms, or None without state weights.
    """

    dev: np.ndarray
    masks: np.ndarray
    dead: np.ndarray
    state: np.ndarray | None


def _memory_binds(g: UnitGraph) -> bool:
    finite = np.isfinite(g.cap)
    return bool(finite.any() and g.size.sum() > g.cap[finite].min())


def decode(g: UnitGraph, scores: np.ndarray, rng: np.random.Generator | None = None, *,
           greedy: bool = False, forced: np.ndarray | None = None,
           state_weights: np.ndarray | None = None, fair: float = 1.0) -> Decoded:
    """Decode ``B`` placements from ``scores`` ``(B, m, D)`` (or ``(m, D)``, one sample).

    ``greedy`` takes the best allowed device; otherwise a Gumbel-max draw with ``rng``.
    ``forced`` ``(B, m)`` replays given devices (a forced device that is not allowed marks
    the sample ``dead``): the completeness test."""
    m, D = g.time.shape
    if scores.ndim == 2:
        scores = scores[None]
    B = scores.shape[0] if forced is None else len(forced)
    if scores.shape[0] != B:
        scores = np.broadcast_to(scores, (B, m, D))
    if forced is None and not greedy:
        scores = scores + rng.gumbel(size=(B, m, D))
    runs = np.isfinite(g.time)
    runs_all = runs.all(axis=1).tolist()
    t_fin = np.where(runs, g.time, 0.0)
    t_over = (t_fin / fair - 1.0).tolist() if state_weights is not None else None
    check_memory = _memory_binds(g)
    free = np.broadcast_to(g.cap, (B, D)).copy()
    slack = np.where(np.isfinite(g.cap), g.cap * MEM_RTOL, 0.0)   # evaluate_placement's tolerance
    size = g.size.tolist()
    bit = np.left_shift(np.int64(1), np.arange(D, dtype=np.int64))
    nbit = ~bit
    reach = np.zeros((B, D), dtype=np.int64)        # strict reachability, bit per device
    dev = np.zeros((B, m), dtype=np.int64)
    masks = np.zeros((B, m, D), dtype=bool)
    dead = np.zeros(B, dtype=bool)
    rows = np.arange(B)
    devices = np.arange(D)
    load = np.zeros((B, D))
    # (terms, m, B, D) while decoding: each step writes contiguous (B, D) blocks
    state = None if state_weights is None else np.zeros((STATE_TERMS, m, B, D), dtype=np.float32)
    w0, w1, w2 = (0.0, 0.0, 0.0) if state_weights is None else \
        (float(x) for x in np.asarray(state_weights, dtype=float))
    pred_ptr, pred_pos = g.pred_ptr.tolist(), g.pred_pos.tolist()
    in_ptr, in_pos, in_w = g.in_ptr.tolist(), g.in_pos.tolist(), g.in_w.tolist()
    in_w_arr = g.in_w
    in_w_total = np.add.reduceat(np.r_[g.in_w, 0.0], g.in_ptr[:-1]).tolist() if m else []
    inv_fair = 1.0 / fair
    for i in range(m):
        preds = pred_pos[pred_ptr[i]:pred_ptr[i + 1]]
        allowed = runs[i] if runs_all[i] else np.broadcast_to(runs[i], (B, D))
        allowed = np.broadcast_to(allowed, (B, D))
        acyclic = None
        if preds:
            pbits = bit[dev[:, preds[0]]]
            for p in preds[1:]:
                pbits = pbits | bit[dev[:, p]]
            acyclic = (reach & (pbits[:, None] & nbit)) == 0
            allowed = allowed & acyclic
        if check_memory:
            allowed = allowed & (free + slack >= size[i])
        if check_memory or not runs_all[i]:       # else a maximal predecessor device is open
            ok = allowed.any(axis=1)
            if not ok.all():
                dead |= ~ok
                relaxed = runs[i] & (acyclic if acyclic is not None else True)
                relaxed = np.broadcast_to(relaxed, (B, D))
                relaxed = np.where(relaxed.any(axis=1)[:, None], relaxed, runs[i])
                allowed = np.where(ok[:, None], allowed, relaxed)
        masks[:, i] = allowed
        sc = scores[:, i]
        if state is not None:
            lo, hi = in_ptr[i], in_ptr[i + 1]
            if hi == lo:
                switch = 0.0
            elif hi == lo + 1:
                switch = (dev[:, in_pos[lo], None] != devices) * (in_w[lo] * inv_fair)
            else:
                same = dev[:, in_pos[lo:hi], None] == devices
                switch = (in_w_total[i] - in_w_arr[lo:hi] @ same) * inv_fair
            s2 = load * inv_fair
            s3 = np.maximum(s2 + t_over[i], 0.0)
            state[0, i], state[1, i], state[2, i] = switch, s2, s3
            sc = sc + (w0 * switch + w1 * s2 + w2 * s3)
        if forced is not None:
            d = np.asarray(forced[:, i], dtype=np.int64)
            dead |= ~allowed[rows, d]
        else:
            d = np.where(allowed, sc, -np.inf).argmax(axis=1)
        dev[:, i] = d
        load[rows, d] += t_fin[i, d]
        if check_memory:
            free[rows, d] -= size[i]
        if preds:
            new = pbits & nbit[d]                          # edges dev(p) -> d, p off d
            if new.any():
                into = ((reach | bit) & new[:, None]) != 0      # devices reaching a new source
                reach |= np.where(into, (bit[d] | reach[rows, d])[:, None], 0)
    if state is not None:
        state = np.ascontiguousarray(state.transpose(2, 1, 3, 0))      # (B, m, D, terms)
    return Decoded(dev, masks, dead, state)


def price(g: UnitGraph, dev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Max-load and peak memory ratio of each placement in ``dev`` ``(B, m)``.

    The model of :func:`autopar_opt.placement.evaluate.evaluate_placement` on the
    units: a device's load is its units' time plus, if it pays transfers, ``w_h`` for
    every hyperedge ``h`` it holds part of but not all of (tests check equality)."""
    B, m = dev.shape
    D = g.num_devices
    flat = (np.arange(B)[:, None] * D + dev).ravel()
    compute = np.bincount(flat, weights=g.time[np.arange(m)[None, :], dev].ravel(),
                          minlength=B * D).reshape(B, D)
    memory = np.bincount(flat, weights=np.tile(g.size, B), minlength=B * D).reshape(B, D)
    comm = np.zeros((B, D))
    if len(g.h_w):
        # devices each hyperedge touches, as bits; cut when more than one
        held = np.bitwise_or.reduceat(np.left_shift(np.int64(1), dev[:, g.h_pos]), g.h_ptr[:-1],
                                      axis=1)
        cut = (held & (held - 1)) != 0
        for d in range(D):
            comm[:, d] = (cut & ((held >> d) & 1).astype(bool)) @ g.h_w
    loads = compute + np.where(g.pays, comm, 0.0)
    finite = np.isfinite(g.cap)
    ratio = (memory[:, finite] / g.cap[finite]).max(axis=1) if finite.any() else np.zeros(B)
    value = np.where(np.isfinite(loads).all(axis=1), loads.max(axis=1), np.inf)
    return value, ratio
