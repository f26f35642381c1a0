"""Data-parallel training across processes: ``torchrun --nproc_per_node=N --no-python embreg run RECIPE``.

Every model family trains under :class:`torch.nn.parallel.DistributedDataParallel` (DDP) on this contract:

* **Process group.** :func:`process_group` starts it from torchrun's environment (``RANK``, ``WORLD_SIZE``,
  ``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT``): ``gloo`` on the CPU, ``nccl`` on CUDA, where each process takes
  GPU ``LOCAL_RANK``. Outside torchrun (or with one process) nothing changes: :func:`current` is rank 0 of 1.
* **Data.** Each rank trains on a disjoint shard of every epoch (``batches.sharded(rank, world_size)``);
  ``train.batch_size`` is per process, so one step trains ``world_size x batch_size`` examples, as with
  ``DistributedSampler``.
* **Randomness.** The model is initialised alike on every rank (DDP also broadcasts rank 0's weights). Afterwards
  each rank draws its own streams: SSE index transforms get ``rank_offset = rank``, the global generators (dropout)
  are reseeded with :func:`rank_seed`, and batch transforms (negative sampling) get a per-rank generator. Rank 0
  keeps the streams of a single-process run.
* **Evaluation** runs once, on rank 0, on the whole split; its metrics are broadcast, so every rank takes the same
  early-stopping decisions.
* **Files.** Rank 0 alone writes the run directory (checkpoints hold every rank's random state, so ``--resume``
  restores all of them) and feeds the loggers.
* **Sparse gradients** are refused under DDP (:func:`check_dense_gradients`), naming the dense alternative.
* **A rank that stops answering** is reported after ``EMBREG_DDP_TIMEOUT`` seconds (default 1800, the limit of
  every collective: gradient all-reduces, broadcasts, the final barrier): each rank still running raises
  :class:`~embreg.errors.TrainingError` naming the rank(s) that did not answer, so torchrun ends the run instead
  of waiting forever. A run that completes meets at a barrier before the group ends, so every rank exits 0.

Example:
    >>> env = current()
    >>> env.rank, env.world_size, env.active, env.is_main
    (0, 1, False, True)
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from embreg.errors import ConfigError, TrainingError
from embreg.train.seeding import rank_seed

__all__ = [
    "DistributedEnv",
    "current",
    "launched_by_torchrun",
    "process_group",
    "rank_seed",
    "distributed_model",
    "check_dense_gradients",
    "broadcast_from_main",
    "gather_to_main",
    "all_reduce_sums",
    "first_failed_rank",
    "ddp_timeout",
    "DDP_TIMEOUT_ENV",
]

DDP_TIMEOUT_ENV = "EMBREG_DDP_TIMEOUT"
"""Seconds a collective waits for every rank before the run is stopped with the silent ranks named."""
DEFAULT_DDP_TIMEOUT = 1800.0
# Longest wait, after a timeout, for the other ranks to say they are alive (they time out a little later).
_ROLL_CALL_SECONDS = 10.0
# What gloo and NCCL say when a peer never answers or has gone.
_UNANSWERED = ("timed out", "timeout", "connection closed by peer", "connection reset by peer", "broken pipe")


@dataclass(frozen=True)
class DistributedEnv:
    """Where this process stands in a data-parallel run.

    Attributes:
        rank: this process's rank in ``[0, world_size)``.
        world_size: number of processes.
        local_rank: rank on this machine (the GPU a CUDA process takes).
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def active(self) -> bool:
        """More than one process trains together."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that evaluates and writes."""
        return self.rank == 0


def current() -> DistributedEnv:
    """The running process group's view (rank 0 of 1 when none is initialised)."""
    if not (dist.is_available() and dist.is_initialized()):
        return DistributedEnv()
    return DistributedEnv(
        rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=int(os.environ.get("LOCAL_RANK", 0))
    )


def launched_by_torchrun() -> bool:
    """torchrun (or another launcher) set ``WORLD_SIZE`` above 1 for this process."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and "RANK" in os.environ


@contextlib.contextmanager
def process_group(device: str | torch.device | None = "auto") -> Iterator[DistributedEnv]:
    """Starts the process group torchrun asked for (``gloo`` on the CPU, ``nccl`` on CUDA) and ends it afterwards.

    Without torchrun, or when a group is already running (a caller started it), nothing is started or ended.

    Args:
        device: the run's ``train.device``; CUDA (``auto`` where CUDA exists) selects ``nccl`` and GPU
            ``LOCAL_RANK``.

    Raises:
        ConfigError: ``train.device`` names one GPU (``cuda:N``) while several processes would share it, or CUDA
            is chosen and this machine has fewer GPUs than torchrun started processes on it, or
            ``EMBREG_DDP_TIMEOUT`` is not a number of seconds > 0.
        TrainingError: a collective operation (or the barrier a completed run ends with) got no answer within
            ``EMBREG_DDP_TIMEOUT`` seconds, or a rank has gone; the message names the rank(s) that did not answer.
    """
    if not launched_by_torchrun() or dist.is_initialized():
        yield current()
        return
    from embreg.train.device import resolve_device

    spec = str(device or "auto").strip().lower()
    if spec.startswith("cuda:"):
        raise ConfigError(
            f"train.device={device!r} names one GPU, but torchrun started {os.environ['WORLD_SIZE']} processes; "
            "set train.device=cuda (each process takes GPU LOCAL_RANK) or train.device=cpu"
        )
    use_cuda = resolve_device(spec).type == "cuda"
    if use_cuda:
        local_rank, count = int(os.environ.get("LOCAL_RANK", 0)), torch.cuda.device_count()
        if local_rank >= count:
            raise ConfigError(
                f"train.device={device!r}: torchrun started local rank {local_rank} on a machine with {count} CUDA "
                f"device(s), and each process needs a GPU of its own; start at most {count} process(es) per node "
                "(--nproc_per_node), or set train.device=cpu to train every process on the CPU (gloo)"
            )
        torch.cuda.set_device(local_rank)
    timeout = ddp_timeout()
    dist.init_process_group(backend="nccl" if use_cuda else "gloo", timeout=timedelta(seconds=timeout))
    try:
        env = current()
        try:
            yield env
            # every rank ends the group together: rank 0, which holds the rendezvous store, leaves last
            dist.barrier()
        except Exception as error:
            if not _unanswered(error):
                raise
            raise TrainingError(_unanswered_message(env, timeout, error)) from error
    finally:
        dist.destroy_process_group()


def ddp_timeout() -> float:
    """``EMBREG_DDP_TIMEOUT`` in seconds (1800 when unset): how long a collective waits for every rank.

    Raises:
        ConfigError: the value is not a finite number of seconds > 0.

    Example:
        >>> ddp_timeout() > 0
        True
    """
    raw = os.environ.get(DDP_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_DDP_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{DDP_TIMEOUT_ENV}={raw!r} must be a number of seconds > 0, e.g. 600")
    return value


def _unanswered(error: BaseException) -> bool:
    """Whether ``error`` is a collective that a peer never answered (a timeout, or a peer that has gone)."""
    return isinstance(error, RuntimeError) and any(text in str(error).lower() for text in _UNANSWERED)


def _silent_ranks(env: DistributedEnv, wait: float) -> list[int] | None:
    """The ranks that do not say they are alive within ``wait`` seconds, through the rendezvous store (the
    collectives' own connections are closed after a timeout); None when the store (on rank 0) is gone."""
    try:
        store = dist.distributed_c10d._get_default_store()
        store.set_timeout(timedelta(seconds=wait))
        store.set(f"embreg/alive/{env.rank}", "1")
        deadline = time.monotonic() + wait
        while True:
            silent = [r for r in range(env.world_size) if not store.check([f"embreg/alive/{r}"])]
            if not silent or time.monotonic() > deadline:
                return silent
            time.sleep(0.1)
    except Exception:  # the store lives in rank 0's process: it has gone with it
        return None


def _unanswered_message(env: DistributedEnv, timeout: float, error: BaseException) -> str:
    silent = _silent_ranks(env, min(timeout, _ROLL_CALL_SECONDS))
    if silent is None:
        who = "rank 0 did not answer (its process, which holds the rendezvous store, has gone)"
    elif silent:
        who = f"rank(s) {', '.join(map(str, silent))} did not answer (stopped or stuck)"
    else:
        who = "every rank is alive, but they did not meet in the same collective operation"
    cause = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
    return (
        f"rank {env.rank} of {env.world_size}: a collective operation got no answer within {timeout:g} s "
        f"({DDP_TIMEOUT_ENV}): {who}; the collective said: {cause}"
    )


class _DistributedModel(DistributedDataParallel):
    """DDP whose wrapper also answers the wrapped model's own attributes (``model.loss``, ``model.encoder``, ...),
    so objectives and regularisers written for the model run unchanged on the wrapper."""

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "module":
                raise
            return getattr(self.module, name)


def distributed_model(model: nn.Module, device: torch.device) -> nn.Module:
    """``model`` wrapped in DDP for its training steps (parameters and buffers broadcast from rank 0 once, when it is built).

    The wrapper shares the model's parameters; evaluation and checkpoints keep using ``model`` itself. Every
    parameter that requires a gradient must get one in every step (DDP's default ``find_unused_parameters=False``;
    embreg's models freeze what they never use, e.g. the encoder's pooler under mean pooling). Not
    ``static_graph=True``: its first step reduces gradients on another path whose rounding differs, so a resumed
    run (a new wrapper, a new first step) would drift from an uninterrupted one.
    """
    check_dense_gradients(model)
    device_ids = None
    if device.type == "cuda":
        device_ids = [device.index if device.index is not None else torch.cuda.current_device()]
    # embreg's buffers are constants (MD index maps, global means), equal on every rank from the start: syncing them
    # before every forward (DDP's default) would only cost time.
    return _DistributedModel(model, device_ids=device_ids, **_NO_BUFFER_SYNC)


_NO_BUFFER_SYNC: dict[str, Any] = (
    {"forward_sync_buffers": False}
    if "forward_sync_buffers" in inspect.signature(DistributedDataParallel.__init__).parameters
    else {"broadcast_buffers": False}  # torch releases before forward_sync_buffers
)


def check_dense_gradients(model: nn.Module) -> None:
    """Raises :class:`ConfigError` when a module of ``model`` produces sparse gradients (DDP cannot reduce them).

    Example:
        >>> check_dense_gradients(nn.Embedding(4, 2, sparse=True))
        Traceback (most recent call last):
        ...
        embreg.errors.ConfigError: module '' (Embedding) has sparse gradients, which DistributedDataParallel cannot all-reduce here; use dense gradients (sparse=False; the default of every embreg recipe) or train in one process
    """
    for name, module in model.named_modules():
        if getattr(module, "sparse", False) is True:
            raise ConfigError(
                f"module {name!r} ({type(module).__name__}) has sparse gradients, which DistributedDataParallel "
                "cannot all-reduce here; use dense gradients (sparse=False; the default of every embreg recipe) "
                "or train in one process"
            )


def broadcast_from_main(value: Any, env: DistributedEnv) -> Any:
    """Rank 0's ``value`` on every rank (any picklable object); ``value`` itself outside DDP."""
    if not env.active:
        return value
    box = [value if env.is_main else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather_to_main(value: Any, env: DistributedEnv) -> list[Any] | None:
    """Every rank's ``value`` in rank order on rank 0, ``None`` on the others; ``[value]`` outside DDP."""
    if not env.active:
        return [value]
    gathered: list[Any] | None = [None] * env.world_size if env.is_main else None
    dist.gather_object(value, gathered, dst=0)
    return gathered


def all_reduce_sums(values: list[float], env: DistributedEnv) -> list[float]:
    """Element-wise sums of ``values`` over all ranks (``values`` outside DDP)."""
    if not env.active:
        return list(values)
    tensor = torch.tensor(values, dtype=torch.float64)
    if dist.get_backend() == "nccl":
        tensor = tensor.cuda()
    dist.all_reduce(tensor)
    return tensor.cpu().tolist()


def first_failed_rank(ok: bool, env: DistributedEnv) -> int | None:
    """The lowest rank whose ``ok`` is False, or None when every rank's is True; every rank gets the same answer.

    Outside DDP: 0 or None. Under DDP every rank must call it at the same point (an all-reduce of one flag per
    rank), so that a failure seen by one rank stops all of them there instead of leaving the others waiting in the
    next collective.

    Example:
        >>> first_failed_rank(False, DistributedEnv())
        0
    """
    if not env.active:
        return None if ok else 0
    flags = torch.zeros(env.world_size, dtype=torch.float32)
    flags[env.rank] = 0.0 if ok else 1.0
    if dist.get_backend() == "nccl":
        flags = flags.cuda()
    dist.all_reduce(flags)
    failed = torch.nonzero(flags.cpu()).flatten().tolist()
    return failed[0] if failed else None
