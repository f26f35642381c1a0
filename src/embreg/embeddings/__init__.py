"""Mixed-dimension (MD) embeddings: ids -> vectors with popularity-sized blocks (mixed-dimension-embeddings.txt).

* :class:`MixedDimensionEmbedding` and :class:`MixedDimensionEmbeddingBag`: drop-in for ``nn.Embedding`` /
  ``nn.EmbeddingBag`` (same call, output at the base dimension), dense or sparse gradients, exact
  parameter counts; wrap them in :class:`embreg.sse.SSEEmbedding` for SSE.
* :mod:`~embreg.embeddings.sizing` (Alg. 1) and :mod:`~embreg.embeddings.blocking` (Alg. 3, per feature):
  pure functions of real query frequencies.
* :mod:`~embreg.embeddings.builder`: frequencies + alpha + (base dim or budget) + k -> ready layers.
* :func:`init_embedding_`: normal or uniform Xavier initialisation of any of these tables (Appendix H-I).

Example:
    >>> import torch
    >>> from embreg.embeddings import md_embedding
    >>> counts = 1000.0 / torch.arange(1, 5001)          # Zipf-like query counts of 5,000 rows
    >>> emb = md_embedding(counts, num_blocks=4, alpha=0.3, base_dim=32)
    >>> emb(torch.tensor([[0, 4999]])).shape
    torch.Size([1, 2, 32])
    >>> emb.block_dims, emb.num_parameters, emb.uniform_num_parameters
    ((32, 16, 8, 4), 23448, 160000)
"""

from embreg.embeddings.bag import MixedDimensionEmbeddingBag
from embreg.embeddings.blocking import Blocking, equipartition_blocks, feature_blocks
from embreg.embeddings.builder import (
    MixedDimensionPlan,
    md_embedding,
    md_embedding_tables,
    md_feature_embeddings,
    plan_mixed_dimensions,
)
from embreg.embeddings.functional import mixed_dimension_lookup
from embreg.embeddings.memory import buffer_bytes, memory_report, optimizer_state_bytes, parameter_bytes
from embreg.embeddings.mixed_dimension import EmbeddingBlock, MixedDimensionEmbedding
from embreg.embeddings.sizing import md_parameter_count, power_law_dims, power_law_sizes, round_dims
from embreg.embeddings.table_init import EMBEDDING_INITS, init_embedding_

__all__ = [
    "EMBEDDING_INITS",
    "Blocking",
    "EmbeddingBlock",
    "MixedDimensionEmbedding",
    "MixedDimensionEmbeddingBag",
    "MixedDimensionPlan",
    "buffer_bytes",
    "equipartition_blocks",
    "feature_blocks",
    "init_embedding_",
    "md_embedding",
    "md_embedding_tables",
    "md_feature_embeddings",
    "md_parameter_count",
    "memory_report",
    "mixed_dimension_lookup",
    "optimizer_state_bytes",
    "parameter_bytes",
    "plan_mixed_dimensions",
    "power_law_dims",
    "power_law_sizes",
    "round_dims",
]
