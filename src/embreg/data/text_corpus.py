"""Plain-text corpora for language modelling: tokenisation, article-level splits and the encoded splits.

Tokenisation follows the spirit of WikiText (Merity et al., 2016): words, numbers and single punctuation marks are
tokens, case is kept, every non-empty line ends with ``<eos>``. Splits are by *article*, so no article contributes
to two splits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from embreg.data.text_vocab import EOS, Vocabulary
from embreg.errors import DataError

_TOKEN = re.compile(r"\w+(?:[-'.]\w+)*|[^\w\s]", re.UNICODE)


def tokenize_line(line: str) -> list[str]:
    """Tokens of one line of text (no ``<eos>``).

    Example:
        >>> tokenize_line("The U.S. army's 3.5-ton truck (1941).")
        ['The', 'U.S', '.', 'army', "'s", '3.5-ton', 'truck', '(', '1941', ')', '.']
    """
    tokens = []
    for token in _TOKEN.findall(line):
        if "'" in token and not token.startswith("'"):
            head, _, tail = token.partition("'")
            tokens.extend([head, "'" + tail])
        else:
            tokens.append(token)
    return tokens


def tokenize_text(text: str) -> list[str]:
    """Tokens of every non-empty line of ``text``, each line closed by ``<eos>``.

    Example:
        >>> tokenize_text("Hello world.\\n\\nBye")
        ['Hello', 'world', '.', '<eos>', 'Bye', '<eos>']
    """
    out: list[str] = []
    for line in text.splitlines():
        tokens = tokenize_line(line)
        if tokens:
            out.extend(tokens)
            out.append(EOS)
    return out


def split_articles(
    sizes: Sequence[int], fractions: Sequence[float] = (0.8, 0.1, 0.1), *, seed: int = 0
) -> dict[str, np.ndarray]:
    """Assigns whole articles to ``train``/``valid``/``test`` so that each split holds about its share of tokens.

    Articles are visited in a seeded random order and added to the current split until its token share is reached.
    Each split gets at least one article.

    Args:
        sizes: token count of each article.
        fractions: token shares of the three splits (positive, summing to 1).
        seed: seed of the order.

    Returns:
        ``{"train" | "valid" | "test": sorted article indices}``.

    Example:
        >>> parts = split_articles([100] * 10, seed=0)
        >>> [len(parts[k]) for k in ("train", "valid", "test")]
        [8, 1, 1]
    """
    if len(fractions) != 3 or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
        raise DataError(f"fractions={list(fractions)} must be three positive numbers summing to 1")
    if len(sizes) < 3:
        raise DataError(f"{len(sizes)} articles cannot be split three ways; at least 3 are needed")
    order = np.random.default_rng(seed).permutation(len(sizes))
    total = float(sum(sizes))
    bounds = [fractions[0] * total, (fractions[0] + fractions[1]) * total]
    parts: dict[str, list[int]] = {"train": [], "valid": [], "test": []}
    names = ("train", "valid", "test")
    seen = 0.0
    for position, article in enumerate(order):
        left = len(order) - position
        split = 0 if seen < bounds[0] else (1 if seen < bounds[1] else 2)
        # keep at least one article for each later split that is still empty
        empty_later = sum(1 for later in names[split + 1 :] if not parts[later])
        if parts[names[split]] and left <= empty_later:
            split = next(i for i, n in enumerate(names) if i > split and not parts[n])
        parts[names[split]].append(int(article))
        seen += sizes[article]
    return {name: np.array(sorted(idx), dtype=np.int64) for name, idx in parts.items()}


@dataclass
class TextCorpus:
    """A tokenised corpus encoded with one vocabulary.

    Attributes:
        vocab: the vocabulary (built on the training split).
        splits: ``{"train" | "valid" | "test": int64 ids}``, each split one long stream.
        articles: ``{split: article titles}`` (or file names) that went into each split.
        source: where the text came from (for run records).
    """

    vocab: Vocabulary
    splits: dict[str, np.ndarray]
    articles: dict[str, list[str]] = field(default_factory=dict)
    source: str = ""

    def summary(self) -> dict:
        """Token and article counts per split, vocabulary size and ``<unk>`` rate, for run records."""
        out: dict = {"source": self.source, "vocab_size": len(self.vocab)}
        for name, ids in self.splits.items():
            out[name] = {
                "tokens": int(ids.size),
                "articles": len(self.articles.get(name, [])),
                "unk_rate": float((ids == 0).mean()) if ids.size else 0.0,
            }
        return out


def build_corpus(
    articles: Sequence[tuple[str, list[str]]],
    *,
    fractions: Sequence[float] = (0.8, 0.1, 0.1),
    seed: int = 0,
    min_count: int = 3,
    max_vocab: int | None = None,
    source: str = "",
) -> TextCorpus:
    """Splits tokenised ``(title, tokens)`` articles by article and encodes them with a training vocabulary.

    Raises:
        DataError: no article has any token, or fewer than three articles.
    """
    articles = [(title, tokens) for title, tokens in articles if tokens]
    if not articles:
        raise DataError("the corpus is empty: no article has any token")
    parts = split_articles([len(t) for _, t in articles], fractions, seed=seed)
    train_tokens = [tok for i in parts["train"] for tok in articles[i][1]]
    vocab = Vocabulary.from_tokens(train_tokens, min_count=min_count, max_size=max_vocab)
    splits = {name: vocab.encode([tok for i in idx for tok in articles[i][1]]) for name, idx in parts.items()}
    titles = {name: [articles[i][0] for i in idx] for name, idx in parts.items()}
    return TextCorpus(vocab, splits, titles, source)


def load_text_files(
    train: str | Path,
    valid: str | Path,
    test: str | Path,
    *,
    min_count: int = 1,
    max_vocab: int | None = None,
    encoding: str = "utf-8",
) -> TextCorpus:
    """A corpus from a user's own plain-text files, one per split (already split, as WikiText ships).

    Args:
        train, valid, test: UTF-8 text files; lines become sentences ending in ``<eos>``.
        min_count: rarer training words become ``<unk>``.
        max_vocab: cap on the vocabulary size.

    Raises:
        DataError: a file is missing, unreadable or has no token.

    Example:
        >>> import tempfile, os
        >>> d = tempfile.mkdtemp()
        >>> for n in ("train", "valid", "test"):
        ...     _ = open(os.path.join(d, n + ".txt"), "w").write("the cat sat\\non the mat\\n")
        >>> corpus = load_text_files(*(os.path.join(d, n + ".txt") for n in ("train", "valid", "test")))
        >>> corpus.splits["train"].size, len(corpus.vocab)
        (8, 7)
    """
    texts: dict[str, list[str]] = {}
    for name, path in (("train", train), ("valid", valid), ("test", test)):
        path = Path(path)
        try:
            tokens = tokenize_text(path.read_text(encoding=encoding))
        except OSError as exc:
            raise DataError(f"cannot read the {name} text file {str(path)!r}: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise DataError(f"the {name} text file {str(path)!r} is not valid {encoding}: {exc}") from exc
        if not tokens:
            raise DataError(f"the {name} text file {str(path)!r} is empty (no token)")
        texts[name] = tokens
    vocab = Vocabulary.from_tokens(texts["train"], min_count=min_count, max_size=max_vocab)
    return TextCorpus(
        vocab,
        {n: vocab.encode(t) for n, t in texts.items()},
        {n: [str(p)] for n, p in (("train", train), ("valid", valid), ("test", test))},
        source="text files",
    )
