"""``predict`` for the rating, CTR, classification and regression tasks (see :meth:`TrainedRun.predict`).

Inputs are read as the training data was read (the same column names, id parsing and separator rules), ids are
looked up in the run's vocabularies, and each row with an id never seen in training follows the ``unknown`` policy
(:data:`~embreg.serving.trained_run.UNKNOWN_POLICIES`). Predictions are made as the run's evaluator makes them:
ratings clamped to the training range, click logits through a sigmoid, class logits through a softmax.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from embreg.errors import ConfigError, DataError
from embreg.serving.vocabulary import UNKNOWN, IdVocabulary

if TYPE_CHECKING:
    from embreg.serving.trained_run import Prediction, TrainedRun

__all__ = ["predict", "read_columns"]

_BATCH = 65536
_TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq", ".gz")


def predict(run: TrainedRun, rows: Any, unknown: str) -> Prediction:
    if run.task == "rating":
        prediction = _ratings(run, rows, unknown)
    elif run.task == "ctr":
        prediction = _clicks(run, rows, unknown)
    else:
        prediction = _texts(run, rows)
    return _mark_non_finite(prediction)


_PREDICTION_COLUMNS = ("rating", "click_probability", "value", "probability")


def _mark_non_finite(prediction: Prediction) -> Prediction:
    """Rows whose prediction is NaN or infinite get ``status=non-finite`` (never ``ok``), counted as
    ``summary["non_finite"]``: a model with weights that are not finite (a failed run) predicts nothing."""
    table = prediction.table
    columns = [c for c in table.columns if c in _PREDICTION_COLUMNS or str(c).startswith("probability_")]
    values = table[columns].to_numpy(dtype=np.float64, na_value=np.nan).reshape(len(table), len(columns))
    bad = ~np.isfinite(values).all(axis=1)
    prediction.summary["non_finite"] = int(bad.sum())
    if bad.any():
        status = np.array(table["status"].astype(object), dtype=object)
        status[bad] = "non-finite"
        table["status"] = pd.Categorical(status, categories=["ok", "mean", "non-finite"])
    return prediction


def read_columns(path: str | Path, columns: Sequence[str], sep: str | None) -> dict[str, pd.Series]:
    """``{column: values}`` of a CSV/TSV/parquet file, read as the training readers read (header row needed).

    Raises:
        DataError: a missing file or column (naming the columns present), or an unreadable file.
    """
    from embreg.data.ctr_file import _header, _read
    from embreg.data.tables import resolve_column

    file = Path(path)
    if not file.is_file():
        raise DataError(f"input file {str(file)!r} does not exist")
    header, sep = _header(file, sep)
    names = [resolve_column(name, header, "column", file) for name in columns]
    table = _read(file, [(name, "column") for name in names], sep)
    return {column: table.columns[name] for column, name in zip(columns, names)}


def _frame(rows: Any, columns: Sequence[str], sep: str | None) -> pd.DataFrame:
    if isinstance(rows, pd.DataFrame):
        missing = [c for c in columns if c not in rows.columns]
        if missing:
            raise DataError(f"the input table lacks column(s) {missing}; it has {list(rows.columns)}")
        return rows[list(columns)].reset_index(drop=True)
    return pd.DataFrame(read_columns(rows, columns, sep))


def _labels(values: pd.Series) -> np.ndarray:
    """Ids as the ratings reader parses them (canonical integers as ints, everything else as stripped text)."""
    if pd.api.types.is_integer_dtype(values.dtype):
        return values.to_numpy(dtype=np.int64)
    codes, uniques = pd.factorize(values)  # each distinct id is parsed once
    text = pd.Series(np.asarray(uniques, dtype=object)).astype(str).str.strip()
    if text.str.fullmatch(r"-?(?:0|[1-9]\d{0,17})").all():
        return text.astype(np.int64).to_numpy()[codes]
    return text.to_numpy(dtype=object)[codes]


def _finish(
    run: TrainedRun, frame: pd.DataFrame, known: np.ndarray, values: dict[str, np.ndarray], fallback: dict, unknown: str
) -> Prediction:
    """The prediction table: the unknown-id policy applied to rows where ``known`` is False."""
    from embreg.serving.trained_run import Prediction

    bad = ~known
    if bad.any() and unknown == "error":
        shown = frame[bad].head(5).to_dict("records")
        raise DataError(
            f"{int(bad.sum())} of {len(frame)} input rows hold ids never seen in training, e.g. {shown}; choose "
            "what to do with them: unknown='mean' (--unknown mean: the training mean) or 'skip' (--unknown skip)"
        )
    table = frame.copy(deep=False)  # copy-on-write: adding columns leaves the caller's frame alone
    for column, array in values.items():
        filled = array
        if bad.any():
            filled = array.copy()
            value = fallback[column]
            filled[bad] = value[bad] if isinstance(value, np.ndarray) else value
        table[column] = filled
    table["status"] = pd.Categorical.from_codes((~known).astype(np.int8), ["ok", "mean"])
    if unknown == "skip":
        table = table[known].reset_index(drop=True)
    summary = {
        "rows": len(frame),
        "predicted": int(known.sum()),
        "unknown": int(bad.sum()),
        "fallback": int(bad.sum()) if unknown == "mean" else 0,
        "skipped": int(bad.sum()) if unknown == "skip" else 0,
    }
    return Prediction(table, summary)


@torch.no_grad()
def _outputs(run: TrainedRun, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """``model(batch).predictions`` over ``inputs`` in batches, on the model's device, back on the CPU."""
    n = next(iter(inputs.values())).shape[0]
    parts = []
    for start in range(0, n, _BATCH):
        batch = {key: value[start : start + _BATCH].to(run.device) for key, value in inputs.items()}
        parts.append(run.model(batch).predictions.float().cpu())
    return torch.cat(parts) if parts else torch.zeros(0)


def _ratings(run: TrainedRun, rows: Any, unknown: str) -> Prediction:
    d = run.recipe.data
    frame = _frame(rows, [d.user_col, d.item_col], d.sep)
    users = run.vocabularies["user"].indices(_labels(frame[d.user_col]))
    items = run.vocabularies["item"].indices(_labels(frame[d.item_col]))
    known = (users != UNKNOWN) & (items != UNKNOWN)
    inputs = {"user": torch.from_numpy(np.where(known, users, 0)), "item": torch.from_numpy(np.where(known, items, 0))}
    predictions = _outputs(run, inputs)
    if run.evaluator.rating_range is not None:
        predictions = predictions.clamp(*run.evaluator.rating_range)
    bad = ~known
    fallback = np.zeros(len(known), np.float64)  # read only at the rows with an unseen id
    if bad.any():
        fallback[bad] = _rating_fallback(run, users[bad], items[bad])
    return _finish(run, frame, known, {"rating": predictions.numpy()}, {"rating": fallback}, unknown)


@torch.no_grad()
def _rating_fallback(run: TrainedRun, users: np.ndarray, items: np.ndarray) -> float | np.ndarray:
    """The rating of a row with an unseen id: the mean training rating; for models with bias tables (BiasedMF:
    ``mu + b_u + b_i``) their global mean plus the bias of whichever of the user and the item is known."""
    model: Any = run.model
    mean = float(run.prepared.part("train").ratings.mean())
    if not all(hasattr(model, name) for name in ("global_mean", "user_bias", "item_bias")):
        return mean
    values = torch.full((len(users),), float(model.global_mean))
    for ids, table in ((users, model.user_bias), (items, model.item_bias)):
        seen = torch.from_numpy(ids != UNKNOWN)
        if seen.any():
            index = torch.from_numpy(np.where(ids != UNKNOWN, ids, 0)).to(run.device)
            bias = table(index).reshape(len(ids)).float().cpu()
            values += torch.where(seen, bias, torch.zeros_like(bias))
    if run.evaluator.rating_range is not None:
        values = values.clamp(*run.evaluator.rating_range)
    return values.numpy()


def _clicks(run: TrainedRun, rows: Any, unknown: str) -> Prediction:
    d = run.recipe.data
    if d.path is None:
        raise ConfigError(
            f"predict reads rows in the format of the run's training file, and run {str(run.path)!r} was trained on "
            f"the registry table {d.dataset!r}, whose values are not kept by name; train on a click file "
            "(data.path) to predict on new rows"
        )
    vocabularies = run.vocabularies
    fields = list(vocabularies)
    frame = _frame(rows, [*fields, *d.dense_cols], d.sep)
    codes = np.zeros((len(frame), len(fields)), np.int64)
    known = np.ones(len(frame), bool)
    for j, name in enumerate(fields):
        found = _field_indices(vocabularies[name], frame[name])
        known &= found != UNKNOWN
        codes[:, j] = np.where(found == UNKNOWN, 0, found)
    dense = np.zeros((len(frame), len(d.dense_cols)), np.float64)
    for j, name in enumerate(d.dense_cols):
        values = pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        if not np.isfinite(values).all():
            row = int(np.flatnonzero(~np.isfinite(values))[0])
            raise DataError(f"input row {row + 1}, column {name!r}: {frame[name].iloc[row]!r} is not a finite number")
        dense[:, j] = values
    dense = (dense - run.prepared.dense_mean) / run.prepared.dense_std
    inputs = {"categorical": torch.from_numpy(codes), "dense": torch.from_numpy(dense.astype(np.float32))}
    probability = torch.sigmoid(_outputs(run, inputs)).numpy()
    rate = float(run.prepared.part("train").labels.mean())
    return _finish(run, frame, known, {"click_probability": probability}, {"click_probability": rate}, unknown)


def _field_indices(vocabulary: IdVocabulary, values: pd.Series) -> np.ndarray:
    """``(N,)`` index of each value of one categorical field as the click reader normalises it (text, stripped;
    missing -> ``""``), :data:`UNKNOWN` where the value was never seen in training.

    A column of Arrow strings (what pandas reads text into) is first looked up as it is, in one Arrow hash pass;
    only the values not found that way (padded, missing, or unknown) go through the normalising path. A value found
    as it is needs no normalising, since every vocabulary label is already stripped text.
    """
    exact = None
    if isinstance(values.dtype, pd.StringDtype) and values.dtype.storage == "pyarrow":
        import pyarrow.compute as pc

        hits = pc.index_in(values.array._pa_array, value_set=vocabulary.arrow_labels())
        exact = hits.to_numpy(zero_copy_only=False)  # float with NaN where not found
        missed = np.isnan(exact)
        if not missed.any():
            return exact.astype(np.int64)
        found = exact.copy()
        found[missed] = _normalised_indices(vocabulary, values[missed])
        return found.astype(np.int64)
    return _normalised_indices(vocabulary, values)


def _normalised_indices(vocabulary: IdVocabulary, values: pd.Series) -> np.ndarray:
    value_codes, uniques = pd.factorize(values)  # each distinct value is normalised once; missing -> ""
    text = pd.Series(np.append(np.asarray(uniques, dtype=object), "")).map(str).str.strip().to_numpy(object)
    return vocabulary.indices(text)[value_codes]


def _texts(run: TrainedRun, rows: Any) -> Prediction:
    from embreg.models.encoder_classifier import encode_texts
    from embreg.models.pretrained import load_pretrained
    from embreg.serving.trained_run import Prediction

    d = run.recipe.data
    if isinstance(rows, pd.DataFrame):
        texts = _frame(rows, [d.text_col], None)[d.text_col].astype(str).tolist()
    elif isinstance(rows, (str, Path)):
        path = Path(rows)
        if path.suffix.lower() in _TABLE_SUFFIXES:
            texts = read_columns(path, [d.text_col], d.sep)[d.text_col].astype(str).tolist()
        else:
            if not path.is_file():
                raise DataError(f"input file {str(path)!r} does not exist")
            texts = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        texts = [str(text) for text in rows]
    _, tokenizer = load_pretrained(run.recipe.model.pretrained, progress=False)
    outputs = []
    for start in range(0, len(texts), 256):
        outputs.append(_outputs(run, encode_texts(tokenizer, texts[start : start + 256], d.max_length)))
    table = pd.DataFrame({"text": texts})
    if run.task == "regression":
        table["value"] = torch.cat(outputs).numpy() if outputs else np.zeros(0)
    elif "label" not in run.vocabularies:  # multi-task: one label and probability column per target
        heads = {kind: vocab for kind, vocab in run.vocabularies.items() if kind.startswith("label_")}
        logits = torch.cat(outputs) if outputs else torch.zeros(0, sum(len(v) for v in heads.values()))
        for (kind, vocab), part in zip(heads.items(), torch.split(logits, [len(v) for v in heads.values()], dim=-1)):
            probability, index = torch.softmax(part, dim=-1).max(dim=-1)
            table[kind] = vocab.labels_of(index.numpy())
            table[kind.replace("label_", "probability_", 1)] = probability.numpy()
    else:
        logits = torch.cat(outputs) if outputs else torch.zeros(0, len(run.vocabularies["label"]))
        probability, index = torch.softmax(logits, dim=-1).max(dim=-1)
        table["label"] = run.vocabularies["label"].labels_of(index.numpy())
        table["probability"] = probability.numpy()
    table["status"] = "ok"
    n = len(texts)
    return Prediction(table, {"rows": n, "predicted": n, "unknown": 0, "fallback": 0, "skipped": 0})
