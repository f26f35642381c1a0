"""Datasets, readers, splits, side-information graphs and negative sampling.

A named dataset is fetched once into ``$EMBREG_HOME/datasets/<name>`` and verified
by sha256; after that it never touches the network::

    from embreg.data import load_ml100k, per_user_split, item_graph_from_kg, NegativeSampler

    ml = load_ml100k()                                   # fetch("ml-100k") on first use
    split = per_user_split(ml.ratings.users, seed=0)     # {"train", "valid", "test"} -> indices
    edges = item_graph_from_kg(ml)                       # (E, 2) item pairs sharing cast or crew
    train = ml.ratings.subset(split["train"])
    sampler = NegativeSampler(train.users, train.items, ml.num_items)

Your own interactions: ``load_ratings_file("ratings.csv", user="uid", item="iid", rating="stars")``.

Text for language models: ``load_enwiki()`` (the ``enwiki-gensim`` Wikipedia extract, split by article) or
``load_text_files(train, valid, test)`` for your own plain-text files.

Your own labelled texts for fine-tuning: ``load_text_file("reviews.csv", text_col="body", label_col="stars")``.
"""

from embreg.data.cache import embreg_home
from embreg.data.ctr import CTRData
from embreg.data.datasets import catalog as _catalog  # noqa: F401  (registers the built-in datasets)
from embreg.data.datasets.adult import load_adult
from embreg.data.datasets.movielens import MovieLens100k, load_ml100k
from embreg.data.datasets.movielens_ctr import load_ml100k_ctr
from embreg.data.datasets.polarity import load_polarity
from embreg.data.datasets.reviews import load_reviews
from embreg.data.datasets.synthetic_ctr import synthetic_ctr
from embreg.data.datasets.wikipedia import load_enwiki, read_wiki_dump
from embreg.data.files.ctr_file import load_ctr_file
from embreg.data.files.ratings_file import load_ratings_file
from embreg.data.files.text_file import load_text_file
from embreg.data.graphs import (
    DEFAULT_KG_RELATIONS,
    GraphSummary,
    cooccurrence_edges,
    graph_summary,
    item_graph_from_genres,
    item_graph_from_kg,
    user_graph_from_attributes,
)
from embreg.data.labelled_text import TextTask, few_sample_split
from embreg.data.ratings import RatingsData, encode_labels
from embreg.data.registry import (
    DEFAULT_REGISTRY,
    DatasetFile,
    DatasetInfo,
    DatasetPart,
    DatasetRegistry,
    DatasetSpec,
    dataset_dir,
    fetch,
    list_datasets,
    register_dataset,
)
from embreg.data.samplers import NegativeSampler
from embreg.data.sequences import SequenceSplit, leave_one_out, left_pad, sampled_negatives
from embreg.data.sources import PyPIWheelSource, Source, UrlArchiveSource
from embreg.data.splits import load_split, min_split_rows, per_user_split, random_split, save_split
from embreg.data.text_corpus import TextCorpus, build_corpus, load_text_files, split_articles, tokenize_text
from embreg.data.text_sources import PinnedWheelSource
from embreg.data.text_vocab import Vocabulary

__all__ = [
    "TextTask",
    "SequenceSplit",
    "leave_one_out",
    "left_pad",
    "sampled_negatives",
    "few_sample_split",
    "load_polarity",
    "load_reviews",
    "CTRData",
    "load_adult",
    "load_ctr_file",
    "load_ml100k_ctr",
    "synthetic_ctr",
    "DEFAULT_KG_RELATIONS",
    "DEFAULT_REGISTRY",
    "DatasetFile",
    "DatasetInfo",
    "DatasetPart",
    "DatasetRegistry",
    "DatasetSpec",
    "GraphSummary",
    "MovieLens100k",
    "NegativeSampler",
    "PinnedWheelSource",
    "PyPIWheelSource",
    "RatingsData",
    "Source",
    "TextCorpus",
    "UrlArchiveSource",
    "Vocabulary",
    "build_corpus",
    "cooccurrence_edges",
    "dataset_dir",
    "embreg_home",
    "encode_labels",
    "fetch",
    "graph_summary",
    "item_graph_from_genres",
    "item_graph_from_kg",
    "list_datasets",
    "load_enwiki",
    "load_ml100k",
    "load_ratings_file",
    "load_split",
    "min_split_rows",
    "load_text_file",
    "load_text_files",
    "per_user_split",
    "random_split",
    "read_wiki_dump",
    "register_dataset",
    "save_split",
    "split_articles",
    "tokenize_text",
    "user_graph_from_attributes",
]
