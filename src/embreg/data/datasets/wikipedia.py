"""The English Wikipedia extract shipped in gensim's test data, as a language-modelling corpus.

The ``enwiki-gensim`` dataset is the file ``enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2``
from ``gensim==4.4.0`` (``gensim/test/test_data/``): a shortened 2016 dump of 206 pages. Reading it keeps articles
(namespace 0, not redirects), removes wiki markup with gensim's own ``filter_wiki`` (a maintained library function,
not a parser of ours), drops section-heading markup, tokenises the text (:func:`tokenize_text`) and splits it by
article. About 107 articles and 0.55M tokens remain.
"""

from __future__ import annotations

import bz2
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from embreg.data.registry import fetch
from embreg.data.text_corpus import TextCorpus, build_corpus, tokenize_text
from embreg.errors import DataError

ENWIKI_NAME = "enwiki-gensim"
ENWIKI_FILE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
_HEADING = re.compile(r"^\s*=+\s*(.*?)\s*=+\s*$", re.MULTILINE)
_EMPHASIS = re.compile(r"'{2,}")  # ''italic'' and '''bold''' quotes, which filter_wiki keeps


def _filter_wiki():
    try:
        from gensim.corpora.wikicorpus import extract_pages, filter_wiki
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise DataError("cleaning Wikipedia markup needs gensim (pip install 'gensim>=4.3')") from exc
    return extract_pages, filter_wiki


def clean_wiki_markup(raw: str) -> str:
    """Plain text of one article's wikitext: gensim's ``filter_wiki``, then heading markers and emphasis quotes removed.

    Example:
        >>> clean_wiki_markup("'''Bold''' [[link|text]] {{cite}}\\n==Head==")
        'Bold text \\nHead'
    """
    _, filter_wiki = _filter_wiki()
    return _EMPHASIS.sub("", _HEADING.sub(r"\1", filter_wiki(raw)))


def read_wiki_dump(path: str | Path, *, limit: int | None = None) -> list[tuple[str, list[str]]]:
    """``(title, tokens)`` of every article of a MediaWiki XML dump (``.bz2`` or plain).

    Args:
        path: the dump file.
        limit: keep only the first ``limit`` articles (quick slices).

    Raises:
        DataError: the file holds no article with text.
    """
    extract_pages, _ = _filter_wiki()
    path = Path(path)
    opener = bz2.open if path.suffix == ".bz2" else open
    articles: list[tuple[str, list[str]]] = []
    with opener(path, "rb") as handle:
        for title, text, _pageid in extract_pages(handle, filter_namespaces=("0",)):
            if not text or text.lstrip().lower().startswith("#redirect"):
                continue
            tokens = tokenize_text(clean_wiki_markup(text))
            if tokens:
                articles.append((title, tokens))
            if limit is not None and len(articles) >= limit:
                break
    if not articles:
        raise DataError(f"{path} holds no article with text (the corpus would be empty)")
    return articles


@lru_cache(maxsize=4)
def _cached_articles(path: str, limit: int | None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple((title, tuple(tokens)) for title, tokens in read_wiki_dump(path, limit=limit))


def load_enwiki(
    *,
    fractions: Sequence[float] = (0.8, 0.1, 0.1),
    seed: int = 0,
    min_count: int = 3,
    max_vocab: int | None = None,
    max_articles: int | None = None,
) -> TextCorpus:
    """The ``enwiki-gensim`` corpus (fetched on first use), split by article and encoded.

    Args:
        fractions: token shares of train/valid/test.
        seed: split seed.
        min_count: words seen fewer times in training become ``<unk>`` (WikiText uses 3).
        max_vocab: optional cap on the vocabulary size.
        max_articles: use only the first articles of the dump (quick slices for tests).

    Example:
        >>> corpus = load_enwiki()  # doctest: +SKIP
        >>> corpus.summary()["train"]["articles"]  # doctest: +SKIP
        85
    """
    path = fetch(ENWIKI_NAME, progress=False) / ENWIKI_FILE
    articles = [(t, list(tokens)) for t, tokens in _cached_articles(str(path), max_articles)]
    return build_corpus(
        articles,
        fractions=fractions,
        seed=seed,
        min_count=min_count,
        max_vocab=max_vocab,
        source=f"{ENWIKI_NAME} ({ENWIKI_FILE})",
    )
