"""The ``tagging`` task and the ``tagging-bilstm-crf`` recipe: runs on CoNLL files (small made-up files written by
the tests, tests/helpers/tagging_files.py) and on the silver-tagged reviews; bad files and unused settings are
one-line errors naming file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embreg.cli import main
from embreg.errors import ConfigError, DataError
from embreg.nn.crf import invalid_transition
from embreg.recipes import load_recipe
from embreg.recipes.run import build_run
from tests.helpers.recipes import set_args
from tests.helpers.tagging_files import write_conll_splits

QUICK = ["train.epochs=1", "train.progress=false", "train.device=cpu", "train.threads=1", "train.batch_size=8"]


def _files(tmp_path: Path) -> list[str]:
    paths = write_conll_splits(tmp_path)
    return [f"data.path={paths['train']}", f"data.valid_path={paths['valid']}", f"data.test_path={paths['test']}"]


@pytest.mark.integration
def test_a_run_on_conll_files_reports_accuracy_and_span_f1(tmp_path: Path) -> None:
    out = tmp_path / "run"
    overrides = [*_files(tmp_path), *QUICK, "train.epochs=3", "train.lr=0.02", "model.dropout=0"]
    assert main(["run", "tagging-bilstm-crf", *set_args(overrides), "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert {"test_accuracy", "test_precision", "test_recall", "test_f1", "val_f1"} <= set(metrics)
    assert metrics["test_accuracy"] > 0.8 and metrics["test_f1"] > 0.5, metrics
    split = json.loads((out / "split.json").read_text())
    assert split["sentences"] == {"train": 60, "valid": 16, "test": 16}
    assert split["tags"] == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    assert split["data"]["path"].endswith("train.txt") and len(split["data"]["sha256"]) == 64
    assert (out / "best.safetensors").is_file()


def test_a_tag_of_the_test_file_missing_from_training_is_an_error_naming_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _files(tmp_path)
    test = Path(files[2].split("=", 1)[1])
    test.write_text(test.read_text().replace("B-LOC", "B-GPE", 1))
    assert main(["run", "tagging-bilstm-crf", *set_args([*files, *QUICK]), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("embreg: error: ") and "test.txt:" in err
    assert "tag 'B-GPE' of the test data is not in the training data's tag set" in err
    assert len(err.splitlines()) == 1


def test_a_malformed_line_is_an_error_naming_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = _files(tmp_path)
    train = Path(files[0].split("=", 1)[1])
    lines = train.read_text().splitlines()
    lines[4] = "broken"
    train.write_text("\n".join(lines))
    assert (
        main(
            ["run", "tagging-bilstm-crf", *set_args([*files, *QUICK, "data.sha256=null"]), "--out", str(tmp_path / "r")]
        )
        == 2
    )
    assert "train.txt:5: 1 column(s) in 'broken'" in capsys.readouterr().err


def test_an_iob1_file_is_refused_under_bio_and_trains_under_none(tmp_path: Path) -> None:
    files = _files(tmp_path)
    for file in files:
        path = Path(file.split("=", 1)[1])
        path.write_text(path.read_text().replace("B-LOC", "I-LOC"))  # IOB1: a place opens with I-
    with pytest.raises(DataError, match=r"train.txt:\d+: the tags O I-LOC are not a valid BIO sequence"):
        build_run(load_recipe("tagging-bilstm-crf", [*files, *QUICK]))
    recipe = load_recipe("tagging-bilstm-crf", [*files, *QUICK, "model.tag_scheme=none"])
    assert recipe.monitor == ("val_accuracy", "max")
    assert "test_f1" not in recipe.adapter.metric_names(recipe)
    build_run(recipe)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data.valid_path=v.txt"], "data.valid_path needs data.path"),
        (["data.path={train}", "data.valid_path={train}"], "data.test_path is not"),
        (
            ["data.split=[0.6, 0.2, 0.2]", "data.path={train}", "data.valid_path={train}", "data.test_path={train}"],
            "data.split=.* is unused",
        ),
        (["data.tag_column=2"], "data.tag_column=2 is unused"),
        (["data.path={train}", "data.tag_column=0"], "token's column"),
        (["model.tag_scheme=bilou"], "tag_scheme"),
        (["embeddings={name: md}"], "model 'bilstm-crf' does not take 'md'"),
        (["index_transforms={label: {name: label-sse}}"], "task 'tagging' has no 'label' ids"),
    ],
)
def test_unused_or_bad_settings_are_refused(tmp_path: Path, overrides: list[str], message: str) -> None:
    train = write_conll_splits(tmp_path)["train"]
    with pytest.raises(ConfigError, match=message):
        load_recipe("tagging-bilstm-crf", [o.replace("{train}", str(train)) for o in overrides])


@pytest.mark.integration
def test_the_silver_reviews_run_under_iobes_and_the_decodes_are_valid() -> None:
    recipe = load_recipe("tagging-bilstm-crf", ["data.max_sentences=60", "model.tag_scheme=iobes", *QUICK])
    built = build_run(recipe)
    corpus = built.prepared.corpus
    assert any(t.startswith("S-") for t in corpus.tags) and corpus.source["dataset"] == "reviews-silver"
    tensors = built.prepared.tensors["test"]
    decoded = built.model.decode(tensors)
    for row, n in zip(decoded.tolist(), tensors["mask"].sum(dim=1).tolist(), strict=True):
        assert invalid_transition([corpus.tags[i] for i in row[:n]], "iobes") is None


def test_one_file_is_split_by_data_split_and_a_tiny_one_is_refused(tmp_path: Path) -> None:
    train = write_conll_splits(tmp_path, sizes=(40, 1, 1))["train"]
    built = build_run(load_recipe("tagging-bilstm-crf", [f"data.path={train}", "data.split=[0.5, 0.25, 0.25]", *QUICK]))
    sizes = {split: len(s) for split, s in built.prepared.corpus.splits.items()}
    assert sizes == {"train": 20, "valid": 10, "test": 10}
    (tmp_path / "tiny").mkdir()
    tiny = write_conll_splits(tmp_path / "tiny", sizes=(2, 1, 1))["train"]
    with pytest.raises(DataError, match="2 data row"):
        build_run(load_recipe("tagging-bilstm-crf", [f"data.path={tiny}", *QUICK]))
