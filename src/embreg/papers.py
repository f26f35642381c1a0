"""The five papers embreg implements, in one place: their short keys, titles, authors and years.

The key of a paper is the short file name the project cites it by (``sse-stochastic-shared-embeddings.txt``): a
registry entry's ``reference``, a study file's ``paper:`` and the results hub all use it. ``docs/papers.md`` lists
the same papers for readers, with what embreg implements from each and where; a test keeps the two in step.

Example:
    >>> from embreg.papers import PAPERS, paper
    >>> [p.key for p in PAPERS][0]
    'sse-stochastic-shared-embeddings.txt'
    >>> paper("mixed-dimension-embeddings.txt").year
    2019
"""

from __future__ import annotations

from dataclasses import dataclass

from embreg.errors import ConfigError

__all__ = ["Paper", "PAPERS", "PAPER_KEYS", "paper", "cited_paper"]


@dataclass(frozen=True)
class Paper:
    """One paper: its citation key (a short file name), the hub's section title and the full citation."""

    key: str
    short: str
    title: str
    authors: str
    year: int
    venue: str

    def citation(self) -> str:
        """``Authors (year). Title. Venue.``"""
        return f"{self.authors} ({self.year}). {self.title}. {self.venue}."


PAPERS: tuple[Paper, ...] = (
    Paper(
        "sse-stochastic-shared-embeddings.txt",
        "Stochastic shared embeddings (SSE)",
        "Stochastic Shared Embeddings: Data-driven Regularization of Embedding Layers",
        "Liwei Wu, Shuqing Li, Cho-Jui Hsieh, James Sharpnack",
        2019,
        "NeurIPS 2019",
    ),
    Paper(
        "mixed-dimension-embeddings.txt",
        "Mixed-dimension embeddings",
        "Mixed Dimension Embeddings with Application to Memory-Efficient Recommendation Systems",
        "Antonio Ginart, Maxim Naumov, Dheevatsa Mudigere, Jiyan Yang, James Zou",
        2019,
        "arXiv:1909.11810 (ISIT 2021)",
    ),
    Paper(
        "dropout-explicit-implicit-regularization.txt",
        "Dropout: explicit and implicit regularisation",
        "The Implicit and Explicit Regularization Effects of Dropout",
        "Colin Wei, Sham Kakade, Tengyu Ma",
        2020,
        "ICML 2020",
    ),
    Paper(
        "lnsr-noise-stability-bert.txt",
        "Layerwise noise stability regularisation (fine-tuning BERT)",
        "Noise Stability Regularization for Improving BERT Fine-tuning",
        "Hang Hua, Xingjian Li, Dejing Dou, Chengzhong Xu, Jiebo Luo",
        2021,
        "NAACL 2021",
    ),
    Paper(
        "nlp-best-practices.txt",
        "NLP best practices",
        "Deep Learning for NLP Best Practices",
        "Sebastian Ruder",
        2017,
        "blog post, ruder.io",
    ),
)
"""The papers in the hub's order (recommenders first, then the NLP ones)."""

PAPER_KEYS: tuple[str, ...] = tuple(p.key for p in PAPERS)


def paper(key: str) -> Paper:
    """The paper whose key is ``key``.

    Raises:
        ConfigError: ``key`` is not one of :data:`PAPER_KEYS` (the message lists them).
    """
    for p in PAPERS:
        if p.key == key:
            return p
    raise ConfigError(f"unknown paper {key!r}; the papers are {', '.join(PAPER_KEYS)} (docs/papers.md)")


def cited_paper(reference: str) -> Paper | None:
    """The paper a ``reference`` string cites (``"sse-stochastic-shared-embeddings.txt, eq. 5"``), or ``None``."""
    return next((p for p in PAPERS if p.key in reference), None)
