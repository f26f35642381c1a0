"""The CRF's batched log-likelihood + backward and its Viterbi decode against ``pytorch-crf`` 0.7.2, side by side.

Both libraries get the same batch (emissions ``(B, T, K)`` with random lengths, gold tags, right-padded mask) and the
same start/transition/end scores (ours are copied from pytorch-crf's, and the log-likelihoods and decodes are
checked equal before timing). Timed in turn, in one run: ``log-likelihood + backward`` (sum over the batch, then
``backward()``) and ``decode`` (ours returns a ``(B, T)`` tensor, pytorch-crf a list of lists; each as its API
gives it). Our constrained CRF (BIO over ``(K - 1) / 2`` entity types) is timed as well: pytorch-crf has no
constraints. pytorch-crf is a benchmark-only dependency (``pip install -e .[bench]``).

Example (writes ``docs/results/crf-speed/crf-speed.json`` and ``crf-speed-table.md``):
    python benchmarks/crf_speed.py --batch 64 --length 50 --tags 9 --threads 2
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from embreg.nn.crf import CRF

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "crf-speed"


def bio_tags(num_tags: int) -> list[str]:
    """``O`` and B-/I- pairs of ``(num_tags - 1) // 2`` types (``num_tags`` odd)."""
    types = (num_tags - 1) // 2
    return ["O"] + [f"{p}-T{i}" for i in range(types) for p in ("B", "I")]


def make_batch(args: argparse.Namespace, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(args.seed)
    lengths = torch.randint(max(1, args.length // 2), args.length + 1, (args.batch,), generator=g)
    lengths[0] = args.length
    emissions = torch.randn(args.batch, args.length, args.tags, generator=g)
    tags = torch.randint(0, args.tags, (args.batch, args.length), generator=g)
    mask = torch.arange(args.length).unsqueeze(0) < lengths.unsqueeze(1)
    return emissions.to(device), tags.to(device), mask.to(device)


def timed(calls: dict[str, Callable[[], Any]], reps: int, warmup: int, sync: Callable[[], None]) -> dict[str, list]:
    """Wall times of each call, taken in turn (interference spreads over all of them) after warm-up rounds."""
    for _ in range(warmup):
        for call in calls.values():
            call()
    sync()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(reps):
        for name, call in calls.items():
            sync()
            start = time.perf_counter()
            call()
            sync()
            times[name].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=50)
    parser.add_argument("--tags", type=int, default=9, help="number of tags (odd: O + B-/I- pairs)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--name", default="crf-speed", help="file stem of the JSON and table")
    args = parser.parse_args()
    if args.tags < 3 or args.tags % 2 == 0:
        parser.error(f"--tags={args.tags} must be odd and >= 3 (O plus B-/I- pairs)")

    import torchcrf  # benchmark-only dependency: pytorch-crf 0.7.2

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    emissions, tags, mask = make_batch(args, device)
    theirs = torchcrf.CRF(args.tags, batch_first=True).to(device)
    ours = CRF(args.tags).to(device)
    bio = CRF(args.tags, tags=bio_tags(args.tags), scheme="bio").to(device)
    with torch.no_grad():
        for crf in (ours, bio):
            crf.transitions.copy_(theirs.transitions)
            crf.start_transitions.copy_(theirs.start_transitions)
            crf.end_transitions.copy_(theirs.end_transitions)
    ll_theirs = theirs(emissions, tags, mask, reduction="sum")
    ll_ours = ours(emissions, tags, mask).sum()
    torch.testing.assert_close(ll_ours, ll_theirs, rtol=1e-4, atol=1e-3)
    decoded = ours.decode(emissions, mask)
    assert [row[: int(m.sum())] for row, m in zip(decoded.tolist(), mask, strict=True)] == theirs.decode(emissions, mask)

    leaf = emissions.clone().requires_grad_(True)

    def backward(crf: Any, is_ours: bool) -> Callable[[], None]:
        def run() -> None:
            crf.zero_grad(set_to_none=True)
            leaf.grad = None
            ll = crf(leaf, tags, mask).sum() if is_ours else crf(leaf, tags, mask, reduction="sum")
            ll.backward()

        return run

    calls: dict[str, Callable[[], Any]] = {
        "ll_backward:pytorch-crf": backward(theirs, False),
        "ll_backward:embreg": backward(ours, True),
        "ll_backward:embreg-bio": backward(bio, True),
        "decode:pytorch-crf": lambda: theirs.decode(emissions, mask),
        "decode:embreg": lambda: ours.decode(emissions, mask),
        "decode:embreg-bio": lambda: bio.decode(emissions, mask),
    }
    times = timed(calls, args.reps, args.warmup, sync)
    median = {name: statistics.median(t) for name, t in times.items()}
    rows = []
    for op in ("ll_backward", "decode"):
        peer = median[f"{op}:pytorch-crf"]
        for impl in ("pytorch-crf", "embreg", "embreg-bio"):
            ms = median[f"{op}:{impl}"] * 1e3
            rows.append({"op": op, "impl": impl, "median_ms": ms, "speedup_vs_pytorch_crf": peer / median[f"{op}:{impl}"]})
    machine = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchcrf": getattr(torchcrf, "__version__", "0.7.2"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "threads": args.threads,
    }
    record = {
        "command": "python " + " ".join(sys.argv),
        "machine": machine,
        "shape": {"batch": args.batch, "length": args.length, "tags": args.tags},
        "reps": args.reps,
        "rows": rows,
        "times_s": times,
        "targets_met": {
            op: median[f"{op}:embreg"] <= median[f"{op}:pytorch-crf"] for op in ("ll_backward", "decode")
        },
    }
    lines = [
        f"B={args.batch}, T={args.length}, K={args.tags}, device {machine['device']}, {args.threads} threads, "
        f"median of {args.reps}",
        "",
        "| operation | implementation | median ms | speed-up vs pytorch-crf |",
        "|---|---|---:|---:|",
    ]
    lines += [f"| {r['op']} | {r['impl']} | {r['median_ms']:.3f} | {r['speedup_vs_pytorch_crf']:.2f}x |" for r in rows]
    table = "\n".join(lines) + "\n"
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(record, indent=2) + "\n")
    (args.out / f"{args.name}-table.md").write_text(table)


if __name__ == "__main__":
    main()
