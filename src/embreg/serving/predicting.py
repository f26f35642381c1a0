"""``predict`` for the rating, CTR, classification and regression tasks (see :meth:`~embreg.serving.trained_run.TrainedRun.predict`).

Inputs are read as the training data was read (the same column names, id parsing and separator rules), ids are
looked up in the run's vocabularies, and each row with an id never seen in training follows the ``unknown`` policy
(:data:`~embreg.serving.trained_run.UNKNOWN_POLICIES`). Predictions are made as the run's evaluator makes them:
ratings clamped to the training range, click logits through a sigmoid, class logits through a softmax.

Texts (classification, regression) keep every column of their input table, in order, and get the prediction
columns after them; a text file is read line by line (:func:`embreg.data.files.inputs.read_lines`). Texts are cut to
``data.max_length`` word pieces as in training; the cut texts and the unknown word pieces are counted, and a blank
text keeps its row with ``status=empty`` and no prediction.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from embreg.errors import ConfigError, DataError
from embreg.serving.prediction import Prediction
from embreg.serving.served_run import ServedRun
from embreg.serving.vocabulary import UNKNOWN, IdVocabulary

__all__ = ["predict", "read_columns"]

_BATCH = 65536
_TEXT_BATCH = 256  # texts tokenised and run together
_TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq", ".gz")


def predict(run: ServedRun, rows: Any, unknown: str) -> Prediction:
    if run.task == "rating":
        prediction = _ratings(run, rows, unknown)
    elif run.task == "ctr":
        prediction = _clicks(run, rows, unknown)
    else:
        return _texts(run, rows)  # marks its own non-finite rows: its columns may be renamed
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
    from embreg.data.files.ctr_file import _header, _read
    from embreg.data.files.tables import resolve_column

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
    run: ServedRun, frame: pd.DataFrame, known: np.ndarray, values: dict[str, np.ndarray], fallback: dict, unknown: str
) -> Prediction:
    """The prediction table: the unknown-id policy applied to rows where ``known`` is False."""

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
def _outputs(run: ServedRun, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """``model(batch).predictions`` over ``inputs`` in batches, on the model's device, back on the CPU."""
    n = next(iter(inputs.values())).shape[0]
    parts = []
    for start in range(0, n, _BATCH):
        batch = {key: value[start : start + _BATCH].to(run.device) for key, value in inputs.items()}
        parts.append(run.model(batch).predictions.float().cpu())
    return torch.cat(parts) if parts else torch.zeros(0)


def _ratings(run: ServedRun, rows: Any, unknown: str) -> Prediction:
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
def _rating_fallback(run: ServedRun, users: np.ndarray, items: np.ndarray) -> float | np.ndarray:
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


def _clicks(run: ServedRun, rows: Any, unknown: str) -> Prediction:
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


def _texts(run: ServedRun, rows: Any) -> Prediction:
    """Predictions for texts: the input table's every column (a text file or a list: ``text``), then the prediction
    columns and ``status`` (``ok``; ``empty`` for a blank or missing text, which gets no prediction)."""
    from embreg.models.pretrained import load_tokenizer

    d = run.recipe.data
    table, text_col = _text_table(rows, d.text_col, d.sep)
    raw = table[text_col]
    texts = raw.astype(object).where(raw.notna(), "").map(str)
    filled = texts.str.strip() != ""
    wanted = texts[filled].tolist()
    tokenizer = load_tokenizer(run.recipe.model.pretrained, progress=False)
    outputs, cut, unknown = [], 0, 0
    for start in range(0, len(wanted), _TEXT_BATCH):
        inputs, batch_cut, batch_unknown = encode_for_prediction(tokenizer, wanted[start : start + _TEXT_BATCH], d)
        outputs.append(_outputs(run, inputs))
        cut, unknown = cut + batch_cut, unknown + batch_unknown
    columns = _text_predictions(run, torch.cat(outputs) if outputs else None)
    finite = np.ones(len(wanted), dtype=bool)
    for values in columns.values():
        if values.dtype != object:
            finite &= np.isfinite(values.astype(np.float64))
    status = np.where(filled.to_numpy(), "ok", "empty").astype(object)
    status[np.flatnonzero(filled.to_numpy())[~finite]] = "non-finite"
    names = _free_names([*columns, "status"], table.columns)
    out = table.copy()
    for name, values in columns.items():
        full = np.full(len(out), None if values.dtype == object else np.nan, dtype=values.dtype)
        full[filled.to_numpy()] = values
        out[names[name]] = full
    out[names["status"]] = status
    summary = {
        "rows": len(out),
        "predicted": int(filled.sum()),
        "empty": int((~filled).sum()),
        "cut": cut,
        "unknown_pieces": unknown,
        "max_length": d.max_length,
        "non_finite": int((~finite).sum()),
    }
    return Prediction(out, summary, kind="texts")


def _text_table(rows: Any, text_col: str, sep: str | None) -> tuple[pd.DataFrame, str]:
    """The input as a table and the name of its text column: a DataFrame or table file as it is (every column, in
    order; ``text_col``, or the header's ``text_col:<type>``), a text file
    (:func:`embreg.data.files.inputs.read_lines`) or a list as one ``text`` column."""
    from embreg.data.files.inputs import read_lines

    if isinstance(rows, pd.DataFrame):
        if text_col not in rows.columns:
            raise DataError(f"the input table lacks the text column {text_col!r}; it has {list(rows.columns)}")
        return rows.reset_index(drop=True), text_col
    if isinstance(rows, (str, Path)):
        path = Path(rows)
        if not path.is_file():
            raise DataError(
                f"input file {str(path)!r} does not exist (to predict on a text itself, pass a list: "
                f"predict([{str(rows)[:40]!r}]))"
            )
        if path.suffix.lower() in _TABLE_SUFFIXES:
            return _whole_table(path, text_col, sep)
        return pd.DataFrame({"text": pd.Series(read_lines(path), dtype=object)}), "text"
    return pd.DataFrame({"text": pd.Series([str(text) for text in rows], dtype=object)}), "text"


def _whole_table(path: Path, text_col: str, sep: str | None) -> tuple[pd.DataFrame, str]:
    """Every column of a CSV/TSV/parquet file (text files: as text, e.g. ids keep their leading zeros), read as the
    training reader reads (:func:`read_columns`); ``text_col`` must be one of them."""
    from embreg.data.files.ctr_file import _header, _read
    from embreg.data.files.inputs import decode_lines
    from embreg.data.files.tables import resolve_column

    if path.suffix.lower() in (".csv", ".tsv"):
        decode_lines(path.read_bytes(), str(path))  # a file that is not UTF-8: the error names its line
    header, sep = _header(path, sep)
    column = resolve_column(text_col, header, "text", path)
    table = _read(path, [(name, "column") for name in header], sep)
    return pd.DataFrame({name: table.columns[name] for name in header}), column


def encode_for_prediction(tokenizer: Any, texts: list[str], data: Any) -> tuple[dict[str, torch.Tensor], int, int]:
    """The tensors :func:`~embreg.models.encoder_classifier.encode_texts` gives for ``texts`` (cut to
    ``data.max_length`` word pieces, as in training), how many texts were cut, and how many of the word pieces kept
    are the tokenizer's unknown piece (``[UNK]``).

    Example:
        >>> from embreg.models.pretrained import load_tokenizer  # doctest: +SKIP
        >>> _, cut, unknown = encode_for_prediction(load_tokenizer("all-minilm-l6-v2"), ["a b c d", "☃"],
        ...                                         type("D", (), {"max_length": 4}))  # doctest: +SKIP
        >>> cut, unknown  # doctest: +SKIP
        (1, 1)
    """
    from embreg.models.encoder_classifier import TEXT_KEYS, tokenize_texts

    encoded = tokenize_texts(tokenizer, texts, data.max_length)
    inputs = {k: encoded[k].long() for k in TEXT_KEYS if k in encoded}
    cut = sum(bool(e.overflowing) for e in encoded.encodings)
    unk = tokenizer.unk_token_id
    unknown = 0 if unk is None else int(((inputs["input_ids"] == unk) & inputs["attention_mask"].bool()).sum())
    return inputs, cut, unknown


def _text_predictions(run: ServedRun, outputs: torch.Tensor | None) -> dict[str, np.ndarray]:
    """The prediction columns of the model's outputs ``(N, C)`` for the non-empty texts (``None``: there are none)."""
    if run.task == "regression":
        return {"value": outputs.reshape(-1).numpy() if outputs is not None else np.zeros(0)}
    heads = {kind: vocab for kind, vocab in run.vocabularies.items() if kind.startswith("label_")}
    if "label" in run.vocabularies:
        heads = {"label": run.vocabularies["label"]}
    if outputs is None:
        outputs = torch.zeros(0, sum(len(v) for v in heads.values()))
    columns: dict[str, np.ndarray] = {}
    for (kind, vocab), part in zip(heads.items(), torch.split(outputs, [len(v) for v in heads.values()], dim=-1)):
        probability, index = torch.softmax(part, dim=-1).max(dim=-1)
        columns[kind] = np.asarray(vocab.labels_of(index.numpy()), dtype=object)
        columns[kind.replace("label", "probability", 1)] = probability.numpy()
    return columns


def _free_names(names: list[str], taken: Any) -> dict[str, str]:
    """Each new column's name: as it is, or ``predicted_<name>`` where the input already has a column of that name
    (e.g. the ``label`` of a labelled file), so no input column is overwritten.

    Example:
        >>> _free_names(["label", "probability"], ["text", "label"])
        {'label': 'predicted_label', 'probability': 'probability'}
    """
    used = set(map(str, taken))
    out = {}
    for name in names:
        free = name
        while free in used:
            free = f"predicted_{free}"
        used.add(free)
        out[name] = free
    return out
