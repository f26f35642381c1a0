"""Baseline ``lexicon`` (IBM Model 1, word by word) on a recipe's data: the command, its refusals, and a study row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embreg.cli import main
from embreg.errors import ConfigError
from embreg.recipes import load_recipe
from embreg.recipes.baselines import run_baseline
from embreg.studies.report import write_report
from embreg.studies.runner import run_study
from embreg.studies.spec import StudySpec
from embreg.tasks.translation.task import translation_splits
from tests.helpers.translation import quick_overrides, write_pairs


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pairs(tmp_path_factory.mktemp("pairs") / "pairs.tsv")


def _data_overrides(path: Path) -> list[str]:
    return [o for o in quick_overrides(path) if o.startswith("data.")]


def test_the_lexicon_learns_word_for_word_pairs_and_scores_the_task_split(pairs_file: Path) -> None:
    recipe = load_recipe("translation", quick_overrides(pairs_file))
    result = run_baseline("lexicon", recipe)
    # write_pairs maps every word to its own target word: a learnt lexicon translates unseen sentences exactly
    assert result.metrics["test_bleu"] == pytest.approx(100.0)
    assert result.metrics["test_unknown_words"] == 0.0
    test = translation_splits(recipe.data).split["test"]
    assert [(r["source"], r["reference"]) for r in result.outputs["test"]] == test
    assert len(result.outputs["valid"]) == recipe.data.valid_sentences
    assert result.record["pairs"]["train"] == len(translation_splits(recipe.data).split["train"])


def test_the_command_writes_metrics_and_translations(pairs_file: Path, tmp_path: Path, capsys) -> None:
    args = [a for o in _data_overrides(pairs_file) for a in ("--set", o)]
    out = tmp_path / "lexicon"
    assert main(["baseline", "lexicon", "translation", *args, "--set", "baseline.iterations=3", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "test_bleu" in printed and "source:" in printed
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["test_bleu"] == pytest.approx(100.0)
    assert json.loads((out / "record.json").read_text())["iterations"] == 3
    rows = (out / "translations-test.tsv").read_text().splitlines()
    assert rows[0] == "source\treference\toutput" and len(rows) > 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--set", "train.epochs=3"], "reads only the recipe's data section"),
        (["--set", "baseline.iteration=3"], "iterations"),
        (["--set", "baseline.iterations=0"], "must be >= 1"),
    ],
)
def test_the_command_refuses_settings_it_cannot_honour(pairs_file: Path, extra, message, capsys) -> None:
    args = [a for o in _data_overrides(pairs_file) for a in ("--set", o)]
    assert main(["baseline", "lexicon", "translation", *args, *extra]) == 2
    assert message in capsys.readouterr().err


def test_the_command_refuses_an_out_it_would_overwrite_and_a_negative_sample_count(
    pairs_file: Path, tmp_path: Path, capsys
) -> None:
    args = [a for o in _data_overrides(pairs_file) for a in ("--set", o)]
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me\n")
    full = tmp_path / "full"
    full.mkdir()
    (full / "kept.txt").write_text("keep me too\n")
    for out in (notes, notes / "lexicon", full):
        assert main(["baseline", "lexicon", "translation", *args, "--out", str(out)]) == 2
        assert "--out" in capsys.readouterr().err
    assert notes.read_text() == "keep me\n" and [p.name for p in full.iterdir()] == ["kept.txt"]
    with pytest.raises(SystemExit):
        main(["baseline", "lexicon", "translation", *args, "--samples", "-1"])
    assert "must be >= 0" in capsys.readouterr().err


def test_a_baseline_refuses_a_recipe_of_another_task() -> None:
    with pytest.raises(ConfigError, match="serves task"):
        run_baseline("lexicon", load_recipe("mf"))
    assert main(["baseline", "lexicn", "translation"]) == 2


def test_a_study_shows_the_lexicon_as_a_row_run_once(pairs_file: Path, tmp_path: Path) -> None:
    common = [*quick_overrides(pairs_file, epochs=1)]
    spec = StudySpec.from_mapping(
        {
            "name": "lex",
            "title": "t",
            "paper": "sse-stochastic-shared-embeddings.txt",
            "variants": {
                "Transformer": {"recipe": "translation"},
                "Lexicon": {"recipe": "translation", "method": "lexicon", "set": ["baseline.iterations=4"]},
            },
            "common": common,
            "seeds": 2,
            "metrics": ["test_bleu", "test_chrf", "test_bleu_greedy"],
        }
    )
    records = run_study(spec, tmp_path / "lex.jsonl", progress=False)
    lexicon = [r for r in records if r.variant == "Lexicon"]
    assert [r.seed for r in lexicon] == [0]  # deterministic: one run
    assert lexicon[0].metrics["test_bleu"] == pytest.approx(100.0)
    assert len([r for r in records if r.variant == "Transformer"]) == 2
    assert run_study(spec, tmp_path / "lex.jsonl", progress=False) == records  # resumes: nothing runs again
    write_report(spec, records, tmp_path / "page", command="embreg study run lex.yaml")
    page = (tmp_path / "page" / "README.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| Lexicon |"))
    assert "| 1 | 100.0000 |" in row and "—" in row  # n = 1, test_bleu, and no greedy decode


def test_a_study_refuses_a_claim_on_a_metric_the_baseline_lacks_or_an_unknown_method(
    pairs_file: Path, tmp_path: Path
) -> None:
    base = {
        "name": "lex",
        "title": "t",
        "paper": "p.txt",
        "common": quick_overrides(pairs_file, epochs=1),
        "metrics": ["test_bleu"],
    }
    with pytest.raises(ConfigError, match="unknown baseline 'lexicn'"):
        StudySpec.from_mapping({**base, "variants": {"L": {"recipe": "translation", "method": "lexicn"}}})
    spec = StudySpec.from_mapping(
        {
            **base,
            "variants": {"T": {"recipe": "translation"}, "L": {"recipe": "translation", "method": "lexicon"}},
            "claims": [{"text": "c", "metric": "test_bleu_greedy", "variant": "T", "baseline": "L"}],
        }
    )
    with pytest.raises(ConfigError, match="does not report"):
        run_study(spec, tmp_path / "lex.jsonl", progress=False)
    assert not (tmp_path / "lex.jsonl").exists() or not (tmp_path / "lex.jsonl").read_text()  # nothing ran
