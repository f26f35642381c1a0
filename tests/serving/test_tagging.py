"""A trained tagger tags new sentences: ``TrainedRun.predict`` and ``embreg predict`` (lines or CoNLL in, CoNLL
out), with the run's tokenisation and vocabularies, unknown tokens counted, and scheme-valid tag sequences only."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from embreg.cli import main
from embreg.data.datasets.review_tags import tokenize as review_tokenize
from embreg.errors import ConfigError, DataError
from embreg.nn.crf import invalid_transition
from embreg.recipes import load_recipe
from embreg.recipes.run import run_single
from embreg.serving import load
from embreg.tasks.tagging.serving import _tokenizer, conll_text, detect_format, read_sentences
from tests.helpers.tagging_files import write_conll_splits

TAGS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]


def _conll_rows(text: str) -> list[list[tuple[str, str]]]:
    sentences, current = [], []
    for line in text.split("\n"):
        if line:
            token, tag = line.split("\t")
            current.append((token, tag))
        elif current:
            sentences.append(current)
            current = []
    assert not current, "the CoNLL text must end each sentence with a blank line"
    return sentences


def test_a_tagging_run_has_its_vocabularies_and_tags_sentences_as_its_model_decodes(trained) -> None:
    run = load(trained("tagging"))
    assert set(run.vocabularies) == {"token", "tag"}
    assert run.vocabularies["token"].labels[:2].tolist() == ["<pad>", "<unk>"]
    assert run.vocabularies["tag"].labels.tolist() == TAGS
    assert len(run.vocabularies["token"]) == len(run.prepared.corpus.vocab) > 10
    tagged = run.predict(["Ann met Bo Li in New York", "", "Zed met  Cy\tin Rome"])
    assert tagged.tokens == [["Ann", "met", "Bo", "Li", "in", "New", "York"], [], ["Zed", "met", "Cy", "in", "Rome"]]
    assert [len(t) for t in tagged.tags] == [7, 0, 5]
    assert tagged.summary == {"sentences": 3, "tokens": 12, "unknown": 1}  # "Zed" is not in the training files
    assert tagged.table.loc[tagged.table["token"] == "Zed", "status"].tolist() == ["unknown"]
    assert tagged.table["sentence"].tolist() == [1] * 7 + [3] * 5
    assert "1 unseen in training" in tagged.summary_line()
    ids = run.vocabularies["token"].indices(["Zed", "met", "Cy", "in", "Rome"])
    ids[ids < 0] = 1  # <unk>
    batch = {"tokens": torch.as_tensor(ids).unsqueeze(0), "mask": torch.ones(1, 5, dtype=torch.bool)}
    expected = [TAGS[i] for i in run.model.decode(batch)[0].tolist()]
    assert tagged.tags[2] == expected
    assert run.predict([["Zed", "met", "Cy", "in", "Rome"]]).tags == [expected]  # token lists as they are


def _emissions_prefer(model: torch.nn.Module, scores: dict[int, float]) -> None:
    """The same emission ``scores`` (tag id -> score, 0 for the others) at every token and flat learnt transitions:
    a decoder that ignored the scheme would emit the best-scored tag everywhere."""
    with torch.no_grad():
        model.emissions.weight.zero_()
        model.emissions.bias.fill_(0.0)
        for tag, value in scores.items():
            model.emissions.bias[tag] = value
        for table in (model.crf.transitions, model.crf.start_transitions, model.crf.end_transitions):
            table.zero_()


def test_decoding_gives_valid_bio_where_the_emissions_alone_would_not(trained) -> None:
    run = load(trained("tagging"))
    _emissions_prefer(run.model, {TAGS.index("I-PER"): 10.0, TAGS.index("B-PER"): 5.0})
    sentences = ["Ann met Bo", "in Rome", "Oslo"]
    tokens = run.vocabularies["token"].indices("Ann met Bo".split())
    emissions = run.model({"tokens": torch.as_tensor(tokens).unsqueeze(0), "mask": torch.ones(1, 3, dtype=bool)})
    unconstrained = [TAGS[i] for i in emissions.predictions[0].argmax(-1).tolist()]
    assert unconstrained == ["I-PER"] * 3 and invalid_transition(unconstrained, "bio") == 0
    tagged = run.predict(sentences)
    assert tagged.tags == [["B-PER", "I-PER", "I-PER"], ["B-PER", "I-PER"], ["B-PER"]]
    assert all(invalid_transition(tags, "bio") is None for tags in tagged.tags)


def test_decoding_gives_valid_iobes_where_the_emissions_alone_would_not(tmp_path: Path) -> None:
    from embreg.tasks.tagging.corpus import bio_to_iobes

    paths = write_conll_splits(tmp_path)
    for path in paths.values():  # the same sentences, their BIO tags written in IOBES
        blocks = path.read_text().split("\n\n")
        rows = [[line.split() for line in block.splitlines()] for block in blocks[1:]]
        body = ["\n".join(f"{t} {p} {g}" for (t, p, _), g in zip(r, bio_to_iobes([x[2] for x in r]))) for r in rows]
        path.write_text("\n\n".join([blocks[0], *body]))
    overrides = [f"data.path={paths['train']}", f"data.valid_path={paths['valid']}", f"data.test_path={paths['test']}"]
    quick = [
        "model.tag_scheme=iobes",
        "model.emb_dim=8",
        "model.hidden_dim=4",
        "train.epochs=1",
        "train.progress=false",
    ]
    run_single(load_recipe("tagging-bilstm-crf", [*overrides, *quick]), tmp_path / "run")
    run = load(tmp_path / "run")
    tags = run.vocabularies["tag"].labels.tolist()
    _emissions_prefer(run.model, {tags.index("I-PER"): 10.0, tags.index("S-PER"): 3.0})
    tagged = run.predict(["Ann met Bo Li", "Rome"])
    assert tagged.tags == [["B-PER", "I-PER", "I-PER", "E-PER"], ["S-PER"]]
    assert all(invalid_transition(t, "iobes") is None for t in tagged.tags)
    assert invalid_transition(["I-PER"] * 4, "iobes") == 0


def test_embreg_predict_reads_lines_or_conll_and_writes_conll(
    trained, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = trained("tagging")
    lines = tmp_path / "sentences.txt"
    lines.write_bytes(b"Ann met Bo in Rome\r\n\r\nZed met Cy Oslo\n")
    out = tmp_path / "tags.conll"
    assert main(["predict", str(run_dir), "--input", str(lines), "--out", str(out)]) == 0
    summary = capsys.readouterr().out
    assert (
        summary.startswith("2 sentences, 9 tokens tagged (1 unseen in training, read as <unk>)") and str(out) in summary
    )
    written = _conll_rows(out.read_text())
    assert [[token for token, _ in sentence] for sentence in written] == [
        ["Ann", "met", "Bo", "in", "Rome"],
        ["Zed", "met", "Cy", "Oslo"],
    ]
    assert all(tag in TAGS for sentence in written for _, tag in sentence)
    assert detect_format(out.read_text().split("\n")) == "conll"
    # the written CoNLL, or a CoNLL file with other columns, read back as CoNLL: the same tokens and tags
    gold = tmp_path / "gold.txt"
    gold.write_text("-DOCSTART- -X- O\n\nAnn NNP B-PER\nmet VBD O\nBo NNP B-PER\nin IN O\nRome NNP B-LOC\n")
    again = tmp_path / "again.conll"
    assert main(["predict", str(run_dir), "--input", str(gold), "--out", str(again)]) == 0
    assert _conll_rows(again.read_text()) == written[:1]
    assert capsys.readouterr().out.startswith("1 sentence, 5 tokens tagged (0 unseen in training")
    assert main(["predict", str(run_dir), "--input", str(out)]) == 0  # no --out: CoNLL on stdout, summary on stderr
    captured = capsys.readouterr()
    assert _conll_rows(captured.out) == written and captured.err.startswith("2 sentences, 9 tokens tagged")
    assert main(["predict", str(run_dir), "--input", str(gold), "--input-format", "lines"]) == 0
    assert capsys.readouterr().err.startswith("6 sentences")  # -DOCSTART- -X- O is a sentence of 3 tokens then


def test_unknown_tokens_follow_the_policy_and_bad_requests_are_one_line_errors(
    trained, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = load(trained("tagging"))
    with pytest.raises(DataError, match=r"1 token\(s\) were never seen in training, e.g. \['Zed'\]"):
        run.predict(["Zed met Ann"], unknown="error")
    with pytest.raises(ConfigError, match="a tagger tags every token"):
        run.predict(["Ann met Bo"], unknown="skip")
    with pytest.raises(ConfigError, match="says how to read a file"):
        run.predict(["Ann met Bo"], input_format="conll")
    with pytest.raises(DataError, match=r"does not exist; to tag sentences held in memory pass a list"):
        run.predict("Ann met Bo")
    with pytest.raises(DataError, match="a string or a list of token strings"):
        run.predict([3])
    with pytest.raises(ConfigError, match="reads tagging input"):
        load(trained("rating")).predict(tmp_path / "x.csv", input_format="lines")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"Ann met Bo\nBo \xff ran\n")
    assert main(["predict", str(trained("tagging")), "--input", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"embreg: error: {bad}:2: not UTF-8 (invalid start byte at byte 3)"


def test_the_format_rule_and_the_runs_tokenisation(tmp_path: Path) -> None:
    assert detect_format(["Ann B-PER", "met O", "", "Bo B-PER", "ran O"]) == "conll"
    assert detect_format(["Ann", "met", "", "Bo"]) == "conll"  # tokens only, one per line
    assert detect_format(["-DOCSTART-", "Ann"]) == "conll"
    assert detect_format(["Ann met Bo", "in Rome ."]) == "lines"  # no blank line ends a sentence
    # two-word sentences and a blank line fit the CoNLL rule: --input-format lines reads such a file as lines
    assert detect_format(["Ann met", "Bo ran", "", "Cy left"]) == "conll"
    assert detect_format(["Ann B-PER", "met O"]) == "lines"  # one sentence, no blank line: name the format
    assert detect_format(["Ann met Bo .", "Cy ran", "", "Di"]) == "lines"  # lines of different widths
    file = tmp_path / "one.txt"
    file.write_text("Ann B-PER\nmet O\n")
    assert read_sentences(file, str.split) == [["Ann", "B-PER"], ["met", "O"]]
    assert read_sentences(file, str.split, "conll") == [["Ann", "met"]]
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    with pytest.raises(DataError, match="no sentence to tag"):
        read_sentences(empty, str.split)
    silver = SimpleNamespace(recipe=SimpleNamespace(data=SimpleNamespace(path=None)))
    own_files = SimpleNamespace(recipe=SimpleNamespace(data=SimpleNamespace(path="train.txt")))
    assert _tokenizer(silver) is review_tokenize  # reviews-silver runs were trained on the reviews' tokens
    assert _tokenizer(own_files)("Rome, Italy") == ["Rome,", "Italy"]
    assert conll_text([["a"], [], ["b"]], [["O"], [], ["O"]]) == "a\tO\n\nb\tO\n\n"


def test_predict_without_out_writes_csv_to_stdout_and_input_format_is_for_tagging_runs_only(
    trained, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "pairs.csv"
    rows.write_text("user,item\nu01,i02\nzz,i03\n")
    assert main(["predict", str(trained("rating")), "--input", str(rows)]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0] == "user,item,rating,status" and len(captured.out.splitlines()) == 3
    assert captured.err.startswith("2 rows: 1 predicted, 1 with ids unseen in training")
    assert main(["predict", str(trained("rating")), "--input", str(rows), "--input-format", "lines"]) == 2
    assert "reads tagging input; this is a 'rating' run" in capsys.readouterr().err
