"""Cost of SSE inside a SASRec / SSE-PT training step on MovieLens-100k: step-time ratios measured in one run.

Target: an SSE-PT step costs <= 1.05x a SASRec step of the same size. "The same size" is read two ways,
both reported: SASRec with the hidden width of SSE-PT (d = 100 against SSE-PT's 50-d items + 50-d users), and the
SSE-PT model itself with every SSE probability at 0 (the same parameters; the ratio is the cost of the swaps
alone). SSE-SE + SASRec against SASRec is reported beside them.

Every variant is built as it trains (its recipe, batch 128, 50 items of history, one thread); the variants take
turns in interleaved rounds (``embreg.demo.step_costs``) so that drifts in machine load hit all of them alike.

    python benchmarks/sasrec_step_cost.py --rounds 20 --steps 5

writes ``docs/results/sasrec-step-cost/sasrec-step-cost.json`` and ``summary.json`` (the claims the results hub
shows) in that folder.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path

import torch

from embreg.demo import step_costs
from embreg.studies.hub import write_benchmark_summary

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "sasrec-step-cost"
NO_SSE = ["index_transforms.user.p=0.0", "index_transforms.item.p=0.0", "index_transforms.label.p=0.0"]
VARIANTS = {  # label -> (recipe, overrides)
    "SASRec (d = 50)": ("sasrec", []),
    "SASRec (d = 100)": ("sasrec", ["model.dim=100"]),
    "SSE-SE + SASRec (d = 50)": ("sasrec-sse", []),
    "SSE-PT, every p = 0 (50 + 50)": ("sse-pt", NO_SSE),
    "SSE-PT (50 + 50)": ("sse-pt", []),
}
RATIOS = {  # label -> (numerator, denominator, target or None)
    "SSE-PT / SASRec of SSE-PT's width (d = 100)": ("SSE-PT (50 + 50)", "SASRec (d = 100)", 1.05),
    "SSE-PT / the same model with p = 0 (the swaps alone)": ("SSE-PT (50 + 50)", "SSE-PT, every p = 0 (50 + 50)", 1.05),
    "SSE-SE + SASRec / SASRec (d = 50)": ("SSE-SE + SASRec (d = 50)", "SASRec (d = 50)", 1.05),
    "SSE-PT / SASRec (d = 50): the user embedding's cost": ("SSE-PT (50 + 50)", "SASRec (d = 50)", None),
}
CLAIMS = {  # ratio label -> the claim the hub lists
    "SSE-PT / SASRec of SSE-PT's width (d = 100)": "An SSE-PT step costs <= 1.05x a SASRec step of the same hidden "
    "width",
    "SSE-PT / the same model with p = 0 (the swaps alone)": "SSE's swaps cost <= 1.05x inside an SSE-PT step "
    "(against the same model with every p = 0)",
    "SSE-SE + SASRec / SASRec (d = 50)": "An SSE-SE + SASRec step costs <= 1.05x a SASRec step",
}


def write_summary(out: Path, record: dict) -> None:
    """``summary.json`` (the claims the results hub lists) from a ``sasrec-step-cost.json`` record."""
    ratios = record["ratios"]
    claims = [
        {
            "claim": CLAIMS[name],
            "reading": f"{ratios[name]:.3f}x",
            "verdict": "met" if ratios[name] <= target else "not met",
            "p": None,
        }
        for name, (_, _, target) in RATIOS.items()
        if target is not None
    ]
    write_benchmark_summary(
        out,
        "sasrec-step-cost",
        "Cost of SSE inside a SASRec / SSE-PT training step",
        "sse-stochastic-shared-embeddings.txt",
        claims,
        record["machine"],
        record["command"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds")
    parser.add_argument("--steps", type=int, default=5, help="steps per variant per round")
    parser.add_argument("--out", default=str(RESULTS), help="results folder (default: %(default)s)")
    parser.add_argument("--summary-only", action="store_true", help="rebuild summary.json from the stored record")
    args = parser.parse_args()
    if args.summary_only:
        write_summary(Path(args.out), json.loads((Path(args.out) / "sasrec-step-cost.json").read_text()))
        return
    torch.manual_seed(0)
    seconds = step_costs(VARIANTS, rounds=args.rounds, steps=args.steps)  # per training example
    ratios = {name: seconds[a] / seconds[b] for name, (a, b, _) in RATIOS.items()}
    record = {
        "command": f"python benchmarks/sasrec_step_cost.py --rounds {args.rounds} --steps {args.steps}",
        "machine": {"cpus": os.cpu_count(), "threads": 1, "platform": platform.platform(), "torch": torch.__version__},
        "median_ms_per_step": {name: value * 128 * 1e3 for name, value in seconds.items()},
        "ratios": ratios,
    }
    print("| variant | median step (ms, batch 128) |\n|---|---|")
    for name, value in record["median_ms_per_step"].items():
        print(f"| {name} | {value:.1f} |")
    print("\n| ratio | value | target |\n|---|---|---|")
    for name, (_, _, target) in RATIOS.items():
        print(f"| {name} | {ratios[name]:.3f} | {'<= ' + str(target) if target else '-'} |")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sasrec-step-cost.json").write_text(json.dumps(record, indent=2) + "\n")
    write_summary(out, record)
    print(f"wrote {out / 'sasrec-step-cost.json'} and {out / 'summary.json'}")


if __name__ == "__main__":
    main()
