"""SYNTHETIC Criteo-like CTR data, for scale and speed benchmarks only (never a stand-in for real results).

26 categorical fields whose cardinalities are spaced log-uniformly from about 10 to about 10^6 (as Criteo
Kaggle's range from order 10 to order 10^7), Zipf-distributed value popularity within every field (value ranks
shuffled so that popular ids are not simply the small ones), 13 dense features, and a label drawn from a planted
model with a low-rank pairwise interaction: each value ``x`` of field ``f`` has a latent vector
``v_f[x]`` in R^rank, and

    logit = b + w . dense + scale * sum_{f < g} <v_f[x_f], v_g[x_g]>,   label ~ Bernoulli(sigmoid(logit)).

Example:
    >>> data = synthetic_ctr(1000, num_fields=4, max_cardinality=1000, seed=0)
    >>> data.name, data.synthetic, data.categorical.shape, data.cardinalities
    ('synthetic-ctr (SYNTHETIC)', True, (1000, 4), (10, 46, 215, 1000))
"""

from __future__ import annotations

import numpy as np

from embreg.data.ctr import CTRData
from embreg.errors import DataError

__all__ = ["synthetic_ctr", "criteo_like_cardinalities"]


def criteo_like_cardinalities(
    num_fields: int = 26, min_cardinality: int = 10, max_cardinality: int = 10**6
) -> tuple[int, ...]:
    """``num_fields`` cardinalities spaced log-uniformly in ``[min_cardinality, max_cardinality]``, rounded.

    Example:
        >>> criteo_like_cardinalities(3, 10, 1000)
        (10, 100, 1000)
    """
    if num_fields < 1:
        raise DataError(f"num_fields={num_fields} must be >= 1")
    if not 2 <= min_cardinality <= max_cardinality:
        raise DataError(
            f"cardinalities need 2 <= min_cardinality={min_cardinality} <= max_cardinality={max_cardinality}"
        )
    sizes = np.geomspace(min_cardinality, max_cardinality, num_fields)
    return tuple(int(round(s)) for s in sizes)


def _zipf_sample(rng: np.random.Generator, cardinality: int, exponent: float, size: int) -> np.ndarray:
    weights = np.arange(1, cardinality + 1, dtype=np.float64) ** -exponent
    cdf = np.cumsum(weights)
    ranks = np.searchsorted(cdf, rng.random(size) * cdf[-1], side="right")
    ranks = np.minimum(ranks, cardinality - 1)
    return rng.permutation(cardinality)[ranks]


def synthetic_ctr(
    num_examples: int,
    *,
    num_fields: int = 26,
    min_cardinality: int = 10,
    max_cardinality: int = 10**6,
    zipf_exponent: float = 1.05,
    rank: int = 4,
    num_dense: int = 13,
    interaction_scale: float = 1.0,
    seed: int = 0,
) -> CTRData:
    """Generates a SYNTHETIC Criteo-like CTR table (see the module docstring).

    Args:
        num_examples: N.
        num_fields: categorical fields (Criteo: 26).
        min_cardinality, max_cardinality: smallest and largest field cardinality.
        zipf_exponent: ``s`` of the within-field popularity ``P(rank r) ~ r^-s``.
        rank: dimension of the planted pairwise interaction.
        num_dense: dense features (Criteo: 13), standard normal.
        interaction_scale: multiplies the pairwise term of the logit.
        seed: everything is a function of the seed.

    Returns:
        :class:`CTRData` with ``synthetic=True`` and a name that says SYNTHETIC.
    """
    if num_examples < 1:
        raise DataError(f"num_examples={num_examples} must be >= 1")
    if rank < 1 or zipf_exponent <= 0:
        raise DataError(f"rank={rank} must be >= 1 and zipf_exponent={zipf_exponent} > 0")
    rng = np.random.default_rng(seed)
    cardinalities = criteo_like_cardinalities(num_fields, min_cardinality, max_cardinality)
    columns = []
    total = np.zeros((num_examples, rank))
    squares = np.zeros(num_examples)
    for cardinality in cardinalities:
        ids = _zipf_sample(rng, cardinality, zipf_exponent, num_examples)
        latent = rng.normal(0.0, 1.0 / np.sqrt(rank * num_fields), size=(cardinality, rank))
        vectors = latent[ids]
        total += vectors
        squares += (vectors**2).sum(1)
        columns.append(ids.astype(np.int64))
    pairwise = 0.5 * ((total**2).sum(1) - squares)  # sum over f < g of <v_f, v_g>
    pairwise = pairwise / (pairwise.std() + 1e-12)
    dense = rng.normal(size=(num_examples, num_dense))
    weights = rng.normal(0.0, 0.5 / np.sqrt(max(num_dense, 1)), size=num_dense)
    logits = -1.0 + dense @ weights + interaction_scale * pairwise
    labels = (rng.random(num_examples) < 1.0 / (1.0 + np.exp(-logits))).astype(np.float32)
    return CTRData(
        "synthetic-ctr (SYNTHETIC)",
        np.stack(columns, axis=1),
        tuple(f"C{j + 1}" for j in range(num_fields)),
        cardinalities,
        dense.astype(np.float32),
        tuple(f"I{j + 1}" for j in range(num_dense)),
        labels,
        synthetic=True,
    )
