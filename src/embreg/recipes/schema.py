"""Typed recipe configuration for recommender recipes (MF, NCF and BPR with optional SSE or dropout; DLRM for CTR).

Every field has a default; a recipe YAML names only what differs. Unknown or misspelt keys are errors that
suggest the closest valid key (see :func:`embreg.config.from_dict`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from embreg.data.graphs import DEFAULT_KG_RELATIONS
from embreg.errors import ConfigError
from embreg.recipes.embedding_schema import EmbeddingConfig


@dataclass
class DataConfig:
    """Where the interactions come from and how they are split.

    Attributes:
        dataset: a registry name (``embreg list``); ignored when ``path`` is set.
        path: a user's own ratings file (CSV/TSV/parquet) instead of a registry dataset.
        user_col, item_col, rating_col, timestamp_col: column mapping for ``path`` (``rating_col: null`` means
            implicit feedback).
        sep: field separator for text files (``null``: from the extension, else sniffed).
        split: train/valid/test fractions.
        split_seed: seed of the split (recorded in the run directory).
        min_rating: for ranking tasks, interactions with a rating below this are dropped (``null``: keep all).
        max_rows: keep only the first ``max_rows`` interactions (quick slices for tests and smoke runs).
    """

    dataset: str = "ml-100k"
    path: str | None = None
    user_col: str = "user_id"
    item_col: str = "item_id"
    rating_col: str | None = "rating"
    timestamp_col: str | None = None
    sep: str | None = None
    split: list[float] = field(default_factory=lambda: [0.8, 0.1, 0.1])
    split_seed: int = 0
    min_rating: float | None = None
    max_rows: int | None = None

    def __post_init__(self) -> None:
        if len(self.split) != 3 or any(f <= 0 for f in self.split) or abs(sum(self.split) - 1) > 1e-6:
            raise ConfigError(f"split={self.split} must be three positive fractions summing to 1")
        if self.max_rows is not None and self.max_rows < 10:
            raise ConfigError(f"max_rows={self.max_rows} must be >= 10 or null")


@dataclass
class ModelConfig:
    """The recommender and its embedding tables.

    Attributes:
        name: ``mf`` (biased MF, squared loss), ``bpr`` (pairwise ranking loss), ``ncf`` (GMF + MLP, squared
            loss) or ``dlrm`` (CTR: bottom MLP, per-field embeddings, dot interactions, top MLP).
        dim: embedding dimension (the base dimension of mixed-dimension tables).
        dropout: dropout on the user/item vectors (MF/BPR: the paper's "Dropout + MF/BPR" baseline; NCF: in the MLP).
        l2: weight of the batch-mean squared norm of looked-up vectors and biases (MF/BPR).
        init_std: standard deviation of the normal initialisation of the vectors.
        init: how the embedding tables start: ``normal`` (rows ``N(0, init_std^2)``) or ``xavier_uniform``
            (``U(-b, b)``, ``b = sqrt(6 / (rows + columns))`` for every table and projection, a mixed-dimension
            block's rows as rows of its whole table; the mixed-dimension paper's protocol, Appendix H-I); see
            :func:`embreg.embeddings.init_embedding_`. NCF's and DLRM's linear layers start uniform Xavier with
            zero biases whatever this says (:func:`embreg.models.mlp.mlp`).
        mlp: NCF's MLP widths (mixed-dimension-embeddings.txt, Appendix H: 128-128-32).
        bottom_mlp: DLRM's bottom MLP hidden widths (its last layer outputs ``dim``).
        top_mlp: DLRM's top MLP hidden widths (its last layer outputs the logit).
    """

    name: Literal["mf", "bpr", "ncf", "dlrm"] = "mf"
    dim: int = 64
    dropout: float = 0.0
    l2: float = 0.0
    init_std: float = 0.1
    init: Literal["normal", "xavier_uniform"] = "normal"
    mlp: list[int] = field(default_factory=lambda: [128, 128, 32])
    bottom_mlp: list[int] = field(default_factory=lambda: [64])
    top_mlp: list[int] = field(default_factory=lambda: [64, 32])

    def __post_init__(self) -> None:
        if self.dim < 1:
            raise ConfigError(f"model.dim={self.dim} must be >= 1")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"model.dropout={self.dropout} is outside [0, 1)")
        if self.l2 < 0:
            raise ConfigError(f"model.l2={self.l2} must be >= 0")
        for name in ("mlp", "bottom_mlp", "top_mlp"):
            if any(width < 1 for width in getattr(self, name)):
                raise ConfigError(f"model.{name}={getattr(self, name)} must hold widths >= 1")


@dataclass
class SSEConfig:
    """Stochastic shared embeddings on the user and item tables (sse-stochastic-shared-embeddings.txt, Sec. 3).

    Attributes:
        kind: ``none``, ``se`` (SSE-SE, eq. 5) or ``graph`` (SSE-Graph, eq. 3).
        p_user, p_item: SSE probability per table (``p_u``, ``p_i`` in the paper's Table 1).
        rho_user, rho_item: neighbour preference ``rho >= 1`` of SSE-Graph per table.
        item_graph: item knowledge graph for SSE-Graph: ``kg`` (shared actor/director/writer/producer) or
            ``genre`` (shared genre).
        kg_relations: relations that make two items neighbours in the ``kg`` graph.
        user_graph: user graph for SSE-Graph: ``none`` (SSE-SE on users) or ``occupation`` (same occupation).
        seed_offset: added to the training seed to seed the transforms' own generators.
    """

    kind: Literal["none", "se", "graph"] = "none"
    p_user: float = 0.0
    p_item: float = 0.0
    rho_user: float = 1.0
    rho_item: float = 1.0
    item_graph: Literal["kg", "genre"] = "kg"
    kg_relations: list[str] = field(default_factory=lambda: list(DEFAULT_KG_RELATIONS))
    user_graph: Literal["none", "occupation"] = "none"
    seed_offset: int = 1000

    def __post_init__(self) -> None:
        for name in ("p_user", "p_item"):
            value = getattr(self, name)
            if not 0 <= value <= 1:
                raise ConfigError(f"sse.{name}={value} is outside [0, 1]")
        for name in ("rho_user", "rho_item"):
            value = getattr(self, name)
            if value < 1:
                raise ConfigError(f"sse.{name}={value} must be >= 1")


@dataclass
class TrainConfig:
    """Optimisation and early stopping.

    Attributes:
        epochs: maximum epochs.
        batch_size: examples per step.
        lr, optimizer, weight_decay: the optimizer (``adam``, ``amsgrad`` (Adam with the AMSGrad maximum),
            ``adamw``, ``sgd`` or ``adagrad``).
        patience: evaluations without improvement before stopping (``null``: never stop early).
        clip_norm: global gradient-norm clipping (``null``: none).
        seed: training seed (initialisation, batch order, negatives, dropout, SSE).
        num_negatives: sampled negatives per positive (BPR).
        eval_train: also score the training split each epoch (learning curves).
        threads: torch CPU threads (``null``: torch's default).
        progress: show a progress bar.
    """

    epochs: int = 100
    batch_size: int = 1024
    lr: float = 1e-3
    optimizer: Literal["adam", "amsgrad", "adamw", "sgd", "adagrad"] = "adam"
    weight_decay: float = 0.0
    patience: int | None = 5
    clip_norm: float | None = None
    seed: int = 0
    num_negatives: int = 1
    eval_train: bool = False
    threads: int | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise ConfigError(f"train.epochs={self.epochs} must be >= 1")
        if self.batch_size < 1:
            raise ConfigError(f"train.batch_size={self.batch_size} must be >= 1")
        if self.lr <= 0:
            raise ConfigError(f"train.lr={self.lr} must be > 0")
        if self.num_negatives < 1:
            raise ConfigError(f"train.num_negatives={self.num_negatives} must be >= 1")


@dataclass
class SearchParam:
    """One dimension of a hyper-parameter search (``embreg sweep``).

    Attributes:
        type: ``float``, ``log_float``, ``int`` or ``categorical``.
        low, high: bounds for numeric types.
        choices: values for ``categorical``.
    """

    type: Literal["float", "log_float", "int", "categorical"] = "float"
    low: float | None = None
    high: float | None = None
    choices: list[int | float | str | bool | None] | None = None

    def __post_init__(self) -> None:
        if self.type == "categorical":
            if not self.choices:
                raise ConfigError("a categorical search parameter needs a non-empty 'choices' list")
        elif self.low is None or self.high is None or self.low >= self.high:
            raise ConfigError(f"a {self.type} search parameter needs low < high, got low={self.low}, high={self.high}")
        elif self.type == "log_float" and self.low <= 0:
            raise ConfigError(f"a log_float search parameter needs low > 0, got {self.low}")


@dataclass
class RecipeConfig:
    """A recommender recipe: task, data, model, embedding tables, SSE, training and its tuning search space.

    Attributes:
        name: recipe name (``embreg list``).
        description: one line shown by ``embreg list``.
        task: ``rating`` (explicit: RMSE/MAE), ``ranking`` (implicit: full-ranking top-k metrics) or ``ctr``
            (binary click labels: log-loss, accuracy, AUC; ``data.dataset`` is ``adult``, ``ml-100k-ctr`` or
            ``synthetic-ctr``).
        embedding: uniform or mixed-dimension tables (:class:`EmbeddingConfig`).
        search: dotted config key -> search dimension, used by ``embreg sweep``.
        tuned: provenance of the values in this recipe (which sweep chose them).
    """

    name: str = "recipe"
    description: str = ""
    task: Literal["rating", "ranking", "ctr"] = "rating"
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    sse: SSEConfig = field(default_factory=SSEConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    search: dict[str, SearchParam] = field(default_factory=dict)
    tuned: str = ""

    def __post_init__(self) -> None:
        if self.task == "rating" and self.model.name not in ("mf", "ncf"):
            raise ConfigError(f"task 'rating' needs model.name 'mf' or 'ncf', got {self.model.name!r}")
        if self.task == "ranking" and self.model.name != "bpr":
            raise ConfigError(f"task 'ranking' needs model.name 'bpr', got {self.model.name!r}")
        if self.task == "ctr" and self.model.name != "dlrm":
            raise ConfigError(f"task 'ctr' needs model.name 'dlrm', got {self.model.name!r}")
        if self.task == "ctr" and self.sse.kind != "none":
            raise ConfigError(f"sse.kind={self.sse.kind!r} is not supported for task 'ctr'; use 'none'")
        if self.embedding.kind == "md" and self.model.name == "bpr":
            raise ConfigError("embedding.kind 'md' is available for models mf, ncf and dlrm, not 'bpr'")

    @property
    def monitor(self) -> tuple[str, str]:
        """The validation metric that selects the best epoch and its direction."""
        if self.task == "ctr":
            return ("val_logloss", "min")
        return ("val_rmse", "min") if self.task == "rating" else ("val_ndcg@10", "max")
