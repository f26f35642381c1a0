"""Small own files of every family, as a newcomer brings them: a few hundred rows, a catalogue of 30 items."""

from __future__ import annotations

import random
from pathlib import Path

__all__ = ["SMALL_FILES", "small_file_overrides"]

_WORDS = "the cat sat on a mat dog ran far away big small red blue green house tree car road sun moon star".split()


def _sentence(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(low, high)))


def _interactions(path: Path, rows: int, rng: random.Random, timed: bool) -> None:
    pairs: set[tuple[int, int]] = set()
    while len(pairs) < rows:
        pairs.add((rng.randrange(max(5, rows // 8)), rng.randrange(30)))  # a 30-item catalogue
    header = "user_id,item_id,rating" + (",ts" if timed else "")
    lines = [f"{u},{i},{rng.randint(1, 5)}" + (f",{k}" if timed else "") for k, (u, i) in enumerate(sorted(pairs))]
    path.write_text("\n".join([header, *lines]) + "\n")


def _conll(path: Path, sentences: int, rng: random.Random) -> None:
    lines = []
    for _ in range(sentences):
        previous = "O"
        for _ in range(rng.randint(3, 8)):
            tag = rng.choice(["O", "O", "B-X"] if previous == "O" else ["O", "I-X", "B-X"])
            lines.append(f"{rng.choice(_WORDS)} {tag}")
            previous = tag
        lines.append("")
    path.write_text("\n".join(lines) + "\n")


def small_file_overrides(family: str, folder: Path, rows: int = 300, seed: int = 0) -> list[str]:
    """Writes the family's small file(s) into ``folder`` and returns the ``--set`` values that name them: what a
    newcomer adds to a shipped recipe (``data.path`` and the columns it needs), nothing else."""
    rng = random.Random(seed)
    if family in ("rating", "ranking"):
        _interactions(folder / "ratings.csv", rows, rng, timed=False)
        return [f"data.path={folder / 'ratings.csv'}"]
    if family == "next-item":
        _interactions(folder / "timed.csv", rows, rng, timed=True)
        return [f"data.path={folder / 'timed.csv'}", "data.timestamp_col=ts"]
    if family == "ctr":
        lines = [f"{k % 2},{rng.choice('abcde')},{rng.choice('xyz')},{rng.random():.3f}" for k in range(rows)]
        (folder / "clicks.csv").write_text("\n".join(["label,site,device,price", *lines]) + "\n")
        return [f"data.path={folder / 'clicks.csv'}", "data.dense_cols=[price]"]
    if family == "lm":
        names = []
        for name, count in (("train", rows), ("valid", rows // 8), ("test", rows // 8)):
            (folder / f"{name}.txt").write_text("".join(_sentence(rng, 4, 12) + "\n" for _ in range(count)))
            names.append(str(folder / f"{name}.txt"))
        return [f"data.paths=[{', '.join(names)}]"]
    if family == "classification":
        lines = [f"{_sentence(rng, 3, 10)},{('pos', 'neg')[k % 2]}" for k in range(rows)]
        (folder / "labelled.csv").write_text("\n".join(["text,label", *lines]) + "\n")
        return [f"data.path={folder / 'labelled.csv'}"]
    if family == "translation":
        lines = [f"{_sentence(rng, 1, 6)}\t{_sentence(rng, 1, 6)}" for _ in range(rows)]
        (folder / "pairs.tsv").write_text("\n".join(["source\ttarget", *lines]) + "\n")
        return [f"data.path={folder / 'pairs.tsv'}"]
    if family == "mlm":
        (folder / "texts.txt").write_text("".join(_sentence(rng, 4, 15) + "\n" for _ in range(rows)))
        return [f"data.path={folder / 'texts.txt'}"]
    if family == "tagging":
        _conll(folder / "tags.conll", rows // 3, rng)
        return [f"data.path={folder / 'tags.conll'}"]
    raise ValueError(f"no small file for family {family!r}")


SMALL_FILES = {
    "rating": "mf",
    "ranking": "bpr",
    "next-item": "sasrec",
    "ctr": "ctr-adult",
    "lm": "lm-none",
    "classification": "ft-reviews",
    "translation": "translation",
    "mlm": "mlm",
    "tagging": "tagging-bilstm-crf",
}
"""The first shipped recipe of each family a newcomer would try on their own file."""
