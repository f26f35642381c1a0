"""``run_torchrun_ranks(worker, world_size, env, *args)``: ``world_size`` spawned processes with torchrun's
environment (no process group yet: the worker starts it, e.g. with :func:`embreg.train.distributed.process_group`),
each returning ``worker(rank, *args)``; the result of a rank is its return value, or ``"raised <Type>: <message>"``
for an exception, with its exit code.
"""

from __future__ import annotations

import os
import pickle
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp


def _entry(rank: int, worker: Callable[..., Any], world_size: int, port: int, env: dict, out: str, args: tuple):
    os.environ.update(env)
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank)
    )
    torch.set_num_threads(1)
    try:
        result = worker(rank, *args)
    except Exception as error:
        result = f"raised {type(error).__name__}: {error}"
    Path(out, f"rank-{rank}.pkl").write_bytes(pickle.dumps(result))


def run_torchrun_ranks(
    worker: Callable[..., Any], world_size: int, env: dict[str, str], *args: Any, timeout: float = 120.0
) -> list[tuple[Any, int | None]]:
    """``(result, exit code)`` of each rank, in rank order; ranks still running after ``timeout`` s are killed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # gloo CPU processes, also where CUDA exists
    with tempfile.TemporaryDirectory() as out:
        try:
            context = mp.start_processes(
                _entry, args=(worker, world_size, port, env, out, args), nprocs=world_size, join=False,
                start_method="spawn",
            )  # fmt: skip
        finally:
            if hidden is None:
                del os.environ["CUDA_VISIBLE_DEVICES"]
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = hidden
        deadline = time.monotonic() + timeout
        for process in context.processes:
            process.join(max(deadline - time.monotonic(), 0.1))
        for process in context.processes:
            if process.is_alive():
                process.kill()
                process.join()
        results = []
        for rank, process in enumerate(context.processes):
            path = Path(out, f"rank-{rank}.pkl")
            results.append((pickle.loads(path.read_bytes()) if path.exists() else None, process.exitcode))
        return results


def silent_rank_one(rank: int) -> str:
    """Rank 1 stops answering (sleeps past the timeout) before the collective rank 0 waits in."""
    from embreg.train.distributed import broadcast_from_main, process_group

    with process_group("cpu") as env:
        if rank == 1:
            time.sleep(12)
        broadcast_from_main("hello", env)
    return "finished"


def uneven_finish(rank: int) -> str:
    """Both ranks complete; rank 1 ends its work last, so rank 0 (the store's holder) would leave first."""
    from embreg.train.distributed import broadcast_from_main, process_group

    with process_group("cpu") as env:
        broadcast_from_main("hello", env)
        if rank == 1:
            time.sleep(2)
    return "finished"
