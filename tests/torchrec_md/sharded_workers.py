"""What each gloo rank runs in test_torchrec_sharded.py (module-level functions: spawned ranks import them).

The worker builds the same layer on every rank (same seed), shards its EBC table-wise with DMP (block i on rank
``i % world``), loads the unsharded weights, and returns what the test compares with the unsharded layer: the
forward on the rank's slice of the batch, the projections' gradients (averaged over ranks by DDP) and the forward
after one step of FBGEMM's fused exact SGD on the tables.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from fbgemm_gpu.split_embedding_configs import EmbOptimType
from torchrec import KeyedJaggedTensor
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.model_parallel import DistributedModelParallel

from embreg.integrations.torchrec_md import TorchRecMixedDimensionEmbedding, table_wise_plan

NUM_IDS = 300
LEARNING_RATE = 0.5


def build_layer(seed: int) -> TorchRecMixedDimensionEmbedding:
    """The unsharded layer every rank starts from: 4 popularity blocks of 300 Zipf-like ids, dims multiples of 4."""
    torch.manual_seed(seed)
    counts = 1000.0 / torch.arange(1, NUM_IDS + 1, dtype=torch.float64)
    return TorchRecMixedDimensionEmbedding.from_frequencies(
        counts, num_blocks=4, alpha=0.5, base_dim=16, feature="item", pooling="mean"
    )


def batch(seed: int, world: int) -> tuple[torch.Tensor, list[KeyedJaggedTensor], torch.Tensor]:
    """The global batch: (4 * world,) single ids, one bag KJT per rank, and (4 * world, 16) loss weights."""
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, NUM_IDS, (4 * world,), generator=g)
    bags = []
    for _ in range(world):
        lengths = torch.randint(0, 4, (3,), generator=g)
        values = torch.randint(0, NUM_IDS, (int(lengths.sum()),), generator=g)
        bags.append(KeyedJaggedTensor(keys=["item"], values=values, lengths=lengths))
    return ids, bags, torch.randn(4 * world, 16, generator=g)


def sharded_step(seed: int) -> dict[str, Any]:
    """One rank's forward, backward and fused SGD step through the DMP-sharded layer."""
    rank, world = dist.get_rank(), dist.get_world_size()
    ids, bags, weights = batch(seed, world)
    local_ids, local_weights = ids.chunk(world)[rank], weights.chunk(world)[rank]
    model = build_layer(seed)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    plan = table_wise_plan(model, world)
    sharder = EmbeddingBagCollectionSharder(
        fused_params={"optimizer": EmbOptimType.EXACT_SGD, "learning_rate": LEARNING_RATE}
    )
    dmp = DistributedModelParallel(model, device=torch.device("cpu"), plan=plan, sharders=[sharder])
    dmp.load_state_dict(state)
    bag_out = dmp(bags[rank]).detach()
    out = dmp(local_ids)
    (out * local_weights).sum().backward()
    projection_grads = {k: p.grad.clone() for k, p in dmp.module.projections.items()}
    with torch.no_grad():
        after = dmp(local_ids)
    owned_tables = sorted(  # the tables whose rows live on this rank (a ShardedTensor with local shards)
        name for name, value in dmp.state_dict().items() if hasattr(value, "local_shards") and value.local_shards()
    )
    return {
        "rank": rank,
        "plan": str(plan),
        "out": out.detach(),
        "bag_out": bag_out,
        "projection_grads": projection_grads,
        "after_step": after,
        "owned_tables": owned_tables,
        "sharded_type": type(dmp.module.ebc).__name__,
    }
