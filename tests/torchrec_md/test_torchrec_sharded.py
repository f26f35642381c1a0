"""DistributedModelParallel shards the MD tables on the CPU: 2 gloo ranks, table-wise (block i on rank i % 2).

Each rank's forward (single ids and KJT bags), the projections' gradients (DDP-averaged) and the forward after one
fused exact-SGD step on the tables equal what the unsharded layer gives on the same data.
"""

from __future__ import annotations

import pytest
import torch

try:
    from embreg.integrations import torchrec_md  # noqa: F401
except ImportError as exc:  # TorchRec missing, or its FBGEMM does not load with this torch
    pytest.skip(f"needs the torchrec extra (docs/torchrec.md): {exc}", allow_module_level=True)

from tests.helpers.ddp import run_ranks  # noqa: E402
from tests.torchrec_md.sharded_workers import LEARNING_RATE, batch, build_layer, sharded_step  # noqa: E402

WORLD = 2
SEED = 0


@pytest.fixture(scope="module")
def ranks() -> list[dict]:
    return run_ranks(sharded_step, WORLD, SEED, timeout=300.0)


@pytest.fixture(scope="module")
def reference() -> dict:
    """The unsharded layer on the global batch: forwards, gradients and the forward after the same SGD step on the
    tables, for the mean of the ranks' losses (DDP averages the projections' gradients over ranks, and TorchRec's
    all-to-all divides the tables' gradients by the world size, its default gradient division)."""
    layer = build_layer(SEED)
    ids, bags, weights = batch(SEED, WORLD)
    bag_out = [layer(b).detach() for b in bags]
    out = layer(ids)
    ((out * weights).sum() / WORLD).backward()
    grads = {k: p.grad.clone() for k, p in layer.projections.items()}
    with torch.no_grad():
        for i in range(layer.num_blocks):
            table = layer.table_weight(i)
            table -= LEARNING_RATE * table.grad
    with torch.no_grad():
        after = layer(ids)
    return {"out": out.detach(), "bag_out": bag_out, "grads": grads, "after": after}


def test_tables_are_placed_table_wise_on_both_ranks(ranks):
    for rank, result in enumerate(ranks):
        assert result["sharded_type"] == "ShardedEmbeddingBagCollection"
        assert "table_wise" in result["plan"]
        expected = [f"ebc.embedding_bags.item_block{i}.weight" for i in range(rank, 4, WORLD)]
        assert result["owned_tables"] == expected


def test_sharded_forward_equals_unsharded(ranks, reference):
    for rank, result in enumerate(ranks):
        torch.testing.assert_close(result["out"], reference["out"].chunk(WORLD)[rank])
        torch.testing.assert_close(result["bag_out"], reference["bag_out"][rank])


def test_sharded_projection_gradients_equal_unsharded(ranks, reference):
    for result in ranks:
        assert result["projection_grads"].keys() == reference["grads"].keys()
        for key, grad in reference["grads"].items():
            torch.testing.assert_close(result["projection_grads"][key], grad)


def test_fused_sgd_step_on_sharded_tables_matches_unsharded_step(ranks, reference):
    for rank, result in enumerate(ranks):
        torch.testing.assert_close(result["after_step"], reference["after"].chunk(WORLD)[rank])
        assert not torch.allclose(result["after_step"], result["out"])  # the step did move the tables
