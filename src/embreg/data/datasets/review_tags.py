"""``reviews-silver``: the clothing reviews' real text with span tags made by a fixed rule (not human labels).

No human-labelled sequence data (NER, chunking or POS corpora) is reachable from the package registries this
project uses, so the ``tagging`` task's default data is a clearly labelled substitute: the real sentences of the
``clothing-reviews`` dataset (:mod:`embreg.data.datasets.reviews`), tokenised by :func:`tokenize`, with *silver* BIO tags
from :func:`silver_tags`:

* ``SIZE``: a clothing size (``xs``, ``m``, ``xxl``, any case) or a petite size (``0p``, ``00p``);
* ``COLOR``: a colour word of :data:`COLOURS` (``navy blue`` is one span);
* ``NUM``: any other token holding a digit (``5``, ``34b``, ``100``).

A maximal run of tokens of one kind is one span (``B-`` then ``I-``).

A tagger learns these from word identity and context, so the recipe runs end to end on real text; its scores say
nothing about accuracy on human annotation. Use ``data.path`` for real CoNLL files.

Example:
    >>> tokens = tokenize("Love it. Bought the XS in navy blue for 50 dollars")
    >>> list(zip(tokens, silver_tags(tokens)))[4:]
    [('the', 'O'), ('XS', 'B-SIZE'), ('in', 'O'), ('navy', 'B-COLOR'), ('blue', 'I-COLOR'), ('for', 'O'), ('50', 'B-NUM'), ('dollars', 'O')]
"""

from __future__ import annotations

import re

from embreg.data.files.conll import TaggedSentence

__all__ = ["tokenize", "silver_tags", "load_review_sentences", "SILVER_DATASET", "COLOURS", "SIZES"]

SILVER_DATASET = "reviews-silver"
_TOKEN = re.compile(r"[A-Za-z]+(?:'[a-z]+)?|\d+[A-Za-z]*|[^\sA-Za-z\d]")
SIZES = frozenset({"xxs", "xs", "s", "m", "l", "xl", "xxl", "xxxl"})
COLOURS = frozenset(
    "black white red blue navy green grey gray pink beige ivory cream yellow orange purple brown olive teal coral "
    "burgundy tan maroon khaki mustard turquoise lavender".split()
)
_PETITE = re.compile(r"0*\d{0,2}p")


def tokenize(text: str) -> list[str]:
    """Words (with an apostrophe suffix), numbers (with letters after them: ``34b``) and single punctuation marks.

    Example:
        >>> tokenize("I'm 5'4\\", size 0p!")
        ["I'm", '5', "'", '4', '"', ',', 'size', '0p', '!']
    """
    return _TOKEN.findall(text)


def _kind(token: str) -> str:
    lower = token.lower()
    if lower in SIZES or _PETITE.fullmatch(lower):
        return "SIZE"
    if lower in COLOURS:
        return "COLOR"
    if any(c.isdigit() for c in token):
        return "NUM"
    return "O"


def silver_tags(tokens: list[str]) -> list[str]:
    """BIO tags of ``tokens`` by the module's rule (a run of one kind is one span)."""
    tags = []
    previous = "O"
    for i in range(len(tokens)):
        kind = _kind(tokens[i])
        if kind == "O":
            tags.append("O")
        else:
            tags.append(f"{'I' if kind == previous else 'B'}-{kind}")
        previous = kind
    return tags


def load_review_sentences(max_sentences: int | None = None) -> list[TaggedSentence]:
    """Every review text (title and body, :func:`embreg.data.datasets.reviews.read_reviews`) as one silver-tagged sentence,
    in the table's order; the first ``max_sentences`` when given. Reads the cached ``clothing-reviews`` dataset."""
    from embreg.data.datasets.reviews import read_reviews

    texts = read_reviews()["text"].tolist()
    if max_sentences is not None:
        texts = texts[:max_sentences]
    sentences = []
    for row, text in enumerate(texts):
        tokens = tokenize(str(text))
        if tokens:
            sentences.append(TaggedSentence(tokens, silver_tags(tokens), f"{SILVER_DATASET} review {row}"))
    return sentences
