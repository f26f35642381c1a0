"""Reading CoNLL files, the tagged corpus and its tag checks: malformed lines and mismatched tag sets name file and
line. The files here are small ones these tests write (made-up sentences), not real data."""

from __future__ import annotations

from pathlib import Path

import pytest

from embreg.data.datasets.review_tags import silver_tags, tokenize
from embreg.data.files.conll import read_conll
from embreg.errors import DataError
from embreg.nn.crf import invalid_transition
from embreg.tasks.tagging.corpus import TaggedCorpus, bio_to_iobes, check_tags, tag_order

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
"""


def _write(tmp_path: Path, text: str, name: str = "train.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_sentences_tokens_tags_and_lines(tmp_path: Path) -> None:
    sentences = read_conll(_write(tmp_path, CONLL))
    assert [s.tokens for s in sentences] == [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]]
    assert sentences[0].tags == ["B-ORG", "O", "B-MISC", "O"]
    assert sentences[1].lines == [8, 9] and sentences[1].where(1).endswith("train.txt:9")


def test_the_tag_column_is_selectable(tmp_path: Path) -> None:
    sentences = read_conll(_write(tmp_path, CONLL), tag_column=2)
    assert sentences[0].tags == ["B-NP", "B-VP", "B-NP", "I-NP"]
    assert read_conll(_write(tmp_path, CONLL), tag_column=-3)[1].tags == ["NNP", "NNP"]


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("EU B-ORG\nrejects\n", 2, "1 column"),
        ("EU NNP B-ORG\nrejects O\n", 2, "2 columns in 'rejects O', but line 1 has 3"),
    ],
)
def test_a_malformed_line_names_file_and_line(tmp_path: Path, text: str, line: int, what: str) -> None:
    with pytest.raises(DataError, match=rf"train.txt:{line}: {what}"):
        read_conll(_write(tmp_path, text))


def test_a_tag_column_beyond_the_line_and_bad_bytes_name_the_line(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"train.txt:1: 2 column\(s\).*tag in column 3"):
        read_conll(_write(tmp_path, "EU B-ORG\n"), tag_column=3)
    path = tmp_path / "bad.txt"
    path.write_bytes(b"EU B-ORG\n\xff\xfe O\n")
    with pytest.raises(DataError, match=r"bad.txt:2: not UTF-8"):
        read_conll(path)
    with pytest.raises(DataError, match="no tagged sentence"):
        read_conll(_write(tmp_path, "-DOCSTART- O\n\n", "empty.txt"))
    with pytest.raises(DataError, match="no such file"):
        read_conll(tmp_path / "missing.txt")


def test_a_tag_missing_from_the_training_data_names_file_and_line(tmp_path: Path) -> None:
    train = read_conll(_write(tmp_path, CONLL))
    valid = read_conll(_write(tmp_path, "Paris NNP B-NP B-LOC\n", "valid.txt"))
    with pytest.raises(DataError, match=r"valid.txt:1: tag 'B-LOC' of the valid data is not in the training"):
        check_tags({"train": train, "valid": valid, "test": train}, "bio")


def test_an_invalid_bio_sequence_names_file_and_line(tmp_path: Path) -> None:
    iob1 = CONLL.replace("Peter NNP B-NP B-PER", "Peter NNP B-NP I-PER")
    sentences = read_conll(_write(tmp_path, iob1))
    with pytest.raises(DataError, match=r"train.txt:8: the tags I-PER are not a valid BIO sequence.*tag_scheme=none"):
        check_tags({"train": sentences, "valid": sentences, "test": sentences}, "bio")
    check_tags({"train": sentences, "valid": sentences, "test": sentences}, "none")
    with pytest.raises(DataError, match=r"train.txt:4: the tags B-ORG O are not a valid IOBES sequence"):
        check_tags({"train": sentences, "valid": sentences, "test": sentences}, "iobes")


def test_the_corpus_vocabulary_and_tags_come_from_training(tmp_path: Path) -> None:
    train = read_conll(_write(tmp_path, CONLL))
    other = read_conll(_write(tmp_path, "Unseen NNP B-NP B-PER\n", "test.txt"))
    corpus = TaggedCorpus({"train": train, "valid": train, "test": other}, min_count=1)
    assert corpus.tags == ["O", "B-MISC", "B-ORG", "B-PER", "I-PER"]
    test = corpus.tensors("test")
    assert test["tokens"].tolist() == [[1]] and test["mask"].tolist() == [[True]]
    assert corpus.tensors("train")["mask"].sum().item() == 6
    with pytest.raises(DataError, match="every split needs at least one"):
        TaggedCorpus({"train": train, "valid": [], "test": train})


def test_tag_order_and_iobes_conversion() -> None:
    assert tag_order(["I-A", "B-A", "O", "S-A", "E-A", "NN"]) == ["O", "B-A", "I-A", "E-A", "S-A", "NN"]
    tags = ["B-A", "I-A", "O", "B-B", "B-B", "I-B", "I-B"]
    converted = bio_to_iobes(tags)
    assert converted == ["B-A", "E-A", "O", "S-B", "B-B", "I-B", "E-B"]
    assert invalid_transition(converted, "iobes") is None


def test_silver_review_tags_are_valid_bio() -> None:
    tokens = tokenize("Ordered the XS and M in black, navy blue; I'm 5'4\" and 120 lbs.")
    tags = silver_tags(tokens)
    assert invalid_transition(tags, "bio") is None
    assert dict(zip(tokens, tags, strict=True))["XS"] == "B-SIZE"
    assert [t for t, g in zip(tokens, tags, strict=True) if g.endswith("COLOR")] == ["black", "navy", "blue"]
    assert tags[tokens.index("navy") + 1] == "I-COLOR" and "B-NUM" in tags
