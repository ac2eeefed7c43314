"""Session 9 validation gaps: inputs that were accepted (or reported poorly)
where the product rule asks for a refusal naming file, key, value, rule and fix.

Oracle for each refusal: exit code 2, no ``Traceback``, the key and the words
of the rule and fix, and no output written (``solve --out DIR`` leaves no
DIR). Hand-derived numbers: the debug model is embed, 4 transformer blocks,
head (6 layers, seq_len 128); gpt-1.7b (examples/quickstart.yaml) is embed,
24 blocks, head (26 layers, seq_len 2048).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from autopar_opt.ir.strategies import cp_degree_ok, cp_degrees_for

from support.cli import run_cli as _cli
from support import paths

ROOT = paths.REPO
QUICKSTART = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
FEASIBLE_PLAN = ROOT / "tests" / "data" / "report" / "plan_feasible.json"
C4 = {"name": "c4", "nodes": 1, "gpus_per_node": 4, "device": "A100-40GB"}


def _write(tmp_path: Path, spec: dict) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _quickstart(**plan) -> dict:
    spec = copy.deepcopy(QUICKSTART)
    spec["plan"].update(plan)
    return spec


def _refused(tmp_path: Path, spec: dict, *words: str) -> str:
    """``estimate`` and ``solve --out`` both exit 2 with ``words``; nothing written."""
    path = _write(tmp_path, spec)
    code, text = _cli("estimate", path)
    assert code == 2, text
    assert "spec.yaml" in text and all(w in text for w in words), text
    out = tmp_path / "out"
    code, text2 = _cli("solve", path, "--out", out)
    assert code == 2 and all(w in text2 for w in words), text2
    assert not out.exists()
    return text


# ------------------------------------------------------------ 1. vp_chunks
def test_interleaved_plan_whose_stages_do_not_split_into_vp_chunks(tmp_path):
    """pp 2, no stage_layers: Megatron-LM's split puts 24 / 2 = 12 of gpt-1.7b's
    blocks on each stage (embed and head ride along). vp 5: 24 blocks do not
    split into pp*vp = 10 chunks; the vp counts that do are the divisors of 12.
    Before session 9: priced as if each chunk were 12/5 blocks."""
    text = _refused(tmp_path, _quickstart(schedule="interleaved", vp_chunks=5), "plan.vp_chunks = 5",
                    "24 transformer blocks", "pp*vp_chunks = 10", "not a multiple of 10",
                    "[1, 2, 3, 4, 6, 12]")
    assert "Traceback" not in text


def test_uneven_stage_layers_with_vp_suggests_the_even_split(tmp_path):
    """stage_layers [12, 14]: 11 and 13 blocks, gcd 1, so only vp 1 fits; the
    split with 12 blocks each is embed + 12 blocks | 12 blocks + head = [13, 13]."""
    _refused(tmp_path, _quickstart(schedule="interleaved", vp_chunks=2, stage_layers=[12, 14]),
             "plan.vp_chunks = 2", "stage 0 holds 11 transformer blocks",
             "set stage_layers: [13, 13]", "vp_chunks in [1]")


def test_explicit_interleaved_plan_counts_blocks_per_stage(tmp_path):
    """Explicit stages [embed, block000] | [block001..head]: 1 and 3 blocks, so vp 2
    is refused; [embed, block000, block001] | [block002, block003, head] (2 and 2
    blocks) is accepted."""
    def spec(cut: int) -> dict:
        names = ["embed", "block000", "block001", "block002", "block003", "head"]
        stages = [{"layers": names[:cut], "strategies": [{"dp": 2}]},
                  {"layers": names[cut:], "strategies": [{"dp": 2}]}]
        return {"model": {"zoo": "debug"}, "cluster": C4, "training": {"global_batch_size": 16},
                "search": {"pp_degrees": [1, 2]},
                "plan": {"stages": stages, "microbatches": 4, "schedule": "interleaved",
                         "vp_chunks": 2}}
    _refused(tmp_path, spec(2), "plan.vp_chunks = 2", "stage 0 holds 1 transformer blocks",
             "move layers between plan.stages")
    code, text = _cli("estimate", _write(tmp_path, spec(3)))
    assert code == 0, text


def test_interleaved_plan_that_splits_evenly_still_runs(tmp_path):
    """vp 2 and 12 blocks per stage: valid, priced as before."""
    code, text = _cli("estimate", _write(tmp_path, _quickstart(schedule="interleaved",
                                                               vp_chunks=2)))
    assert code == 0, text


# ------------------------------------------------------------ 2. cp vs seq_len
@pytest.mark.parametrize("seq_len,cp,ok", [(2048, 2, True), (2048, 1024, True), (2048, 2048, False),
                                           (2050, 2, False), (2052, 2, True), (6, 3, True),
                                           (9, 3, False), (None, 2, False), (None, 1, True)])
def test_cp_degree_rule(seq_len, cp, ok):
    """seq_len must be a multiple of 2*cp (hand-checked table)."""
    assert cp_degree_ok(seq_len, cp) is ok


def test_cp_degrees_for_agrees_with_the_rule():
    """Brute force: every cp in 1..n with the rule, for every n up to 200."""
    for n in range(1, 201):
        assert cp_degrees_for(n) == [c for c in range(1, n + 1) if cp_degree_ok(n, c)]


def test_plan_cp_that_does_not_split_the_sequence(tmp_path):
    """seq_len 2050 = 2 * 1025: 2*cp = 4 does not divide it; the cp that do are
    the divisors of 1025 (1, 5, 25, 41, 205, 1025). Before: accepted."""
    spec = _quickstart(tp=1, cp=2)
    spec["training"]["seq_len"] = 2050
    _refused(tmp_path, spec, "plan.cp = 2", "seq_len 2050 is not a multiple of 2*cp = 4",
             "1, 5, 25, 41, 205, 1025")


def test_explicit_stage_cp_that_does_not_split_the_sequence(tmp_path):
    """debug model, seq_len 130: cp 2 needs a multiple of 4."""
    stages = [{"layers": ["embed", "block000", "block001"], "strategies": [{"dp": 1, "cp": 2}]},
              {"layers": ["block002", "block003", "head"], "strategies": [{"dp": 2}]}]
    spec = {"model": {"zoo": "debug"}, "cluster": C4,
            "training": {"global_batch_size": 16, "seq_len": 130},
            "plan": {"stages": stages, "microbatches": 4}}
    _refused(tmp_path, spec, "plan.stages[0].strategies[0].cp = 2", "seq_len 130",
             "multiple of 2*cp = 4")


def test_search_cp_degree_that_does_not_split_the_sequence(tmp_path):
    """Refused per entry, like a cp degree that does not divide the devices
    (search.cp_degrees[i]). Before: dropped silently by the enumerator (which
    also let through cp with seq_len % cp == 0 but seq_len % 2cp != 0)."""
    spec = copy.deepcopy(QUICKSTART)
    del spec["plan"]
    spec["training"]["seq_len"] = 2050
    spec["search"]["cp_degrees"] = [1, 2]
    _refused(tmp_path, spec, "search.cp_degrees[1] = 2", "not a multiple of 2*cp = 4",
             "remove it")


def test_cp_that_splits_the_sequence_still_runs(tmp_path):
    code, text = _cli("estimate", _write(tmp_path, _quickstart(tp=1, cp=2)))
    assert code == 0, text


# ------------------------------------------------------------ 3. report input
@pytest.mark.parametrize("edit,words", [
    (lambda d: d.update(schema_version=99), ["'schema_version' = 99", "reads schema_version 1"]),
    (lambda d: d["plan"].update(stages=[]), ["'plan.stages' = []", "at least one stage"]),
], ids=["schema_version_99", "no_stages"])
def test_report_refuses_unknown_version_and_empty_plan(tmp_path, edit, words):
    """Before: both rendered an HTML report with exit 0."""
    doc = json.loads(FEASIBLE_PLAN.read_text())
    edit(doc)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    out = tmp_path / "r.html"
    code, text = _cli("report", plan, "-o", out)
    assert code == 2 and "plan.json" in text and all(w in text for w in words), text
    assert not out.exists()


# ------------------------------------------------------------ 4. edges
@pytest.mark.parametrize("edges,words", [
    ([["a"]], ["model.edges[0] = [a]", "has 1 item(s); needs 2",
               "each edge is [from, to]: write [a, b]"]),
    ([["a", "b", "c"]], ["model.edges[0]", "each edge is [from, to]"]),
    ([[]], ["model.edges[0] = []", "has 0 item(s); needs 2"]),
], ids=["one_name", "three_names", "empty"])
def test_edge_with_the_wrong_number_of_names(tmp_path, edges, words):
    """Before: "required key missing; add 'edges[0][1]'" (and twice for [])."""
    spec = {"model": {"name": "m", "layers": [{"name": "a", "flops_fwd": 1e9},
                                              {"name": "b", "flops_fwd": 1e9}], "edges": edges},
            "cluster": {"zoo": "dgx-a100-8"}, "training": {"global_batch_size": 8}}
    code, text = _cli("estimate", _write(tmp_path, spec))
    assert code == 2 and "spec.yaml" in text and all(w in text for w in words), text
    assert "edges[0][1]" not in text and "invalid spec: 1 problem" in text
