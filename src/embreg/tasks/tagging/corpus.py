"""Tagged sentences for sequence labelling: splits, vocabularies, tag-scheme checks and padded tensors.

A :class:`TaggedCorpus` holds ``train``/``valid``/``test`` lists of :class:`~embreg.data.files.conll.TaggedSentence`.
Its token vocabulary (``<pad>`` = 0, ``<unk>`` = 1, then training tokens seen at least ``min_count`` times, most
frequent first) and its tag set come from the training split only. :func:`check_tags` holds every split to a tag
scheme (nlp-best-practices.txt, "Sequence labelling": BIO, IOBES) and to the training tag set, naming the file
and line of the first offence, so that a CRF never meets a gold path it gives probability 0.

Example:
    >>> from embreg.data.files.conll import TaggedSentence
    >>> train = [TaggedSentence(["John", "runs"], ["B-PER", "O"]), TaggedSentence(["Ann"], ["B-PER"])]
    >>> corpus = TaggedCorpus({"train": train, "valid": train[:1], "test": train[1:]})
    >>> corpus.tags, corpus.vocab[:2]
    (['O', 'B-PER'], ['<pad>', '<unk>'])
    >>> corpus.tensors("valid")["tokens"].tolist()
    [[3, 4]]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from embreg.data.files.conll import TaggedSentence
from embreg.errors import ConfigError, DataError
from embreg.nn.crf.constraints import invalid_transition, split_tag

__all__ = ["TaggedCorpus", "check_tags", "bio_to_iobes", "tag_order", "PAD", "UNK"]

PAD, UNK = "<pad>", "<unk>"
SPLITS = ("train", "valid", "test")


def tag_order(tags: set[str] | Sequence[str]) -> list[str]:
    """The tag ids' order: ``O`` first, then by entity type and prefix (``B``, ``I``, ``E``, ``S``), others by name.

    Example:
        >>> tag_order({"I-PER", "O", "B-LOC", "B-PER", "I-LOC"})
        ['O', 'B-LOC', 'I-LOC', 'B-PER', 'I-PER']
    """
    rank = {"B": 0, "I": 1, "E": 2, "S": 3}

    def key(tag: str) -> tuple[int, str, int, str]:
        if tag == "O":
            return (0, "", 0, "")
        prefix, sep, kind = tag.partition("-")
        if sep and prefix in rank:
            return (1, kind, rank[prefix], tag)
        return (2, tag, 0, tag)

    return sorted(set(tags), key=key)


def bio_to_iobes(tags: Sequence[str]) -> list[str]:
    """A valid BIO sequence in IOBES (a segment's last token ``E-``, a one-token segment ``S-``).

    Example:
        >>> bio_to_iobes(["B-PER", "I-PER", "I-PER", "O", "B-LOC"])
        ['B-PER', 'I-PER', 'E-PER', 'O', 'S-LOC']
    """
    out = []
    for i, tag in enumerate(tags):
        if tag == "O":
            out.append(tag)
            continue
        prefix, kind = tag.split("-", 1)
        continues = i + 1 < len(tags) and tags[i + 1] == f"I-{kind}"
        if prefix == "B":
            out.append(tag if continues else f"S-{kind}")
        else:
            out.append(tag if continues else f"E-{kind}")
    return out


def check_tags(splits: dict[str, list[TaggedSentence]], scheme: str) -> None:
    """Every tag of every split is in the training tag set and, unless ``scheme`` is ``none``, a valid ``scheme``
    tag in a valid sequence (nlp-best-practices.txt, "Sequence labelling").

    Raises:
        DataError: naming ``file:line``, the bad tag and the fix (the tag set of the training file; the model's
            ``tag_scheme``).
    """
    train_tags = {t for s in splits["train"] for t in s.tags}
    for split in SPLITS:
        for sentence in splits.get(split, []):
            for position, tag in enumerate(sentence.tags):
                if tag not in train_tags:
                    raise DataError(
                        f"{sentence.where(position)}: tag {tag!r} of the {split} data is not in the training data's "
                        f"tag set ({', '.join(tag_order(train_tags))}); the tag sets of train and {split} must match"
                    )
                if scheme != "none":
                    try:
                        split_tag(tag, scheme)
                    except ConfigError as exc:
                        raise DataError(
                            f"{sentence.where(position)}: {exc}; convert the file to {scheme.upper()} or set "
                            "model.tag_scheme=none"
                        ) from None
            bad = invalid_transition(sentence.tags, scheme)
            if bad is not None:
                shown = sentence.tags[max(0, bad - 1) : bad + 1]
                raise DataError(
                    f"{sentence.where(bad)}: the tags {' '.join(shown)} are not a valid {scheme.upper()} sequence "
                    f"(at token {bad + 1} of the sentence); fix the file or set model.tag_scheme=none"
                )


@dataclass
class TaggedCorpus:
    """Splits of tagged sentences with the training split's vocabulary and tag set (module docstring).

    Attributes:
        splits: ``{"train", "valid", "test"}`` -> sentences.
        min_count: training tokens seen fewer times map to ``<unk>``.
        source: what the data was (for ``split.json`` and ``report.md``).
    """

    splits: dict[str, list[TaggedSentence]]
    min_count: int = 1
    source: dict[str, Any] = field(default_factory=dict)
    vocab: list[str] = field(init=False)
    tags: list[str] = field(init=False)

    def __post_init__(self) -> None:
        missing = [s for s in SPLITS if not self.splits.get(s)]
        if missing:
            raise DataError(f"no sentences in the {', '.join(missing)} split(s); every split needs at least one")
        counts = Counter(token for s in self.splits["train"] for token in s.tokens)
        kept = sorted((t for t, c in counts.items() if c >= self.min_count), key=lambda t: (-counts[t], t))
        self.vocab = [PAD, UNK, *kept]
        self.tags = tag_order({t for s in self.splits["train"] for t in s.tags})
        self._ids = {t: i for i, t in enumerate(self.vocab)}
        self._tag_ids = {t: i for i, t in enumerate(self.tags)}

    def token_counts(self) -> torch.Tensor:
        """Training counts of every vocabulary id, ``(V,)``."""
        counts = torch.zeros(len(self.vocab), dtype=torch.long)
        for sentence in self.splits["train"]:
            for token in sentence.tokens:
                counts[self._ids.get(token, 1)] += 1
        return counts

    def tensors(self, split: str) -> dict[str, torch.Tensor]:
        """``{"tokens", "tags"}`` int64 and ``"mask"`` bool, each ``(N, T)`` right-padded (``T``: longest sentence).

        Raises:
            DataError: a tag outside the training tag set (:func:`check_tags` names its line first).
        """
        sentences = self.splits[split]
        longest = max(len(s.tokens) for s in sentences)
        tokens = torch.zeros(len(sentences), longest, dtype=torch.long)
        tags = torch.zeros(len(sentences), longest, dtype=torch.long)
        mask = torch.zeros(len(sentences), longest, dtype=torch.bool)
        for row, sentence in enumerate(sentences):
            n = len(sentence.tokens)
            tokens[row, :n] = torch.tensor([self._ids.get(t, 1) for t in sentence.tokens])
            try:
                tags[row, :n] = torch.tensor([self._tag_ids[t] for t in sentence.tags])
            except KeyError as exc:
                raise DataError(f"{sentence.where()}: tag {exc.args[0]!r} is not in the training tag set") from None
            mask[row, :n] = True
        return {"tokens": tokens, "tags": tags, "mask": mask}

    def summary(self) -> dict[str, Any]:
        """Sizes for ``split.json``."""
        return {
            "sentences": {s: len(self.splits[s]) for s in SPLITS},
            "tokens": {s: sum(len(x.tokens) for x in self.splits[s]) for s in SPLITS},
            "vocab_size": len(self.vocab),
            "tags": list(self.tags),
            "data": self.source,
        }
