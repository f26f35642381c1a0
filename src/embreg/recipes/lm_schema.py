"""Typed configuration of language-model recipes (``task: lm``): text data, the LSTM, its dropout, the technique.

The ``technique`` section selects one of the update rules of dropout-explicit-implicit-regularization.txt with one
line (``technique.name``); the per-site dropout probabilities of the ``dropout`` section are what the dropout-based
techniques use *and* what the analytic ones match (``lambda_1 = q/(1-q)``, ``lambda_2 = sqrt(q/(1-q))`` per site,
App. D.1), so ``--set technique.name=explicit_xi`` swaps dropout for Alg. 2 at the same strength.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from embreg.errors import ConfigError
from embreg.recipes.schema import SearchParam

TECHNIQUES = ("standard", "dropout_k", "explicit", "explicit_xi", "dropout_k_xi", "dropout_k_two_mask")


def _probability(name: str, value: float) -> None:
    if not 0 <= value < 1:
        raise ConfigError(f"{name}={value} is outside [0, 1)")


@dataclass
class TextDataConfig:
    """The corpus, its article-level split, vocabulary and BPTT batching.

    Attributes:
        dataset: registry name (``enwiki-gensim``); ignored when ``paths`` is set.
        paths: your own ``[train, valid, test]`` plain-text files instead of a registry dataset.
        split: token shares of train/valid/test (articles are never divided).
        split_seed: seed of the article split.
        min_count: training words seen fewer times become ``<unk>``.
        max_vocab: cap on the vocabulary size (``null``: none).
        max_articles: use only the first articles of the dump (quick slices).
        max_train_tokens, max_eval_tokens: truncate the training / each evaluation stream (CPU-sized runs).
        bptt: window length; variable_bptt: AWD-LSTM's random window lengths.
        batch_size: training streams; eval_batch_size: evaluation streams.
    """

    dataset: str = "enwiki-gensim"
    paths: list[str] | None = None
    split: list[float] = field(default_factory=lambda: [0.8, 0.1, 0.1])
    split_seed: int = 0
    min_count: int = 3
    max_vocab: int | None = None
    max_articles: int | None = None
    max_train_tokens: int | None = None
    max_eval_tokens: int | None = None
    bptt: int = 35
    variable_bptt: bool = False
    batch_size: int = 20
    eval_batch_size: int = 10

    def __post_init__(self) -> None:
        if self.paths is not None and len(self.paths) != 3:
            raise ConfigError(f"data.paths={self.paths} must list three files: train, valid, test")
        if len(self.split) != 3 or any(f <= 0 for f in self.split) or abs(sum(self.split) - 1) > 1e-6:
            raise ConfigError(f"data.split={self.split} must be three positive fractions summing to 1")
        for name in ("min_count", "bptt", "batch_size", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"data.{name}={getattr(self, name)} must be >= 1")
        for name in ("max_train_tokens", "max_eval_tokens"):
            value = getattr(self, name)
            if value is not None and value < 100:
                raise ConfigError(f"data.{name}={value} must be >= 100 or null")


@dataclass
class LMModelConfig:
    """The AWD-style LSTM (see :class:`embreg.models.LSTMLanguageModel`).

    Attributes:
        emb_dim, hidden_dim, layers: sizes (the last layer has ``emb_dim`` units when tied without projection).
        tie: tie input and output embeddings.
        proj_dim: down-projection before the softmax (``null``: none).
        learn_init: learn the initial LSTM state.
        init_range: embeddings start uniform in ``+-init_range``.
    """

    emb_dim: int = 200
    hidden_dim: int = 400
    layers: int = 2
    tie: bool = True
    proj_dim: int | None = None
    learn_init: bool = False
    init_range: float = 0.1

    def __post_init__(self) -> None:
        for name in ("emb_dim", "hidden_dim", "layers"):
            if getattr(self, name) < 1:
                raise ConfigError(f"model.{name}={getattr(self, name)} must be >= 1")


@dataclass
class LMDropoutConfig:
    """Dropout probability per site (paper Sec. 5.1 uses 0.4 on input, hidden, output and weights)."""

    embedding: float = 0.0
    input: float = 0.4
    hidden: float = 0.4
    output: float = 0.4
    weight: float = 0.4

    def __post_init__(self) -> None:
        for name in ("embedding", "input", "hidden", "output", "weight"):
            _probability(f"dropout.{name}", getattr(self, name))

    def per_site_group(self) -> dict[str, float]:
        """``{site group of LSTMLanguageModel: q}``."""
        return {"embedding": self.embedding, "input": self.input, "hidden": self.hidden, "output": self.output,
                "weight_hh": self.weight}


@dataclass
class TechniqueConfig:
    """Which update rule regularises training.

    Attributes:
        name: ``standard`` (the model's own dropout: Dropout_1, or nothing when every probability is 0),
            ``dropout_k`` (Alg. 1), ``explicit`` (R_approx or an ablation, no dropout), ``explicit_xi`` (Alg. 2),
            ``dropout_k_xi`` (Alg. 4), ``dropout_k_two_mask`` (Sec. 3.1's exact noise).
        k: dropout samples for the ``dropout_k*`` rules.
        form: ``hessian`` (R_approx, eq. 4.4), ``identity`` or ``loss_jacobian`` (R~_approx, eq. 5.1).
        lambda1, lambda2: one coefficient for every site (``null``: ``q/(1-q)`` and ``sqrt(q/(1-q))`` per site).
        samples: label samples of the R_approx estimator.
        structure: ``element`` (eq. 4.4 as written, independent noise per entry) or ``model`` (the model's sharing).
        sites: site groups the analytic terms act on (``null``: every site whose dropout probability is > 0).
    """

    name: Literal["standard", "dropout_k", "explicit", "explicit_xi", "dropout_k_xi", "dropout_k_two_mask"] = "standard"
    k: int = 1
    form: Literal["hessian", "identity", "loss_jacobian"] = "hessian"
    lambda1: float | None = None
    lambda2: float | None = None
    samples: int = 1
    structure: Literal["element", "model"] = "element"
    sites: list[str] | None = None

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ConfigError(f"technique.k={self.k} must be >= 1")
        if self.samples < 1:
            raise ConfigError(f"technique.samples={self.samples} must be >= 1")
        for name in ("lambda1", "lambda2"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"technique.{name}={value} must be >= 0 or null")


@dataclass
class LMTrainConfig:
    """Optimisation (App. D.1 uses SGD, lr 30, clipping 0.35 and weight decay 1.2e-6 with AWD-LSTM)."""

    epochs: int = 20
    lr: float = 30.0
    optimizer: Literal["adam", "adamw", "sgd", "adagrad"] = "sgd"
    weight_decay: float = 1.2e-6
    clip_norm: float | None = 0.35
    patience: int | None = None
    seed: int = 0
    threads: int | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise ConfigError(f"train.epochs={self.epochs} must be >= 1")
        if self.lr <= 0:
            raise ConfigError(f"train.lr={self.lr} must be > 0")
        if self.weight_decay < 0:
            raise ConfigError(f"train.weight_decay={self.weight_decay} must be >= 0")


@dataclass
class LMRecipeConfig:
    """A language-model recipe. ``task`` must be ``lm`` (it tells the command line which schema to use)."""

    name: str = "lm"
    description: str = ""
    task: Literal["lm"] = "lm"
    data: TextDataConfig = field(default_factory=TextDataConfig)
    model: LMModelConfig = field(default_factory=LMModelConfig)
    dropout: LMDropoutConfig = field(default_factory=LMDropoutConfig)
    technique: TechniqueConfig = field(default_factory=TechniqueConfig)
    train: LMTrainConfig = field(default_factory=LMTrainConfig)
    search: dict[str, SearchParam] = field(default_factory=dict)
    tuned: str = ""

    @property
    def monitor(self) -> tuple[str, str]:
        return "val_ppl", "min"
