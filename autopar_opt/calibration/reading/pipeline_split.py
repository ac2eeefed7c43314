"""How a run record's transformer layers are split over its pipeline stages.

The split moves a pipelined run's slowest stage, so it is read from what the
record states, explicit fields first (issue 28: explicit fields beat free text):

1. ``parallelism.pp_stage_layers``: the transformer layers of each stage, stated
   (Megatron-Core's ``--decoder-first-pipeline-num-layers`` / ``--decoder-last-
   pipeline-num-layers`` or a DeepSpeed ``partition_method`` give such splits); the
   embedding joins the first stage, the LM head the last.
2. ``parallelism.pp_partition``: ``even`` (Megatron-LM's split: the blocks spread
   evenly, the embedding on the first stage and the head on the last, beside their
   blocks) or ``embedding_slots`` (the embedding and the head each count as one layer
   of the split: BigScience Megatron-DeepSpeed ``--pp-partition-method
   type:transformer|embedding``; Megatron-Core ``--account-for-embedding-in-pipeline-
   split`` with ``--account-for-loss-in-pipeline-split``).
3. Neither stated: the free-text notes naming such a partition ("own pp slot",
   "embeddings as own slots", the two options' names) are read as ``embedding_slots``
   and said, with the field to state instead; otherwise ``even``.

Layers that do not divide over the stages go one more to the first stages, said.
"""

from __future__ import annotations

import re
from typing import Any

from autopar_opt.calibration.reading.errors import Unmodelable

#: The values of ``parallelism.pp_partition``.
PARTITIONS = ("even", "embedding_slots")
#: Words of a record's notes that state an embedding-slot partition (QA round 11 read only
#: "own pp slot"; five BLOOM records wrote "embeddings as own slots" and were split evenly).
_NOTES_SLOTS = re.compile(r"\bown (?:pp|pipeline) slots?\b|type:transformer\|embedding|"
                          r"account-for-embedding-in-pipeline-split")
#: "own slot(s)" alone names the partition only beside the word embedding.
_OWN_SLOTS = re.compile(r"\bown slots?\b")


def _notes_say_slots(notes: str) -> bool:
    text = notes.lower()
    return bool(_NOTES_SLOTS.search(text) or ("embedding" in text and _OWN_SLOTS.search(text)))


def even_sizes(num_blocks: int, pp: int, embed_slots: bool) -> tuple[int, ...]:
    """Items per stage (blocks, embedding and head counted): the blocks spread evenly,
    the first stages one more; with ``embed_slots`` the embedding and the head count as
    blocks of the split, else they join the first and the last stage."""
    items = num_blocks + (2 if embed_slots else 0)
    if items < pp:
        raise Unmodelable(f"{num_blocks} blocks cannot fill {pp} pipeline stages")
    base, extra = divmod(items, pp)
    sizes = [base + (1 if i < extra else 0) for i in range(pp)]
    if not embed_slots:
        sizes[0] += 1
        sizes[-1] += 1
    return tuple(sizes)


def _stated_partition(value: Any) -> str | None:
    if value is None:
        return None
    word = str(value).strip().lower()
    if word in PARTITIONS:
        return word
    raise Unmodelable(f"parallelism.pp_partition = {value!r} is not a partition this reader "
                      f"knows: state one of {', '.join(PARTITIONS)} (embedding_slots: the "
                      "embedding and the LM head each take one layer's place in the split), "
                      "or the layers of each stage as parallelism.pp_stage_layers")


def _stated_layers(value: Any, num_blocks: int, pp: int) -> tuple[int, ...]:
    where = f"parallelism.pp_stage_layers = {value!r}"
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        raise Unmodelable(f"{where} must be a list of whole numbers of transformer layers, one "
                          f"per pipeline stage (e.g. [{num_blocks // max(pp, 1)}, ...])")
    if len(value) != pp or sum(value) != num_blocks:
        raise Unmodelable(f"{where} must list {pp} stages (pp) whose layers add up to "
                          f"model.num_layers = {num_blocks} (it lists {len(value)} adding up to "
                          f"{sum(value)}): state each stage's transformer layers")
    return tuple(value)


def stage_split(parallelism, notes_text: str, num_blocks: int, pp: int
                ) -> tuple[tuple[int, ...], list[str]]:
    """Items per stage (embedding and head counted, as :func:`even_sizes`) and the
    sentences that say how the split was read (none for a stated even split that divides,
    or at pp = 1)."""
    said: list[str] = []
    layers = parallelism.raw("pp_stage_layers")
    partition = _stated_partition(parallelism.raw("pp_partition"))
    if layers is not None:
        if partition == "embedding_slots":
            raise Unmodelable("parallelism.pp_partition = embedding_slots and "
                              "parallelism.pp_stage_layers are both stated: the stated layers "
                              "place the embedding and the head with the first and last "
                              "stages' layers; state one of the two")
        blocks = _stated_layers(layers, num_blocks, pp)
        sizes = list(blocks)
        sizes[0] += 1
        sizes[-1] += 1
        if pp > 1 and len(set(blocks)) > 1:
            said.append(f"transformer layers per stage as stated: {list(blocks)}, the "
                        "embedding with the first and the LM head with the last")
        return tuple(sizes), said
    from_notes = partition is None and _notes_say_slots(notes_text)
    slots = partition == "embedding_slots" or from_notes
    sizes = even_sizes(num_blocks, pp, slots)
    if pp == 1:
        return sizes, said
    if slots:
        how = ("the notes name it (state parallelism.pp_partition: embedding_slots instead of "
               "free text)" if from_notes else "parallelism.pp_partition = embedding_slots")
        said.append(f"the embedding and the LM head each take one layer's place in the split "
                    f"(BigScience --pp-partition-method type:transformer|embedding; "
                    f"Megatron-Core --account-for-embedding-in-pipeline-split and "
                    f"--account-for-loss-in-pipeline-split), as {how}: layers per stage, "
                    f"those two counted, {list(sizes)}")
    elif num_blocks % pp:
        said.append(f"the {num_blocks} transformer layers do not divide over pp = {pp} and the "
                    f"record states no split (parallelism.pp_stage_layers): spread evenly, the "
                    f"first stages one more (layers per stage, embedding and head included: "
                    f"{list(sizes)})")
    return sizes, said
