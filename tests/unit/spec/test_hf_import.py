"""Hugging Face config import: parameter counts against the published figures,
agreement with the zoo's own builders, and the error messages.

Oracle: ``model_zoo/hf/SOURCES.yaml`` holds each bundled config's published
parameter count with its source; the layer graph must match it within 1%. The configs of
``tests/data/hf_reconstructed/`` (written from published figures for readers with no
bundled copy) are checked against their published counts the same way.
"""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from autopar_opt.cli.commands import app
from autopar_opt.ir.graph import LayerKind
from autopar_opt.cli.model import model_summary
from autopar_opt.model_zoo.hf_config import (SUPPORTED_MODEL_TYPES, HfConfigError, build_hf_graph,
                                             load_hf_config)
from autopar_opt.model_zoo.registry import build_model
from autopar_opt.spec import SpecError, load_spec
from support import paths

ROOT = paths.REPO
HF = ROOT / "model_zoo" / "hf"
#: configs written from published figures, not bundled (their SOURCES.yaml says why)
RECONSTRUCTED = ROOT / "tests" / "data" / "hf_reconstructed"
BUNDLED = yaml.safe_load((HF / "SOURCES.yaml").read_text())
SOURCES = {**BUNDLED, **yaml.safe_load((RECONSTRUCTED / "SOURCES.yaml").read_text())}


def _graph(name: str, seq_len: int = 2048):
    folder = HF if name in BUNDLED else RECONSTRUCTED
    config, origin = load_hf_config(folder / f"{name}.json")
    return build_hf_graph(config, seq_len, origin=str(origin))


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_total_params_within_one_percent_of_published(name):
    graph = _graph(name, 512)
    published = float(SOURCES[name]["params_total"])
    assert abs(graph.total_params() / published - 1) < 0.01, (graph.total_params(), published)


@pytest.mark.parametrize("name", sorted(n for n, d in SOURCES.items() if "params_active" in d))
def test_active_params_match_published(name):
    entry = SOURCES[name]
    summary = model_summary(_graph(name))
    key = ("params_active_no_embedding" if entry.get("active_convention") == "no_input_embedding"
           else "params_active")
    active, published = summary[key], float(entry["params_active"])
    if entry.get("active_rounding") == "truncated":     # the published figure's last digit
        step = float(entry.get("active_step", 0.1e9))
        assert published <= active < published + step
    else:
        assert abs(active / published - 1) < 0.01, (active, published)
    assert active < summary["params_total"] / 3     # sparse: most experts idle per token


def test_bundled_configs_cover_every_family():
    """One config per readable family, bundled or (where no copy of the published file
    could be made) written from the published figures; each with its SOURCES entry."""
    files = [*HF.glob("*.json"), *RECONSTRUCTED.glob("*.json")]
    types = {json.loads(p.read_text())["model_type"] for p in files}
    assert set(SUPPORTED_MODEL_TYPES) == types
    assert set(BUNDLED) == {p.stem for p in HF.glob("*.json")}
    assert set(SOURCES) == {p.stem for p in files}


def test_sources_state_each_config_once():
    """Every bundled config has one SOURCES.yaml entry: PyYAML keeps a repeated key's last
    value, so a second entry silently replaced the first (QA round 11: Qwen3-235B-A22B's
    second entry dropped ``active_rounding: truncated`` and ``active_step``, turning the
    check 22e9 <= active < 23e9 into +-1% of 22e9; Mixtral-8x22B was listed twice too)."""
    node = yaml.compose((HF / "SOURCES.yaml").read_text())
    names = [key.value for key, _ in node.value]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def test_llama_config_matches_zoo_builder_per_block():
    """The general block builder reproduces the zoo's Llama-3 8B block (same dims):
    FLOPs, activations and communication volumes exactly; parameters too (RMSNorm:
    h per norm in both since the zoo's gated blocks count RMSNorm's weight alone)."""
    hf = _graph("llama-3.1-8b", 8192)
    zoo = build_model("llama3-8b")
    a, b = hf.layers[1], zoo.layers[1]
    for field in ("flops_fwd", "flops_bwd", "act_bytes", "act_replicated_bytes",
                  "flops_recompute_selective", "tp_comm_bytes", "cp_comm_bytes", "max_tp"):
        assert getattr(a, field) == pytest.approx(getattr(b, field), rel=1e-12), field
    assert b.params == a.params


def test_mixtral_layers_are_moe_with_experts_separated():
    g = _graph("mixtral-8x7b-v0.1")
    blocks = [layer for layer in g.layers if layer.kind is LayerKind.moe_block]
    assert len(blocks) == 32
    blk = blocks[0]
    assert (blk.num_experts, blk.top_k) == (8, 2)
    assert blk.expert_params == 8 * 3 * 4096 * 14336
    # routed FLOPs: top-2 SwiGLU experts, 2 FLOPs per weight per token
    assert blk.expert_flops_fwd == pytest.approx(2 * 2048 * 2 * 3 * 4096 * 14336)
    assert blk.a2a_bytes == pytest.approx(2 * 2048 * 2 * 4096)


def test_deepseek_v3_dense_first_layers_and_mla():
    g = _graph("deepseek-v3")
    kinds = [layer.kind for layer in g.layers[1:-1]]
    assert kinds[:3] == [LayerKind.transformer_block] * 3
    assert kinds[3:] == [LayerKind.moe_block] * 58
    assert g.layers[4].max_tp == 128


def test_qwen3_moe_mlp_only_layers_are_dense():
    config, _ = load_hf_config(HF / "qwen3-30b-a3b.json")
    config = dict(config, mlp_only_layers=[0, 5])
    g = build_hf_graph(config, 1024)
    dense = [i for i, layer in enumerate(g.layers[1:-1]) if layer.kind is LayerKind.transformer_block]
    assert dense == [0, 5]


@pytest.mark.parametrize("value, rule", [
    (["3"], "entry '3' is not an integer layer index"),
    ([2.0], "entry 2.0 is not an integer layer index"),
    ([-1], "entry -1 is negative"),
    ([48], "entry 48 is out of range: the model has 48 layers (indices 0 to 47)"),
    ([0, 5, 0], "entry 0 is repeated"),
    ("0,5", "is not a list of layer indices"),
])
def test_qwen_moe_mlp_only_layers_are_validated(tmp_path, value, rule):
    """A bad ``mlp_only_layers`` entry is refused naming the file, the key, the value,
    the rule and the fix (before: ``transformers``' ``layer_idx not in mlp_only_layers``
    semantics silently kept the layer MoE, and a text was split into characters);
    through a spec it is a SpecError on ``model.hf_config``, through ``autopar model``
    exit 2 without a traceback."""
    config, _ = load_hf_config(HF / "qwen3-30b-a3b.json")
    config = dict(config, mlp_only_layers=value)
    with pytest.raises(HfConfigError) as err:
        build_hf_graph(config, 1024, origin="cfg/config.json")
    msg = str(err.value)
    assert msg.startswith(f"cfg/config.json: mlp_only_layers = {value!r}: {rule}")
    assert "(fix: " in msg
    (tmp_path / "c.json").write_text(json.dumps(config))
    with pytest.raises(SpecError, match=r"model\.hf_config = 'c\.json'.*mlp_only_layers"):
        load_spec(_spec(tmp_path, "{hf_config: c.json}"))
    res = CliRunner().invoke(app, ["model", str(tmp_path / "c.json"), "--seq-len", "1024"])
    assert res.exit_code == 2 and rule in res.output and "Traceback" not in res.output


def test_unknown_model_type_lists_supported():
    # a family without a reason of its own (jamba now says its Mamba layers: below)
    with pytest.raises(HfConfigError, match=r"model_type 'xglm' is not supported; "
                                            r"supported: bert, bloom, cohere, cohere2, deepseek_v2, .*vit"):
        build_hf_graph({"model_type": "xglm"}, 128)
    with pytest.raises(HfConfigError, match=r"model_type 'jamba' is not supported: .*Mamba.*"
                                            r"supported family: bert, bloom, .*vit"):
        build_hf_graph({"model_type": "jamba"}, 128)


def test_missing_key_is_named():
    config, _ = load_hf_config(HF / "mixtral-8x7b-v0.1.json")
    del config["num_local_experts"]
    with pytest.raises(HfConfigError, match="model_type 'mixtral' needs key 'num_local_experts'"):
        build_hf_graph(config, 128)


def test_learned_positions_bound_the_sequence():
    config, _ = load_hf_config(HF / "bert-base-uncased.json")
    with pytest.raises(HfConfigError, match="seq_len 1024 exceeds max_position_embeddings=512"):
        build_hf_graph(config, 1024)


def _spec(tmp_path, model: str, training: str = "{global_batch_size: 16, seq_len: 1024}"):
    path = tmp_path / "spec.yaml"
    path.write_text(f"model: {model}\ncluster: {{zoo: debug-2x4}}\ntraining: {training}\n")
    return path


def test_spec_hf_config_relative_path_and_directory(tmp_path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text((HF / "qwen3-8b.json").read_text())
    by_dir = load_spec(_spec(tmp_path, "{hf_config: cfg}"))
    assert by_dir.graph.name == "cfg"
    by_file = load_spec(_spec(tmp_path, "{hf_config: cfg/config.json, name: q}"))
    assert by_file.graph.total_params() == by_dir.graph.total_params()
    assert by_file.graph.name == "q"


def test_spec_errors_name_key_and_fix(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"model_type": "mamba"}))
    with pytest.raises(SpecError, match=r"model\.hf_config = 'c\.json'.*'mamba' is not supported"):
        load_spec(_spec(tmp_path, "{hf_config: c.json}"))
    (tmp_path / "c.json").write_text((HF / "llama-3.1-8b.json").read_text())
    with pytest.raises(SpecError, match=r"training\.seq_len.*set training\.seq_len"):
        load_spec(_spec(tmp_path, "{hf_config: c.json}", "{global_batch_size: 16}"))


def test_cli_model_json_and_errors(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["model", str(HF / "qwen1.5-moe-a2.7b.json"), "--json",
                              "--seq-len", "512"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert {"name", "layers", "params_total", "params_active"} <= set(data)
    assert data["name"] == "qwen1.5-moe-a2.7b" and data["seq_len"] == 512
    assert data["by_kind"]["moe_block"]["count"] == 24
    text = runner.invoke(app, ["model", str(HF / "qwen1.5-moe-a2.7b.json")]).stdout
    assert "moe_block" in text and "4/60" in text and "seq_len 8192 (the model's own maximum" in text
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"model_type": "rwkv"}))
    res = runner.invoke(app, ["model", str(tmp_path)])
    assert res.exit_code == 2 and "not supported" in res.output
    assert "Traceback" not in res.output


def test_a_multimodal_config_names_its_readable_language_model():
    """A LLaVA-style config (an unsupported model_type with a text_config of a supported
    one) says which part autopar reads and how to give it, instead of only "not
    supported"."""
    config = {"model_type": "llava", "text_config": {"model_type": "llama", "hidden_size": 4096},
              "vision_config": {"model_type": "clip_vision_model"}}
    with pytest.raises(HfConfigError, match=r"'llava' is a multimodal model.*model_type "
                                             r"'llama'.*use the text_config object"):
        build_hf_graph(config, 4096, origin="llava.json")
    with pytest.raises(HfConfigError, match="'mllama' is not supported"):
        build_hf_graph({"model_type": "mllama", "text_config": {"model_type": "mllama_text_model"}},
                       4096, origin="m.json")


@pytest.mark.parametrize("config, words", [
    ({"model_type": "jamba", "attn_layer_period": 8, "num_hidden_layers": 32},
     ["model_type 'jamba' is not supported", "Mamba", "state-space"]),
    ({"model_type": "nemotron_h", "hybrid_override_pattern": "M-M*-"},
     ["model_type 'nemotron_h' is not supported", "Mamba-2", "hybrid_override_pattern"]),
    ({"model_type": "llama4", "text_config": {"model_type": "llama4_text"}},
     ["model_type 'llama4' is not supported", "text_config, model_type 'llama4_text'",
      "chunked attention"]),
    ({"model_type": "qwen3_next"}, ["linear attention"])])
def test_an_unmodelled_family_is_refused_saying_what_is_not_modelled(config, words):
    """Hybrid state-space models (Jamba, Nemotron-H), Llama 4 (chunked attention) and
    Qwen3-Next (linear attention) got "is not supported" and the list of supported types:
    the refusal now says which layers the cost model has no form for, and points to the
    explicit layer list with measured costs; never a build of something else."""
    with pytest.raises(HfConfigError) as err:
        build_hf_graph(config, 4096, origin="m.json")
    text = str(err.value)
    assert text.startswith("m.json: ") and "(fix: " in text and "model.measured" in text
    for word in words:
        assert word in text, (word, text)


def test_deepseek_v2_lite_mla_without_query_compression():
    """DeepSeek-V2-Lite (q_lora_rank null): Q straight from the hidden state (2048 x 16 x
    (128 + 64)), KV down-projection with the shared RoPE key (2048 x (512 + 64)), its
    norm, the KV up-projection (512 x 16 x (128 + 128)), the output (16 x 128 x 2048); the
    first layer dense (SwiGLU 10944), the other 26 DeepSeekMoE."""
    config, _ = load_hf_config(HF / "deepseek-v2-lite.json")
    graph = build_hf_graph(config, 4096)
    attn = 2048 * 16 * 192 + 2048 * 576 + 512 + 512 * 16 * 256 + 16 * 128 * 2048
    assert graph.layers[1].params == attn + 3 * 2048 * 10944 + 2 * 2048
    assert [layer.is_moe for layer in graph.layers[1:-1]] == [False] + [True] * 26
    assert graph.arch.mla == (0, 512, 128, 64, 128)


def test_a_repeated_key_is_refused_not_resolved_to_its_last_value(tmp_path):
    """``num_hidden_layers`` twice (16, then 2): json keeps the 2; the config is refused
    naming the key, as spec files refuse a repeated key (README: duplicate keys are
    errors). The CLI says it with exit 2 and no traceback."""
    text = (HF / "llama-3.1-8b.json").read_text()
    bad = tmp_path / "config.json"
    bad.write_text(text.replace('"num_hidden_layers": 32', '"num_hidden_layers": 16, "num_hidden_layers": 2'))
    assert bad.read_text().count('"num_hidden_layers"') == 2
    with pytest.raises(HfConfigError, match="key 'num_hidden_layers' appears more than once"):
        load_hf_config(bad)
    res = CliRunner().invoke(app, ["model", str(bad)])
    assert res.exit_code == 2 and "appears more than once" in res.output
    assert "Traceback" not in res.output
    assert load_hf_config(HF / "llama-3.1-8b.json")[0]["num_hidden_layers"] == 32


def test_a_byte_order_mark_is_read_and_an_empty_file_is_said_empty(tmp_path):
    """A config saved with a UTF-8 BOM (Windows editors) reads as the same config; an empty
    .json says it is empty (it was "JSON syntax error ... Expecting value")."""
    text = (HF / "llama-3.1-8b.json").read_text()
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert load_hf_config(bom)[0] == load_hf_config(HF / "llama-3.1-8b.json")[0]
    empty = tmp_path / "config.json"
    empty.write_text("  \n")
    with pytest.raises(HfConfigError, match="the file is empty"):
        load_hf_config(empty)


@pytest.mark.parametrize("name, seq_len, context", [("phi-3-mini-4k", 8192, 4096),
                                                    ("llama3-8b", 32768, 8192)])
def test_model_says_a_sequence_beyond_the_models_context(name, seq_len, context):
    """``autopar model NAME --seq-len N`` beyond the model's stated context says so, as
    solve and estimate do (ir.arch.positions_notice); at the context itself nothing is
    said. QA round 11: the command printed no notice (a zoo model's --seq-len also
    replaced its published context, so none could be given)."""
    res = CliRunner().invoke(app, ["model", name, "--seq-len", str(seq_len), "--json"])
    assert res.exit_code == 0, res.output
    notices = json.loads(res.stdout)["notices"]
    assert len(notices) == 1 and f"exceeds the model's max_position_embeddings {context}" \
        in notices[0]
    assert f"notice:  --seq-len {seq_len} exceeds" in CliRunner().invoke(
        app, ["model", name, "--seq-len", str(seq_len)]).stdout
    same = CliRunner().invoke(app, ["model", name, "--seq-len", str(context), "--json"])
    assert json.loads(same.stdout)["notices"] == []


def test_t5_with_a_wider_attention_than_d_model_is_refused():
    """T5-3B states d_model 1024 with 32 heads of d_kv 128 (an inner width of 4096): its
    q, k, v, o are 1024 x 4096, 2,851,598,336 parameters in all (by hand: 24 encoder blocks
    of 4·1024·4096 + 2·1024·16384 + 2·1024, 24 decoder blocks of 8·1024·4096 + 2·1024·16384
    + 3·1024, two relative-position tables of 32 x 32 and two final norms, a 32128 x 1024
    table), the Hugging Face page's 2.85B. The encoder-decoder blocks make every head
    d_model / heads wide, which built 1.95 B without a word (QA round 11): refused, naming
    d_kv; t5-large (16 x 64 = 1024) still builds."""
    config, _ = load_hf_config(HF / "t5-large.json")
    t3b = dict(config, d_model=1024, d_kv=128, num_heads=32, d_ff=16384)
    with pytest.raises(HfConfigError, match=r"d_kv = 128 with num_heads = 32: the attention's "
                       r"inner width num_heads x d_kv differs from d_model = 1024"):
        build_hf_graph(t3b, 512)
    assert abs(build_hf_graph(config, 512).total_params() / 737_668_096 - 1) < 2e-4


def test_the_layer_limit_counts_the_built_layers_on_both_paths(tmp_path):
    """2,048 blocks build 2,050 layers with the embedding and output layer: a spec refused
    them (model: 2050 layers exceed the limit of 2048) while `autopar model config.json`
    built them (QA round 11; README: the configs get the same limits). Both refuse now,
    naming num_hidden_layers; 2,046 blocks (2,048 layers) build."""
    config, _ = load_hf_config(HF / "llama-3.1-8b.json")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(config, num_hidden_layers=2048)))
    res = CliRunner().invoke(app, ["model", str(path), "--seq-len", "64"])
    assert res.exit_code == 2
    assert "num_hidden_layers = 2048: 2050 layers with the embedding and output layers, " \
           "above the limit of 2048 layers" in res.output
    assert len(build_hf_graph(dict(config, num_hidden_layers=2046), 64).layers) == 2048


@pytest.mark.parametrize("change, key, value, fix", [
    ({"num_key_value_heads": 7}, "num_key_value_heads", 7, "use a divisor of 32, e.g. 4"),
    ({"hidden_size": "4096"}, "hidden_size", "4096", "remove the quotes, 4096"),
    ({"vocab_size": None}, "vocab_size", None, "give its value from the model's published"),
    ({"model_type": "qwen3_moe", "num_experts": 8, "moe_intermediate_size": 64,
      "num_experts_per_tok": 2, "mlp_only_layers": [0, 5, 0]}, "mlp_only_layers", [0, 5, 0],
     "list each"),
])
def test_model_json_error_names_the_key_value_and_fix(tmp_path, change, key, value, fix):
    """`autopar model CONFIG --json` on a bad config: the problem's key, value, rule and fix
    are the message's own (QA round 11: key "", value null, the whole message as the rule
    and a generic fix, while the text form named them)."""
    config, _ = load_hf_config(HF / "llama-3.1-8b.json")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(config, **change)))
    res = CliRunner().invoke(app, ["model", str(path), "--seq-len", "64", "--json"])
    assert res.exit_code == 2
    problem = json.loads(res.stdout)["error"]["problems"][0]
    assert (problem["key"], problem["value"]) == (key, value)
    assert problem["fix"].startswith(fix) and "(fix:" not in problem["rule"]
    assert key in problem["rule"] and not problem["rule"].startswith(str(path))


def test_model_seq_len_help_says_where_it_applies():
    """`autopar model --seq-len` sets a zoo model's length too (llama3-8b --seq-len 32768);
    its help said "for a bare config.json" only (QA round 11)."""
    import typer

    command = typer.main.get_command(app).commands["model"]
    help_text = next(p.help for p in command.params if p.name == "seq_len")
    assert "or a zoo model" in help_text and "the zoo model's own length" in help_text
    res = CliRunner().invoke(app, ["model", "llama3-8b", "--seq-len", "4096", "--json"])
    assert json.loads(res.stdout)["seq_len"] == 4096


@pytest.mark.parametrize("name, data, what", [
    ("tokenizer_config.json", {"add_bos_token": True, "model_max_length": 4096,
                               "tokenizer_class": "LlamaTokenizer"}, "a tokenizer's"),
    ("generation_config.json", {"bos_token_id": 1, "do_sample": True, "temperature": 0.6},
     "a generation_config.json"),
    ("adapter_config.json", {"base_model_name_or_path": "meta-llama/Llama-3.1-8B",
                             "peft_type": "LORA", "r": 16}, "a PEFT adapter's"),
    ("params.json", {"dim": 4096, "n_layers": 32, "n_heads": 32, "vocab_size": 128256},
     "Meta's native params.json")])
def test_another_file_of_a_model_repository_is_named_as_such(tmp_path, name, data, what):
    """The JSON files beside a repository's config.json were "missing model_type (fix: add
    it ... e.g. llama)" in a spec's hf_config, a fix that leads to one missing key after
    another, and autopar model read a tokenizer or generation config as a spec with
    several unknown keys. Each is named, with the config.json to give instead."""
    from autopar_opt.spec import SpecError, load_spec
    from support.cli import run_cli

    (tmp_path / name).write_text(json.dumps(data))
    code, text = run_cli("model", tmp_path / name)
    flat = " ".join(text.split())
    assert code == 2 and f"this is {what}" in flat and "unknown key" not in flat, text
    assert "give the config.json of the same model repository" in flat
    spec = tmp_path / "s.yaml"
    spec.write_text(f"model: {{hf_config: {name}}}\ncluster: {{zoo: 2x8-h100}}\n"
                    "training: {global_batch_size: 8, seq_len: 2048}\n")
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    problem = err.value.problems[0]
    assert problem.key == "model.hf_config" and f"this is {what}" in problem.rule
    assert "add it" not in problem.fix
