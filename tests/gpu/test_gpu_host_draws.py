"""Index transforms drawn on the host when training on CUDA (embreg.train.host_draws): the trainer's default there.

Marked ``gpu``: skipped without CUDA (tests/gpu/conftest.py). The CPU side (the same run as drawing in the forward
pass, the modes and their errors, resume) is in tests/train/test_host_draws.py and tests/test_registry_matrix.py.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from embreg.errors import DataError
from embreg.models import BiasedMF
from embreg.recipes import load_recipe
from embreg.recipes.run import build_run
from embreg.sse import SSE, SSEGraph
from embreg.train.device import move_batch
from embreg.train.host_draws import plan_host_draws
from tests.gpu.test_gpu_families import _mf_trainer

pytestmark = pytest.mark.gpu

CUDA = torch.device("cuda", 0)


@pytest.mark.parametrize("recipe_name", ["mf-sse-graph", "bpr-sse-se", "sse-pt"])
def test_sse_recipes_on_cuda_draw_on_pinned_host_batches(recipe_name: str) -> None:
    recipe = load_recipe(recipe_name)
    recipe = load_recipe(recipe_name, [*recipe.adapter.smoke_overrides, "train.device=cuda", "train.progress=false"])
    try:
        prepared = recipe.adapter.prepare(recipe)
    except DataError as exc:
        pytest.skip(f"{recipe_name}: its data is not available here ({exc})")
    trainer = build_run(recipe, prepared).trainer(None)
    draws = trainer._host_draws
    assert draws is not None and draws.transforms
    assert all(t.device.type == "cuda" for t in [*trainer.model.parameters(), *trainer.model.buffers()])
    trainer.model.train()
    batch = next(iter(trainer.batches.epoch(0)))
    drawn = draws.draw(batch)
    assert any(drawn[k] is not batch[k] for k in batch)
    assert all(v.is_pinned() for k, v in drawn.items() if batch[k].is_pinned())
    loss, _ = trainer._train_step(batch, 0)
    assert math.isfinite(loss)
    cpu = torch.device("cpu")
    for graph_transform in [t for t in draws.transforms if isinstance(t, SSEGraph)]:  # a CPU copy, made once
        assert graph_transform.graph_on(cpu) is graph_transform.graph_on(cpu)
        assert graph_transform.graph_on(cpu).indptr.device == cpu
    assert not any(t.passthrough for t in draws.transforms)  # only during the step


def test_a_forward_pass_on_host_drawn_ids_makes_no_host_sync() -> None:
    model = BiasedMF.build(30, 40, 4, user_transform=SSE(30, 0.5, seed=1), item_transform=SSE(40, 0.5, seed=2))
    model = model.to(CUDA).train()
    draws = plan_host_draws(model, CUDA, "auto")
    assert draws is not None
    batch = {"user": torch.randint(0, 30, (64,)), "item": torch.randint(0, 40, (64,))}
    on_device = move_batch(batch, CUDA)
    drawn = move_batch(draws.draw(batch), CUDA)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with draws.passed_through():
            out = model(drawn)
        with pytest.raises(RuntimeError, match="synchroniz"):  # in the forward pass, each transform's range check
            model(on_device)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert torch.isfinite(out.predictions).all()


def _ids_reaching_the_tables(device: str, data: dict[str, torch.Tensor], steps: int) -> list[torch.Tensor]:
    trainer = _mf_trainer(data, None, 1, device)  # SSE on users and items, p = 0.1
    seen: list[torch.Tensor] = []
    for table in (trainer.model.user_embedding, trainer.model.item_embedding):
        table.register_forward_pre_hook(lambda module, args: seen.append(args[0].cpu()))
    trainer.model.train()
    batches = iter(trainer.batches.epoch(0))
    for _ in range(steps):
        trainer._train_step(next(batches), 0)
    return seen


def test_a_run_on_cuda_draws_the_swaps_of_the_same_run_on_the_cpu(synthetic_ratings) -> None:
    on_cuda = _ids_reaching_the_tables("cuda", synthetic_ratings, 3)
    on_cpu = _ids_reaching_the_tables("cpu", synthetic_ratings, 3)
    assert len(on_cuda) == len(on_cpu) == 6
    assert all(torch.equal(a, b) for a, b in zip(on_cuda, on_cpu, strict=True))


def test_an_sse_training_step_on_cuda_waits_for_the_gpu_once(synthetic_ratings) -> None:
    trainer = _mf_trainer(synthetic_ratings, None, 1, "cuda")  # SSE on users and items, drawn on the host
    trainer.model.train()
    batches = iter(trainer.batches.epoch(0))
    trainer._train_step(next(batches), 0)  # the first step allocates the optimizer's state
    batch = next(batches)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer._train_step(batch, 0)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    syncs = [str(w.message) for w in caught if "synchroniz" in str(w.message)]
    assert len(syncs) == 1, syncs  # the loss read back, before the update
