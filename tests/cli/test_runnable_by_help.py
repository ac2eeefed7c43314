"""`autopar solve --help` describes `--runnable-by megatron`'s space as the search has it:
Megatron-LM's partial recomputation (`--recompute-method block`) is searched in every
configuration, 1F1B pipelines of several stages included (README "Runnable plans";
ir/target.py ``Target.searches_blocks``; QA round 34). The help said "with one stage or
interleaving, not in a 1F1B pipeline of several stages" after the search had grown it.

Oracle: the command itself. On GPT-1.7B cut to 8 layers over two stages of one A100 at
12.5 GiB (README's QA round 34 instance), searching only 1F1B with pp = 2, the megatron
target answers with a block plan (full recomputation of the first N of a stage's 4
layers, 0 < N < 4), which the old help said the space did not hold.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from support.cli import run_cli

SPEC = """\
model: {zoo: gpt-1.7b, overrides: {num_layers: 8}}
cluster: {nodes: 1, gpus_per_node: 2, device: A100-80GB, device_memory_gib: 12.5}
training: {global_batch_size: 8, seq_len: 8192, dtype: bf16}
search: {pp_degrees: [2], tp_degrees: [1], zero_levels: [0, 1], recompute: [none, full],
         schedules: [1f1b], microbatches: [2, 4, 8], hybrid_sharding: [false]}
"""


def _runnable_by_help() -> str:
    """The option's help as `autopar solve --help` prints it, read from the command (the
    rendered panel wraps and may shorten long tokens with the terminal's width)."""
    import typer.main

    from autopar_opt.cli.commands import app
    solve = typer.main.get_command(app).commands["solve"]
    return next(p.help for p in solve.params if "--runnable-by" in p.opts)


def test_megatron_block_recomputation_in_a_1f1b_pipeline_is_searched_as_the_help_says(tmp_path: Path):
    spec = tmp_path / "blk.yaml"
    spec.write_text(SPEC)
    code, text = run_cli("solve", str(spec), "--runnable-by", "megatron", "--json", "--quiet",
                         "--time-limit", "60")
    assert code == 0, text
    doc = json.loads(text)
    assert doc["plan"]["pp"] == 2 and doc["plan"]["schedule"] == "1f1b"
    first = re.search(r"first (\d+) of 4 transformer layers per stage", doc["plan"]["recompute"])
    assert first and 0 < int(first.group(1)) < 4, doc["plan"]["recompute"]
    words = _runnable_by_help()
    assert "every configuration" in words and "not in a 1F1B" not in words, words
