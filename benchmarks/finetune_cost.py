"""Cost of each fine-tuning regulariser: step time relative to a plain fine-tuning step, and peak memory.

One process times every method on the same batch (all-MiniLM-L6-v2, batch 32 x 64 tokens of clothing reviews,
AdamW, a full optimisation step: forward, penalty, backward, clipping, update). Methods are timed in interleaved
rounds, so a change in machine load hits all of them alike. Reported per method: the ratio of its median step time
to plain fine-tuning's, and the median of the per-round ratios (each round's steps over FT's steps of the same
round) with a 95 % bootstrap interval, which decides whether a cost target is met, missed or at its limit. Peak
memory is the peak resident set size of a separate process that loads the model and runs a few steps of one
method (``VmHWM``, so it includes Python, torch and the model), and the part of it the training steps add on top
of the resident size before the first step.

    python benchmarks/finetune_cost.py --rounds 5 --steps 2 --threads 1

writes ``docs/results/finetune-cost/finetuning-stability-cost.json``, the markdown table as that folder's
``README.md``, and rebuilds its ``summary.json`` (``--out-dir``: another folder).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from embreg.analysis.stats import median_interval, target_verdict
from embreg.data.datasets.reviews import load_reviews
from embreg.models import EncoderClassifier, encode_texts
from embreg.recipes import list_recipes, load_recipe
from embreg.regularizers import StepContext
from embreg.studies.hub import write_benchmark_summary

LABELS = {
    "ft-reviews": "FT",
    "ft-reviews-noise": "FT+Noise",
    "ft-reviews-l2sp": "L2-SP",
    "ft-reviews-mixout": "Mixout",
    "ft-reviews-smart": "SMART",
    "ft-reviews-r3f": "R3F",
    "ft-reviews-lnsr": "LNSR",
}
"""Table names of the shipped fine-tuning recipes (the stability table's methods), in table order."""


def _shipped_methods() -> dict[str, str]:
    """Method name -> shipped ``ft-reviews*`` recipe that differs from FT by a regulariser (not by an index
    transform, which this benchmark does not build): the labelled ones in table order, then any other."""
    shipped = sorted(
        name for name in list_recipes() if name.startswith("ft-reviews") and not load_recipe(name).index_transforms
    )
    ordered = [name for name in LABELS if name in shipped] + [name for name in shipped if name not in LABELS]
    return {LABELS.get(name, name): name for name in ordered}


RECIPES = _shipped_methods()  # method name -> recipe name


def _from_recipe(recipe: str, **arguments: object):
    """The recipe's regulariser (``None``: plain fine-tuning) exactly as the shipped recipe builds it, with
    ``arguments`` changed: what the stability table ran. The fine-tuning regularisers need no build context."""

    def build():
        specs = load_recipe(recipe).regularizers
        if not specs:
            return None
        if len(specs) > 1:
            raise ValueError(f"recipe {recipe!r} has {len(specs)} regularisers; this benchmark times one")
        for key, value in arguments.items():
            setattr(specs[0], key, value)
        return specs[0].build(None)

    return build


# the shipped recipes, then the LNSR recipe at the paper's injection layer (b = 1) and one layer later than its b = 3
METHODS = {
    **{name: _from_recipe(recipe) for name, recipe in RECIPES.items()},
    "LNSR (b=1)": _from_recipe(RECIPES["LNSR"], start_layer=1),
    "LNSR (b=4)": _from_recipe(RECIPES["LNSR"], start_layer=4),
}
TARGETS = {"LNSR": 1.7, "LNSR (b=1)": 1.7, "LNSR (b=4)": 1.7, "R3F": 2.0, "SMART": 3.0, "Mixout": 1.2, "L2-SP": 1.2}
OUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "finetune-cost"


def _batch(batch_size: int, max_length: int, tokenizer) -> dict[str, torch.Tensor]:
    task = load_reviews("binary", train_size=2000)
    texts = sorted(task.texts["train"], key=len, reverse=True)[:batch_size]  # long texts: every row fills T
    batch = encode_texts(tokenizer, texts, max_length)
    batch["labels"] = torch.as_tensor(task.labels["train"][:batch_size]).long()
    return batch


class Runner:
    """A model, its regulariser and optimizer, stepping on one fixed batch."""

    def __init__(self, base: EncoderClassifier, method: str, batch: dict[str, torch.Tensor]) -> None:
        self.model = copy.deepcopy(base).train()
        self.regularizer = METHODS[method]()
        if self.regularizer is not None and hasattr(self.regularizer, "prepare"):
            self.model = self.regularizer.prepare(self.model)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-5)
        self.batch = batch

    def step(self) -> float:
        started = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        output = self.model(self.batch)
        loss = self.model.loss(self.batch, output)
        if self.regularizer is not None and hasattr(self.regularizer, "penalty"):
            loss = loss + self.regularizer.penalty(StepContext(self.model, self.batch, output=output, loss=loss))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        return time.perf_counter() - started


def paired_round_ratios(times: list[float], ft_times: list[float], steps: int) -> list[float]:
    """Per round, the method's median step over FT's median step in the same round (rounds are interleaved, so
    each ratio pairs steps taken under the same machine load)."""
    rounds = len(times) // steps
    return [
        statistics.median(times[r * steps : (r + 1) * steps]) / statistics.median(ft_times[r * steps : (r + 1) * steps])
        for r in range(rounds)
    ]


def _status_mib(field: str) -> float:
    """A memory field of /proc/self/status (``VmRSS``, ``VmHWM``) in MiB; ru_maxrss where /proc is missing."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return float(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")


def peak_memory(method: str, args: argparse.Namespace) -> tuple[float, float]:
    """``(peak RSS, peak minus RSS before the first step)`` in MiB of a fresh process running ``method``.

    A fresh process, because the peak-RSS counters of Linux are per process (``VmHWM`` restarts at ``exec``).
    """
    command = [
        sys.executable,
        __file__,
        "--memory-only",
        method,
        "--threads",
        str(args.threads),
        "--batch-size",
        str(args.batch_size),
        "--max-length",
        str(args.max_length),
        "--steps",
        str(args.steps),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    peak, before = (float(v) for v in result.stdout.strip().splitlines()[-1].split())
    return peak, peak - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2, help="timed steps per method per round")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--memory-only", choices=sorted(METHODS), help=argparse.SUPPRESS)
    parser.add_argument("--no-memory", action="store_true", help="skip the per-method memory processes")
    parser.add_argument(
        "--host-note",
        default="other jobs may have shared the cores",
        help="how busy the machine was (recorded with the results)",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=sorted(METHODS),
        metavar="METHOD",
        help="time only these methods (FT is always timed: the ratios are to it)",
    )
    parser.add_argument("--out-dir", type=Path, default=OUT, help="output folder (default: %(default)s)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    base, tokenizer = EncoderClassifier.from_pretrained("all-minilm-l6-v2", 2)
    batch = _batch(args.batch_size, args.max_length, tokenizer)
    if args.memory_only:
        runner = Runner(base, args.memory_only, batch)
        before = _status_mib("VmRSS")
        for _ in range(args.steps + 1):
            runner.step()
        print(_status_mib("VmHWM"), before)
        return
    started = _utc_now()
    chosen = [name for name in METHODS if args.methods is None or name == "FT" or name in args.methods]
    runners = {name: Runner(base, name, batch) for name in chosen}
    for runner in runners.values():
        runner.step()  # warm-up: allocator, lazy initialisation
    times: dict[str, list[float]] = {name: [] for name in chosen}
    for _ in range(args.rounds):
        for name, runner in runners.items():
            times[name] += [runner.step() for _ in range(args.steps)]
    base_time = statistics.median(times["FT"])
    rows = {}
    for name in chosen:
        median = statistics.median(times[name])
        round_ratios = paired_round_ratios(times[name], times["FT"], args.steps)
        low, high = median_interval(round_ratios)
        rows[name] = {
            "median_step_seconds": median,
            "ratio_to_FT": median / base_time,
            "target": TARGETS.get(name),
            "round_ratios": round_ratios,
            "ratio_ci95": [low, high],
            "verdict": target_verdict(low, high, TARGETS.get(name)),
            "step_seconds": times[name],
        }
    if not args.no_memory:
        for name in chosen:
            rows[name]["peak_rss_mib"], rows[name]["step_memory_mib"] = peak_memory(name, args)
    machine = (
        f"{platform.machine()}, {torch.get_num_threads()} torch thread(s), torch {torch.__version__}, "
        f"run {started}-{_utc_now()} UTC"
    )
    command = "python benchmarks/finetune_cost.py " + " ".join(sys.argv[1:])
    record = {
        "command": command,
        "machine": machine,
        "host_note": args.host_note,
        "batch": [args.batch_size, args.max_length],
        "model": "all-minilm-l6-v2",
        "methods": rows,
    }
    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "finetuning-stability-cost.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [
        "# Fine-tuning regularisers: cost per step",
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine}; {args.host_note}; all-MiniLM-L6-v2, batch {args.batch_size} x "
        f"{args.max_length} tokens, AdamW, one full step (forward, penalty, backward, clip, update); "
        f"{args.rounds} interleaved rounds x {args.steps} steps per method.",
        "",
        "Ratio: median step over FT's median step. Per-round ratio: the median over rounds of each round's "
        "ratio (steps paired by round), with its 95 % bootstrap interval; the verdict is *met* when the whole "
        "interval is at or under the target, *missed* when it is all above, *at limit* otherwise.",
        "",
        "| method | median step (s) | ratio to FT | per-round ratio [95 % interval] | target | verdict | "
        "peak RSS (MiB) | added by the steps (MiB) |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for name, row in rows.items():
        target = f"<= {row['target']}x" if row["target"] else "—"
        memory = f"{row['peak_rss_mib']:.0f} | {row['step_memory_mib']:.0f}" if "peak_rss_mib" in row else "— | —"
        low, high = row["ratio_ci95"]
        lines.append(
            f"| {name} | {row['median_step_seconds']:.3f} | {row['ratio_to_FT']:.2f} | "
            f"{statistics.median(row['round_ratios']):.2f} [{low:.2f}, {high:.2f}] | {target} | "
            f"{row['verdict']} | {memory} |"
        )
    (out / "README.md").write_text("\n".join(lines) + "\n")  # the folder's page is the table
    write_summary(out, record)
    print("\n".join(lines))


VERDICTS = {"met": "met", "missed": "not met", "at limit": "partly met"}


def write_summary(folder: Path, record: dict) -> None:
    """``folder/summary.json``: one claim per method with a cost target."""
    claims = []
    for name, row in record["methods"].items():
        if row.get("target") is None:
            continue
        low, high = row["ratio_ci95"]
        claims.append(
            {
                "claim": f"{name} costs <= {row['target']}x a plain fine-tuning step (target)",
                "reading": f"{row['ratio_to_FT']:.2f}x (per-round median "
                f"{statistics.median(row['round_ratios']):.2f}, 95% interval [{low:.2f}, {high:.2f}])",
                "verdict": VERDICTS.get(row["verdict"], row["verdict"]),
                "p": None,
            }
        )
    write_benchmark_summary(
        folder,
        "finetune-cost",
        "Fine-tuning step cost of LNSR and the stability baselines",
        "lnsr-noise-stability-bert.txt",
        claims,
        {"description": record["machine"]},
        record["command"],
    )


if __name__ == "__main__":
    main()
