"""The Transformer Engine stand-in used to import Megatron-Bridge on CPU
(tests/support/te_shim.py) cannot make a check pass vacuously: it serves only the two
Bridge modules that import TE unconditionally, only the names they touch while being
imported, and every use of those names raises."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from support import te_shim


@pytest.fixture
def shim():
    if importlib.util.find_spec("transformer_engine") is not None:
        pytest.skip("a real Transformer Engine is installed: the stand-in is not used")
    assert te_shim.install()
    try:
        yield
    finally:
        te_shim.uninstall()


def _import_as(importer: str) -> dict:
    """Run ``import transformer_engine.pytorch as te`` as module ``importer`` does."""
    scope = {"__name__": importer}
    exec("import transformer_engine.pytorch as te", scope)   # noqa: S102 - the import under test
    return scope


def test_only_the_listed_importers_get_it(shim):
    for other in ("megatron.core.utils", "megatron.bridge.models.qwen.qwen_provider", "__main__"):
        with pytest.raises(ModuleNotFoundError, match="Transformer Engine is not installed"):
            _import_as(other)
    te = _import_as("megatron.bridge.peft.lora_layers")["te"]
    assert te.__name__ == "transformer_engine.pytorch"


def test_an_importer_keeps_it_and_nobody_else_sees_it(shim, tmp_path, monkeypatch):
    """A module of IMPORTERS (here a stand-in module with the same two lines as
    Bridge's lora_layers) keeps ``te`` in its globals; once it has run, the stand-in
    is out of ``sys.modules`` and the next importer finds no Transformer Engine."""
    (tmp_path / "autopar_te_probe.py").write_text(
        "import transformer_engine.pytorch as te\n\nclass Adapter(te.Linear):\n    pass\n")
    monkeypatch.setattr(te_shim, "IMPORTERS", te_shim.IMPORTERS | {"autopar_te_probe"})
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        probe = importlib.import_module("autopar_te_probe")
    finally:
        sys.modules.pop("autopar_te_probe", None)
    assert probe.te.__name__ == "transformer_engine.pytorch"
    assert "transformer_engine" not in sys.modules and "transformer_engine.pytorch" not in sys.modules
    with pytest.raises(ModuleNotFoundError):
        _import_as("megatron.core.extensions.transformer_engine")
    with pytest.raises(te_shim.TransformerEngineUnavailable):
        probe.Adapter()


def test_it_leaves_sys_modules_when_another_module_is_imported(shim):
    _import_as("megatron.bridge.peft.lora")
    assert "transformer_engine" in sys.modules
    import json.tool  # noqa: F401  (any other import)
    sys.modules.pop("json.tool", None)
    importlib.import_module("json.tool")
    assert "transformer_engine" not in sys.modules and "transformer_engine.pytorch" not in sys.modules
    with pytest.raises(ModuleNotFoundError):
        _import_as("megatron.core.extensions.transformer_engine")


def test_names_can_be_subclassed_and_annotated_but_every_use_raises(shim):
    te = _import_as("megatron.bridge.peft.lora_layers")["te"]

    class Adapter(te.Linear):              # what lora_layers does at import
        pass

    annotation = tuple[te.ops.Sequential, te.ops.Sequential]   # evaluated at def time there
    assert annotation is not None
    uses = [lambda: te.Linear(4, 4), lambda: Adapter(4, 4), lambda: te.ops.Sequential(),
            lambda: isinstance(object(), te.Linear), lambda: issubclass(int, te.Linear),
            lambda: object == te.Linear, lambda: te.Linear != object, lambda: te.Linear.forward,
            lambda: te.fp8_autocast, lambda: te.ops.Linear, lambda: te.__version__ and None]
    for use in uses[:-1]:
        with pytest.raises(te_shim.TransformerEngineUnavailable, match="cannot be verified"):
            use()
    with pytest.raises(AttributeError):        # dunder probes stay AttributeError (hasattr)
        uses[-1]()
