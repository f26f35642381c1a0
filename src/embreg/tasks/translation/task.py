"""Task ``translation``: an encoder-decoder on (source, target) sentence pairs; sacreBLEU BLEU and chrF.

Data: the registry's German-English pairs (``trans-de-en``, :mod:`embreg.data.datasets.trans_de_en`) or a user's
tab-separated pairs file (``data.path``; columns ``data.source_col`` / ``data.target_col``, default ``source`` and
``target``; :func:`embreg.tasks.translation.parallel.read_pairs`). Pairs are split by *distinct source sentence*
(:func:`~embreg.tasks.translation.parallel.split_by_source`), so no test source is seen in training; ``data.max_*_pairs`` then
keep a seeded random subset of each split (CPU-sized runs). BPE vocabularies (Hugging Face ``tokenizers``) are
learnt on the training split only: one joint vocabulary (``data.joint_vocab: true``) or one per side.

Id kinds for index transforms: ``source`` (the encoder's input tokens) and ``target`` (the decoder's input
tokens); the four special ids are never swapped nor drawn (:func:`embreg.models.transformer_nmt.transform_regular_ids`).

Metrics: ``loss`` (label-smoothed cross-entropy), ``bleu`` and ``chrf`` (sacreBLEU, corpus level, detokenised).
The best epoch is picked by ``val_bleu``: greedy decoding of the first ``data.valid_sentences`` validation
sources (a capped, cheap decode that measures what the run is for; the label-smoothed loss rewards calibration,
not translations). The test split is decoded with beam search (``data.beam``, ``data.alpha``, ``data.beta``); a
finished run also reports greedy decoding (``test_bleu_greedy``, ``test_chrf_greedy``) and beam search with GNMT's
coverage penalty at ``beta = 0.2`` (``test_bleu_coverage``, ``test_chrf_coverage``) on the same model, with the
seconds each decode took.

Example:
    >>> from embreg.recipes import load_recipe
    >>> recipe = load_recipe("translation-sse")
    >>> recipe.monitor, sorted(recipe.index_transforms)
    (('val_bleu', 'max'), ['source', 'target'])
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from embreg.batching.batches import TensorBatches
from embreg.batching.token_batches import TokenBudgetBatches
from embreg.errors import ConfigError
from embreg.tasks import TaskAdapter, check_split, register_task
from embreg.tasks.data_files import checked_file, file_record, note_dropped, resolve_data_file
from embreg.tasks.translation.evaluation import DecodeSettings, TranslationEvaluator
from embreg.tasks.translation.parallel import encode_texts, read_pairs, split_by_source, train_bpe

__all__ = [
    "TranslationDataConfig",
    "PreparedTranslation",
    "TranslationSplits",
    "TranslationTask",
    "pad_rows",
    "translation_splits",
]

COVERAGE_BETA = 0.2
"""GNMT's coverage weight (Wu et al. 2016, Sec. 7), used for the finished run's ``test_*_coverage`` decode."""


@dataclass
class TranslationDataConfig:
    """The pairs, their split, the BPE vocabularies and the decoding of the test split.

    Attributes:
        dataset: ``trans-de-en`` (German -> English) or ``file`` (``path``).
        path: your own tab-separated pairs file with a header (sets ``dataset: file``); sha256: its checksum
            (filled in when the recipe is loaded); source_col, target_col: its column names.
        min_words: keep only pairs whose source and target both have at least this many words (white-space
            separated; ``1``: every pair). The dictionary is mostly single words, on which BLEU's 4-grams are empty,
            so the shipped recipes keep pairs of 3 words and more; on a user's file (``path``) that rule gives way
            to ``1`` unless set (:data:`DATASET_SETTINGS`). Pairs it drops are counted on stderr, in
            ``split.json`` and in ``report.md``, as are those the subsets below leave out and the sentences
            ``max_tokens`` cuts.
        split: shares of the distinct source sentences in train/valid/test; split_seed: seed of that split and of
            the subsets below.
        max_train_pairs, max_eval_pairs: keep a random subset of the training / each evaluation split (``null``:
            all).
        joint_vocab: one BPE vocabulary for both sides (needed by ``model.share_embeddings``), else one per side.
        vocab_size: BPE vocabulary size (per vocabulary, the 4 special tokens included); min_frequency: of a merge.
        max_tokens: BPE tokens kept per sentence (longer ones are cut), before ``</s>``.
        batch_tokens: a token budget per training batch (fairseq's ``--max-tokens``): pairs sorted by their source
            and target lengths are cut into batches of at most this many padded tokens on their longer side and at
            most ``train.batch_size`` pairs, visited in a random order (:mod:`embreg.batching.token_batches`);
            ``null``: batches of ``train.batch_size`` pairs drawn at random, padded to their longest pair.
        valid_sentences: validation sources decoded (greedily) each epoch for ``val_bleu``.
        beam, alpha, beta: test decoding: beam width (1: greedy), GNMT length-normalisation exponent and coverage
            weight (:mod:`embreg.nn.decoding`).
    """

    DATASET_SETTINGS: ClassVar[tuple[str, ...]] = ("min_words",)
    """Settings a shipped recipe writes for its own dataset: on a user's file they take their defaults unless set
    (:func:`embreg.tasks.data_files.file_section`)."""

    dataset: Literal["trans-de-en", "file"] = "trans-de-en"
    path: str | None = None
    sha256: str | None = None
    source_col: str = "source"
    target_col: str = "target"
    min_words: int = 1
    split: list[float] = field(default_factory=lambda: [0.8, 0.1, 0.1])
    split_seed: int = 0
    max_train_pairs: int | None = None
    max_eval_pairs: int | None = None
    joint_vocab: bool = True
    vocab_size: int = 8000
    min_frequency: int = 2
    max_tokens: int = 48
    batch_tokens: int | None = None
    valid_sentences: int = 500
    beam: int = 5
    alpha: float = 0.6
    beta: float = 0.0

    def __post_init__(self) -> None:
        resolve_data_file(self)
        check_split(self.split)
        for name in ("min_words", "vocab_size", "min_frequency", "max_tokens", "valid_sentences", "beam"):
            if getattr(self, name) < 1:
                raise ConfigError(f"data.{name}={getattr(self, name)} must be >= 1")
        if self.vocab_size <= 4:
            raise ConfigError(f"data.vocab_size={self.vocab_size} must be > 4 (the special tokens take 4 ids)")
        for name in ("max_train_pairs", "max_eval_pairs", "batch_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"data.{name}={value} must be >= 1 or null")
        if self.alpha < 0 or self.beta < 0:
            raise ConfigError(f"data.alpha={self.alpha} and data.beta={self.beta} must be >= 0")
        if self.source_col == self.target_col:
            raise ConfigError(f"data.source_col and data.target_col are both {self.source_col!r}")


@dataclass
class PreparedTranslation:
    """Tokenised splits and what the model and evaluator need.

    Attributes:
        tensors: ``{split: {"source": (N, S), "target": (N, T + 1)}}`` right-padded ids.
        sources, references: per evaluation split, the source id lists and the reference texts.
        tokenizers: ``{"source": tokenizer, "target": tokenizer}`` (the same object when joint).
        source_vocab_size, target_vocab_size: vocabulary sizes (specials included).
        record: what ``split.json`` records.
    """

    tensors: dict[str, dict[str, torch.Tensor]]
    sources: dict[str, list[list[int]]]
    references: dict[str, list[str]]
    tokenizers: dict[str, Any]
    source_vocab_size: int
    target_vocab_size: int
    record: dict[str, Any]


def pad_rows(rows: list[list[int]], pad: int = 0) -> torch.Tensor:
    """``(N, max length)`` LongTensor of ``rows``, right-padded with ``pad``.

    Example:
        >>> pad_rows([[5, 2], [7]]).tolist()
        [[5, 2], [7, 0]]
    """
    out = torch.full((len(rows), max(len(r) for r in rows)), pad, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.as_tensor(row, dtype=torch.long)
    return out


def _subset(pairs: list, limit: int | None, seed: int) -> list:
    if limit is None or limit >= len(pairs):
        return pairs
    keep = np.sort(np.random.default_rng(seed).choice(len(pairs), size=limit, replace=False))
    return [pairs[i] for i in keep]


def _cut_sentences(split: dict[str, list], tokenizers: dict[str, Any], max_tokens: int) -> dict[str, int]:
    """How many sources and targets of all splits have more BPE tokens than ``max_tokens`` (their tail is cut)."""
    counts = {}
    for side, index in (("source", 0), ("target", 1)):
        texts = [pair[index] for rows in split.values() for pair in rows]
        long = sum(len(encoding.ids) > max_tokens for encoding in tokenizers[side].encode_batch(texts))
        counts[f"{side} sentences longer than data.max_tokens={max_tokens} tokens"] = long
    return counts


@dataclass
class TranslationSplits:
    """The sentence pairs of each split, as the task trains and scores on them (before any tokenisation).

    Attributes:
        split: ``{"train" | "valid" | "test": [(source, target), ...]}`` after ``data.max_*_pairs``.
        rows_read: pairs in the file; with_min_words: pairs left by ``data.min_words``.
        described: a user's file's record (path and checksum), ``None`` for a registry dataset.
        dropped: ``{what a filter dropped: how many pairs}`` (``data.min_words``, ``data.max_*_pairs``).
    """

    split: dict[str, list[tuple[str, str]]]
    rows_read: int
    with_min_words: int
    described: Any = None
    dropped: dict[str, int] = field(default_factory=dict)

    def record(self, d: TranslationDataConfig) -> dict[str, Any]:
        """What ``split.json`` records of the pairs: the data (with what the filters dropped, also said on stderr),
        the split's seed, fractions and counts."""
        used = sum(len(rows) for rows in self.split.values())
        data = (
            file_record(self.described, {"rows_read": self.rows_read}, used)
            if self.described
            else {"dataset": d.dataset, "rows_read": self.rows_read, "rows": used}
        )
        note_dropped(data, self.where(d), self.dropped)
        return {
            "data": data,
            "split_seed": d.split_seed,
            "pairs_with_min_words": self.with_min_words,
            "fractions": d.split,
            "pairs": {name: len(rows) for name, rows in self.split.items()},
            "distinct_sources": {name: len({s for s, _ in rows}) for name, rows in self.split.items()},
        }

    def where(self, d: TranslationDataConfig) -> str:
        """The user's file, or the registry dataset's name, as the notes on stderr name it."""
        return self.described["path"] if self.described else d.dataset


def translation_splits(d: TranslationDataConfig, progress: bool = False) -> TranslationSplits:
    """The pairs of ``data`` (the registry's dataset or ``data.path``), filtered by ``data.min_words``, split by
    distinct source sentence and cut to ``data.max_train_pairs`` / ``data.max_eval_pairs``: what the task trains and
    scores on, and what a non-neural baseline (:mod:`embreg.recipes.baselines`) reads.

    Raises:
        ConfigError: ``data.min_words`` leaves no pair.
        DataError: the file cannot be read or split.
    """
    described = checked_file(d) if d.path is not None else None
    if described is not None:
        pairs = read_pairs(str(d.path), d.source_col, d.target_col)
    else:
        from embreg.data.datasets.trans_de_en import TRANS_DE_EN_FILE
        from embreg.data.registry import fetch

        directory = fetch(d.dataset, progress=progress)
        pairs = read_pairs(directory / TRANS_DE_EN_FILE)
    rows_read = len(pairs)
    if d.min_words > 1:
        pairs = [p for p in pairs if min(len(p[0].split()), len(p[1].split())) >= d.min_words]
        if not pairs:
            raise ConfigError(f"data.min_words={d.min_words} leaves none of the {rows_read} pairs")
    split = split_by_source(pairs, d.split, d.split_seed)
    before = {name: len(rows) for name, rows in split.items()}
    split["train"] = _subset(split["train"], d.max_train_pairs, d.split_seed)
    for name in ("valid", "test"):
        split[name] = _subset(split[name], d.max_eval_pairs, d.split_seed + 1)
    dropped = {
        f"pairs with fewer than data.min_words={d.min_words} words on a side": rows_read - len(pairs),
        f"training pairs beyond data.max_train_pairs={d.max_train_pairs}": before["train"] - len(split["train"]),
        f"evaluation pairs beyond data.max_eval_pairs={d.max_eval_pairs}": sum(
            before[name] - len(split[name]) for name in ("valid", "test")
        ),
    }
    return TranslationSplits(split, rows_read, len(pairs), described, dropped)


class TranslationTask(TaskAdapter):
    """Sequence-to-sequence translation (see the module docstring)."""

    name = "translation"
    data_config = TranslationDataConfig
    default_model = "transformer-nmt"
    id_kinds = ("source", "target")
    smoke_overrides = (
        "data.max_train_pairs=256",
        "data.max_eval_pairs=16",
        "data.vocab_size=300",
        "data.max_tokens=12",
        "data.valid_sentences=8",
        "data.beam=2",
        "model.d_model=32",
        "model.heads=2",
        "model.feedforward=64",
        "model.encoder_layers=1",
        "model.decoder_layers=1",
        "train.batch_size=32",
        "train.eval_batch_size=16",
        "train.epochs=1",
        "train.progress=false",
    )
    # Vaswani et al. 2017 (the SSE paper's Sec. 4.3 set-up): Adam (0.9, 0.98, 1e-9), inverse-square-root schedule
    # after a linear warm-up; a CPU-sized run warms up over the first 10% of its steps
    train_defaults = {
        "epochs": 10,
        "batch_size": 64,
        "eval_batch_size": 64,
        "lr": 1e-3,
        "optimizer": "adam",
        "schedule": "inverse-sqrt",
        "warmup": 0.1,
        "clip_norm": 1.0,
        "patience": None,
    }
    headline = ("test_bleu", "test_chrf")

    def monitor(self, recipe) -> tuple[str, str]:
        return "val_bleu", "max"

    def evaluated_metrics(self, recipe) -> tuple[str, ...]:
        return ("loss", "bleu", "chrf")

    def extra_metric_names(self, recipe) -> tuple[str, ...]:
        return tuple(
            f"test_{name}_{how}" for how in ("greedy", "coverage") for name in ("bleu", "chrf", "decode_seconds")
        ) + ("test_decode_seconds",)

    def check_data(self, recipe) -> None:
        config = recipe.model.config
        if getattr(config, "share_embeddings", False) and not recipe.data.joint_vocab:
            raise ConfigError(
                "model.share_embeddings=true needs one vocabulary for both sides; set data.joint_vocab=true"
            )
        positions = getattr(config, "max_positions", None)
        if positions is not None and recipe.data.max_tokens + 2 > positions:
            raise ConfigError(
                f"data.max_tokens={recipe.data.max_tokens} makes sequences of {recipe.data.max_tokens + 2} tokens "
                f"(with <s> and </s>), more than model.max_positions={positions}"
            )

    def prepare(self, recipe) -> PreparedTranslation:
        d = recipe.data
        pairs = translation_splits(d, progress=recipe.train.progress)
        split = pairs.split
        train_sources = [s for s, _ in split["train"]]
        train_targets = [t for _, t in split["train"]]
        if d.joint_vocab:
            joint = train_bpe(train_sources + train_targets, d.vocab_size, d.min_frequency)
            tokenizers = {"source": joint, "target": joint}
        else:
            tokenizers = {
                "source": train_bpe(train_sources, d.vocab_size, d.min_frequency),
                "target": train_bpe(train_targets, d.vocab_size, d.min_frequency),
            }
        tensors, sources, references = {}, {}, {}
        for name, rows in split.items():
            src = encode_texts(tokenizers["source"], [s for s, _ in rows], d.max_tokens, bos=False)
            tgt = encode_texts(tokenizers["target"], [t for _, t in rows], d.max_tokens, bos=True)
            tensors[name] = {"source": pad_rows(src), "target": pad_rows(tgt)}
            sources[name] = src
            references[name] = [t for _, t in rows]
        sources["valid"] = sources["valid"][: d.valid_sentences]
        references["valid"] = references["valid"][: d.valid_sentences]
        record = {
            **pairs.record(d),
            "joint_vocab": d.joint_vocab,
            "vocab_sizes": {side: tok.get_vocab_size() for side, tok in tokenizers.items()},
        }
        cut = _cut_sentences(split, tokenizers, d.max_tokens)
        note_dropped(record["data"], pairs.where(d), cut, action="cut")
        return PreparedTranslation(
            tensors,
            sources,
            references,
            tokenizers,
            tokenizers["source"].get_vocab_size(),
            tokenizers["target"].get_vocab_size(),
            record,
        )

    def num_ids(self, prepared: PreparedTranslation, kind: str) -> int:
        """The regular (non-special) ids of the side's vocabulary: the space index transforms draw in."""
        size = prepared.source_vocab_size if kind == "source" else prepared.target_vocab_size
        return size - 4

    def batches(self, recipe, prepared: PreparedTranslation) -> TensorBatches | TokenBudgetBatches:
        train, budget = prepared.tensors["train"], recipe.data.batch_tokens
        if budget is None:
            return TensorBatches(train, recipe.train.batch_size, seed=recipe.train.seed)
        return TokenBudgetBatches(train, budget, max_examples=recipe.train.batch_size, seed=recipe.train.seed)

    def evaluator(self, recipe, prepared: PreparedTranslation) -> TranslationEvaluator:
        d = recipe.data
        max_len = d.max_tokens + 1
        settings = {
            "valid": DecodeSettings(beam=1, max_len=max_len),
            "test": DecodeSettings(beam=d.beam, alpha=d.alpha, beta=d.beta, max_len=max_len),
        }
        tensors = {name: prepared.tensors[name] for name in ("valid", "test")}
        target_tokenizer = prepared.tokenizers["target"]
        return TranslationEvaluator(
            tensors,
            prepared.sources,
            prepared.references,
            target_tokenizer.decode,
            settings,
            batch_size=recipe.train.eval_batch_size or 64,
        )

    def records(self, recipe, prepared: PreparedTranslation) -> dict:
        tokenizers = {side: json.loads(tok.to_str()) for side, tok in prepared.tokenizers.items()}
        return {"split.json": prepared.record, "tokenizers.json": tokenizers}

    def data_used(self, recipe, prepared: PreparedTranslation) -> dict[str, Any]:
        return prepared.record["data"]

    def finish(self, recipe, prepared, trainer, evaluator: TranslationEvaluator, metrics: dict) -> dict:
        metrics = dict(metrics)
        d = recipe.data
        model = trainer.model
        main = evaluator.decode(model, "test")
        metrics["test_decode_seconds"] = main["decode_seconds"]
        max_len = d.max_tokens + 1
        variants = {
            "greedy": DecodeSettings(beam=1, max_len=max_len),
            "coverage": DecodeSettings(beam=d.beam, alpha=d.alpha, beta=COVERAGE_BETA, max_len=max_len),
        }
        for how, settings in variants.items():
            for name, value in evaluator.decode(model, "test", settings).items():
                metrics[f"test_{name}_{how}"] = value
        return metrics


register_task(
    TranslationTask(),
    "sentence-pair translation (encoder-decoder): label-smoothed loss; sacreBLEU BLEU and chrF",
    "sse-stochastic-shared-embeddings.txt, Sec. 4.3 and Table 5",
)
