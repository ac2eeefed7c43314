"""A simulated pipeline timeline of one iteration, for the report's Gantt chart.

The cost model prices an iteration with a closed form (docs/DESIGN.md §3,
:func:`autopar_opt.cost.evaluate.pipeline_latency`); it does not say *when* each
micro-batch runs. To draw one iteration we replay the schedule as a list
scheduler: every stage executes its operations in the schedule's fixed order,
each as soon as its stage is free and its inputs have arrived.

Assumptions (stated in the chart caption):

* A stage's per-micro-batch time ``p_i`` (forward + backward) is split into
  forward ``p_i/3`` and backward ``2p_i/3`` (backward ≈ 2× forward FLOPs,
  Narayanan et al. 2021, Sec. 5.1).
* The cross-stage time ``o_i`` (activation forward + gradient backward,
  :func:`autopar_opt.cost.reshard.cross_stage_time`) is split in half: ``o_i/2``
  after each forward, ``o_i/2`` after each backward. Transfers are pure delays
  (links are not modelled as busy).
* Orders: GPipe runs all forwards then all backwards (Huang et al. 2019);
  1F1B does ``pp-i-1`` warm-up forwards on stage ``i``, then alternates one
  forward, one backward, then drains (PipeDream-Flush, Narayanan et al. 2021,
  Sec. 2.2.1). The interleaved schedule is drawn as 1F1B.
* The once-per-iteration ``sync`` (gradient reduction, optimizer step) starts
  on each stage after its last backward.

For equal stage times ``p`` and no transfers both schedules finish their
pipelines after ``(pp + c - 1)·p``, exactly the closed form.
"""

from __future__ import annotations

from dataclasses import dataclass

FORWARD_SHARE = 1.0 / 3.0
TRANSFER_FORWARD_SHARE = 0.5


@dataclass(frozen=True)
class Op:
    """One bar of the timeline. ``kind`` is ``F``, ``B``, ``sync``, ``send_f`` or ``send_b``.

    ``stage`` is the stage that runs it (for a send, the boundary index: the
    link between stage ``stage`` and ``stage+1``); ``microbatch`` is -1 for sync.
    """

    kind: str
    stage: int
    microbatch: int
    start: float
    end: float


def stage_order(schedule: str, pp: int, stage: int, microbatches: int) -> list[tuple[str, int]]:
    """The fixed order of (``F``/``B``, micro-batch) operations of one stage."""
    c = microbatches
    if schedule == "gpipe":
        return [("F", m) for m in range(c)] + [("B", m) for m in range(c)]
    warmup = min(pp - stage - 1, c)
    order = [("F", m) for m in range(warmup)]
    for j in range(c - warmup):
        order += [("F", warmup + j), ("B", j)]
    order += [("B", m) for m in range(c - warmup, c)]
    return order


def _ready(kind: str, i: int, m: int, pp: int, done: dict, transfers: list[float]) -> float | None:
    """Time the inputs of op (kind, stage i, micro-batch m) arrive, None if not yet known."""
    if kind == "F":
        if i == 0:
            return 0.0
        prev = done.get(("F", i - 1, m))
        return None if prev is None else prev + transfers[i - 1] * TRANSFER_FORWARD_SHARE
    if i == pp - 1:
        return done.get(("F", i, m))
    nxt = done.get(("B", i + 1, m))
    return None if nxt is None else nxt + transfers[i] * (1 - TRANSFER_FORWARD_SHARE)


def simulate(stage_times: list[float], transfer_times: list[float], sync_times: list[float],
             microbatches: int, schedule: str) -> list[Op]:
    """Replay one iteration; returns every op (stages, sends, syncs) sorted by start.

    Raises ValueError on inconsistent lengths or a non-positive micro-batch count.
    """
    pp = len(stage_times)
    if pp == 0 or microbatches < 1:
        raise ValueError("the timeline needs at least one stage and one micro-batch")
    if len(transfer_times) != pp - 1 or len(sync_times) != pp:
        raise ValueError(f"{pp} stages need {pp - 1} transfer times and {pp} sync times")
    orders = [stage_order(schedule, pp, i, microbatches) for i in range(pp)]
    pos, free = [0] * pp, [0.0] * pp
    done: dict[tuple[str, int, int], float] = {}
    ops: list[Op] = []
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for i in range(pp):
            while pos[i] < len(orders[i]):
                kind, m = orders[i][pos[i]]
                ready = _ready(kind, i, m, pp, done, transfer_times)
                if ready is None:
                    break
                share = FORWARD_SHARE if kind == "F" else 1 - FORWARD_SHARE
                start = max(free[i], ready)
                end = start + stage_times[i] * share
                ops.append(Op(kind, i, m, start, end))
                done[(kind, i, m)] = free[i] = end
                pos[i] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise ValueError(f"schedule {schedule!r} deadlocks")  # cannot happen for valid orders
    ops += _sends(ops, transfer_times)
    ops += [Op("sync", i, -1, free[i], free[i] + sync_times[i]) for i in range(pp)]
    return sorted(ops, key=lambda op: (op.start, op.stage, op.kind, op.microbatch))


def _sends(ops: list[Op], transfer_times: list[float]) -> list[Op]:
    """Forward sends leave stage i after F; backward sends leave stage i+1 after B."""
    out = []
    for op in ops:
        if op.kind == "F" and op.stage < len(transfer_times):
            t = transfer_times[op.stage] * TRANSFER_FORWARD_SHARE
            if t > 0:
                out.append(Op("send_f", op.stage, op.microbatch, op.end, op.end + t))
        elif op.kind == "B" and op.stage > 0:
            t = transfer_times[op.stage - 1] * (1 - TRANSFER_FORWARD_SHARE)
            if t > 0:
                out.append(Op("send_b", op.stage - 1, op.microbatch, op.end, op.end + t))
    return out


def makespan(ops: list[Op]) -> float:
    """End of the last op (including sync)."""
    return max(op.end for op in ops)


def idle_time(ops: list[Op], stage: int) -> float:
    """Bubble of one stage: time up to the end of the last backward of any stage
    that the stage spends neither in forward nor in backward."""
    return idle_times(ops, stage + 1)[stage]


def idle_times(ops: list[Op], pp: int) -> list[float]:
    """:func:`idle_time` of stages ``0 .. pp-1`` in one pass over ``ops`` (one pass
    per stage was O(pp² · micro-batches): 0.9 s of a 64 × 128 report)."""
    pipeline_end = max(op.end for op in ops if op.kind in ("F", "B"))
    busy = [0.0] * pp
    for op in ops:
        if op.kind in ("F", "B") and op.stage < pp:
            busy[op.stage] += op.end - op.start
    return [pipeline_end - b for b in busy]
