"""German-English pairs from the TU Chemnitz dictionary in the Debian package ``trans-de-en`` (1.9-6).

The package installs ``usr/share/trans/de-en``: one entry per line, ``German :: English``, with ``|`` between
aligned alternatives (a word, its plural, phrases using it; the k-th German alternative translates the k-th
English one), ``;`` between synonyms, ``{...}`` grammatical annotations (``{m}``, ``{pl}``, ``{vt}``) and
``[...]`` usage labels (``[ugs.]``, ``[med.]``, ``[Br.]``). :func:`dictionary_pairs` turns it into pairs:

1. comment lines (``#``) and lines without exactly one `` :: `` are skipped;
2. both sides are split on ``|``; an entry whose sides have different numbers of alternatives is skipped;
3. each alternative is split on ``;`` and its *first* synonym on each side is kept (synonyms are not aligned
   across the two sides, so pairing them all would invent translations);
4. ``{...}`` and ``[...]`` annotations are removed and white space collapsed (parentheses stay: they hold words);
5. pairs with a side of fewer than :data:`MIN_WORDS` or more than :data:`MAX_WORDS` words are dropped, and
   repeated pairs are kept once (first occurrence).

On the 1.9-6 package (206,238 lines) this yields the counts in :data:`TRANS_DE_EN_COUNTS`. The canonical file is
``de-en.tsv``: a ``source<TAB>target`` header, then one pair per line (German source, English target), in the
dictionary's order.

Example:
    >>> pairs, counts = dictionary_pairs(["Aal {m} [cook.] | Aale {pl} :: eel | eels", "# comment"])
    >>> pairs, counts["pairs"]
    ([('Aal', 'eel'), ('Aale', 'eels')], 2)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from embreg.data.debian import DebianPackageSource
from embreg.data.specs import DatasetFile, DatasetPart, DatasetSpec

__all__ = [
    "TRANS_DE_EN_URL",
    "TRANS_DE_EN_SHA256",
    "TRANS_DE_EN_MEMBER",
    "TRANS_DE_EN_FILE",
    "TRANS_DE_EN_COUNTS",
    "TRANS_DE_EN_TSV_SHA256",
    "trans_de_en_spec",
    "MIN_WORDS",
    "MAX_WORDS",
    "clean_phrase",
    "dictionary_pairs",
    "convert_trans_de_en",
]

TRANS_DE_EN_URL = "http://deb.debian.org/debian/pool/main/d/ding/trans-de-en_1.9-6_all.deb"
TRANS_DE_EN_SHA256 = "45f6b4cf1c434776fba6811d7bc522efabb5425c43ba8afd0e289bf9e2e53df4"
TRANS_DE_EN_MEMBER = "usr/share/trans/de-en"
TRANS_DE_EN_FILE = "de-en.tsv"
MIN_WORDS = 1
MAX_WORDS = 40
"""Pairs keep sides of ``MIN_WORDS`` to ``MAX_WORDS`` white-space words."""

TRANS_DE_EN_COUNTS = {
    "lines": 206238,
    "entries": 206233,
    "unaligned": 0,
    "alternatives": 391763,
    "outside_length": 37,
    "duplicates": 2234,
    "pairs": 389492,
}
"""What :func:`dictionary_pairs` reports on the 1.9-6 package: 389,492 pairs over 337,132 distinct German sources
(64% of the sources are one word, 13% two, 21% three or more)."""
TRANS_DE_EN_TSV_SHA256 = "34c08d51f8ef65baba51e1c285dff8897ba38985a52c10168441bfb9d619883f"
"""sha256 of the converted ``de-en.tsv``."""

_ANNOTATION = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]")
_SPACE = re.compile(r"\s+")


def clean_phrase(text: str) -> str:
    """``text`` without ``{...}`` and ``[...]`` annotations, white space (tabs included) collapsed.

    Example:
        >>> clean_phrase("Sonnenbrille {f}  [humor.] ")
        'Sonnenbrille'
    """
    return _SPACE.sub(" ", _ANNOTATION.sub(" ", text)).strip()


def dictionary_pairs(lines: Iterable[str]) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """``(pairs, counts)`` from the dictionary's lines by the rules of the module docstring.

    ``counts``: ``lines`` read, ``entries`` (lines with one `` :: ``), ``unaligned`` (entries skipped for unequal
    alternatives), ``alternatives`` (aligned alternatives seen), ``outside_length`` (dropped by length, or empty
    after cleaning), ``duplicates`` (repeated pairs dropped) and ``pairs`` kept.
    """
    counts = dict.fromkeys(TRANS_DE_EN_COUNTS, 0)
    seen: set[tuple[str, str]] = set()
    pairs: list[tuple[str, str]] = []
    for line in lines:
        counts["lines"] += 1
        line = line.strip()
        if not line or line.startswith("#") or line.count(" :: ") != 1:
            continue
        counts["entries"] += 1
        german, english = line.split(" :: ")
        left, right = german.split("|"), english.split("|")
        if len(left) != len(right):
            counts["unaligned"] += 1
            continue
        for de, en in zip(left, right):
            counts["alternatives"] += 1
            pair = (clean_phrase(de.split(";")[0]), clean_phrase(en.split(";")[0]))
            if not all(MIN_WORDS <= len(side.split()) <= MAX_WORDS for side in pair):
                counts["outside_length"] += 1
                continue
            if pair in seen:
                counts["duplicates"] += 1
                continue
            seen.add(pair)
            pairs.append(pair)
    counts["pairs"] = len(pairs)
    return pairs, counts


def convert_trans_de_en(raw: bytes, dest: Path) -> None:
    """Writes ``dest/de-en.tsv`` from the bytes of ``usr/share/trans/de-en`` (UTF-8)."""
    pairs, _ = dictionary_pairs(raw.decode("utf-8").splitlines())
    with open(dest / TRANS_DE_EN_FILE, "w", encoding="utf-8", newline="\n") as out:
        out.write("source\ttarget\n")
        for source, target in pairs:
            out.write(f"{source}\t{target}\n")


def trans_de_en_spec() -> DatasetSpec:
    """``trans-de-en``: the dictionary's German-English pairs, converted from the Debian package (checked by its
    sha256; a hand-placed copy in ``$EMBREG_HOME/downloads/`` is used first)."""
    source = DebianPackageSource(TRANS_DE_EN_URL, TRANS_DE_EN_SHA256, TRANS_DE_EN_MEMBER, converter=convert_trans_de_en)
    part = DatasetPart("pairs", (DatasetFile(TRANS_DE_EN_FILE, TRANS_DE_EN_TSV_SHA256),), (source,))
    return DatasetSpec(
        "trans-de-en",
        "German-English dictionary pairs (TU Chemnitz, Debian trans-de-en 1.9-6): 389,492 pairs, 337,132 sources",
        (part,),
    )
