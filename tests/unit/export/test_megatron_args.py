"""A Megatron-LM command line as a plan (``plan: {megatron_args: ...}``): what is read,
what is refused, nothing dropped silently.

Oracles: Megatron-LM's own parser (the flag list is the installed Megatron-LM 0.17.1's,
compared when the frameworks extra is installed); the plan section that states the same
run by hand; the spec's model and dtype for the contradictions.
"""

from __future__ import annotations

import os

import pytest

from autopar_opt.export.megatron import MegatronArgsError, megatron_lm_flags, parse_megatron_args
from autopar_opt.spec import SpecError, load_spec
from support.paths import REPO

FLAGS_FILE = REPO / "autopar_opt" / "export" / "megatron_lm_flags.yaml"


def test_the_flag_list_is_megatron_lms_own():
    """The packaged list equals every flag of the installed Megatron-LM's parse_args
    (AUTOPAR_REGEN_GOLDEN=1 rewrites it from there)."""
    pytest.importorskip("megatron.training.arguments")
    import importlib.metadata

    from support.frameworks import megatron_lm_flags as installed
    flags, version = installed(), importlib.metadata.version("megatron-core")
    if os.environ.get("AUTOPAR_REGEN_GOLDEN"):
        head = "".join(line for line in FLAGS_FILE.read_text().splitlines(keepends=True)
                       if line.startswith("#"))
        FLAGS_FILE.write_text(head + f"megatron_core: '{version}'\nflags:\n"
                              + "".join(f"- {f}\n" for f in flags))
        megatron_lm_flags.cache_clear()
    assert megatron_lm_flags() == (version, frozenset(flags))
    assert {"--tensor-model-parallel-size", "--use-torch-fsdp2", "--recompute-activations",
            "--data-path"} <= set(flags) and "--foo-bar" not in flags


def test_unknown_flags_are_refused_all_at_once_with_the_nearest_name():
    with pytest.raises(MegatronArgsError) as info:
        parse_megatron_args("--tensor-parallel-size 2 --foo-bar --micro-batch-size 2 --foo-bar")
    problems = info.value.problems
    assert len(problems) == 2
    assert problems[0].startswith("--tensor-parallel-size: Megatron-LM 0.17.1 has no such argument")
    assert "did you mean '--tensor-model-parallel-size'" in problems[0]
    assert problems[1].startswith("--foo-bar: ")


def test_the_launcher_options_before_the_script_are_not_megatrons():
    args = parse_megatron_args("CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun --nnodes 2 --nproc-per-node 4 "
                               "--rdzv-backend c10d pretrain_gpt.py --tensor-model-parallel-size 2 "
                               "--data-path /data/x --lr 3e-4")
    assert args.tensor_model_parallel_size == 2


def _spec(tmp_path, plan_yaml: str, dtype: str = "bf16"):
    path = tmp_path / "spec.yaml"
    path.write_text("model: {zoo: llama3-8b}\ncluster: {zoo: 2x8-h100}\n"
                    f"training: {{global_batch_size: 64, seq_len: 8192, dtype: {dtype}}}\n"
                    + plan_yaml)
    return path


def test_fsdp2_and_recompute_activations_are_priced_as_their_plans(tmp_path):
    """--use-torch-fsdp2 is ZeRO-3 (FSDP2 fully_shard), --recompute-activations is
    selective recomputation (Megatron-LM's older spelling): the same plans as the plan
    section stating them (they were dropped: ZeRO-0, no recomputation)."""
    base = "--tensor-model-parallel-size 2 --micro-batch-size 1 --global-batch-size 64"
    args = load_spec(_spec(tmp_path, f"plan: {{megatron_args: '{base} --use-torch-fsdp2 "
                                      "--recompute-activations'}\n"))
    same = load_spec(_spec(tmp_path, "plan: {tp: 2, micro_batch_size: 1, zero: 3, "
                                     "recompute: selective}\n"))
    assert args.plan.to_dict() == same.plan.to_dict()
    blocks = [s for st in args.plan.stages for s in st.strategies[1:-1]]
    assert {s.zero for s in blocks} == {3} and {s.recompute.value for s in blocks} == {"selective"}


def test_flags_the_spec_contradicts_are_each_named(tmp_path):
    """--fp16 against dtype bf16, --num-experts 8 on a dense model, another hidden size and
    another GQA group count, an unknown flag elsewhere: every contradiction in one error."""
    bad = ("--tensor-model-parallel-size 2 --fp16 --num-experts 8 --hidden-size 5120 "
           "--group-query-attention --num-query-groups 4 --num-attention-heads 32")
    with pytest.raises(SpecError) as info:
        load_spec(_spec(tmp_path, f"plan: {{megatron_args: '{bad}'}}\n"))
    rules = [p.rule for p in info.value.problems if p.key == "plan.megatron_args"]
    assert len(rules) == 4, rules
    assert rules[0].startswith("--fp16 trains in fp16, but training.dtype is bf16")
    assert any(r.startswith("--num-experts 8, but the model has none (a dense model)") for r in rules)
    assert any(r.startswith("--hidden-size 5120, but the model has 4096") for r in rules)
    assert any(r.startswith("--num-query-groups 4, but the model has 8") for r in rules)
    # the same flags the model has, and the spec's precision: accepted
    good = ("--tensor-model-parallel-size 2 --bf16 --hidden-size 4096 --group-query-attention "
            "--num-query-groups 8 --num-attention-heads 32 --ffn-hidden-size 14336")
    assert load_spec(_spec(tmp_path, f"plan: {{megatron_args: '{good}'}}\n")).plan is not None
    # --num-query-groups without --group-query-attention is ignored by Megatron: not checked
    assert load_spec(_spec(tmp_path, "plan: {megatron_args: '--num-query-groups 4'}\n")).plan


def test_batch_length_and_layer_count_contradictions_come_together(tmp_path):
    """--global-batch-size, --seq-length and --num-layers that the spec contradicts are named
    in one error with the others (they stopped at the first one)."""
    bad = "--global-batch-size 32 --seq-length 4096 --num-layers 80 --fp16"
    with pytest.raises(SpecError) as info:
        load_spec(_spec(tmp_path, f"plan: {{megatron_args: '{bad}'}}\n"))
    rules = [p.rule for p in info.value.problems if p.key == "plan.megatron_args"]
    assert [r.split()[0] for r in rules] == ["--global-batch-size", "--seq-length",
                                             "--num-layers", "--fp16"], rules
    assert "--global-batch-size 32 differs from training.global_batch_size 64" in rules[0]
    assert "--num-layers 80 but the model has 32 transformer layers" in rules[2]


def test_null_tokenizer_vocabulary_is_the_models():
    """Hand-derived: NullTokenizer adds one end-of-document token (Megatron-Core 0.17.1
    null_tokenizer.py), so ``--vocab-size V-1`` builds V; Megatron pads V to a multiple
    of 128·tp (Llama 3's 128,256 at tp 8: 1,008 x 128 = 129,024; at tp 1 it is one)."""
    from autopar_opt.export.megatron import null_tokenizer_vocab, padded_vocab
    assert null_tokenizer_vocab(128256) == 128255
    assert padded_vocab(128256, 8) == 129024 and padded_vocab(128256, 1) == 128256
    assert padded_vocab(50257, 2) == 50432


def test_head_width_vocabulary_and_expert_parallelism_contradictions_are_named(tmp_path):
    """QA round 5 (M7): --kv-channels, --vocab-size and --expert-model-parallel-size on a
    dense model were accepted without a word (the spec's model was priced). Llama 3 8B:
    heads of 128 channels, 128,256 tokens, untied, no experts."""
    bad = ("--tensor-model-parallel-size 2 --kv-channels 64 --vocab-size 50000 "
           "--expert-model-parallel-size 4")
    with pytest.raises(SpecError) as info:
        load_spec(_spec(tmp_path, f"plan: {{megatron_args: '{bad}'}}\n"))
    rules = [p.rule for p in info.value.problems if p.key == "plan.megatron_args"]
    assert [r.split()[0] for r in rules] == ["--kv-channels", "--vocab-size",
                                             "--expert-model-parallel-size"], rules
    assert "the model's heads have 128 channels" in rules[0]
    assert "NullTokenizer adds one: 128255 builds it" in rules[1]
    # what the model has (and our own export's NullTokenizer size) is accepted
    good = ("--tensor-model-parallel-size 2 --kv-channels 128 --vocab-size 128255 "
            "--untie-embeddings-and-output-weights --expert-model-parallel-size 1")
    assert load_spec(_spec(tmp_path, f"plan: {{megatron_args: '{good}'}}\n")).plan is not None


def test_untying_a_tied_model_is_named(tmp_path):
    import json
    config = json.loads((REPO / "model_zoo" / "hf" / "gemma-3-1b.json").read_text())
    assert config.get("tie_word_embeddings", True)
    path = tmp_path / "spec.yaml"
    path.write_text("model: {hf_config: " + str(REPO / "model_zoo" / "hf" / "gemma-3-1b.json")
                    + "}\ncluster: {zoo: 2x8-h100}\ntraining: {global_batch_size: 64, seq_len: 4096}\n"
                    "plan: {megatron_args: '--untie-embeddings-and-output-weights'}\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert any("--untie-embeddings-and-output-weights, but the model ties" in p.rule
               for p in info.value.problems)


def test_the_expert_tensor_parallel_degree_round_trips(tmp_path):
    """--expert-tensor-parallel-size 1 beside --tensor-model-parallel-size 2 is the plan's
    etp 1 on the MoE blocks (QA round 9: the tool's own Megatron export of such a plan was
    refused as "autopar models expert TP = TP"); on a dense model it is refused."""
    path = tmp_path / "moe.yaml"
    head = ("model: {zoo: debug-moe}\ncluster: {nodes: 1, gpus_per_node: 8, "
            "device: H100-SXM-80GB}\ntraining: {global_batch_size: 16, seq_len: 128}\n")
    base = ("--tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 4 "
            "--micro-batch-size 1 --global-batch-size 16")
    path.write_text(head + f"plan: {{megatron_args: '{base} --expert-tensor-parallel-size 1'}}\n")
    args = load_spec(path)
    path.write_text(head + "plan: {tp: 2, sequence_parallel: true, ep: 4, etp: 1, "
                           "micro_batch_size: 1}\n")
    same = load_spec(path)
    assert args.plan.to_dict() == same.plan.to_dict()
    moe = [s for st in args.plan.stages for s in st.strategies if s.ep > 1]
    assert moe and {s.expert_tp for s in moe} == {1} and {s.tp for s in moe} == {2}
    with pytest.raises(SpecError, match="--expert-tensor-parallel-size 1 on a model without"):
        load_spec(_spec(tmp_path, "plan: {megatron_args: '--tensor-model-parallel-size 2 "
                                  "--expert-tensor-parallel-size 1 --micro-batch-size 1 "
                                  "--global-batch-size 64'}\n"))


def test_short_flags_are_pointed_at_their_long_form_and_an_empty_line_is_refused():
    """QA round 10: "--tp" got "did you mean '--sft'?", and "" was read as Megatron's
    defaults (tp 1, pp 1, micro-batch 1) without a word."""
    from autopar_opt.export.megatron import MegatronArgsError, parse_megatron_args

    with pytest.raises(MegatronArgsError, match="did you mean '--tensor-model-parallel-size'"):
        parse_megatron_args("--tp 8 --micro-batch-size 1")
    with pytest.raises(MegatronArgsError, match="the command line is empty"):
        parse_megatron_args("")


@pytest.mark.parametrize("line,flag,value", [
    ("--tensor-model-parallel-size two", "--tensor-model-parallel-size", "'two'"),
    ("--micro-batch-size 0", "--micro-batch-size", "0 is not a positive integer"),
    ("--micro-batch-size -4", "--micro-batch-size", "-4 is not a positive integer"),
    ("--global-batch-size 0", "--global-batch-size", "0 is not a positive integer"),
    ("--pipeline-model-parallel-size 0", "--pipeline-model-parallel-size", "0 is not a positive"),
])
def test_an_unreadable_or_non_positive_value_names_its_flag_and_prints_no_usage(line, flag, value,
                                                                               capsys):
    """QA round 34: a value argparse could not read printed argparse's usage of the importer
    (40 lines, ``usage: autopar [...]``) and the message said only "a flag has an invalid
    value"; ``--micro-batch-size 0`` was priced as 1, ``-4`` as -2 micro-batches. Megatron-LM
    refuses both (validate_args: ``micro_batch_size > 0``, ``global_batch_size > 0``)."""
    with pytest.raises(MegatronArgsError) as info:
        parse_megatron_args(line)
    (problem,) = info.value.problems
    assert problem.startswith(f"argument {flag}: ") and value in problem, problem
    captured = capsys.readouterr()
    assert "usage:" not in captured.err + captured.out
