"""Data-parallel training (embreg.train.distributed): 2 gloo ranks on the CPU, spawned as torchrun would start them.

Every model family trains and evaluates under DDP, rank 0 alone writes, ranks train disjoint shards with random
streams of their own, and a resumed DDP run equals an uninterrupted one. Shard arithmetic, the sparse-gradient
refusal and the torchrun-only commands are checked without processes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from embreg.batching.batches import TensorBatches
from embreg.cli import main
from embreg.errors import ConfigError
from embreg.models import BiasedMF
from embreg.optim.optimizers import optimizer_factory
from embreg.registry import REGISTRY
from embreg.tasks.lm.batches import BPTTBatches
from embreg.tasks.ratings.evaluation import RatingEvaluator
from embreg.train.distributed import DistributedEnv, check_dense_gradients, current, ddp_timeout
from embreg.train.trainer import Trainer
from tests.helpers import ddp_torchrun, ddp_workers
from tests.helpers.ddp import run_ranks
from tests.helpers.ddp_torchrun import run_torchrun_ranks

pytestmark = pytest.mark.integration

SSE_BPR = ["data.max_rows=3000", "train.progress=false", "train.threads=1", "train.patience=null"]
SSE_BOTH = ["index_transforms.user={name: sse-se, p: 0.1}", "index_transforms.item={name: sse-se, p: 0.1}"]


# ---------------------------------------------------------------------------------------------- no processes
def test_shards_are_disjoint_cover_the_epoch_and_take_equal_steps():
    batches = TensorBatches({"x": torch.arange(103)}, batch_size=10, seed=3)
    shards = [[b["x"] for b in batches.sharded(rank, 3).epoch(1)] for rank in range(3)]
    seen = [torch.cat(s) for s in shards]
    assert {len(s) for s in shards} == {len(batches.sharded(0, 3))} == {4}  # ceil(ceil(103 / 3) / 10)
    assert all(len(x) == 35 for x in seen)  # 103 padded to 105 by the permutation's own beginning
    union = torch.cat(seen)
    assert set(union.tolist()) == set(range(103)) and len(union) - len(set(union.tolist())) == 2
    assert torch.equal(torch.cat([b["x"] for b in batches.sharded(1, 3).epoch(1)]), seen[1])  # replays exactly
    assert not torch.equal(torch.cat([b["x"] for b in batches.sharded(1, 3).epoch(2)]), seen[1])
    with pytest.raises(ValueError, match="rank=3"):
        batches.sharded(3, 3)


def test_sharded_batch_transforms_draw_per_rank_generators():
    def noise(batch, generator):
        batch["r"] = torch.rand(batch["x"].shape, generator=generator)
        return batch

    batches = TensorBatches({"x": torch.zeros(8)}, batch_size=4, seed=0, transform=noise)
    draws = [torch.cat([b["r"] for b in batches.sharded(r, 2).epoch(0)]) for r in (0, 1)]
    assert not torch.equal(draws[0], draws[1])
    assert torch.equal(draws[0], torch.cat([b["r"] for b in batches.sharded(0, 2).epoch(0)]))


def test_bptt_shards_carry_their_own_streams():
    batches = BPTTBatches(np.arange(1001), batch_size=4, bptt=7)
    shards = [batches.sharded(r, 2) for r in (0, 1)]
    assert [s.data.shape for s in shards] == [torch.Size([4, 125])] * 2
    assert len(shards[0]) == len(shards[1])
    starts = sorted(shards[0].data[:, 0].tolist() + shards[1].data[:, 0].tolist())
    assert starts == [i * 125 for i in range(8)]


def test_sparse_gradients_are_refused_before_training(synthetic_ratings):
    with pytest.raises(ConfigError, match="sparse gradients"):
        check_dense_gradients(torch.nn.Sequential(torch.nn.Embedding(5, 2, sparse=True)))
    model = BiasedMF.build(30, 40, 4, global_mean=3.0)
    model.user_embedding.sparse = True
    with pytest.raises(ConfigError, match="user_embedding.*sparse gradients.*one process"):
        Trainer(
            model,
            optimizer_factory("sgd", 0.1),
            TensorBatches(synthetic_ratings, 64),
            RatingEvaluator({"valid": synthetic_ratings}),
            epochs=1,
            distributed=DistributedEnv(rank=0, world_size=2),
        )


def test_without_torchrun_one_process_is_rank_zero_of_one():
    env = current()
    assert (env.rank, env.world_size, env.active, env.is_main) == (0, 1, False, True)


def test_only_run_trains_under_torchrun(monkeypatch, capsys):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    assert main(["list"]) == 2
    assert "only 'embreg run' trains data-parallel" in capsys.readouterr().err


@pytest.mark.parametrize("local_rank", ["1", "3"])
def test_more_cuda_processes_than_gpus_is_a_clear_error(monkeypatch, local_rank):
    from embreg.train import distributed

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "set_device", lambda *_: pytest.fail("set_device must not be reached"))
    monkeypatch.setattr(distributed.dist, "init_process_group", lambda **_: pytest.fail("no group may start"))
    monkeypatch.setattr(distributed, "launched_by_torchrun", lambda: True)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", local_rank)
    for device in ("auto", "cuda"):
        with pytest.raises(ConfigError, match=r"local rank \d on a machine with 1 CUDA device.*train.device=cpu"):
            with distributed.process_group(device):
                pass


# ------------------------------------------------------------------------------------------- 2 gloo ranks
@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory: pytest.TempPathFactory) -> str:
    pytest.importorskip("transformers")
    from tests.helpers.finetune_tiny import tiny_checkpoint

    return str(tiny_checkpoint(tmp_path_factory.mktemp("tiny-bert"), mask=True))  # [MASK]: the mlm family


def test_every_family_trains_and_evaluates_on_two_ranks_and_rank_zero_alone_writes(tmp_path, tiny_encoder):
    ranks = run_ranks(ddp_workers.train_every_family, 2, str(tmp_path), tiny_encoder, timeout=600)
    runs = [*REGISTRY.names("model"), "ft-reviews-lnsr", "lm-dropout-k"]
    assert sorted(ranks[0]["metrics"]) == sorted(runs)
    for model in runs:
        metrics = ranks[0]["metrics"][model]
        assert metrics == ranks[1]["metrics"][model], model  # evaluated once, broadcast to every rank
        assert metrics["world_size"] == 2 and metrics["epochs_run"] == 2
        assert any(k.startswith("test_") for k in metrics), model
        assert (tmp_path / model / "metrics.json").is_file() and (tmp_path / model / "history.jsonl").is_file()
    assert ranks[1]["written"] == []
    assert any(path.endswith("metrics.json") for path in ranks[0]["written"])


def test_ranks_train_disjoint_shards_with_their_own_random_streams():
    overrides = SSE_BPR + SSE_BOTH + ["train.epochs=1"]
    ranks = run_ranks(ddp_workers.streams, 2, "bpr-dropout", overrides)
    assert [r["shard"][:2] for r in ranks] == [(0, 2), (1, 2)] and ranks[0]["shard"][2] == ranks[1]["shard"][2]
    assert all(r["ddp"] == "_DistributedModel" for r in ranks)
    assert [set(r["offsets"].values()) for r in ranks] == [{0}, {1}] and len(ranks[0]["offsets"]) == 2
    for name in ranks[0]["draws"]:
        assert ranks[0]["draws"][name] != ranks[1]["draws"][name], name
    assert ranks[0]["negatives"] != ranks[1]["negatives"]
    assert ranks[0]["global"] != ranks[1]["global"]


@pytest.mark.parametrize("draws", ["auto", "host"])
def test_resume_under_ddp_equals_the_uninterrupted_ddp_run(tmp_path, draws):
    overrides = [*SSE_BPR, *SSE_BOTH, f"train.index_transforms_on={draws}"]  # host: the swaps as on GPUs
    ranks = run_ranks(ddp_workers.resume_equals_uninterrupted, 2, str(tmp_path), "bpr-dropout", overrides)
    for rank in ranks:
        assert rank["resumed"] == rank["full"]
        assert rank["resumed_losses"] == rank["full_losses"] and len(rank["full_losses"]) == 3
    assert ranks[0]["history_epochs"] == [0, 1, 2]


@pytest.mark.skipif(shutil.which("torchrun", path=os.path.dirname(sys.executable)) is None, reason="no torchrun")
def test_the_torchrun_command_of_the_readme_trains(tmp_path):
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    out = tmp_path / "run"
    command = [torchrun, "--nproc_per_node=2", "--no-python", "embreg", "run", "mf", "--out", str(out)]
    for override in ("data.max_rows=3000", "train.epochs=1", "train.progress=false", "train.threads=1"):
        command += ["--set", override]
    env = dict(os.environ, OMP_NUM_THREADS="1", PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")
    env["CUDA_VISIBLE_DEVICES"] = ""  # the CPU (gloo) path, also on a machine with fewer GPUs than ranks
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "metrics.json").is_file() and '"world_size": 2' in (out / "metrics.json").read_text()
    assert done.stdout.count("test_rmse") == 1  # rank 0 alone prints


def test_a_parameter_without_gradient_is_named_under_ddp():
    messages = run_ranks(ddp_workers.unused_parameter_error, 2)
    assert all("these got none: ['orphan']" in m and "requires_grad_(False)" in m for m in messages), messages


def test_a_non_finite_loss_on_one_rank_stops_every_rank_with_a_clear_error():
    messages = run_ranks(ddp_workers.non_finite_loss_on_one_rank, 2, timeout=120)
    assert messages[1].startswith("loss became nan") and "on rank 1 at epoch 0, step 1" in messages[1], messages
    assert messages[0].startswith("the loss of rank 1 became non-finite (this rank's: "), messages
    assert all("at epoch 0, step 1" in m for m in messages)


def test_a_rank_that_stops_answering_is_named_after_the_timeout():
    started = time.monotonic()
    results = run_torchrun_ranks(ddp_torchrun.silent_rank_one, 2, {"EMBREG_DDP_TIMEOUT": "3"}, timeout=90)
    message = results[0][0]
    assert message.startswith("raised TrainingError: rank 0 of 2: a collective operation got no answer within 3 s"), (
        results
    )
    assert "(EMBREG_DDP_TIMEOUT): rank(s) 1 did not answer" in message, message
    assert time.monotonic() - started < 60


def test_a_completed_run_exits_zero_on_every_rank_whichever_finishes_last():
    results = run_torchrun_ranks(ddp_torchrun.uneven_finish, 2, {"EMBREG_DDP_TIMEOUT": "30"}, timeout=90)
    assert results == [("finished", 0), ("finished", 0)]


@pytest.mark.parametrize("value", ["0", "-5", "soon", "inf"])
def test_a_bad_ddp_timeout_is_refused(monkeypatch, value):
    monkeypatch.setenv("EMBREG_DDP_TIMEOUT", value)
    with pytest.raises(ConfigError, match=f"EMBREG_DDP_TIMEOUT='{value}' must be a number of seconds > 0"):
        ddp_timeout()
