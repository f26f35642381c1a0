"""Tokenisation, vocabulary, article-level splits, user text files and BPTT batching."""

import numpy as np
import pytest
import torch

from embreg.data import Vocabulary, build_corpus, load_text_files, split_articles, tokenize_text
from embreg.errors import DataError
from embreg.tasks.lm.batches import BPTTBatches, batchify


def test_tokenize_keeps_case_and_splits_punctuation_with_eos_per_line():
    assert tokenize_text("It's 3.5 km, isn't it?\n\n Next") == [
        "It",
        "'s",
        "3.5",
        "km",
        ",",
        "isn",
        "'t",
        "it",
        "?",
        "<eos>",
        "Next",
        "<eos>",
    ]


def test_vocabulary_maps_rare_words_to_unk():
    vocab = Vocabulary.from_tokens("a a a b b c".split(), min_count=2)
    assert vocab.encode(["a", "b", "c", "zzz"]).tolist() == [2, 3, 0, 0]
    assert len(Vocabulary.from_tokens("a a b b c c".split(), min_count=1, max_size=4)) == 4
    with pytest.raises(DataError, match="empty"):
        Vocabulary.from_tokens([])


def test_article_split_is_disjoint_complete_and_seeded():
    sizes = list(np.random.default_rng(0).integers(50, 500, 40))
    parts = split_articles(sizes, (0.8, 0.1, 0.1), seed=3)
    together = np.concatenate(list(parts.values()))
    assert sorted(together.tolist()) == list(range(40))
    share = sum(sizes[i] for i in parts["train"]) / sum(sizes)
    assert 0.7 < share < 0.9
    again = split_articles(sizes, (0.8, 0.1, 0.1), seed=3)
    assert all(np.array_equal(parts[k], again[k]) for k in parts)
    with pytest.raises(DataError, match="fractions"):
        split_articles(sizes, (0.5, 0.5))


def test_build_corpus_uses_a_training_vocabulary_and_refuses_an_empty_corpus():
    articles = [(f"t{i}", ([f"w{i}"] * 5 + ["common"] * 3)) for i in range(6)]
    corpus = build_corpus(articles, fractions=(0.6, 0.2, 0.2), min_count=2)
    train_titles = set(corpus.articles["train"])
    assert not train_titles & set(corpus.articles["valid"]) and not train_titles & set(corpus.articles["test"])
    assert (corpus.splits["valid"] == 0).any()  # words of unseen articles are <unk>
    with pytest.raises(DataError, match="empty"):
        build_corpus([("a", []), ("b", [])])


def test_user_text_files(tmp_path):
    for name in ("train", "valid", "test"):
        (tmp_path / f"{name}.txt").write_text("the cat sat on the mat\nthe dog\n")
    corpus = load_text_files(*(tmp_path / f"{n}.txt" for n in ("train", "valid", "test")))
    assert corpus.vocab.decode(corpus.splits["train"][:4]) == ["the", "cat", "sat", "on"]
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(DataError, match="empty"):
        load_text_files(tmp_path / "train.txt", tmp_path / "empty.txt", tmp_path / "test.txt")
    with pytest.raises(DataError, match="cannot read"):
        load_text_files(tmp_path / "nope.txt", tmp_path / "valid.txt", tmp_path / "test.txt")


def test_bptt_batches_cover_the_streams_with_shifted_targets():
    ids = np.arange(203)
    batches = BPTTBatches(ids, batch_size=4, bptt=7)
    data = batchify(ids, 4)
    seen = list(batches.epoch(0))
    assert len(seen) == len(batches)
    assert torch.equal(torch.cat([b["input"] for b in seen], 1), data[:, :-1])
    assert torch.equal(torch.cat([b["target"] for b in seen], 1), data[:, 1:])
    assert [bool(b["reset"]) for b in seen] == [True] + [False] * (len(seen) - 1)
    later = [int(b["index"]) for b in batches.epoch(1)]
    assert not set(later) & {int(b["index"]) for b in seen}


def test_variable_bptt_replays_per_epoch():
    batches = BPTTBatches(np.arange(5000), batch_size=2, bptt=20, variable_length=True, seed=1)
    lengths = [b["input"].shape[1] for b in batches.epoch(3)]
    assert lengths == [b["input"].shape[1] for b in batches.epoch(3)]
    assert len(set(lengths)) > 3 and min(lengths) >= 1 and sum(lengths) == 2499


def test_batchify_refuses_too_little_text():
    with pytest.raises(DataError, match="streams"):
        batchify(np.arange(3), 4)
