"""Convert the official GroupLens ``ml-100k.zip`` into RecBole's atomic files.

GroupLens ships ``u.data`` (tab-separated ratings), ``u.item`` and ``u.user``
(``|``-separated, Latin-1). The canonical layout of embreg's ``ml-100k`` dataset
is RecBole's (``ml-100k.inter``, ``.item``, ``.user``: tab-separated with typed
headers). The conversion keeps every rating, user and item in file order:

- ``.inter``: ``user_id:token item_id:token rating:float timestamp:float`` from ``u.data``.
- ``.item``: ``item_id:token movie_title:token_seq release_year:token class:token_seq``;
  the title loses its trailing ``" (YYYY)"``, the year comes from the release
  date (else from the title), and ``class`` lists the genre names in
  ``u.genre`` order, separated by spaces.
- ``.user``: ``user_id age gender occupation zip_code`` from ``u.user``.

The output is not byte-identical to RecBole's copy (which, for example, spells
the placeholder title of item 267 ``unkonwn``), so its integrity rests on the
archive's sha256, checked before conversion.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

from embreg.errors import DataError

GENRES_100K = (
    "unknown",
    "Action",
    "Adventure",
    "Animation",
    "Children's",
    "Comedy",
    "Crime",
    "Documentary",
    "Drama",
    "Fantasy",
    "Film-Noir",
    "Horror",
    "Musical",
    "Mystery",
    "Romance",
    "Sci-Fi",
    "Thriller",
    "War",
    "Western",
)
"""Genre flag order of ``u.item`` (as listed in ``u.genre``)."""

_TITLE_YEAR = re.compile(r"\s*\((\d{4})\)\s*$")
_DATE_YEAR = re.compile(r"(\d{4})\s*$")
_PREFIX = "ml-100k/"


def _lines(archive: zipfile.ZipFile, member: str, encoding: str) -> list[str]:
    try:
        raw = archive.read(_PREFIX + member)
    except KeyError as exc:
        raise DataError(f"archive {archive.filename} lacks member {_PREFIX + member}") from exc
    return [line for line in io.StringIO(raw.decode(encoding)).read().splitlines() if line.strip()]


def _fields(line: str, sep: str, count: int, member: str, number: int) -> list[str]:
    fields = line.split(sep)
    if len(fields) != count:
        raise DataError(f"{member} line {number}: expected {count} fields separated by {sep!r}, found {len(fields)}")
    return fields


def _item_row(fields: list[str], number: int) -> str:
    item_id, raw_title, release_date = fields[0], fields[1], fields[2]
    title_year = _TITLE_YEAR.search(raw_title)
    title = _TITLE_YEAR.sub("", raw_title).strip()
    date_year = _DATE_YEAR.search(release_date)
    year = date_year.group(1) if date_year else (title_year.group(1) if title_year else "")
    flags = fields[5:]
    if any(flag not in ("0", "1") for flag in flags):
        raise DataError(f"u.item line {number}: genre flags must be 0 or 1, found {flags}")
    genres = " ".join(name for name, flag in zip(GENRES_100K, flags) if flag == "1")
    return "\t".join((item_id, title, year, genres))


def convert_grouplens_ml100k(archive: zipfile.ZipFile, dest: Path) -> None:
    """Write ``ml-100k.inter``, ``ml-100k.item`` and ``ml-100k.user`` into ``dest`` from the GroupLens zip.

    Args:
        archive: the opened ``ml-100k.zip`` (members under ``ml-100k/``).
        dest: existing directory to write the three files into (UTF-8, ``\\n`` line ends).

    Example:
        >>> with zipfile.ZipFile("ml-100k.zip") as zf:  # doctest: +SKIP
        ...     convert_grouplens_ml100k(zf, Path("out"))
    """
    inter = ["user_id:token\titem_id:token\trating:float\ttimestamp:float"]
    for number, line in enumerate(_lines(archive, "u.data", "latin-1"), 1):
        inter.append("\t".join(_fields(line.strip(), "\t", 4, "u.data", number)))

    items = ["item_id:token\tmovie_title:token_seq\trelease_year:token\tclass:token_seq"]
    for number, line in enumerate(_lines(archive, "u.item", "latin-1"), 1):
        items.append(_item_row(_fields(line, "|", 5 + len(GENRES_100K), "u.item", number), number))

    users = ["user_id:token\tage:token\tgender:token\toccupation:token\tzip_code:token"]
    for number, line in enumerate(_lines(archive, "u.user", "latin-1"), 1):
        users.append("\t".join(_fields(line, "|", 5, "u.user", number)))

    for name, rows in (("ml-100k.inter", inter), ("ml-100k.item", items), ("ml-100k.user", users)):
        (dest / name).write_text("\n".join(rows) + "\n", encoding="utf-8")
