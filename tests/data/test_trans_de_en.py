"""The German-English pairs: a Debian package read without dpkg, the dictionary converted by its documented rules,
a user's pairs file read with errors naming file and line, and the split by distinct source sentence."""

from __future__ import annotations

import hashlib
import io
import lzma
import tarfile
from pathlib import Path

import pytest

from embreg.data.datasets.trans_de_en import (
    TRANS_DE_EN_FILE,
    TRANS_DE_EN_MEMBER,
    convert_trans_de_en,
    dictionary_pairs,
    trans_de_en_spec,
)
from embreg.data.debian import DebianPackageSource, ar_members, read_deb_member
from embreg.data.registry import DatasetFile, DatasetPart, DatasetRegistry, DatasetSpec
from embreg.errors import DataError
from embreg.tasks.translation.parallel import read_pairs, split_by_source, train_bpe

DICTIONARY = """# Version :: devel
# License :: GPL
Aal {m} [cook.] | Aale {pl} :: eel | eels
Sonnenbrille {f}; Augenbeschattung {f} [humor.] :: sunglasses; shades [coll.]
Haus {n} | Häuser {pl} | zu Hause :: house | houses
Aal {m} [zool.] :: eel
der Hund bellt :: the dog barks
"""


def _ar(members: dict[str, bytes]) -> bytes:
    out = b"!<arch>\n"
    for name, body in members.items():
        header = name.encode().ljust(16) + b"0".ljust(12) + b"0".ljust(6) * 2 + b"100644".ljust(8)
        out += header + str(len(body)).encode().ljust(10) + b"`\n" + body + (b"\n" if len(body) % 2 else b"")
    return out


def fake_deb(text: str) -> bytes:
    """A ``.deb`` whose data.tar.xz holds ``./usr/share/trans/de-en`` with ``text``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = text.encode("utf-8")
        info = tarfile.TarInfo("./" + TRANS_DE_EN_MEMBER)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return _ar(
        {
            "debian-binary": b"2.0\n",
            "control.tar.xz": lzma.compress(b""),
            "data.tar.xz": lzma.compress(buffer.getvalue()),
        }
    )


def test_the_dictionary_rules_split_alternatives_strip_annotations_and_drop_repeats() -> None:
    pairs, counts = dictionary_pairs(DICTIONARY.splitlines())
    assert pairs == [
        ("Aal", "eel"),
        ("Aale", "eels"),
        ("Sonnenbrille", "sunglasses"),
        ("der Hund bellt", "the dog barks"),
    ]  # "Haus | Häuser | zu Hause :: house | houses" has unaligned alternatives: skipped
    assert counts == {
        "lines": 7,
        "entries": 5,
        "unaligned": 1,
        "alternatives": 5,
        "outside_length": 0,
        "duplicates": 1,
        "pairs": 4,
    }


def test_a_debian_package_is_read_with_the_standard_library_and_fetched_through_the_registry(home: Path) -> None:
    package = fake_deb(DICTIONARY)
    assert sorted(ar_members(package)) == ["control.tar.xz", "data.tar.xz", "debian-binary"]
    assert read_deb_member(package, TRANS_DE_EN_MEMBER).decode() == DICTIONARY
    with pytest.raises(DataError, match="has no file 'usr/share/other'"):
        read_deb_member(package, "usr/share/other")
    with pytest.raises(DataError, match="not an ar archive"):
        ar_members(b"PK\x03\x04")
    # a hand-placed package with the right sha256 is used without the network
    name = "trans-de-en_test_all.deb"
    (home / "downloads").mkdir(parents=True)
    (home / "downloads" / name).write_bytes(package)
    digest = hashlib.sha256(package).hexdigest()
    source = DebianPackageSource(
        f"http://127.0.0.1:9/{name}", digest, TRANS_DE_EN_MEMBER, converter=convert_trans_de_en
    )
    registry = DatasetRegistry()
    registry.register(
        DatasetSpec("toy-de-en", "toy", (DatasetPart("pairs", (DatasetFile(TRANS_DE_EN_FILE, "0" * 64),), (source,)),))
    )
    directory = registry.fetch("toy-de-en", progress=False)
    assert read_pairs(directory / TRANS_DE_EN_FILE)[-1] == ("der Hund bellt", "the dog barks")
    (home / "downloads" / name).write_bytes(package + b"x")  # a copy with another checksum is refused
    with pytest.raises(DataError, match="sha256"):
        source.provide([TRANS_DE_EN_FILE], home, scratch=home, progress=False)


def test_the_registry_names_the_debian_package_by_url_and_checksum() -> None:
    source = trans_de_en_spec().parts[0].sources[0]
    assert source.url.endswith("trans-de-en_1.9-6_all.deb")
    assert source.sha256 == "45f6b4cf1c434776fba6811d7bc522efabb5425c43ba8afd0e289bf9e2e53df4"


def test_a_malformed_line_of_a_pairs_file_is_refused_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text("source\ttarget\nein Haus\ta house\nkaputt ohne Tab\nzwei\ttwo\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"{path}:3: 1 tab-separated column\(s\), the header has 2"):
        read_pairs(path)
    path.write_text("de\ten\nein Haus\t\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"{path}:1: the header has no column 'source'"):
        read_pairs(path)
    with pytest.raises(DataError, match=rf"{path}:2: empty 'en' column"):
        read_pairs(path, "de", "en")
    path.write_bytes(b"source\ttarget\n\xff\tx\n")
    with pytest.raises(DataError, match=rf"{path}: not UTF-8"):
        read_pairs(path)


def test_splits_hold_distinct_sources_and_bpe_learns_on_the_training_split_only() -> None:
    pairs = [(f"quelle {i % 50}", f"ziel {i}") for i in range(200)]
    split = split_by_source(pairs, (0.6, 0.2, 0.2), seed=3)
    sources = {name: {s for s, _ in rows} for name, rows in split.items()}
    assert not sources["train"] & sources["test"] and not sources["train"] & sources["valid"]
    assert sum(len(rows) for rows in split.values()) == 200
    assert split == split_by_source(pairs, (0.6, 0.2, 0.2), seed=3)
    tokenizer = train_bpe(["nur training"] * 5, vocab_size=30)
    assert tokenizer.token_to_id("<pad>") == 0 and tokenizer.token_to_id("<unk>") == 3
    assert tokenizer.encode("xyz").ids[1:] == [3, 3, 3]  # characters unseen in training are unknown
