"""The id vocabularies of a task's prepared data: which original id each index of the model stands for.

=================  ==================================================================
task               vocabularies
=================  ==================================================================
rating, ranking    ``user``, ``item`` (the labels of the ratings file / ML-100k ids)
next-item          ``user``, ``item`` (the same, before users with short histories are dropped)
lm                 ``token`` (the words of the training vocabulary, ``<unk>`` first)
classification     ``label`` (the class names)
ctr                one per categorical field, by its column name (click files only: the registry
                   tables do not keep their values by name)
regression         none
tagging            ``token`` (the training vocabulary: ``<pad>``, ``<unk>``, then the tokens, most frequent
                   first) and ``tag`` (the tag names in the order of the CRF's tag ids)
=================  ==================================================================

Example:
    >>> from embreg.recipes import load_recipe
    >>> recipe = load_recipe("mf", ["data.max_rows=100"])
    >>> vocab = task_vocabularies(recipe, recipe.adapter.prepare(recipe))
    >>> vocab["user"].kind, len(vocab["item"]) > 0
    ('user', True)
"""

from __future__ import annotations

from typing import Any

from embreg.serving.vocabulary import IdVocabulary

__all__ = ["task_vocabularies"]


def task_vocabularies(recipe: Any, prepared: Any) -> dict[str, IdVocabulary]:
    """``{kind: IdVocabulary}`` of ``prepared`` (the data ``recipe.adapter.prepare(recipe)`` gave)."""
    task = recipe.task
    if task in ("rating", "ranking"):
        ratings = prepared.ratings
        return {"user": IdVocabulary("user", ratings.user_ids), "item": IdVocabulary("item", ratings.item_ids)}
    if task == "next-item":
        ratings = _interactions(recipe, prepared)
        return {"user": IdVocabulary("user", ratings.user_ids), "item": IdVocabulary("item", ratings.item_ids)}
    if task == "lm":
        return {"token": IdVocabulary("token", list(prepared.vocab.words))}
    if task == "ctr" and recipe.data.path is not None:
        return _click_fields(recipe.data)
    if task == "classification" and getattr(prepared.task, "targets", None) is not None:  # multi-task: per target
        return {
            f"label_{name}": IdVocabulary(f"label_{name}", list(prepared.task.class_names(k)))
            for k, (name, _) in enumerate(prepared.task.targets)
        }
    if task == "tagging":
        corpus = prepared.corpus
        return {"token": IdVocabulary("token", list(corpus.vocab)), "tag": IdVocabulary("tag", list(corpus.tags))}
    if task == "classification":
        names = prepared.task.label_names or tuple(str(i) for i in range(prepared.task.num_labels))
        return {"label": IdVocabulary("label", list(names))}
    return {}


def _click_fields(data: Any) -> dict[str, IdVocabulary]:
    """The categorical fields of a click file, their values numbered as :func:`embreg.data.load_ctr_file` numbers
    them (sorted stripped text over the whole file, a missing value being ``""``)."""
    from pathlib import Path

    from embreg.data.ctr import encode_field
    from embreg.data.files.ctr_file import _categories, _header, _read
    from embreg.data.files.tables import resolve_column

    file = Path(data.path)
    header, sep = _header(file, data.sep)
    label = resolve_column(data.label_col, header, "label", file)
    dense = [resolve_column(name, header, "dense feature", file) for name in data.dense_cols]
    if data.categorical_cols is None:
        fields = [name for name in header if name not in {label, *dense}]
    else:
        fields = [resolve_column(name, header, "categorical field", file) for name in data.categorical_cols]
    table = _read(file, [(name, "categorical field") for name in fields], sep)
    return {name: IdVocabulary(name, encode_field(_categories(table, name))[1]) for name in fields}


def _interactions(recipe: Any, prepared: Any) -> Any:
    """The interactions a next-item split was made from (ML-100k's are in the prepared bundle; a file is read
    again: its labels are what the split's indices number)."""
    if prepared.movielens is not None and recipe.data.path is None:
        return prepared.movielens.ratings
    from embreg.tasks.ratings.task import load_interactions

    ratings, _, _ = load_interactions(recipe.data, rating_col=None, holds="timed interactions", per_timestamp=True)
    return ratings
