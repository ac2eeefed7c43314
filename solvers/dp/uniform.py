"""The DP under a target's uniformity rule (issue 29; :mod:`autopar_opt.ir.target`).

A framework takes one value per uniform dimension (tp, cp, sp, ZeRO, ep, etp,
recomputation) for the whole model. Each strategy carries its key
(``CostTables.uniform_keys``: one value per dimension, ``-1`` where the
setting changes nothing on that layer); a plan is runnable iff one full key
``g`` matches every layer's strategy.

Label rule. A label of the chain DP (:mod:`~autopar_opt.solvers.dp.chain`)
carries the key its layers have fixed so far, and two labels of different keys
never compete: neither dominates the other, since a completion open to one is
closed to the other. The labels therefore split into independent families, one
per full key, and the DP runs family by family under **one** incumbent and one
cutoff (a best-first branch on the key): each family's label passes take only
the strategies of its key (``allowed``), families are visited in order of a
proven lower bound (:func:`key_bound`), a family whose bound reaches the
incumbent is closed without a pass, and a family's own search stops as soon as
it proves it cannot beat the incumbent (``solve_chain(cutoff=...)``). The
configuration's proven bound is the least bound over the families not closed
(the incumbent when all are), so the certificate is as tight as the free
space's; time a family does not use goes to the next one.

Keys are enumerated once per configuration from the distinct key tables of the
layer classes (identical layers share one), so a chain of 126 identical
blocks costs as much as one block.

Megatron's block recomputation (the first N transformer layers of every model chunk
recompute fully, the others not at all) joins as families of their own
(:func:`block_families`), run without the ordering rule of identical layers: where the
stage of every layer is known (one stage, or the interleaved schedule's fixed split) as
fixed per-layer sets, and where the split is free (1F1B with ``pp > 1``) as a rule the
labels carry (:mod:`~autopar_opt.solvers.dp.stage_prefix`), one search per ``N``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from autopar_opt.core.assignment import Assignment
from autopar_opt.cost.tables import CostTables, fits
from autopar_opt.ir.target import BLOCK_KINDS, RECOMPUTE_DIM, recompute_code
from autopar_opt.solvers.dp.chain import ChainOutcome, solve_chain
from autopar_opt.solvers.dp.common import (_least_memory_partition, fit_limit, iteration_time,
                                           layer_memory)
from autopar_opt.solvers.dp.stage_prefix import StagePrefix, stage_prefix


@dataclass(frozen=True)
class KeyFamily:
    """One full key and, per layer, the indices of the strategies that match it.

    ``block`` > 0: a family of Megatron's block recomputation (:func:`block_families`),
    ``key`` its full-recomputation key, ``block`` its ``--recompute-num-layers``; its
    allowed sets depend on a layer's position in its stage, so the chain DP runs it
    without the ordering rule of identical layers."""

    key: tuple[int, ...]
    allowed: list[np.ndarray]
    block: int = 0
    #: its :func:`key_bound` when computed with the family (block families), else None
    bound: float | None = None
    #: over a free split, the rule the labels carry (``allowed``: the union of its sets)
    prefix: StagePrefix | None = None

    @property
    def symmetric(self) -> bool:
        return self.block == 0


def _compatible(rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """``[len(keys), len(rows)]``: row ``r`` matches key ``g`` in every dimension
    (``-1`` on either side matches anything)."""
    r, g = rows[None, :, :], keys[:, None, :]
    return ((r == g) | (r < 0) | (g < 0)).all(axis=2)


def key_families(tables: CostTables) -> list[KeyFamily]:
    """Every full key some runnable plan can take (each layer has a strategy of it),
    with its per-layer strategy sets; keys with identical sets are one family."""
    keys = tables.uniform_keys
    if keys is None:      # a fixed split without a target's rules (interleaving): one family
        every: dict[int, np.ndarray] = {}       # layers of one class share their array
        return [KeyFamily((), [every.setdefault(id(s), np.arange(len(s))) for s in tables.strategies])]
    families: dict[tuple, KeyFamily] = {}
    for key, allowed in _keyed_sets(tables).items():
        sig = tuple(tuple(a.tolist()) for a in (allowed[u] for u in _class_heads(keys)))
        families.setdefault(sig, KeyFamily(key, allowed))
    return list(families.values())


def _keyed_sets(tables: CostTables) -> dict[tuple[int, ...], list[np.ndarray]]:
    """Every full key some runnable plan can take, with its per-layer strategy sets
    (shared by the layers of a class), in key order (computed once per configuration)."""
    cache = tables.__dict__.setdefault("_dp_families", {})
    if "sets" not in cache:
        cache["sets"] = _key_sets(tables)
    return cache["sets"]


def _key_sets(tables: CostTables) -> dict[tuple[int, ...], list[np.ndarray]]:
    keys = tables.uniform_keys
    classes: dict[int, np.ndarray] = {}
    for arr in keys:
        classes.setdefault(id(arr), arr)
    tabs = list(classes.values())
    if any(len(t) == 0 for t in tabs):
        return {}
    dims = tabs[0].shape[1]
    domain = [sorted({int(v) for t in tabs for v in t[:, d] if v >= 0}) for d in range(dims)]
    # seed: the class that fixes the most dimensions; its wildcards expanded over the domain
    seed = max(tabs, key=lambda t: int((t >= 0).sum()) / max(len(t), 1))
    cands = {tuple(int(v) for v in row) for row in seed}
    for d in range(dims):
        if not domain[d]:
            continue
        grown = set()
        for c in cands:
            if c[d] >= 0:
                grown.add(c)
            else:
                grown.update(c[:d] + (v,) + c[d + 1:] for v in domain[d])
        cands = grown
    cand = np.array(sorted(cands), dtype=np.int64).reshape(len(cands), dims)
    ok = np.ones(len(cand), dtype=bool)
    compat: dict[int, np.ndarray] = {}
    for t in tabs:
        m = _compatible(t, cand)
        compat[id(t)] = m
        ok &= m.any(axis=1)
    out: dict[tuple[int, ...], list[np.ndarray]] = {}
    for j in np.flatnonzero(ok):
        per_class = {cid: np.flatnonzero(m[j]) for cid, m in compat.items()}
        out[tuple(int(v) for v in cand[j])] = [per_class[id(arr)] for arr in keys]
    return out


#: The recomputation column of a uniform key and its codes for none and full
#: (:func:`autopar_opt.ir.target.uniform_key`).
_RC, _NONE, _FULL = RECOMPUTE_DIM, recompute_code("none"), recompute_code("full")


def block_families(tables: CostTables) -> list[KeyFamily]:
    """Megatron's block recomputation (``--recompute-method block --recompute-num-layers
    N``: full recomputation of the first ``N`` transformer layers of every model chunk,
    none of the others) as key families, where the configuration's stage of every layer
    is known (:meth:`~autopar_opt.cost.tables.CostTables.block_stages`: one stage, or the
    interleaved schedule's fixed split): for every full key with ``rc = full`` whose
    ``rc = none`` twin is a key too and every ``N`` from 1 to one less than a stage's
    layers per chunk, the ``j``-th transformer layer of a stage of ``k`` takes the full
    key's strategies when ``j < v·min(N, k/v)`` and the none key's otherwise (the
    positions fixed, every plan of the family is the block plan of its split; ``N`` at
    least the layers per chunk of every stage is the full key itself). Where the split is
    free (1F1B with ``pp > 1``), the families of :func:`_free_split_families`. Empty where
    the target's space holds no block plan (not Megatron, or not both recomputation modes)."""
    cache = tables.__dict__.setdefault("_dp_families", {})     # one list per configuration
    if "block" not in cache:
        cache["block"] = _block_families(tables)
    return cache["block"]


def _block_families(tables: CostTables) -> list[KeyFamily]:
    stage = tables.block_stages()
    if stage is None:
        return _free_split_families(tables)
    v = max(tables.vp_chunks, 1)
    blocks = [tables.graph.layers[u].kind in BLOCK_KINDS for u in range(tables.num_layers)]
    position, count = [0] * tables.num_layers, [0] * tables.pp
    for u, i in enumerate(stage):
        if blocks[u]:
            position[u], count[i] = count[i], count[i] + 1
    if any(k % v for k in count):
        return []
    most = max(k // v for k in count)
    if most < 2:
        return []               # a chunk of one layer: N = 1 is full recomputation itself
    per_chunk = np.array([count[i] // v for i in stage])     # per layer, its stage's
    blocks, position = np.array(blocks, dtype=bool), np.array(position)
    # per N = 1..most-1 (rows), the layers that recompute fully
    masks = blocks[None, :] & (position[None, :] < v * np.minimum(
        np.arange(1, most)[:, None], per_chunk[None, :]))
    out: dict[tuple, KeyFamily] = {}
    for key, full, none, sig in _key_pairs(tables):
        terms_full, terms_none = _layer_terms(tables, full), _layer_terms(tables, none)
        bounds = _bounds(tables, np.where(masks[:, :, None], terms_full[None], terms_none[None]))
        for n, mask, bound in zip(range(1, most), masks, bounds):
            allowed = [full[u] if on else none[u] for u, on in enumerate(mask.tolist())]
            out[sig + (n,)] = KeyFamily(key, allowed, n, float(bound))
    return list(out.values())


def _key_pairs(tables: CostTables):
    """Each full key (``rc = full``) whose ``rc = none`` twin is a key too, with both keys'
    strategy sets per layer and their signature, once per distinct pair of sets (keys
    whose sets agree on every layer class give the same families)."""
    sets = _keyed_sets(tables)
    heads = _class_heads(tables.uniform_keys)
    seen: set[tuple] = set()
    for key, full in sets.items():
        if key[_RC] != _FULL:
            continue
        none = sets.get(key[:_RC] + (_NONE,) + key[_RC + 1:])
        if none is None:
            continue
        sig = tuple(tuple(a.tolist()) for a in (x[u] for x in (full, none) for u in heads))
        if sig not in seen:
            seen.add(sig)
            yield key, full, none, sig


def _free_split_families(tables: CostTables) -> list[KeyFamily]:
    """Block recomputation where the split is free (1F1B, ``pp > 1``,
    :meth:`~autopar_opt.cost.tables.CostTables.free_block_split`): for every full key with
    ``rc = full`` whose ``rc = none`` twin is a key too and every ``N`` from 1 to ``B - 1``
    (``B`` transformer layers), a family whose labels carry the rule
    (:func:`~autopar_opt.solvers.dp.stage_prefix.stage_prefix`). An ``N`` is left out
    where no plan of it can differ from the full key's or none fits: stage ``i`` holds at
    most ``K_N,i`` transformer layers
    (:func:`_most_per_stage`, memory), so ``max_i K_N,i <= N`` makes every stage
    recompute all of its layers (the full key's own family) and ``Σ_i K_N,i < B`` leaves
    layers no stage can hold. Its bound is :func:`key_bound` over the union of the two
    keys' strategies with the time of the layers that must recompute added
    (:func:`least_recomputed` of them over stages of at most ``max_i K_N,i``, charged the
    least excesses of a layer's fastest full strategy over its fastest of the union), and
    the pipeline's ``(c-1)·max p`` term raised from ``Σp/pp`` to the least largest stage
    under those stage sizes (:func:`least_bottleneck`): ``T = Σp + Σo + (c-1)·max(p, o)
    + max g`` (:meth:`~autopar_opt.cost.tables.CostTables.latency`)."""
    if not tables.free_block_split():
        return []
    blocks = [tables.graph.layers[u].kind in BLOCK_KINDS for u in range(tables.num_layers)]
    count = sum(blocks)
    if count < 2:
        return []
    sizes = [len(s) for s in tables.strategies]
    out: dict[tuple, KeyFamily] = {}
    stored = None           # the stages' stored-memory matrix, built on first need
    for key, full, none, sig in _key_pairs(tables):
        rule, union = stage_prefix(1, blocks, full, none, sizes)
        terms, terms_full, terms_none = (_layer_terms(tables, x) for x in (union, full, none))
        if terms is None or terms_full is None or terms_none is None:
            continue
        room = fit_limit(tables) - max(float(terms[:, 2].min(initial=0.0)), 0.0)
        if stored is None:
            stored = _stored_by_stage(tables, blocks)
        excess = np.cumsum(np.sort(np.maximum(terms_full[blocks, 3] - terms[blocks, 3], 0.0)))
        fast = [np.concatenate(([0.0], np.cumsum(np.sort(t[blocks, 3])))) for t in (terms_full, terms_none)]
        # per N (rows, 1..B-1), the most transformer layers each stage (columns) can hold
        most = _most_per_stage(room, _least_stored(stored, full), _least_stored(stored, none))
        # N such that a stage can hold more than N layers, and the stages all B of them
        ns = [(n, k.tolist()) for n, k in zip(range(1, count), most)
              if k.max() > n and k.sum() >= count]
        if not ns:
            continue
        forced = np.array([least_recomputed(n, count, max(k)) for n, k in ns])
        stacked = np.repeat(terms[None], len(ns), axis=0)
        stacked[:, 0, 3] += excess[forced - 1]      # the time sum is all the bound reads of it
        total = stacked[:, :, 3].sum(axis=1)
        floor = np.array([least_bottleneck(n, count, k, *fast) for n, k in ns])
        raised = (tables.rounds - 1) * np.maximum(floor - total / tables.pp, 0.0)
        for (n, _), bound, least in zip(ns, (_bounds(tables, stacked) + raised).tolist(), floor):
            out[sig + (n,)] = KeyFamily(key, union, n, float(bound), StagePrefix(
                n, rule.block, rule.full, rule.none, float(least)))
    return list(out.values())


def _stored_by_stage(tables: CostTables, blocks: list[bool]) -> tuple[list[int], np.ndarray]:
    """The transformer layers (indices) and their stored memory per stage and strategy,
    ``(pp, layers, strategies)`` (:func:`~autopar_opt.solvers.dp.common.layer_memory`: each
    stage's in-flight count; a layer with fewer strategies padded with ``inf``). Built
    once per configuration for :func:`_least_stored`, not kept: a matrix per
    configuration would hold pp x layers x strategies floats for every table alive."""
    index = [u for u, b in enumerate(blocks) if b]
    width = max(len(tables.strategies[u]) for u in index)
    out = np.full((tables.pp, len(index), width), np.inf)
    for i in range(tables.pp):
        mem = layer_memory(tables, i)
        for j, u in enumerate(index):
            out[i, j, :len(mem[u])] = mem[u]
    return index, out


def _least_stored(stored: tuple[list[int], np.ndarray], allowed: list[np.ndarray]) -> np.ndarray:
    """Per stage (rows), the cumulative sums of the transformer layers' least stored memory
    over their ``allowed`` strategies, sorted (``stored``: :func:`_stored_by_stage`)."""
    index, mem = stored
    mask = np.zeros(mem.shape[1:], dtype=bool)
    for j, u in enumerate(index):
        mask[j, allowed[u]] = True
    least = np.where(mask[None], mem, np.inf).min(axis=2)
    return np.cumsum(np.sort(least, axis=1), axis=1)


def _most_per_stage(room: float, full: np.ndarray, none: np.ndarray) -> np.ndarray:
    """An upper bound on the transformer layers each stage holds under Megatron's block
    method, per ``N`` from 1 to ``B - 1`` (rows) and stage (columns): a stage's first
    ``min(N, k)`` recompute, the others not, each storing at least the least of its key's
    strategies in that stage (``full``, ``none``: per stage, the cumulative sums of those
    least stored memories, sorted, :func:`_least_stored`), beside the least working set of
    any layer (``room``: the stage limit less it). A stage of ``k <= N`` layers holds the
    ``k`` least full ones at least; of ``k > N``, the ``N`` least full ones and the
    ``k - N`` least none ones."""
    count = full.shape[1]
    ns = np.arange(1, count)
    out = np.empty((count - 1, full.shape[0]), dtype=int)
    for i in range(full.shape[0]):
        upto = int(np.searchsorted(full[i], room, side="right"))     # k <= N: all recompute
        more = ns + np.searchsorted(none[i], room - full[i, ns - 1], side="right")
        out[:, i] = np.where(upto < ns, upto, more)
    return out


def least_bottleneck(n: int, blocks: int, most: list[int], full: np.ndarray,
                     none: np.ndarray) -> float:
    """A lower bound on the largest stage time of every plan of Megatron's block method
    with ``N = n`` over ``blocks`` transformer layers, stage ``i`` holding at most
    ``most[i]`` of them (:func:`_most_per_stage`): a stage of ``k`` takes at least
    ``p(k)``, its ``min(n, k)`` recomputing layers at least the least full times and the
    others the least none times (``full``, ``none``: cumulative sums of those sorted
    least times, from 0). ``p`` grows with ``k``, so the least largest stage is ``p(k*)``
    with ``k*`` the least count for which stages of at most ``min(most[i], k*)`` hold
    every layer (0 where none does)."""
    for k in range(-(-blocks // len(most)), max(most) + 1):
        if sum(min(m, k) for m in most) >= blocks:
            return float(full[min(n, k)] + none[max(k - n, 0)])
    return 0.0


def least_recomputed(n: int, blocks: int, most: int) -> int:
    """The fewest transformer layers Megatron's block method with ``N = n`` recomputes
    over any split of ``blocks`` layers into stages of at most ``most``: ``Σ_i min(n,
    k_i)`` with ``0 <= k_i <= most``, ``Σ k_i = blocks``. ``min(n, ·)`` is concave, so
    the sum is least at a vertex of that box-and-plane polytope, where every ``k_i`` is 0
    or ``most`` but one: ``⌊blocks/most⌋·min(n, most) + min(n, blocks mod most)``."""
    return (blocks // most) * min(n, most) + min(n, blocks % most)


def _class_heads(keys: list[np.ndarray]) -> list[int]:
    """One layer index per distinct key table (layers sharing a table share sets)."""
    seen: dict[int, int] = {}
    for u, arr in enumerate(keys):
        seen.setdefault(id(arr), u)
    return list(seen.values())


def key_bound(tables: CostTables, allowed: list[np.ndarray]) -> float:
    """A proven lower bound on every plan of one key family (``+inf``: none fits).

    As :func:`autopar_opt.search.bounds.analytic_lower_bound` on the family's
    strategies: ``T >= P·(1 + (c-1)/pp) + max_u min_k G + T0`` with ``P >= Σ_u
    min_k A``; a layer that fits alone in no strategy, or layers whose least
    stored memory exceeds ``pp`` stages, prove the family empty."""
    terms = _layer_terms(tables, allowed)
    return math.inf if terms is None else float(_bounds(tables, terms[None])[0])


def family_bound(tables: CostTables, family: KeyFamily) -> float:
    """:func:`key_bound` of a family (a block family's is computed with it)."""
    return key_bound(tables, family.allowed) if family.bound is None else family.bound


def _layer_terms(tables: CostTables, allowed: list[np.ndarray]) -> np.ndarray | None:
    """Per layer, over its ``allowed`` strategies: the least memory alone (stored with
    the least in-flight count plus working set), the least stored memory, the least
    working set, the least time and the least sync (``[L, 5]``; None: a layer has none)."""
    m = min(tables.inflight)
    # per configuration (identical layers share both arrays; the entry keeps them, so an
    # id is never another array's)
    memo: dict[tuple[int, int], tuple] = \
        tables.__dict__.setdefault("_dp_families", {}).setdefault("terms", {})
    rows = []
    for u, ks in enumerate(allowed):
        if not len(ks):
            return None
        key = (id(tables.time[u]), id(ks))
        hit = memo.get(key)
        if hit is None or hit[0] is not tables.time[u] or hit[1] is not ks:
            w, h, x = (tables.weight_bytes[u][ks], tables.act_bytes[u][ks],
                       tables.working_bytes[u][ks])
            hit = memo[key] = (tables.time[u], ks, (
                float(np.min(w + m * h + x)), float(np.min(w + m * h)), float(np.min(x)),
                float(np.min(tables.time[u][ks])), float(np.min(tables.sync[u][ks]))))
        rows.append(hit[2])
    return np.array(rows, dtype=float).reshape(len(rows), 5)


def _bounds(tables: CostTables, terms: np.ndarray) -> np.ndarray:
    """:func:`key_bound` of every family of ``terms`` (``[F, L, 5]``, :func:`_layer_terms`)."""
    lim = fit_limit(tables)
    alone, least, x_min, t_min, g_min = (terms[..., j] for j in range(5))
    stored, total = least.sum(axis=1), t_min.sum(axis=1)
    held = np.maximum(x_min.max(axis=1, initial=0.0), 0.0)
    sync = np.maximum(g_min.max(axis=1, initial=0.0), 0.0)
    pp, c = tables.pp, tables.rounds
    value = total * (1 + (c - 1) / pp) + sync + tables.params.iteration_overhead_s
    empty = (alone > lim).any(axis=1) | (stored + held > tables.pp * lim)
    return np.where(empty, math.inf, value)


#: Least share of the time left that the next key family may use (the first families,
#: with the least bounds, are the likeliest to hold the optimum; what a family does not
#: use goes to the next one).
MIN_SHARE = 0.25


def searched_families(tables: CostTables, part: str = "all") -> list[KeyFamily]:
    """The key families of the target's space: ``part`` ``uniform`` (one key for the
    model, :func:`key_families`), ``block`` (Megatron's block recomputation,
    :func:`block_families`) or ``all`` (both: the space the certificate covers)."""
    out = key_families(tables) if part in ("all", "uniform") else []
    return out + (block_families(tables) if part in ("all", "block") else [])


def solve_uniform(tables: CostTables, deadline: float | None = None, beam: int = 4,
                  rel_gap: float = 0.0, cutoff: float = math.inf,
                  part: str = "all") -> ChainOutcome:
    """The exact DP under the uniformity rule (module docstring): the best runnable
    plan and a proven bound over every key family. With ``rel_gap`` a family whose
    bound is within that relative gap of the incumbent is closed (the answer is then
    proven within the gap: ``exhaustive`` False, ``lower_bound`` the least open bound).

    ``cutoff``: the value of a plan the caller already holds (the search's incumbent,
    from another configuration). It closes families as this configuration's own
    incumbent does, so the answer may have no plan, or a plan worse than
    ``cutoff``, with ``exhaustive`` False and ``lower_bound >= cutoff·(1 - rel_gap)``
    (the least bound over the families it closed, or ``cutoff`` when every one of them
    was proven at least that): this configuration cannot beat the caller's plan by
    more than the gap, which is all the caller needs. ``part``: the families searched
    (:func:`searched_families`; ``all`` by default, the target's whole space)."""
    families = searched_families(tables, part)
    bounds = [family_bound(tables, f) for f in families]
    order = sorted(range(len(families)), key=lambda j: bounds[j])
    inc, ub, labels = None, math.inf, 0
    open_bounds: list[float] = []
    fallback = False
    within = 1.0 - rel_gap
    for pos, j in enumerate(order):
        bar = min(ub, cutoff)        # a family whose bound reaches it (within the gap) is closed
        if bounds[j] >= bar * within * (1 - 1e-12):
            # sorted: every family left is closed by its bound (within the gap)
            open_bounds += [bounds[k] for k in order[pos:] if bounds[k] < bar]
            break
        if deadline is not None and time.monotonic() >= deadline:
            open_bounds += [bounds[k] for k in order[pos:] if bounds[k] < bar]
            break
        live = sum(1 for k in order[pos:] if bounds[k] < bar * within)
        share = None if deadline is None else time.monotonic() + max(
            deadline - time.monotonic(), 0.0) * max(1.0 / max(live, 1), MIN_SHARE)
        out = solve_chain(tables, share, beam, families[j].allowed, cutoff=bar * within,
                          symmetric=families[j].symmetric, prefix=families[j].prefix)
        labels += out.labels
        if out.assignment is not None and out.value < ub and tables.runnable(out.assignment):
            inc, ub, fallback = out.assignment, out.value, out.fallback
        if not out.exhaustive and out.lower_bound < min(ub, cutoff):
            open_bounds.append(max(bounds[j], out.lower_bound))
    # the free-split families' shared relaxations (solvers/dp/chain.py _shared_relaxation)
    # hold a ChainDP's bounds per key pair: dropped with the search that used them
    tables.__dict__.get("_dp_families", {}).pop("prefix_dp", None)
    bar = min(ub, cutoff)
    open_bounds = [b for b in open_bounds if b < bar]
    # every family's optimum is at least its open bound, or at least ``bar``
    lower = min([bar] + open_bounds)
    if inc is None and not open_bounds:
        if math.isfinite(cutoff):     # every family proven at least the caller's plan
            return ChainOutcome(None, math.inf, False, labels, cutoff)
        return ChainOutcome(None, math.inf, True, labels, math.inf)   # no runnable plan fits
    if inc is None:
        # cut before any family found a plan: a runnable least-memory plan, as the free
        # DP answers with the least-memory plan (milliseconds; never a proof)
        inc = least_memory_runnable(tables, [families[j] for j in order])
        if inc is not None:
            ub, fallback = iteration_time(tables, inc), True
            lower = min(lower, ub)
    return ChainOutcome(inc, ub, not open_bounds and lower >= ub, labels, lower, fallback=fallback)


def least_memory_runnable(tables: CostTables, families: list[KeyFamily]) -> Assignment | None:
    """The first family (in the order given) whose least-memory plan fits: the
    stages of the least-memory partition of the whole space (or the target's fixed
    split), each layer on its least-memory strategy of the family. None when no
    family's does (a fallback only: not a proof that no runnable plan fits)."""
    n = tables.num_layers
    if tables.fixed_stage is not None:
        stage = list(tables.fixed_stage)
    else:
        _, cuts, _ = _least_memory_partition(tables)
        if cuts is None:
            return None
        stage = [0] * n
        for i, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
            for u in range(lo, hi):
                stage[u] = i
    mems = {i: layer_memory(tables, i) for i in set(stage)}
    for fam in families:
        choice = []
        for u, ks in enumerate(fam.allowed):
            if not len(ks):
                break
            m = mems[stage[u]][u][ks]
            choice.append(int(ks[int(np.argmin(m))]))
        else:
            asg = Assignment(stage, choice)
            if fits(tables, asg) and tables.runnable(asg):
                return asg
    return None


__all__ = ["KeyFamily", "block_families", "family_bound", "key_bound", "key_families",
           "least_memory_runnable", "least_recomputed", "searched_families", "solve_uniform"]
