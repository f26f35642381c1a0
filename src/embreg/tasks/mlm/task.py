"""Task ``mlm``: masked-LM continued pre-training of a pretrained encoder; perplexity on held-out texts.

sse-stochastic-shared-embeddings.txt, Sec. 4.4 and Tables 6-7: a pretrained BERT is pre-trained further on in-domain
reviews with BERT's masked-LM objective, with SSE-SE (p = 0.015) on the input word pieces and on the embeddings of
the masked-LM targets, then fine-tuned on sentiment. Here the encoder is the packaged all-MiniLM-L6-v2 under a fresh
MLM head (:class:`~embreg.models.encoder_mlm.MaskedLanguageModel`); ``model.pretrained`` of the fine-tuning recipes
then takes the run directory (:mod:`embreg.models.run_encoder`).

Data (``data.dataset``):

* ``reviews``: those of the 22,641 clothing-review texts that are *outside* the validation and test sets of every
  shipped fine-tuning recipe on the reviews and of the reviews' default split (19,641 texts at the shipped splits),
  so fine-tuning never tests on a text the encoder was pre-trained on (:data:`FINETUNING_REVIEW_SPLITS`);
* ``enwiki-gensim``: the Wikipedia extract of the dataset registry in passages of ``max_length`` words, split by
  article;
* ``file``: a user's UTF-8 text file, one text per line (``data.path``).

``valid_size`` / ``test_size`` texts are held out for perplexity, masked once with ``eval_mask_seed``. Training
texts are masked afresh every epoch (BERT's dynamic masking) from the epoch's seeded generator, so a resumed run
draws the masks the uninterrupted one drew. Batches are whole texts (truncated to ``max_length`` word pieces of the
encoder's tokenizer), of similar length unless ``group_by_length: false``; each batch is cut to its longest text.

Order of masking and SSE: BERT's masking is made on the batch (data side), SSE inside the model on the ids the
embedding layer looks up (training only); both transforms exclude the tokenizer's special ids, [MASK] included, so
a masked position is never swapped and [MASK] / [PAD] / [CLS] / [SEP] / [UNK] are never drawn. The paper's SSE-SE
"on the input word-piece embeddings" acts on exactly those looked-up ids. The ``label`` transform acts on the
targets of the selected positions.

Metrics: ``loss``, ``ppl`` and ``accuracy`` (masked-token top-1 accuracy: the share of the selected positions whose
highest-scoring id is the original word piece) on ``val``/``test``; ``implicit_sse_rate`` (the share of the training
texts' non-special tokens BERT's masking replaces by a random token, measured at the recipe's settings: the SSE-SE
equivalent of Sec. 4.4) and ``mask_replaced_rate`` (replaced by [MASK] or a random token).

Example:
    >>> from embreg.recipes import load_recipe
    >>> load_recipe("mlm-sse").monitor
    ('val_ppl', 'min')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from embreg.batching.batches import TensorBatches
from embreg.batching.length_grouped_batches import LengthGroupedBatches
from embreg.data.mlm_masking import BertMasking, implicit_sse_rate
from embreg.errors import ConfigError, DataError
from embreg.tasks import TaskAdapter, register_task
from embreg.tasks.data_files import (
    check_fit_to_file,
    checked_file,
    file_record,
    note_dropped,
    note_fitted,
    resolve_data_file,
)
from embreg.tasks.mlm.evaluation import MaskedLMEvaluator

__all__ = [
    "MaskedLMDataConfig",
    "MaskedLMData",
    "MaskedLMTask",
    "FINETUNING_REVIEW_SPLITS",
    "pretraining_texts",
    "measured_replacement_rates",
    "REVIEW_DEFAULT_SPLIT",
]

REVIEW_DEFAULT_SPLIT = (0, 1000, 2000)
"""``(split_seed, valid_size, test_size)`` of a reviews fine-tuning run that leaves the sizes unset."""

FINETUNING_REVIEW_SPLITS = frozenset({REVIEW_DEFAULT_SPLIT, (0, 500, 1000)})
"""``(split_seed, valid_size, test_size)`` of every shipped fine-tuning recipe on the reviews and of the reviews'
default split: the pre-training texts of ``dataset: reviews`` avoid all their validation and test texts. A test
(tests/recipes/test_mlm_task.py) checks that every shipped fine-tuning recipe on the reviews is in this set, so a
new recipe with another split cannot leak its test texts into pre-training."""


@dataclass
class MaskedLMDataConfig:
    """The pre-training texts, their held-out sets and BERT's masking.

    Attributes:
        dataset: ``reviews``, ``enwiki-gensim`` or ``file`` (``path``: one text per line).
        path, sha256: your own text file and the checksum it must have (``null``: filled in when loaded).
        max_texts: training texts kept (``null``: all left after the held-out sets).
        valid_size, test_size: held-out texts for validation / test perplexity.
        split_seed: seed of the held-out sets (of the articles, for ``enwiki-gensim``).
        max_length: word pieces per text, [CLS] and [SEP] included (longer texts are truncated).
        mask_rate: share of the tokens selected for prediction (BERT: 0.15).
        mask_share, random_share: shares of the selected tokens replaced by [MASK] / a random token (BERT: 0.8 and
            0.1; the rest keep their id).
        eval_mask_seed: seed of the held-out texts' fixed masking.
        group_by_length: batch training texts of similar length together, so a batch cut to its longest text
            carries little padding (:mod:`embreg.batching.length_grouped_batches`; 1.5x fewer tokens per epoch on the
            reviews, docs/results/mlm-batching); ``false``: batches of texts drawn at random.
        max_articles: ``enwiki-gensim`` only: read the first articles of the dump (quick slices).
        fit_to_file: the sizes of :data:`FILE_SIZES` that give way to a user's file too small for them (filled in
            when the recipe is loaded with the sizes the user did not set; :mod:`embreg.tasks.data_files`):
            held-out sets that leave no text to train on become 10% of the texts each.
    """

    FILE_SIZES: ClassVar[tuple[str, ...]] = ("valid_size", "test_size")

    dataset: Literal["reviews", "enwiki-gensim", "file"] = "reviews"
    path: str | None = None
    sha256: str | None = None
    max_texts: int | None = None
    valid_size: int = 500
    test_size: int = 500
    split_seed: int = 0
    max_length: int = 128
    mask_rate: float = 0.15
    mask_share: float = 0.8
    random_share: float = 0.1
    eval_mask_seed: int = 0
    group_by_length: bool = True
    max_articles: int | None = None
    fit_to_file: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        resolve_data_file(self)
        check_fit_to_file(self)
        if self.max_texts is not None and self.max_texts < 1:
            raise ConfigError(f"data.max_texts={self.max_texts} must be >= 1 or null")
        for name in ("valid_size", "test_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"data.{name}={getattr(self, name)} must be >= 1")
        if self.max_length < 3:
            raise ConfigError(f"data.max_length={self.max_length} must be >= 3 ([CLS], a word piece, [SEP])")
        if not 0 < self.mask_rate <= 1:
            raise ConfigError(f"data.mask_rate={self.mask_rate} must be in (0, 1]")
        for name in ("mask_share", "random_share"):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"data.{name}={getattr(self, name)} must be in [0, 1]")
        if self.mask_share + self.random_share > 1 + 1e-9:
            raise ConfigError(
                f"data.mask_share + data.random_share = {self.mask_share + self.random_share} must be <= 1 (the rest "
                "of the selected tokens keep their id)"
            )
        if self.max_articles is not None and self.dataset != "enwiki-gensim":
            raise ConfigError(
                f"data.max_articles={self.max_articles} is read by dataset 'enwiki-gensim' only, not "
                f"{self.dataset!r}; remove it"
            )
        if self.max_articles is not None and self.max_articles < 1:
            raise ConfigError(f"data.max_articles={self.max_articles} must be >= 1 or null")


@dataclass
class MaskedLMData:
    """Prepared texts: ``tensors[split]`` (``input_ids``, ``attention_mask``; held-out splits also masked, with
    ``labels``), the masking, the vocabulary and what the data was."""

    tensors: dict[str, dict[str, torch.Tensor]]
    masking: BertMasking
    vocab_size: int
    special_ids: tuple[int, ...]
    source: dict[str, Any] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)
    encoder: dict[str, str] = field(default_factory=dict)


class MaskBatch:
    """The batch transform of the training texts: BERT's masking from the epoch's generator."""

    def __init__(self, masking: BertMasking) -> None:
        self.masking = masking

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator) -> dict[str, torch.Tensor]:
        inputs, labels = self.masking(batch["input_ids"], batch.get("attention_mask"), generator)
        return {**batch, "input_ids": inputs, "labels": labels}


def _split_texts(
    texts: list[str], d: MaskedLMDataConfig, where: str, fitted: dict[str, tuple[int, int]] | None = None
) -> dict[str, list[str]]:
    """The held-out sets (``data.test_size``, then ``data.valid_size`` texts of a seeded permutation) and the
    training texts left (at most ``data.max_texts``). Sizes of ``data.fit_to_file`` that leave no training text
    become 10% of the texts each, recorded in ``fitted`` as ``{key: (set, used)}``."""
    sizes = {"valid_size": d.valid_size, "test_size": d.test_size}
    if len(texts) <= sum(sizes.values()) and d.fit_to_file:
        for key in d.fit_to_file:
            sizes[key] = max(1, len(texts) // 10)
        if fitted is not None:
            fitted.update(
                {key: (getattr(d, key), sizes[key]) for key in d.fit_to_file if sizes[key] != getattr(d, key)}
            )
    valid_size, test_size = sizes["valid_size"], sizes["test_size"]
    held = valid_size + test_size
    if len(texts) <= held:
        raise DataError(
            f"{where}: {len(texts)} texts leave none to train on after valid_size={valid_size} + "
            f"test_size={test_size} held out; set data.valid_size and data.test_size lower"
        )
    order = np.random.default_rng(d.split_seed).permutation(len(texts))
    train = order[held:] if d.max_texts is None else order[held : held + d.max_texts]
    return {
        "train": [texts[i] for i in sorted(train)],
        "valid": [texts[i] for i in sorted(order[test_size:held])],
        "test": [texts[i] for i in sorted(order[:test_size])],
    }


def _review_texts(d: MaskedLMDataConfig) -> tuple[dict[str, list[str]], dict[str, Any]]:
    from embreg.data.datasets.mlm_texts import review_holdout_rows
    from embreg.data.datasets.reviews import read_reviews

    texts = read_reviews()["text"].tolist()
    holdout = review_holdout_rows(len(texts), FINETUNING_REVIEW_SPLITS)
    held_texts = {texts[i] for i in holdout}
    kept = [t for i, t in enumerate(texts) if i not in holdout and t not in held_texts]  # duplicates of them too
    record = {"dataset": "clothing-reviews", "texts_read": len(texts), "fine_tuning_holdout": len(texts) - len(kept)}
    return _split_texts(kept, d, "clothing-reviews"), record


def _wiki_texts(d: MaskedLMDataConfig) -> tuple[dict[str, list[str]], dict[str, Any]]:
    from embreg.data.datasets.mlm_texts import wiki_passages

    articles = wiki_passages(d.max_length, d.max_articles)
    order = np.random.default_rng(d.split_seed).permutation(len(articles))
    splits: dict[str, list[str]] = {"test": [], "valid": [], "train": []}
    for index in order:  # whole articles: test first, then valid, the rest trains
        split = (
            "test" if len(splits["test"]) < d.test_size else "valid" if len(splits["valid"]) < d.valid_size else "train"
        )
        splits[split].extend(articles[index])
    if not splits["train"]:
        raise DataError(f"enwiki-gensim: no article left to train on after {d.valid_size} + {d.test_size} held out")
    if d.max_texts is not None:
        splits["train"] = splits["train"][: d.max_texts]
    return splits, {"dataset": "enwiki-gensim", "articles": len(articles)}


def _line_count(path: str) -> int:
    """The lines of a text file, a last one without its newline included (blank ones too)."""
    data = Path(path).read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def pretraining_texts(d: MaskedLMDataConfig) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """The ``train`` / ``valid`` / ``test`` texts of a data section and a record of where they came from.

    For ``dataset: reviews`` no text is in the validation or test set of a fine-tuning recipe
    (:data:`FINETUNING_REVIEW_SPLITS`).

    Raises:
        DataError: too few texts for the held-out sets; a file that is missing, changed or unreadable (the line
            named).
    """
    if d.dataset == "file":
        from embreg.data.datasets.mlm_texts import read_text_lines

        described = checked_file(d)
        texts = read_text_lines(str(d.path))
        fitted: dict[str, tuple[int, int]] = {}
        splits = _split_texts(texts, d, str(d.path), fitted)
        used = sum(len(split) for split in splits.values())
        record = file_record(described, {"rows_read": _line_count(str(d.path))}, used)
        where = described["path"]
        beyond = len(texts) - used
        dropped = {
            "blank lines": record["rows_read"] - len(texts),
            f"texts beyond data.max_texts={d.max_texts}": beyond,
        }
        note_dropped(record, where, dropped)
        note_fitted(record, where, fitted, "the 80/10/10 rule holds 10% of its texts out for validation and for test")
        return splits, record
    if d.dataset == "enwiki-gensim":
        return _wiki_texts(d)
    return _review_texts(d)


class MaskedLMTask(TaskAdapter):
    """BERT's masked-LM objective on whole texts; cross-entropy, perplexity (``ppl``) and masked-token top-1
    ``accuracy`` on held-out texts."""

    name = "mlm"
    data_config = MaskedLMDataConfig
    default_model = "encoder-mlm"
    id_kinds = ("token", "label")
    smoke_overrides = (
        "data.max_texts=64",
        "data.valid_size=16",
        "data.test_size=16",
        "data.max_length=32",
        "train.batch_size=16",
        "train.eval_batch_size=16",
        "train.epochs=1",
        "train.progress=false",
    )
    # BERT's optimiser (Devlin et al. 2019, App. A.2) at fine-tuning size: AdamW, linear warm-up over 10%
    train_defaults = {
        "epochs": 1,
        "batch_size": 32,
        "eval_batch_size": 64,
        "lr": 5e-5,
        "optimizer": "adamw",
        "schedule": "linear",
        "warmup": 0.1,
        "weight_decay": 0.01,
        "clip_norm": 1.0,
        "patience": None,
        "keep_checkpoints": "best",
    }
    headline = ("test_ppl", "test_accuracy")

    def monitor(self, recipe: Any) -> tuple[str, str]:
        return "val_ppl", "min"

    def evaluated_metrics(self, recipe: Any) -> tuple[str, ...]:
        return ("loss", "ppl", "accuracy")

    def extra_metric_names(self, recipe: Any) -> tuple[str, ...]:
        return ("implicit_sse_rate", "mask_replaced_rate")

    def prepare(self, recipe: Any) -> MaskedLMData:
        from embreg.models.encoder_classifier import encode_texts
        from embreg.models.pretrained import encoder_source, load_tokenizer

        d = recipe.data
        splits, source = pretraining_texts(d)
        source = {**source, "rows": sum(len(split) for split in splits.values())}
        tokenizer = load_tokenizer(recipe.model.pretrained, progress=recipe.train.progress)
        if tokenizer.mask_token_id is None:
            raise DataError(f"the tokenizer of {recipe.model.pretrained!r} has no [MASK] token; masked LM needs one")
        specials = tuple(sorted({int(i) for i in tokenizer.all_special_ids}))
        masking = BertMasking(
            len(tokenizer), specials, int(tokenizer.mask_token_id), d.mask_rate, d.mask_share, d.random_share
        )
        generator = torch.Generator().manual_seed(d.eval_mask_seed)
        tensors = {}
        for split in ("train", "valid", "test"):
            encoded = encode_texts(tokenizer, splits[split], d.max_length)
            if split != "train":
                encoded["input_ids"], encoded["labels"] = masking(
                    encoded["input_ids"], encoded["attention_mask"], generator
                )
            tensors[split] = encoded
        record = {
            "data": source,
            "sizes": {s: len(t) for s, t in splits.items()},
            "split_seed": d.split_seed,
            "special_ids": list(specials),
            "mask_id": int(tokenizer.mask_token_id),
            "masking": implicit_sse_rate(d.mask_rate, d.mask_share, d.random_share),
        }
        encoder = encoder_source(recipe.model.pretrained)
        return MaskedLMData(tensors, masking, len(tokenizer), specials, source, record, encoder)

    def num_ids(self, prepared: MaskedLMData, kind: str) -> int:
        """The tokenizer's vocabulary size, for input and target ids alike (the decoder is tied to the inputs)."""
        return int(prepared.vocab_size)

    def excluded_ids(self, prepared: MaskedLMData, kind: str) -> tuple[int, ...]:
        """The tokenizer's special ids ([PAD], [UNK], [CLS], [SEP], [MASK]): never swapped, never drawn."""
        return prepared.special_ids

    def batches(self, recipe: Any, prepared: MaskedLMData) -> TensorBatches:
        train = prepared.tensors["train"]
        transform = MaskBatch(prepared.masking)
        if recipe.data.group_by_length:
            lengths = train["attention_mask"].sum(dim=1)
            return LengthGroupedBatches(
                train, lengths, recipe.train.batch_size, seed=recipe.train.seed, transform=transform
            )
        return TensorBatches(train, recipe.train.batch_size, seed=recipe.train.seed, transform=transform)

    def evaluator(self, recipe: Any, prepared: MaskedLMData) -> MaskedLMEvaluator:
        splits = {name: prepared.tensors[name] for name in ("valid", "test")}
        return MaskedLMEvaluator(splits, batch_size=recipe.train.eval_batch_size or 64)

    def records(self, recipe: Any, prepared: MaskedLMData) -> dict[str, Any]:
        return {"split.json": prepared.record}

    def data_used(self, recipe: Any, prepared: MaskedLMData) -> dict[str, Any]:
        """The texts, where the encoder came from and which MLM head it started with (the report names them)."""
        from embreg.models.pretrained_mlm_head import pretrained_mlm_head

        return prepared.source | prepared.encoder | {"mlm_head": pretrained_mlm_head(recipe.model.pretrained)[1]}

    def finish(self, recipe: Any, prepared: MaskedLMData, trainer: Any, evaluator: Any, metrics: dict) -> dict:
        """Adds the replacement rates of BERT's masking, measured on one masking of the training texts."""
        metrics = dict(metrics)
        metrics.update(measured_replacement_rates(prepared, recipe.train.seed))
        return metrics


def measured_replacement_rates(prepared: MaskedLMData, seed: int) -> dict[str, float]:
    """``implicit_sse_rate`` (share of the non-special tokens masking replaced by a random *other* token) and
    ``mask_replaced_rate`` (replaced by [MASK] or another token), over one masking of the training texts."""
    train = prepared.tensors["train"]
    ids, attention = train["input_ids"], train["attention_mask"]
    inputs, _ = prepared.masking(ids, attention, torch.Generator().manual_seed(seed))
    special = torch.zeros(prepared.vocab_size, dtype=torch.bool)
    special[list(prepared.special_ids)] = True
    words = attention.bool() & ~special[ids]
    changed = words & (inputs != ids)
    mask_id = prepared.masking.mask_id
    total = max(int(words.sum()), 1)
    return {
        "implicit_sse_rate": float((changed & (inputs != mask_id)).sum()) / total,
        "mask_replaced_rate": float(changed.sum()) / total,
    }


register_task(
    MaskedLMTask(),
    "masked-LM continued pre-training of an encoder: cross-entropy; perplexity and masked-token accuracy",
    "sse-stochastic-shared-embeddings.txt, Sec. 4.4",
)
