"""``autopar pretrain`` writes a policy; ``autopar place --searcher gdp --policy FILE``
starts from it (zero-shot, then fine-tuning); bad files and misplaced options exit 2
with a message naming the file or option and the fix."""

from __future__ import annotations

import json
import re

import pytest

from support.cli import run_cli
from support.paths import DATA

pytest.importorskip("torch", reason="GDP needs the learn extra (PyTorch)")
THROUGHPUT = DATA / "placement" / "throughput"
BERT24 = THROUGHPUT / "LayerGraphs_bert24_inference.json"
BERT3 = THROUGHPUT / "OperatorGraphs_bert_l-3_inference.json"


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    path = tmp_path_factory.mktemp("policy") / "gdp.pt"
    code, out = run_cli("pretrain", BERT24, BERT3, "--out", path, "--iterations", "2",
                        "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["iterations"] == 2 and doc["trained_on"] == [
        "LayerGraphs_bert24_inference", "OperatorGraphs_bert_l-3_inference"]
    return path


def test_place_with_a_pretrained_policy_reports_zero_shot_and_the_bound(policy):
    code, out = run_cli("place", THROUGHPUT / "LayerGraphs_bert24_training.json", "--searcher",
                        "gdp", "--policy", policy, "--budget-s", "3", "--json")
    assert code == 0, out
    block = json.loads(out)["searcher"]
    assert block["info"]["pretrained"] and block["info"]["decoder"] == "node"
    assert block["info"]["zero_shot_value"] >= block["value"] >= block["lower_bound"] * (1 - 1e-9)
    # the per-node decoder's ceiling is the proven optimum
    assert block["ceiling"] == block["optimum"] and block["ratio_to_ceiling"] == block["ratio_to_optimum"]


def test_decoder_block_is_labelled(policy):
    code, out = run_cli("place", BERT24, "--searcher", "gdp", "--decoder", "block",
                        "--budget-s", "1", "--json")
    assert code == 0, out
    block = json.loads(out)["searcher"]
    assert block["info"]["decoder"] == "block"
    # bert24's block ceiling is its optimum (the DP's figure; RESULTS_place.md)
    assert block["ceiling"] == pytest.approx(17.7899, rel=1e-4)
    assert block["ratio_to_ceiling"] == pytest.approx(block["value"] / block["ceiling"])


@pytest.mark.parametrize("args, message", [
    (["--policy", "{policy}"], "--policy = .*is an option of the gdp searcher"),
    (["--searcher", "anneal", "--policy", "{policy}"], "is an option of the gdp searcher"),
    (["--searcher", "gdp", "--decoder", "ring"], "--decoder = 'ring': must be node or block"),
    (["--searcher", "gdp", "--decoder", "block", "--policy", "{policy}"], "not the block decoder"),
    (["--searcher", "gdp", "--policy", "{junk}"], r"junk\.pt: not a readable policy file"),
    (["--searcher", "gdp", "--policy", "{missing}"], "file not found.*autopar pretrain"),
])
def test_bad_policy_options_exit_2_before_any_work(policy, tmp_path, args, message):
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"\x00not a policy")
    fill = {"policy": policy, "junk": junk, "missing": tmp_path / "missing.pt"}
    code, out = run_cli("place", BERT24, *[a.format(**fill) for a in args])
    assert code == 2
    assert re.search(message, " ".join(out.split())), out


def test_pretrain_refuses_a_bad_output_and_a_bad_graph(tmp_path):
    code, out = run_cli("pretrain", BERT24, "--out", tmp_path, "--iterations", "1")
    assert code == 2 and "is a directory" in out
    code, out = run_cli("pretrain", tmp_path / "nope.json", "--out", tmp_path / "p.pt")
    assert code == 2 and "nope.json" in out and not (tmp_path / "p.pt").exists()
    code, out = run_cli("pretrain", BERT24, "--out", BERT24, "--iterations", "1")
    assert code == 2 and "overwrite" in out


def test_pretrain_quiet_writes_the_policy_and_prints_nothing(tmp_path):
    """--quiet, a common flag (COMMON_FLAGS): the policy file and the exit code only."""
    path = tmp_path / "quiet.pt"
    code, out = run_cli("pretrain", BERT24, "--out", path, "--iterations", "1", "--quiet")
    assert code == 0 and out.strip() == "" and path.stat().st_size > 0


def test_pretrain_stopped_by_a_signal_writes_the_policy_trained_so_far(tmp_path, monkeypatch):
    """QA round 12: Ctrl-C ended pretrain with exit 130, no file and not a word, after any
    length of training. Now the signal ends training after the update in flight and the
    policy is written (as the time limit does). Oracle: SIGINT sent from inside the third
    PPO update (deterministic): 3 updates recorded in the file's summary, exit 128 + 2,
    and the file loads as a policy."""
    import os
    import signal

    from autopar_opt.learn import gdp_place
    from autopar_opt.learn.policy_file import load_policy

    real, calls = gdp_place.PlaceAgent.iteration, []

    def iteration(self, tasks):
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return real(self, tasks)

    monkeypatch.setattr(gdp_place.PlaceAgent, "iteration", iteration)
    path = tmp_path / "p.pt"
    code, out = run_cli("pretrain", BERT24, "--out", path, "--time-limit", "300", "--json")
    assert code == 128 + signal.SIGINT, out
    assert "interrupted: signal 2 stopped training after 3 PPO update(s)" in out
    assert len(calls) == 3 and path.stat().st_size > 0
    load_policy(path)
