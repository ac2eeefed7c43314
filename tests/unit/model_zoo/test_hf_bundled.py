"""Bundled Hugging Face configs by name (``model_zoo.hf_bundled``): a spec's
``hf_config: NAME`` and ``autopar model NAME`` take the shipped config where no file of
that name exists, say so in the model's source, and never shadow a local file; a name
that is neither gets the list of bundled names; ``autopar zoo list`` shows them."""

from __future__ import annotations

import json

from autopar_opt.model_zoo.hf_bundled import bundled_names, is_bare_name
from autopar_opt.spec import load_spec
from autopar_opt.core.errors import SpecError
from support.cli import run_cli
from support.paths import REPO

import pytest

HF = REPO / "model_zoo" / "hf"


def _spec(tmp_path, hf: str):
    path = tmp_path / "s.yaml"
    path.write_text(f"model: {{hf_config: '{hf}'}}\ncluster: {{zoo: 2x8-h100}}\n"
                    "training: {global_batch_size: 32, seq_len: 2048}\n"
                    "plan: {tp: 2, pp: 1, zero: 1, micro_batch_size: 1}\n")
    return path


def test_every_shipped_config_is_listed_by_name():
    assert set(bundled_names()) == {p.stem for p in HF.glob("*.json")}
    assert all(is_bare_name(n) for n in bundled_names())      # granite-3.1-2b-base too
    assert not is_bare_name("mpt-7b.json") and not is_bare_name("dir/mpt-7b")


def test_a_spec_takes_a_bundled_config_by_name_and_says_so(tmp_path):
    spec = load_spec(_spec(tmp_path, "mpt-7b"))
    assert spec.graph.total_params() == 6_649_286_656
    assert "bundled hf/mpt-7b.json" in spec.graph.source


def test_a_local_file_of_that_name_wins(tmp_path):
    """A directory named like a bundled config, holding its own config.json, is read."""
    local = json.loads((HF / "mpt-7b.json").read_text())
    local["n_layers"] = 2
    (tmp_path / "mpt-7b").mkdir()
    (tmp_path / "mpt-7b" / "config.json").write_text(json.dumps(local))
    spec = load_spec(_spec(tmp_path, "mpt-7b"))
    assert spec.graph.arch.num_layers == 2 and "bundled" not in spec.graph.source


def test_a_name_that_is_neither_lists_the_bundled_ones(tmp_path):
    with pytest.raises(SpecError) as err:
        load_spec(_spec(tmp_path, "mpt-8b"))
    problem = err.value.problems[0]
    assert problem.key == "model.hf_config" and "not the name of a bundled config" in problem.rule
    assert "mpt-7b" in problem.fix and "autopar zoo list" in problem.fix
    code, text = run_cli("model", "mpt-8b")
    assert code == 2 and "mpt-7b" in text


def test_the_cli_takes_a_name_and_zoo_list_shows_the_configs():
    code, text = run_cli("model", "granite-3.1-2b-base")
    assert code == 0 and "bundled hf/granite-3.1-2b-base.json" in text
    code, text = run_cli("zoo", "list", "--json")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(text)["hf_configs"]}
    assert set(rows) == set(bundled_names())
    assert rows["phi-2"]["model_type"] == "phi" and rows["phi-2"]["params_total"] == 2.78e9


def test_the_cli_takes_a_zoo_model_name_and_suggests_the_closest_name(tmp_path):
    """``autopar model llama3-70b`` (a zoo model, listed by zoo list) was "not the name of
    a bundled config"; a near miss now gets the closest name, as model.zoo does."""
    code, text = run_cli("model", "llama3-70b")
    assert code == 0 and "total 70.554 G" in text and "the zoo model's" in text
    code, text = run_cli("model", "llama3-8b", "--seq-len", "2048")
    assert code == 0 and "seq_len 2048" in text
    code, text = run_cli("model", "Llama-3.1-8B")
    assert code == 2 and "did you mean 'llama-3.1-8b'?" in text and "llama3-70b" in text
    with pytest.raises(SpecError) as err:                  # model.hf_config takes no zoo name
        load_spec(_spec(tmp_path, "Mpt-7B"))
    assert "did you mean 'mpt-7b'?" in err.value.problems[0].fix
    assert "zoo model" not in err.value.problems[0].rule


def test_a_hub_repository_id_is_named_as_one_with_the_file_to_save(tmp_path):
    """``autopar model Qwen/Qwen2.5-7B`` (the id a model card shows) was read as a spec
    with "unsupported file extension '.5-7B'", and ``meta-llama/Llama-3.1-8B`` with
    '.1-8B'. autopar downloads nothing: the error says the id is one, names the
    config.json to save and, where SOURCES.yaml says a bundled config was transcribed from
    that repository, its name; a local directory of that name still wins."""
    code, text = run_cli("model", "Qwen/Qwen2.5-7B")
    flat = " ".join(text.split())
    assert code == 2 and "file extension" not in flat, text
    assert "reads as a Hugging Face Hub repository id" in flat
    assert "https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json" in flat
    code, text = run_cli("model", "meta-llama/Llama-3.1-8B")
    flat = " ".join(text.split())
    assert code == 2 and "file extension" not in flat, text
    assert "bundled copy of that repository's config: 'llama-3.1-8b'" in flat
    with pytest.raises(SpecError) as err:
        load_spec(_spec(tmp_path, "Qwen/Qwen3-30B-A3B"))
    problem = err.value.problems[0]
    assert problem.key == "model.hf_config" and "Hub repository id" in problem.rule
    assert "'qwen3-30b-a3b'" in problem.fix
    local = json.loads((HF / "qwen3-8b.json").read_text())
    (tmp_path / "Qwen" / "Qwen3-8B").mkdir(parents=True)
    (tmp_path / "Qwen" / "Qwen3-8B" / "config.json").write_text(json.dumps(local))
    assert load_spec(_spec(tmp_path, "Qwen/Qwen3-8B")).graph.total_params() == \
        load_spec(_spec(tmp_path, "qwen3-8b")).graph.total_params()


@pytest.mark.parametrize("asked, meant", [
    ("llama-3.1-70b", "llama3-70b"), ("Llama-3.1-8B", "llama-3.1-8b"),
    ("mixtral-8x7b-instruct", "mixtral-8x7b"), ("qwen3-30b-a3b-base", "qwen3-30b-a3b"),
    ("gemma-3-4b", None), ("qwen3-32b", None)])
def test_a_near_miss_suggests_only_a_model_of_the_size_asked_for(tmp_path, asked, meant):
    """``autopar model llama-3.1-70b`` got "did you mean 'llama-3.1-405b'?" (and the
    spec's hf_config the same), ``gemma-3-4b`` 'gemma-3-1b', ``qwen3-32b`` 'qwen3-8b':
    a model of another size than the name states. The closest name stating the same
    size is offered (the zoo's llama3-70b), or none."""
    code, text = run_cli("model", asked)
    flat = " ".join(text.split())
    assert code == 2
    if meant is None:
        assert "did you mean" not in flat, text
    else:
        assert f"did you mean {meant!r}?" in flat, text
    with pytest.raises(SpecError) as err:          # hf_config: bundled names only
        load_spec(_spec(tmp_path, "llama-3.1-70b"))
    assert "did you mean" not in err.value.problems[0].fix


@pytest.mark.parametrize("url, repo, copy", [
    ("https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json", "Qwen/Qwen3-8B", "qwen3-8b"),
    ("https://huggingface.co/meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B", "llama-3.1-8b"),
    ("hf://Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-7B", None),
    ("https://example.com/models/config.json", None, None)])
def test_a_url_is_named_as_one(tmp_path, url, repo, copy):
    """A URL pasted from a model page was read as the local path 'https:/huggingface.co/...'
    ("no such file") or, without a suffix, as a spec with "unsupported file extension";
    in a spec's hf_config the error also said a relative path is read from the spec's
    folder. A Hub URL now names its repository, the config.json to save and the bundled
    copy where there is one; another URL says autopar downloads nothing."""
    code, text = run_cli("model", url)
    flat = " ".join(text.split())
    assert code == 2 and "file extension" not in flat and "https:/huggingface" not in flat, text
    assert "autopar downloads nothing" in flat
    if repo is not None:
        assert f"URL of the Hugging Face Hub repository {repo!r}" in flat
        assert f"https://huggingface.co/{repo}/blob/main/config.json" in flat
    if copy is not None:
        assert f"bundled copy of that repository's config: {copy!r}" in flat
    with pytest.raises(SpecError) as err:
        load_spec(_spec(tmp_path, url))
    problem = err.value.problems[0]
    assert "autopar downloads nothing" in problem.rule + problem.fix
    assert "relative path" not in problem.fix
