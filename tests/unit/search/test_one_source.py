"""One source for each list: spec sections derived from the dataclasses, solver
names from the registry, backend capabilities declared as features."""

from __future__ import annotations

import dataclasses

import pytest

from autopar_opt.cost.params import CostParams
from autopar_opt.ir.graph import Layer
from autopar_opt.search.engine import SearchOptions
from autopar_opt.search.inner import InnerSolver
from autopar_opt.solvers.base import Feature
from autopar_opt.solvers.registry import AUTO, BACKENDS, backend_class, backend_names, solver_names
from autopar_opt.spec.derive import doc_entries
from autopar_opt.spec.schema import CostModelSection, LayerSpec, SolverSection


def test_cost_model_section_accepts_every_parameter():
    """The drift issue 9 was filed for: a CostParams field was rejected in a spec. The
    attention kernels' efficiencies are measured rows now (issue 28), not a parameter."""
    assert CostModelSection(elementwise_passes=4.0).elementwise_passes == 4.0
    with pytest.raises(ValueError):
        CostModelSection(attention_efficiency=0.7)
    with pytest.raises(ValueError):
        CostModelSection(comm_efficiency=1.5)          # a fraction of link bandwidth
    with pytest.raises(ValueError):
        CostModelSection(layer_overhead_us=-1.0)       # a time is non-negative


def test_docstring_entries_are_read():
    docs = doc_entries(CostParams)
    assert "elementwise_passes" in docs and docs["elementwise_passes"]


def test_layer_spec_has_every_layer_field():
    fields = {f.name for f in dataclasses.fields(Layer)} - {"measured"}
    assert set(LayerSpec.model_fields) == fields
    layer = LayerSpec(name="moe", num_experts=8, top_k=2, expert_load=1.2)
    assert layer.num_experts == 8                      # MoE fields reach a spec file
    assert Layer(**layer.model_dump()).top_k == 2
    with pytest.raises(ValueError):
        LayerSpec(name="x", max_tp=0)


def test_spec_solver_names_come_from_the_registry():
    names = set(SolverSection.model_fields["name"].annotation.__args__)
    assert names == set(solver_names()) == set(BACKENDS) | {AUTO}
    assert set(backend_names()) == set(BACKENDS) and SolverSection().name == AUTO


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_capabilities_are_declared_features(name):
    """The search reads features, not names: the matrix path exactly for
    backends declaring matrix_input, the symmetry default from symmetry_cuts."""
    cls = backend_class(name)
    if not cls().available()[0]:
        pytest.skip(f"{name} is not installed")
    inner = InnerSolver(SearchOptions(solver=name))
    # the matrix builder itself is made on the first MIP (start-up, issue 18)
    assert inner._matrix_input == (Feature.matrix_input in cls.features
                                   and inner.form_name == "milp")
    assert inner.symmetry == (Feature.symmetry_cuts in cls.features)


def test_highs_refuses_the_miqp_with_the_fix():
    from autopar_opt.core.result import ProblemClass
    from autopar_opt.solvers.base import SolverMismatch
    from autopar_opt.solvers.registry import check_accepts, get_backend
    with pytest.raises(SolverMismatch, match="use --form milp"):
        check_accepts(get_backend("highs"), ProblemClass.miqp)
    with pytest.raises(SolverMismatch, match="use --solver dp"):
        check_accepts(get_backend("highs"), ProblemClass.tables)


def _cost_spec(tmp_path, cost_model: dict):
    import yaml

    from autopar_opt.spec import load_spec
    spec = {"model": {"zoo": "debug"},
            "cluster": {"name": "c4", "nodes": 1, "gpus_per_node": 4, "device": "A100-40GB"},
            "training": {"global_batch_size": 16}, "cost_model": cost_model}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return load_spec(path)


def test_every_cost_param_is_a_spec_key_with_its_bounds(tmp_path):
    """The cost_model section is derived from CostParams: every field is accepted
    (and reaches the parameters in use), a value outside the field's declared
    ``valid`` bounds is a spec error naming the key, the plausible range is
    documented, and RANGES is read from the same field metadata."""
    from autopar_opt.cost.params import RANGES
    from autopar_opt.spec import SpecError

    params = CostParams()
    names = [f.name for f in dataclasses.fields(CostParams)]
    assert set(CostModelSection.model_fields) == set(names) | {"file"}
    for f in dataclasses.fields(CostParams):
        value = getattr(params, f.name)
        new = ({next(iter(value)): 0.42} if isinstance(value, dict)
               else (value + 1.0) * 0.5 if f.metadata["valid"].get("le") else value + 1.0)
        got = getattr(_cost_spec(tmp_path, {f.name: new}).cost_params, f.name)
        assert (got[next(iter(value))] if isinstance(value, dict) else got) == pytest.approx(
            new[next(iter(value))] if isinstance(value, dict) else new), f.name
        valid = f.metadata["valid"]
        bad = (valid["le"] + 0.5 if "le" in valid else
               valid.get("ge", valid.get("gt", 0)) - 0.5)
        with pytest.raises(SpecError, match=rf"cost_model\.{f.name}"):
            _cost_spec(tmp_path, {f.name: {next(iter(value)): bad} if isinstance(value, dict) else bad})
        plausible = f.metadata["plausible"]
        if plausible is not None:
            assert RANGES[f.name] == plausible
            assert f"Plausible range {plausible[0]:g} to {plausible[1]:g}" in \
                CostModelSection.model_fields[f.name].description
    assert set(RANGES) == {f.name for f in dataclasses.fields(CostParams) if f.metadata["plausible"]}


def test_cost_params_file_and_overrides_merge_per_device():
    base = CostParams()
    got = base.updated({"gemm_efficiency": {"A100-40GB": 0.5}, "comm_efficiency": 0.7})
    assert got.gemm_efficiency["A100-40GB"] == 0.5 and got.comm_efficiency == 0.7
    assert {k: v for k, v in got.gemm_efficiency.items() if k != "A100-40GB"} == \
        {k: v for k, v in base.gemm_efficiency.items() if k != "A100-40GB"}
    assert CostParams.from_dict({"gemm_efficiency": {"A100-40GB": 0.5}, "comm_efficiency": 0.7,
                                 "unknown": 1}) == got
