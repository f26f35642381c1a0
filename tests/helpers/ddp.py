"""``run_ranks(worker, world_size, *args)``: runs ``worker(*args)`` in ``world_size`` spawned processes joined by a
gloo process group (one thread each, as torchrun would start them; CUDA hidden from them, so ``train.device=auto``
means the CPU) and returns each rank's result, in rank order.

A rank that raises fails the call with its traceback; ranks that hang past ``timeout`` seconds are killed and the
call fails, so a deadlocked collective cannot stall the test suite.
"""

from __future__ import annotations

import faulthandler
import gc
import os
import pickle
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _entry(rank: int, worker: Callable[..., Any], world_size: int, port: int, out: str, args: tuple) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank)
    )
    faulthandler.enable(all_threads=True)  # a rank that aborts in C++ still shows its Python stacks
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        result = worker(*args)
        # every rank ends the group together, as embreg.train.distributed does: no rank tears its gloo threads
        # down (or exits) while a peer's last collective is still in flight
        dist.barrier()
        gc.collect()
    finally:
        dist.destroy_process_group()
    Path(out, f"rank-{rank}.pkl").write_bytes(pickle.dumps(result))


def run_ranks(worker: Callable[..., Any], world_size: int, *args: Any, timeout: float = 300.0) -> list[Any]:
    """Each rank's ``worker(*args)`` (a module-level function, so that spawned processes can import it)."""
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the ranks are CPU processes (gloo), also where CUDA exists
    with tempfile.TemporaryDirectory() as out:
        try:
            context = mp.start_processes(
                _entry,
                args=(worker, world_size, _free_port(), out, args),
                nprocs=world_size,
                join=False,
                start_method="spawn",
            )
        finally:
            if hidden is None:
                del os.environ["CUDA_VISIBLE_DEVICES"]
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = hidden
        deadline = time.monotonic() + timeout
        while not context.join(timeout=1.0):
            if time.monotonic() > deadline:
                for process in context.processes:
                    process.kill()
                raise TimeoutError(f"{world_size} ranks of {worker.__name__} did not finish within {timeout:.0f} s")
        return [pickle.loads(Path(out, f"rank-{r}.pkl").read_bytes()) for r in range(world_size)]
