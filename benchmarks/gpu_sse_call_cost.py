"""Where SSE's time goes on a CUDA GPU: microseconds per call of each piece of an SSE-SE call, and MF / BPR
training steps with and without the range check's host synchronisation. One run on one machine.

Calls (512 CUDA ids, N = 1,000, p = 0.01; mean over 3,000 calls after 100 warm-up calls, between two
``torch.cuda.synchronize()``; the ``busy`` rows over 500 calls, each after queueing a 4096 x 4096 matrix
product, so a host sync there waits for GPU work in flight):

* one PyTorch op (``ids + 1``) and ``torch.empty_like``: the machine's fixed per-op cost;
* the range check (``check_ids_range``: ``aminmax`` and a read back to the host), which every SSE module call
  makes, at p = 0 too;
* :func:`embreg.sse._cuda_sampler.philox_counter` (the generator's offset, read and advanced on the host) and
  :func:`~embreg.sse._cuda_sampler.launch_sse_se` (the Triton launch);
* the sampler core ``_sample_se`` with the Triton kernel and with the tensor ops (``EMBREG_SSE_KERNEL=off``);
* an :class:`~embreg.sse.SSE` module's call at p = 0 (the check alone) and at p = 0.01 with either backend;
* the same module on the pinned CPU copy of the ids (where the trainer draws on CUDA, :mod:`embreg.train.host_draws`):
  at p = 0, at p = 0.01 with the result pinned, and with the pinned result then copied to the GPU.

Steps: the MF and BPR pairs of ``benchmarks/gpu_step_cost.py`` (SSE-SE on users and items against the same
recipe at p = 0) with the transforms called in the forward pass (``train.index_transforms_on=device``), each also
with every transform's range check replaced by a no-op during its steps, interleaved in 20 timed rounds of 5 steps
(that script's timing and ratios).

    python benchmarks/gpu_sse_call_cost.py --out docs/results/gpu-step-cost/sse-calls.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from embreg.sse import SSE
from embreg.sse import base as sse_base
from embreg.sse import functional as F
from embreg.sse._cuda_sampler import cuda_sampler, launch_sse_se, philox_counter
from embreg.sse._validation import check_ids_range

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_step_cost as bench  # noqa: E402 (a sibling benchmark script: its recipes' steps, timing and ratios)

STEP_PAIRS = ["MF + SSE-SE (users, items) / p = 0", "BPR + SSE-SE (users, items) / p = 0"]


def microseconds(call: Callable[[], Any], calls: int = 3000, warm_up: int = 100) -> float:
    """Mean microseconds per ``call()`` between two CUDA synchronisations."""
    for _ in range(warm_up):
        call()
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(calls):
        call()
    torch.cuda.synchronize()
    return round((time.perf_counter() - started) / calls * 1e6, 2)


def with_tensor_ops(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` with ``EMBREG_SSE_KERNEL=off`` (the tensor-op samplers) while it runs."""
    return bench.with_environment(call, "EMBREG_SSE_KERNEL", "off")


def without_range_check(step: Callable[[], Any]) -> Callable[[], Any]:
    """``step`` with every index transform's range check a no-op while it runs."""
    real = sse_base.IndexTransform.check_ids

    def run() -> Any:
        sse_base.IndexTransform.check_ids = lambda self, ids: None  # type: ignore[method-assign]
        try:
            return step()
        finally:
            sse_base.IndexTransform.check_ids = real  # type: ignore[method-assign]

    return run


def call_costs(device: torch.device) -> dict[str, float]:
    """Microseconds per call of each piece (see the module docstring)."""
    ids = torch.randint(0, 1000, (512,), device=device)
    module, identity = SSE(1000, p=0.01, seed=0).to(device).train(), SSE(1000, p=0.0, seed=0).to(device).train()
    generator, kernel = module.generator(device), cuda_sampler(ids)
    if kernel is None:
        raise SystemExit("the Triton sampler is not available here (EMBREG_SSE_KERNEL=off, or no Triton)")
    costs = {
        "one torch op (ids + 1)": microseconds(lambda: ids + 1),
        "empty_like": microseconds(lambda: torch.empty_like(ids)),
        "check_ids_range (aminmax + host read)": microseconds(lambda: check_ids_range(ids, 1000)),
        "philox_counter": microseconds(lambda: philox_counter(generator)),
        "launch_sse_se (triton launch)": microseconds(lambda: launch_sse_se(kernel, ids, 1000, 0.01, 5, 0)),
        "_sample_se triton": microseconds(lambda: F._sample_se(ids, 1000, 0.01, generator)),
        "_sample_se tensor ops": microseconds(with_tensor_ops(lambda: F._sample_se(ids, 1000, 0.01, generator))),
        "module p=0.01 tensor ops": microseconds(with_tensor_ops(lambda: module(ids))),
        "module p=0 (check only)": microseconds(lambda: identity(ids)),
        "module p=0.01 triton": microseconds(lambda: module(ids)),
    }
    # the trainer's default on CUDA (embreg.train.host_draws): the same module call on the pinned CPU batch
    host_ids = ids.cpu().pin_memory()
    on_host, on_host_identity = SSE(1000, p=0.01, seed=0).train(), SSE(1000, p=0.0, seed=0).train()
    costs["host: module p=0 (CPU ids, check only)"] = microseconds(lambda: on_host_identity(host_ids))
    costs["host: module p=0.01 (CPU ids) + pin_memory"] = microseconds(lambda: on_host(host_ids).pin_memory())
    costs["host: the same + copy to the GPU"] = microseconds(
        lambda: on_host(host_ids).pin_memory().to(device, non_blocking=True)
    )
    big = torch.randn(4096, 4096, device=device)

    def busy(call: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> None:
            big @ big  # about 0.2 ms of GPU work queued before the call
            call()

        return run

    costs["busy: matmul alone"] = microseconds(busy(lambda: None), 500)
    costs["busy: + module p=0"] = microseconds(busy(lambda: identity(ids)), 500)
    costs["busy: + module p=0.01 triton"] = microseconds(busy(lambda: module(ids)), 500)
    return costs


def step_costs(device: torch.device) -> dict[str, Any]:
    """MF and BPR: SSE / p = 0 with the range check as it is, and with it a no-op in both variants."""
    # the transforms inside the forward pass, on CUDA ids (the path whose calls are timed above)
    overrides = [
        f"train.device={device}",
        "train.precision=fp32",
        "train.threads=1",
        "train.index_transforms_on=device",
    ]
    out = {}
    for label in STEP_PAIRS:
        recipe, sse_overrides, base, base_overrides = bench.SSE_PAIRS[label]
        sse, prepared, _ = bench.trainer_step(recipe, overrides + sse_overrides)
        baseline, _, _ = bench.trainer_step(base, overrides + base_overrides, prepared)
        sse_unchecked, _, _ = bench.trainer_step(recipe, overrides + sse_overrides, prepared)
        baseline_unchecked, _, _ = bench.trainer_step(base, overrides + base_overrides, prepared)
        runs = {
            "sse": (sse, device),
            "base": (baseline, device),
            "sse no check": (without_range_check(sse_unchecked), device),
            "base no check": (without_range_check(baseline_unchecked), device),
        }
        times = bench.interleaved_times(runs, 20, 5)
        out[label] = {
            "median_ms": {k: round(1e3 * statistics.median(v), 3) for k, v in times.items()},
            "sse/base": bench.paired_ratio(times["sse"], times["base"], bench.SSE_TARGET),
            "no check: sse/base": bench.paired_ratio(times["sse no check"], times["base no check"], bench.SSE_TARGET),
            "base / base no check": bench.paired_ratio(times["base"], times["base no check"], None),
        }
        print(label, json.dumps(out[label]), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("this benchmark needs CUDA (torch sees no CUDA device)")
    device = torch.device("cuda", 0)
    record: dict[str, Any] = {
        "command": " ".join(["python benchmarks/gpu_sse_call_cost.py", *sys.argv[1:]]),
        "machine": {
            "gpu": torch.cuda.get_device_name(device),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
        },
    }
    record["calls_us"] = call_costs(device)
    print(json.dumps(record["calls_us"], indent=1), flush=True)
    record["steps"] = step_costs(device)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
