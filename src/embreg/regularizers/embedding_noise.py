"""Embedding noise: Gaussian noise on the output of every embedding layer while training.

Reference: nlp-best-practices.txt, "Best practices" > "Dropout", paragraph 1: noise injected into a network
("dropout ... is still the go-to regularizer for deep neural networks in NLP") is the regulariser of choice in
NLP, with the caveat that multiplicative masks "would effectively zero out embeddings over time" in recurrent
models. The document names no additive Gaussian variant; the noise here is the additive, zero-mean form
``eps_i ~ N(0, sigma^2)`` that lnsr-noise-stability-bert.txt, Sec. 3.1 injects into a representation, applied to
the embedding lookups (as FT+Noise, :class:`~embreg.regularizers.LayerNoise`, applies it to a layer's input). It
does not zero any coordinate, so the problem the document describes for dropout on embeddings does not arise.

:meth:`EmbeddingNoise.prepare` puts a forward hook on each *top-level* embedding module of the model:
``nn.Embedding``, ``nn.EmbeddingBag``, :class:`~embreg.embeddings.MixedDimensionEmbedding`,
:class:`~embreg.embeddings.MixedDimensionEmbeddingBag` and :class:`~embreg.nn.EmbeddingDropout` (which looks its
wrapped table up itself). A module nested inside another embedding module (the ``nn.Embedding`` inside an
``EmbeddingDropout``) is not hooked, so every lookup gets noise exactly once. A table reached through an
:class:`~embreg.sse.SSEEmbedding` is hooked as usual: the noise lands on the vectors of the transformed ids.

Cost: one Gaussian draw of the size of each embedding output per training step; no extra forward or backward.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from embreg.embeddings import MixedDimensionEmbedding, MixedDimensionEmbeddingBag
from embreg.errors import ConfigError
from embreg.nn import EmbeddingDropout
from embreg.registry import register
from embreg.regularizers._checks import check_number

__all__ = ["EMBEDDING_MODULES", "EmbeddingNoise", "EmbeddingNoiseConfig", "embedding_modules"]

EMBEDDING_MODULES: tuple[type[nn.Module], ...] = (
    nn.Embedding,
    nn.EmbeddingBag,
    MixedDimensionEmbedding,
    MixedDimensionEmbeddingBag,
    EmbeddingDropout,
)
"""Module types whose output is an embedding lookup."""


def embedding_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The top-level embedding modules of ``model``: ``(name, module)`` in registration order.

    A module of :data:`EMBEDDING_MODULES` counts unless it sits inside another one (e.g. the table wrapped by an
    ``EmbeddingDropout``), even when it is also reachable another way (a tied output layer holding the table).

    Example:
        >>> from embreg.embeddings import MixedDimensionEmbedding
        >>> model = nn.ModuleDict({"user": nn.Embedding(5, 4), "item": MixedDimensionEmbedding([2, 3], [4, 2], 4)})
        >>> [name for name, _ in embedding_modules(model)]
        ['user', 'item']
    """
    found = [(name, m) for name, m in model.named_modules() if isinstance(m, EMBEDDING_MODULES)]
    nested = {id(sub) for _, m in found for sub in m.modules() if sub is not m}
    return [(name, m) for name, m in found if id(m) not in nested]


class EmbeddingNoise:
    """Adds ``N(0, sigma^2)`` noise to every embedding output in training mode (identity in eval and at 0).

    Shapes: an embedding's output ``(..., D)`` (``(B, D)`` for a bag) keeps its shape and dtype; the noise is
    drawn elementwise from the global torch generator (seeded by ``train.seed``, saved in checkpoints).

    Args:
        sigma: noise standard deviation (>= 0; 0 switches it off).

    Raises:
        ConfigError: ``sigma`` negative or not a number; :meth:`prepare` on a model without embedding modules.

    Example:
        >>> model = nn.Sequential(nn.Embedding(10, 3))
        >>> model = EmbeddingNoise(sigma=0.1).prepare(model)
        >>> ids = torch.tensor([1, 2])
        >>> bool(torch.equal(model.eval()(ids), model[0].weight[ids]))
        True
        >>> bool(torch.equal(model.train()(ids), model[0].weight[ids]))
        False
    """

    def __init__(self, sigma: float = 0.01) -> None:
        self.sigma = check_number(sigma, "sigma")
        self._handles: list[Any] = []

    def prepare(self, model: nn.Module) -> nn.Module:
        """Hooks the top-level embedding modules of ``model`` (again from scratch when called twice)."""
        modules = embedding_modules(model)
        if not modules:
            kinds = ", ".join(t.__name__ for t in EMBEDDING_MODULES)
            raise ConfigError(
                f"embedding-noise: {type(model).__name__} has no embedding module ({kinds}) to add noise to"
            )
        self.remove()
        self._handles = [m.register_forward_hook(self._add_noise) for _, m in modules]
        return model

    @property
    def num_hooked(self) -> int:
        """How many embedding modules carry the noise hook."""
        return len(self._handles)

    def remove(self) -> None:
        """Removes the hooks (the model behaves as before :meth:`prepare`)."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _add_noise(self, module: nn.Module, args: tuple, output: Any) -> Any:
        if not module.training or self.sigma == 0.0:
            return None
        if isinstance(output, torch.Tensor) and output.is_floating_point():
            return output + torch.randn_like(output) * self.sigma
        return None


@dataclass
class EmbeddingNoiseConfig:
    """``regularizers: [{name: embedding-noise, sigma: 0.01}]`` (see :class:`EmbeddingNoise`)."""

    sigma: float = 0.01

    def __post_init__(self) -> None:
        EmbeddingNoise(self.sigma)  # checks sigma: a bad value fails when the recipe loads


@register(
    "regularizer",
    "embedding-noise",
    config=EmbeddingNoiseConfig,
    summary="Gaussian noise N(0, sigma^2) on every embedding output while training (no extra pass)",
    reference="nlp-best-practices.txt, Best practices > Dropout, para. 1; noise as in "
    "lnsr-noise-stability-bert.txt, Sec. 3.1",
)
def build_embedding_noise(config: EmbeddingNoiseConfig, context: Any) -> EmbeddingNoise:
    return EmbeddingNoise(config.sigma)
