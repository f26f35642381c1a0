import pytest
import torch

from embreg.batching.batches import TensorBatches
from embreg.train.seeding import epoch_generator


def test_epochs_cover_every_example_once_and_replay_exactly():
    batches = TensorBatches({"x": torch.arange(103), "y": torch.arange(103) * 2}, batch_size=10, seed=7)
    first = torch.cat([b["x"] for b in batches.epoch(3)])
    again = torch.cat([b["x"] for b in batches.epoch(3)])
    other = torch.cat([b["x"] for b in batches.epoch(4)])
    assert torch.equal(first.sort().values, torch.arange(103))
    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    assert all(torch.equal(b["y"], b["x"] * 2) for b in batches.epoch(0))
    assert len(batches) == 11


def test_transform_receives_the_epoch_generator():
    def transform(batch, generator):
        batch["r"] = torch.rand(batch["x"].shape, generator=generator)
        return batch

    batches = TensorBatches({"x": torch.arange(8)}, batch_size=4, seed=1, transform=transform)
    a = [b["r"] for b in batches.epoch(0)]
    b = [b["r"] for b in batches.epoch(0)]
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_drop_last_and_no_shuffle():
    batches = TensorBatches({"x": torch.arange(10)}, batch_size=4, shuffle=False, drop_last=True)
    assert [b["x"].tolist() for b in batches.epoch(0)] == [[0, 1, 2, 3], [4, 5, 6, 7]]


@pytest.mark.parametrize(
    "tensors,batch_size",
    [({}, 2), ({"a": torch.zeros(3), "b": torch.zeros(4)}, 2), ({"a": torch.zeros(3)}, 0), ({"a": torch.zeros(0)}, 2)],
)
def test_bad_input(tensors, batch_size):
    with pytest.raises(ValueError):
        TensorBatches(tensors, batch_size)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_pinned_batches_need_cuda() -> None:
    with pytest.raises(RuntimeError, match="pinned batches need CUDA"):
        TensorBatches({"x": torch.arange(4)}, batch_size=2).pinned()


def test_batches_across_gather_chunks_equal_per_batch_indexing(monkeypatch: pytest.MonkeyPatch) -> None:
    import embreg.batching.batches as batches_module

    monkeypatch.setattr(batches_module, "_CHUNK_EXAMPLES", 10)  # 2 batches of 4 per chunk, then a new gather
    data = {"x": torch.arange(23), "y": torch.arange(23).float() * 2}
    batches = TensorBatches(data, batch_size=4, seed=3)
    order = torch.randperm(23, generator=epoch_generator(3, 1))
    got = list(batches.epoch(1))
    assert [b["x"].tolist() for b in got] == [order[i : i + 4].tolist() for i in range(0, 23, 4)]
    assert all(torch.equal(b["y"], b["x"].float() * 2) for b in got)
