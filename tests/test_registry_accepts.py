"""Every model takes what it declares and refuses the rest: a registry-wide matrix of accepted settings.

The cases are read from :data:`embreg.registry.REGISTRY`, so a new model, embedding kind or index transform is
covered without an edit here. For every registered model, on its plainest shipped recipe shrunk by its task's
``smoke_overrides`` (a small slice of the real data; the encoder is a tiny random BERT):

* every embedding kind it declares builds a model that differs from the default build (parameter count or module
  types), and every flag of the default kind either changes the built model or is refused;
* every id kind it declares takes an index transform that shows in the built model;
* every other embedding kind and id kind is refused with a :class:`~embreg.errors.ConfigError` naming the model
  and the value, when the recipe is loaded (before any data is read).
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections import Counter
from typing import Any

import pytest
from torch import nn

from embreg.cli import main
from embreg.errors import ConfigError
from embreg.recipes import load_recipe
from embreg.recipes.accepts import DEFAULT_EMBEDDINGS
from embreg.recipes.no_ops import NoOpWarning
from embreg.recipes.recipe import ID_KINDS
from embreg.recipes.run import build_run, parameter_counts
from embreg.registry import MODEL_DECLARATIONS, REGISTRY, Registry
from embreg.tasks import model_id_kinds
from tests.helpers.pretrained_stub import tiny_pretrained
from tests.helpers.recipes import base_recipe

MODELS = REGISTRY.names("model")
EMBEDDINGS = REGISTRY.names("embedding")


def _smoke(model: str) -> list[str]:
    return [*load_recipe(base_recipe(model)).adapter.smoke_overrides, "train.device=cpu"]


def _accepted_embeddings(model: str) -> list[str]:
    return list(REGISTRY.get("model", model).extra["embeddings"])


def _taken_kinds(model: str) -> tuple[str, ...]:
    """The id kinds the model takes with its base recipe's config."""
    return model_id_kinds(REGISTRY.get("model", model), load_recipe(base_recipe(model)).model.config)


def _transform_for(kind: str) -> str:
    """A registered index transform that acts on ``kind`` ids."""
    for name, entry in REGISTRY.entries("index_transform").items():
        kinds = entry.extra.get("kinds", ())
        if not kinds or kind in kinds:
            return name
    raise AssertionError(f"no registered index transform acts on {kind!r} ids")


def _flag_overrides(embedding: str) -> list[str]:
    """One override per boolean argument of ``embedding``, flipped from its default."""
    config = REGISTRY.get("embedding", embedding).default_config()
    return [
        f"embeddings={{name: {embedding}, {f.name}: {str(not getattr(config, f.name)).lower()}}}"
        for f in dataclasses.fields(config)
        if isinstance(getattr(config, f.name), bool)
    ]


ACCEPTED = [
    pytest.param(model, f"embeddings={{name: {kind}}}", id=f"{model}:embeddings={kind}")
    for model in MODELS
    for kind in _accepted_embeddings(model)
    if kind != DEFAULT_EMBEDDINGS
] + [
    pytest.param(model, f"index_transforms={{{kind}: {{name: {_transform_for(kind)}}}}}", id=f"{model}:ids={kind}")
    for model in MODELS
    for kind in _taken_kinds(model)
]
FLAGS = [
    pytest.param(model, override, id=f"{model}:{override}")
    for model in MODELS
    if DEFAULT_EMBEDDINGS in _accepted_embeddings(model)
    for override in _flag_overrides(DEFAULT_EMBEDDINGS)
]
REFUSED_EMBEDDINGS = [
    pytest.param(model, kind, id=f"{model}:embeddings={kind}")
    for model in MODELS
    for kind in EMBEDDINGS
    if kind not in _accepted_embeddings(model)
]
REFUSED_KINDS = [
    pytest.param(model, kind, id=f"{model}:ids={kind}")
    for model in MODELS
    for kind in ID_KINDS
    if kind not in _taken_kinds(model)
]


# -------------------------------------------------------------------------------------------------- building
@pytest.fixture(scope="module")
def pretrained_stub(tmp_path_factory: pytest.TempPathFactory):
    yield from tiny_pretrained(tmp_path_factory)


@pytest.fixture
def offline(request: pytest.FixtureRequest, model: str) -> None:
    if "pretrained" in REGISTRY.get("model", model).provides:
        request.getfixturevalue("pretrained_stub")


_PREPARED: dict[str, Any] = {}
_DEFAULTS: dict[str, Any] = {}


def _build(model: str, overrides: list[str]) -> nn.Module:
    """The model of ``model``'s base recipe with the smoke overrides and ``overrides`` (data shared per model)."""
    recipe = load_recipe(base_recipe(model), [*_smoke(model), *overrides])
    built = build_run(recipe, prepared=_PREPARED.get(model))
    _PREPARED.setdefault(model, built.prepared)
    return built.model


def fingerprint(model: nn.Module) -> tuple[int, tuple[tuple[str, Any, int], ...]]:
    """Parameter count and the multiset of module types (with their ``sparse`` flag where they have one)."""
    kinds = Counter((type(m).__name__, getattr(m, "sparse", None)) for m in model.modules())
    return sum(p.numel() for p in model.parameters()), tuple(sorted((n, s, c) for (n, s), c in kinds.items()))


def _default(model: str) -> Any:
    if model not in _DEFAULTS:
        _DEFAULTS[model] = fingerprint(_build(model, []))
    return _DEFAULTS[model]


# ----------------------------------------------------------------------------------------------------- matrix
def test_every_model_declares_what_it_takes() -> None:
    for name in MODELS:
        entry = REGISTRY.get("model", name)
        assert all(key in entry.extra for key in MODEL_DECLARATIONS if key != "provides"), name
        assert set(entry.extra["embeddings"]) <= set(EMBEDDINGS), name
        assert set(entry.extra["kinds"]) <= set(ID_KINDS), name
        assert set(entry.extra["tasks"]) <= set(REGISTRY.names("task")), name


@pytest.mark.integration
@pytest.mark.parametrize(("model", "override"), ACCEPTED)
def test_an_accepted_setting_changes_the_built_model(model: str, override: str, offline: None) -> None:
    assert fingerprint(_build(model, [override])) != _default(model)


@pytest.mark.integration
@pytest.mark.parametrize(("model", "override"), FLAGS)
def test_a_flag_of_the_default_tables_changes_the_model_or_is_refused(model: str, override: str, offline: None) -> None:
    try:
        built = _build(model, [override])
    except ConfigError as exc:
        assert model in str(exc) and "embeddings." in str(exc)
        return
    assert fingerprint(built) != _default(model)


@pytest.mark.parametrize(("model", "kind"), REFUSED_EMBEDDINGS)
def test_an_embedding_kind_the_model_does_not_take_is_refused(model: str, kind: str) -> None:
    with pytest.raises(ConfigError, match=rf"embeddings.name='{kind}': model '{model}' does not take"):
        load_recipe(base_recipe(model), [f"embeddings={{name: {kind}}}"])


@pytest.mark.parametrize(("model", "kind"), REFUSED_KINDS)
def test_an_id_kind_the_model_does_not_take_is_refused(model: str, kind: str) -> None:
    transform = _transform_for(kind)
    with pytest.raises(ConfigError, match=rf"index_transforms.{kind}: .*'{kind}' ids"):
        load_recipe(base_recipe(model), [f"index_transforms={{{kind}: {{name: {transform}}}}}"])


# ---------------------------------------------------------------------------------------- the reported cases
def test_the_language_model_builds_the_mixed_dimension_table_its_recipe_names() -> None:
    """The reported command (``lm-none`` with ``md`` embeddings) trained a uniform table while its config said md."""
    from embreg.embeddings import MixedDimensionEmbedding

    recipe = load_recipe("lm-none", [*_smoke("lstm-lm"), "embeddings={name: md, alpha: 0.3}"])
    built = build_run(recipe, prepared=_PREPARED.get("lstm-lm"))
    table = built.model.embedding.embedding
    assert isinstance(table, MixedDimensionEmbedding) and len(set(table.block_dims)) > 1
    assert parameter_counts(built.model)["embedding_parameters"] == table.num_parameters


def test_the_encoder_classifier_refuses_mixed_dimension_tables() -> None:
    with pytest.raises(ConfigError, match="model 'encoder-classifier' does not take 'md'"):
        load_recipe(base_recipe("encoder-classifier"), ["embeddings={name: md}"])


def test_a_model_registration_must_declare_what_it_takes() -> None:
    @dataclasses.dataclass
    class Config:
        dim: int = 4

    registry = Registry()
    with pytest.raises(ValueError, match=r"model 'half' must declare embeddings=\(\.\.\.\), provides=\(\.\.\.\)"):
        registry.register("model", "half", config=Config, summary="s", tasks=("rating",), kinds=())(lambda c, x: 0)
    with pytest.raises(ValueError, match="embeddings=\\(\\) is empty"):
        registry.register(
            "model", "none", config=Config, summary="s", tasks=("rating",), kinds=(), embeddings=(), provides=()
        )(lambda c, x: 0)
    registry.register(
        "model", "whole", config=Config, summary="s", tasks=("rating",), kinds=(), embeddings=("uniform",), provides=()
    )(lambda c, x: 0)
    assert registry.get("model", "whole").accepts() == {
        "tasks": ["rating"],
        "embeddings": ["uniform"],
        "id_kinds": [],
        "id_kind_conditions": {},
    }


# ---------------------------------------------------------------------------------------------- embreg list
def test_embreg_list_shows_what_every_model_provides_and_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    assert main(["list", "--json"]) == 0
    listed = {entry["name"]: entry for entry in json.loads(capsys.readouterr().out)["registry"]["model"]}
    assert sorted(listed) == MODELS
    for name in MODELS:
        entry = REGISTRY.get("model", name)
        assert listed[name]["tasks"] == list(entry.extra["tasks"])
        assert listed[name]["provides"] == list(entry.provides)
        assert listed[name]["accepts"]["embeddings"] == list(entry.extra["embeddings"])
        assert listed[name]["accepts"]["id_kinds"] == list(entry.extra["kinds"])
        assert entry.accepts_line() in text
        assert f"accepts embeddings: {', '.join(entry.extra['embeddings'])}" in entry.accepts_line()


# ------------------------------------------------------------------------------------------------- no-op warnings
NO_DROPOUT = "model.dropout={embedding: 0, input: 0, hidden: 0, output: 0, weight: 0}"


def _lm_warnings(overrides: list[str]) -> list[str]:
    recipe = load_recipe("lm-none", [*_smoke("lstm-lm"), *overrides])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_run(recipe, prepared=_PREPARED.get("lstm-lm"))
    return [str(w.message) for w in caught if issubclass(w.category, NoOpWarning)]


@pytest.mark.integration
def test_dropout_k_on_a_model_without_dropout_warns_once() -> None:
    messages = _lm_warnings(["objective={name: dropout-k, k: 4}", NO_DROPOUT])
    assert len(messages) == 1, messages
    assert "objective 'dropout-k' is a no-op: model 'lstm-lm' has no active dropout" in messages[0]
    assert _lm_warnings(["objective={name: dropout-k, k: 4}", "model.dropout.output=0.3"]) == []


@pytest.mark.integration
def test_a_dropout_regulariser_on_a_model_without_dropout_warns_once() -> None:
    messages = _lm_warnings(["regularizers=[{name: r-approx}]", NO_DROPOUT])
    assert len(messages) == 1, messages
    assert "regularizer 'r-approx' is a no-op: its coefficient is 0 at every dropout site" in messages[0]
    assert _lm_warnings(["regularizers=[{name: r-approx}]", "model.dropout.output=0.3"]) == []
