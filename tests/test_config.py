"""Tests of the strict typed configuration helpers in ``embreg.config``."""

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml

from embreg.config import apply_overrides, from_dict, load_yaml, to_dict
from embreg.errors import ConfigError


@dataclass
class TrainSection:
    lr: float
    batch_size: int = 256
    epochs: int = 10
    shuffle: bool = True

    def __post_init__(self) -> None:
        if self.lr <= 0:
            raise ConfigError(f"lr must be > 0, got {self.lr}")


@dataclass
class ModelSection:
    kind: Literal["mf", "bpr"] = "mf"
    dims: list[int] = field(default_factory=lambda: [8, 16])
    ks: tuple[int, ...] = (1, 5)
    pair: tuple[int, str] = (1, "a")
    weights: dict[str, float] = field(default_factory=dict)
    dropout: float | None = None
    name: str = "model"
    path: Path = Path("out")
    extra: Any = None


@dataclass
class RunConfig:
    train: TrainSection
    model: ModelSection = field(default_factory=ModelSection)
    seed: int | None = None
    note: str | float = "none"


@dataclass
class ValueErrorValidation:
    p: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.p <= 1.0:
            raise ValueError(f"p must be in [0, 1], got {self.p}")


@dataclass
class Outer:
    inner: ValueErrorValidation = field(default_factory=ValueErrorValidation)
    derived: int = field(default=0, init=False)


# ---------------------------------------------------------------------------------------------------------------
# from_dict: happy paths


def test_from_dict_builds_nested_dataclasses_with_defaults() -> None:
    cfg = from_dict(RunConfig, {"train": {"lr": 0.1}})
    assert cfg == RunConfig(train=TrainSection(lr=0.1))
    assert cfg.model.dims == [8, 16]


def test_from_dict_converts_every_supported_type() -> None:
    data = {
        "train": {"lr": 1, "batch_size": 32, "shuffle": False},
        "model": {
            "kind": "bpr",
            "dims": [4, 2],
            "ks": [1, 10, 20],
            "pair": [3, "b"],
            "weights": {"a": 1, "b": "2e-1"},
            "dropout": "1e-3",
            "path": "runs/x",
            "extra": {"anything": [1, "x"]},
        },
        "seed": None,
    }
    cfg = from_dict(RunConfig, data)
    assert cfg.train.lr == 1.0 and isinstance(cfg.train.lr, float)
    assert cfg.train.shuffle is False
    assert cfg.model.kind == "bpr"
    assert cfg.model.ks == (1, 10, 20)
    assert cfg.model.pair == (3, "b")
    assert cfg.model.weights == {"a": 1.0, "b": 0.2}
    assert cfg.model.dropout == pytest.approx(1e-3)
    assert cfg.model.path == Path("runs/x")
    assert cfg.model.extra == {"anything": [1, "x"]}
    assert cfg.seed is None


def test_yaml_scientific_notation_string_becomes_float() -> None:
    data = yaml.safe_load("train:\n  lr: 1e-3\n")
    assert data["train"]["lr"] == "1e-3"  # the PyYAML quirk this accepts
    assert from_dict(RunConfig, data).train.lr == pytest.approx(0.001)


def test_union_prefers_exact_type_before_coercion() -> None:
    assert from_dict(RunConfig, {"train": {"lr": 0.1}, "note": "1e-3"}).note == "1e-3"
    assert from_dict(RunConfig, {"train": {"lr": 0.1}, "note": 2}).note == 2.0


def test_from_dict_accepts_already_built_nested_instance() -> None:
    train = TrainSection(lr=0.5)
    assert from_dict(RunConfig, {"train": train}).train is train


# ---------------------------------------------------------------------------------------------------------------
# from_dict: errors


def test_unknown_key_names_full_path_and_suggests_closest() -> None:
    with pytest.raises(ConfigError) as info:
        from_dict(RunConfig, {"train": {"lrr": 0.1}})
    message = str(info.value)
    assert "unknown config key 'train.lrr'" in message
    assert "did you mean 'train.lr'?" in message
    assert "Valid keys under 'train': batch_size, epochs, lr, shuffle" in message


def test_unknown_top_level_key_suggests_and_lists_keys() -> None:
    with pytest.raises(ConfigError, match=r"'modle'; did you mean 'model'\? Valid keys at the top level: model"):
        from_dict(RunConfig, {"train": {"lr": 0.1}, "modle": {}})


def test_unknown_key_without_close_match_has_no_suggestion() -> None:
    with pytest.raises(ConfigError) as info:
        from_dict(RunConfig, {"train": {"lr": 0.1, "zzzzzz": 1}})
    assert "did you mean" not in str(info.value)
    assert "'train.zzzzzz'" in str(info.value)


def test_unknown_key_case_mismatch_suggests_right_case() -> None:
    with pytest.raises(ConfigError, match=r"did you mean 'train.lr'"):
        from_dict(RunConfig, {"train": {"LR": 0.1}})


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"train": {"lr": True}}, "'train.lr' expects float, got bool True"),
        ({"train": {"lr": "fast"}}, "'train.lr' expects float, got str 'fast'"),
        ({"train": {"lr": 0.1, "batch_size": True}}, "'train.batch_size' expects int, got bool True"),
        ({"train": {"lr": 0.1, "batch_size": 2.5}}, "'train.batch_size' expects int, got float 2.5"),
        ({"train": {"lr": 0.1, "shuffle": 1}}, "'train.shuffle' expects bool, got int 1"),
        ({"train": {"lr": 0.1}, "model": {"name": 3}}, "'model.name' expects str, got int 3"),
        ({"train": {"lr": 0.1}, "model": {"dims": [1, "x"]}}, "'model.dims[1]' expects int, got str 'x'"),
        ({"train": {"lr": 0.1}, "model": {"dims": 3}}, "'model.dims' expects list[int], got int 3"),
        ({"train": {"lr": 0.1}, "model": {"weights": {"a": "b"}}}, "'model.weights.a' expects float"),
        ({"train": {"lr": 0.1}, "model": {"pair": [1]}}, "'model.pair' expects tuple[int, str] (2 items)"),
        ({"train": {"lr": 0.1}, "model": {"dropout": "x"}}, "'model.dropout' expects float | None, got str 'x'"),
        ({"train": {"lr": 0.1}, "seed": 1.5}, "'seed' expects int | None, got float 1.5"),
        ({"train": {"lr": 0.1}, "note": [1]}, "'note' expects str | float, got list [1]"),
        ({"train": [1, 2]}, "'train' expects a mapping for TrainSection, got list [1, 2]"),
    ],
)
def test_wrong_types_name_key_expected_type_and_value(data: dict, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        from_dict(RunConfig, data)
    assert fragment in str(info.value)


def test_literal_rejects_other_values_and_suggests() -> None:
    expected = r"'model.kind' expects one of 'mf', 'bpr', got str 'bprr'; did you mean 'bpr'"
    with pytest.raises(ConfigError, match=expected):
        from_dict(RunConfig, {"train": {"lr": 0.1}, "model": {"kind": "bprr"}})


def test_missing_required_key_is_reported() -> None:
    with pytest.raises(ConfigError, match=r"missing required config key 'train.lr' \(float\)"):
        from_dict(RunConfig, {"train": {}})
    with pytest.raises(ConfigError, match=r"missing required config key 'train'"):
        from_dict(RunConfig, {})


def test_post_init_config_error_gets_key_path_prefix() -> None:
    with pytest.raises(ConfigError, match=r"^train: lr must be > 0, got -1.0$"):
        from_dict(RunConfig, {"train": {"lr": -1}})


def test_post_init_value_error_becomes_config_error_with_prefix() -> None:
    with pytest.raises(ConfigError, match=r"^inner: p must be in \[0, 1\], got 2.0$"):
        from_dict(Outer, {"inner": {"p": 2}})
    with pytest.raises(ConfigError, match=r"^p must be in"):
        from_dict(ValueErrorValidation, {"p": -1})


def test_init_false_fields_are_not_config_keys() -> None:
    with pytest.raises(ConfigError, match="unknown config key 'derived'"):
        from_dict(Outer, {"derived": 3})


def test_top_level_data_must_be_mapping_and_cls_a_dataclass() -> None:
    with pytest.raises(ConfigError, match="config expects a mapping for RunConfig, got list"):
        from_dict(RunConfig, [1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a dataclass type"):
        from_dict(dict, {})  # type: ignore[type-var]


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        from_dict(RunConfig, {"train": {"lrr": 0.1}})


# ---------------------------------------------------------------------------------------------------------------
# to_dict


def test_to_dict_round_trips_through_json_and_from_dict() -> None:
    cfg = from_dict(
        RunConfig,
        {"train": {"lr": 0.1}, "model": {"ks": [1, 2], "path": "a/b", "weights": {"x": 1.5}}, "seed": 3},
    )
    plain = to_dict(cfg)
    assert plain["model"]["ks"] == [1, 2]
    assert plain["model"]["path"] == "a/b"
    assert json.loads(json.dumps(plain)) == plain
    assert yaml.safe_load(yaml.safe_dump(plain)) == plain
    assert from_dict(RunConfig, plain) == cfg


def test_to_dict_leaves_out_init_false_fields_and_rejects_non_plain_values() -> None:
    assert to_dict(Outer()) == {"inner": {"p": 0.5}}
    bad = ModelSection(extra=object())
    with pytest.raises(TypeError, match="'extra'"):
        to_dict(bad)
    with pytest.raises(TypeError, match="dataclass instance or a mapping"):
        to_dict(3)


# ---------------------------------------------------------------------------------------------------------------
# load_yaml


def test_load_yaml_reads_mapping(tmp_path: Path) -> None:
    path = tmp_path / "recipe.yaml"
    path.write_text("train:\n  lr: 0.1\n  epochs: 3\n")
    assert load_yaml(path) == {"train": {"lr": 0.1, "epochs": 3}}


def test_load_yaml_empty_file_is_empty_mapping(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert load_yaml(path) == {}


def test_load_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("train:\n  lr: 0.1\n  epochs: [1, 2\n")
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    message = str(info.value)
    assert "broken.yaml" in message
    assert "line 4" in message


def test_load_yaml_rejects_duplicate_keys_with_line(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("train:\n  lr: 0.1\n  lr: 0.2\n")
    with pytest.raises(ConfigError, match=r"dup.yaml', line 3.*duplicate key 'lr' \(first defined on line 2\)"):
        load_yaml(path)


@pytest.mark.parametrize(("text", "kind"), [("- 1\n- 2\n", "list"), ("3\n", "int")])
def test_load_yaml_top_level_must_be_mapping(tmp_path: Path, text: str, kind: str) -> None:
    path = tmp_path / "top.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"top.yaml' must hold a mapping at the top level, got {kind}"):
        load_yaml(path)


def test_load_yaml_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found: .*nope.yaml"):
        load_yaml(tmp_path / "nope.yaml")


# ---------------------------------------------------------------------------------------------------------------
# apply_overrides


def test_apply_overrides_parses_yaml_values_and_creates_sections() -> None:
    data = {"train": {"lr": 0.1, "epochs": 3}}
    result = apply_overrides(
        data,
        ["train.lr=0.01", "train.shuffle=true", "model.dims=[1,2]", "seed=null", "model.name=a=b", " note = x "],
    )
    assert result == {
        "train": {"lr": 0.01, "epochs": 3, "shuffle": True},
        "model": {"dims": [1, 2], "name": "a=b"},
        "seed": None,
        "note": "x",
    }
    assert data == {"train": {"lr": 0.1, "epochs": 3}}  # input untouched


def test_apply_overrides_returns_deep_copy() -> None:
    data = {"train": {"lr": 0.1}}
    result = apply_overrides(data, [])
    result["train"]["lr"] = 5.0
    assert data["train"]["lr"] == 0.1


def test_apply_overrides_later_wins_and_null_section_is_replaced() -> None:
    result = apply_overrides({"sse": None}, ["sse.p=0.1", "sse.p=0.2"])
    assert result == {"sse": {"p": 0.2}}


@pytest.mark.parametrize("override", ["train.lr", "=3", ".lr=3", "train..lr=3", "train.=3", " =1"])
def test_malformed_overrides_raise(override: str) -> None:
    with pytest.raises(ConfigError, match="malformed override"):
        apply_overrides({}, [override])


def test_override_into_scalar_raises() -> None:
    with pytest.raises(ConfigError, match=r"'train.lr' holds float 0.1, not a mapping"):
        apply_overrides({"train": {"lr": 0.1}}, ["train.lr.x=1"])


def test_override_with_invalid_yaml_value_raises() -> None:
    with pytest.raises(ConfigError, match="is not valid YAML"):
        apply_overrides({}, ["a=[1, 2"])


def test_single_string_instead_of_list_is_rejected() -> None:
    with pytest.raises(ConfigError, match="list of 'key=value' strings"):
        apply_overrides({}, "a=1")


def test_overrides_then_from_dict_catch_misspelt_key() -> None:
    data = apply_overrides({"train": {"lr": 0.1}}, ["train.epoch=3"])
    with pytest.raises(ConfigError, match="did you mean 'train.epochs'"):
        from_dict(RunConfig, data)


def test_dataclasses_module_is_plain_dataclass() -> None:
    # The configs are ordinary dataclasses: replace() etc. keep working on what from_dict builds.
    cfg = from_dict(RunConfig, {"train": {"lr": 0.1}})
    assert dataclasses.replace(cfg, seed=4).seed == 4


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", float("nan"), float("inf")])
def test_a_float_setting_must_be_finite(value) -> None:
    @dataclass
    class Model:
        l2: float = 0.0

    with pytest.raises(ConfigError, match=r"'model.l2' must be a finite number"):
        from_dict(Model, {"l2": value}, path="model")
