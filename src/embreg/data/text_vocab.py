"""Word-level vocabulary with an unknown token for rare words (WikiText-style)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from embreg.errors import DataError

UNK = "<unk>"
EOS = "<eos>"


@dataclass(frozen=True)
class Vocabulary:
    """Words by id: ``<unk>`` is id 0, ``<eos>`` id 1, then words by decreasing training frequency.

    Build it with :meth:`from_tokens`; ``encode`` maps unknown words to ``<unk>``.

    Example:
        >>> vocab = Vocabulary.from_tokens("a a a b b c".split(), min_count=2)
        >>> vocab.words, vocab.encode(["a", "c", "b"]).tolist()
        (('<unk>', '<eos>', 'a', 'b'), [2, 0, 3])
    """

    words: tuple[str, ...]

    @classmethod
    def from_tokens(cls, tokens: Iterable[str], *, min_count: int = 3, max_size: int | None = None) -> Vocabulary:
        """Words seen at least ``min_count`` times, the ``max_size`` most frequent at most (ties by first use).

        Args:
            tokens: the training tokens.
            min_count: rarer words become ``<unk>`` (WikiText uses 3).
            max_size: cap on the number of entries including ``<unk>`` and ``<eos>`` (``None``: no cap).
        """
        if min_count < 1:
            raise DataError(f"min_count={min_count} must be >= 1")
        if max_size is not None and max_size < 3:
            raise DataError(f"max_size={max_size} must be >= 3 (room for <unk>, <eos> and one word)")
        counts = Counter(t for t in tokens if t not in (UNK, EOS))
        if not counts:
            raise DataError("cannot build a vocabulary from an empty corpus")
        kept = [w for w, c in counts.most_common() if c >= min_count]
        if max_size is not None:
            kept = kept[: max_size - 2]
        return cls((UNK, EOS, *kept))

    def __len__(self) -> int:
        return len(self.words)

    @property
    def index(self) -> dict[str, int]:
        """``{word: id}``."""
        return {w: i for i, w in enumerate(self.words)}

    def encode(self, tokens: Sequence[str]) -> np.ndarray:
        """``int64`` ids of ``tokens``; words outside the vocabulary get the id of ``<unk>`` (0)."""
        index = self.index
        return np.fromiter((index.get(t, 0) for t in tokens), dtype=np.int64, count=len(tokens))

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Words of ``ids``."""
        return [self.words[int(i)] for i in ids]
