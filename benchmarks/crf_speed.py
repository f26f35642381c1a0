"""The CRF's batched log-likelihood + backward and its Viterbi decode against ``pytorch-crf`` 0.7.2, side by side.

Both libraries get the same batch (emissions ``(B, T, K)`` with random lengths, gold tags, right-padded mask) and the
same start/transition/end scores (ours are copied from pytorch-crf's, and the log-likelihoods and decodes are
checked equal before timing). Timed in turn, in one run: ``log-likelihood + backward`` (sum over the batch, then
``backward()``) and ``decode`` (ours returns a ``(B, T)`` tensor, pytorch-crf a list of lists; each as its API
gives it). Our constrained CRF (BIO over ``(K - 1) / 2`` entity types) is timed as well: pytorch-crf has no
constraints. pytorch-crf is a benchmark-only dependency (``pip install -e .[bench]``).

Example (writes ``docs/results/crf-speed/crf-speed.json``, ``crf-speed-table.md`` and ``summary.json``):
    python benchmarks/crf_speed.py --shapes 64,50,9 32,100,17 256,30,9 --threads 2
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
from embreg.studies.hub import write_benchmark_summary

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "crf-speed"


def bio_tags(num_tags: int) -> list[str]:
    """``O`` and B-/I- pairs of ``(num_tags - 1) // 2`` types (``num_tags`` odd)."""
    types = (num_tags - 1) // 2
    return ["O"] + [f"{p}-T{i}" for i in range(types) for p in ("B", "I")]


def make_batch(
    batch: int, length: int, tags: int, seed: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Emissions ``(B, T, K)``, gold tags and a right-padded mask of lengths in ``[T/2, T]`` (one row of ``T``)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(max(1, length // 2), length + 1, (batch,), generator=g)
    lengths[0] = length
    emissions = torch.randn(batch, length, tags, generator=g)
    gold = torch.randint(0, tags, (batch, length), generator=g)
    mask = torch.arange(length).unsqueeze(0) < lengths.unsqueeze(1)
    return emissions.to(device), gold.to(device), mask.to(device)


def parse_shape(text: str) -> tuple[int, int, int]:
    """``"B,T,K"`` -> ``(B, T, K)`` (``K`` odd, >= 3: O plus B-/I- pairs)."""
    try:
        b, t, k = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape {text!r} must be B,T,K (three integers)") from None
    if min(b, t) < 1 or k < 3 or k % 2 == 0:
        raise argparse.ArgumentTypeError(f"shape {text!r}: B, T >= 1 and K odd and >= 3")
    return b, t, k


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


def bench_shape(shape: tuple[int, int, int], args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """Checks both libraries agree on one batch of ``shape``, then times them in turn; the medians and ratios."""
    import torchcrf  # benchmark-only dependency: pytorch-crf 0.7.2

    b, t, k = shape
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    emissions, tags, mask = make_batch(b, t, k, args.seed, device)
    theirs = torchcrf.CRF(k, batch_first=True).to(device)
    ours = CRF(k).to(device)
    bio = CRF(k, tags=bio_tags(k), scheme="bio").to(device)
    with torch.no_grad():
        for crf in (ours, bio):
            crf.transitions.copy_(theirs.transitions)
            crf.start_transitions.copy_(theirs.start_transitions)
            crf.end_transitions.copy_(theirs.end_transitions)
    torch.testing.assert_close(
        ours(emissions, tags, mask).sum(), theirs(emissions, tags, mask, reduction="sum"), rtol=1e-4, atol=1e-3
    )
    decoded = ours.decode(emissions, mask)
    lengths = mask.sum(dim=1).tolist()
    assert [row[:n] for row, n in zip(decoded.tolist(), lengths, strict=True)] == theirs.decode(emissions, mask)
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
    median = {name: statistics.median(v) for name, v in times.items()}
    rows = []
    for op in OPS:
        peer = median[f"{op}:pytorch-crf"]
        for impl in ("pytorch-crf", "embreg", "embreg-bio"):
            own = median[f"{op}:{impl}"]
            rows.append(
                {
                    "batch": b,
                    "length": t,
                    "tags": k,
                    "op": op,
                    "impl": impl,
                    "median_ms": own * 1e3,
                    "speedup_vs_pytorch_crf": peer / own,
                }
            )
    return {"rows": rows, "times_s": times}


OPS = ("ll_backward", "decode")
OP_TITLES = {"ll_backward": "log-likelihood + backward", "decode": "Viterbi decode"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shapes",
        type=parse_shape,
        nargs="+",
        default=[(64, 50, 9), (32, 100, 17), (256, 30, 9)],
        help="batches as B,T,K (K odd: O plus B-/I- pairs)",
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    import torchcrf  # benchmark-only dependency: pytorch-crf 0.7.2

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    results = [bench_shape(shape, args, device) for shape in args.shapes]
    rows = [row for result in results for row in result["rows"]]
    machine = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchcrf": getattr(torchcrf, "__version__", "0.7.2"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "threads": args.threads,
    }
    command = "python benchmarks/crf_speed.py " + " ".join(sys.argv[1:])
    record = {
        "command": command,
        "machine": machine,
        "reps": args.reps,
        "rows": rows,
        "times_s": [r["times_s"] for r in results],
    }
    lines = [
        f"device {machine['device']}, {args.threads} threads, median of {args.reps} calls per cell",
        "",
        "| B | T | K | operation | implementation | median ms | speed-up vs pytorch-crf |",
        "|---:|---:|---:|---|---|---:|---:|",
    ]
    lines += [
        f"| {r['batch']} | {r['length']} | {r['tags']} | {r['op']} | {r['impl']} | {r['median_ms']:.3f} | "
        f"{r['speedup_vs_pytorch_crf']:.2f}x |"
        for r in rows
    ]
    table = "\n".join(lines) + "\n"
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "crf-speed.json").write_text(json.dumps(record, indent=2) + "\n")
    (args.out / "crf-speed-table.md").write_text(table)
    claims = []
    for op in OPS:
        ratios = [r["speedup_vs_pytorch_crf"] for r in rows if r["op"] == op and r["impl"] == "embreg"]
        constrained = [r["speedup_vs_pytorch_crf"] for r in rows if r["op"] == op and r["impl"] == "embreg-bio"]
        claims.append(
            {
                "claim": f"The CRF's {OP_TITLES[op]} is at least as fast as pytorch-crf 0.7.2 on the same batch",
                "reading": f"{min(ratios):.2f}x-{max(ratios):.2f}x pytorch-crf's speed over {len(ratios)} batch shapes "
                f"(BIO-constrained: {min(constrained):.2f}x-{max(constrained):.2f}x), {machine['device']}",
                "verdict": "met" if min(ratios) >= 1.0 else "not met",
                "p": None,
            }
        )
    write_benchmark_summary(
        args.out,
        "crf-speed",
        "Linear-chain CRF against pytorch-crf",
        "nlp-best-practices.txt",
        claims,
        machine,
        command,
    )


if __name__ == "__main__":
    main()
