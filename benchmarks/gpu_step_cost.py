"""Training steps on a CUDA GPU: every model family against the CPU, SSE's cost inside a GPU step, and MD tables
against the same parameter budget on the GPU. Ratios from one run on one machine.

Three readings (``--parts``):

* ``families``: each registered model family, built from its plainest shipped recipe
  (:func:`embreg.recipes.shipped.plainest_recipe`) as it trains: its batch size, its optimizer, its real data from
  the dataset registry. One step is the trainer's own (``Trainer._train_step``: batch to the device, forward,
  loss and its one read-back to the host, backward, optimizer step). Variants: the CPU with ``--cpu-threads``
  threads in fp32, and the GPU in fp32 and in bf16 autocast. With ``--random-encoder DIR`` the encoder family runs
  the architecture of the checkpoint in DIR (its ``config.json`` and tokenizer) with random weights, so the
  pretrained weight file need not be on the GPU machine; a step's time does not depend on the weights' values.
* ``sse``: on the GPU in fp32, each SSE recipe against the same recipe with every SSE probability at 0 (the same
  model and parameters; SSE at p = 0 returns the ids untouched, so the ratio is the cost of the swaps,
  sse-stochastic-shared-embeddings.txt eq. 5), and SSE-PT against SASRec of SSE-PT's hidden width (d = 100), the
  reading of ``benchmarks/sasrec_step_cost.py``; the MF and BPR pairs again at ``--sse-batch-sizes`` (a step's fixed
  cost against the swaps' fixed cost). Each pair runs twice: as the trainer runs it by default on CUDA (the
  swaps drawn on the CPU batch before its copy, :mod:`embreg.train.host_draws`), and with the transforms called
  inside the forward pass on CUDA ids (``train.index_transforms_on=device``: the Triton sampler where Triton
  imports), so one run reads both placements, each against its own p = 0 baseline. Target: <= 1.05x.
* ``md``: on the GPU, an MD layer (mixed-dimension-embeddings.txt Alg. 1 sizes from SYNTHETIC Zipf counts, k
  equal-mass blocks, base dimension D) against ``projected@p``, one N x p table projected to D with
  p = round(MD parameters / (N + D)) (the same parameter budget and the same output: the drop-in alternative a
  user with that budget has), and ``uniform@D``. A step: lookup of a Zipf batch, ``(out * W).sum()`` with a
  fixed random W, backward, an Adam step (SparseAdam on the tables of sparse layers). Target: MD at least as
  fast as ``projected@p`` (ratio of step times <= 1.0x).

Timing: the variants of one comparison take turns in rounds, their order shuffled each round (seeded); a
variant's time in a round is ``--steps`` steps between two ``torch.cuda.synchronize()`` calls; round 0 warms
up. Ratios are paired per round (the two variants measured close in time), reported as the median with a
bootstrap 95% interval (:func:`embreg.analysis.stats.median_interval`) and the verdict against the target.

    python benchmarks/gpu_step_cost.py --random-encoder ~/.cache/embreg/models/all-minilm-l6-v2

writes ``docs/results/gpu-step-cost/gpu-step-cost.json``, its ``summary.json`` and ``table.md``; the page
``docs/results/gpu-step-cost/README.md`` reads them. ``--update`` keeps the parts of the stored record that this run
does not measure; each part records the command and machine that measured it (``runs``). Needs CUDA
(``--accelerator cpu`` runs every part on the CPU as a quick check of the script itself, into a folder of your
choice).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from embreg.analysis.stats import median_interval, target_verdict
from embreg.batching.batches import endless_batches
from embreg.embeddings import MixedDimensionEmbedding, md_embedding
from embreg.errors import DataError
from embreg.recipes import load_recipe
from embreg.recipes.run import build_run
from embreg.recipes.shipped import plainest_recipe
from embreg.registry import REGISTRY
from embreg.sse._cuda_sampler import cuda_sampler
from embreg.sse._kernel import backend_name
from embreg.studies.hub import write_benchmark_summary

sys.path.insert(0, str(Path(__file__).resolve().parent))
from md_speed import optimizers, sample_ids, zipf_counts  # noqa: E402 (a sibling benchmark script)

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "gpu-step-cost"
SSE_TARGET = 1.05
MD_TARGET = 1.0

# label -> (recipe, overrides of the SSE variant, the recipe of its baseline, the baseline's overrides)
SSE_PAIRS: dict[str, tuple[str, list[str], str, list[str]]] = {
    "MF + SSE-SE (users, items) / p = 0": ("mf-sse-se", [], "mf-sse-se", ["index_transforms.user.p=0.0", "index_transforms.item.p=0.0"]),
    "BPR + SSE-SE (users, items) / p = 0": ("bpr-sse-se", [], "bpr-sse-se", ["index_transforms.user.p=0.0", "index_transforms.item.p=0.0"]),
    "SASRec + SSE-SE (input, output) / p = 0": ("sasrec-sse", [], "sasrec-sse", ["index_transforms.item.p=0.0", "index_transforms.label.p=0.0"]),
    "SSE-PT / p = 0 (the swaps alone)": ("sse-pt", [], "sse-pt", ["index_transforms.user.p=0.0", "index_transforms.item.p=0.0", "index_transforms.label.p=0.0"]),
    "SSE-PT / SASRec of SSE-PT's width (d = 100)": ("sse-pt", [], "sasrec", ["model.dim=100"]),
}  # fmt: skip


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def interleaved_times(
    steps: dict[str, tuple[Callable[[], Any], torch.device]], rounds: int, per_round: int, seed: int = 0
) -> dict[str, list[float]]:
    """Seconds per step of each variant, one value per timed round; ``steps[label] = (one_step, its device)``."""
    order, shuffler = list(steps), random.Random(seed)
    times: dict[str, list[float]] = {label: [] for label in steps}
    for round_index in range(rounds + 1):
        shuffler.shuffle(order)
        for label in order:
            one_step, device = steps[label]
            synchronize(device)
            started = time.perf_counter()
            for _ in range(per_round):
                one_step()
            synchronize(device)
            if round_index:  # round 0 warms up (kernels compiled, caches and allocator filled)
                times[label].append((time.perf_counter() - started) / per_round)
    return times


def paired_ratio(numerator: list[float], denominator: list[float], target: float | None) -> dict[str, Any]:
    """The per-round ratios' median, its bootstrap 95% interval and the verdict against an upper-bound target."""
    ratios = [a / b for a, b in zip(numerator, denominator, strict=True)]
    low, high = median_interval(ratios)
    return {
        "median": statistics.median(ratios),
        "low": low,
        "high": high,
        "target": target,
        "verdict": target_verdict(low, high, target),
    }


def trainer_step(recipe_name: str, overrides: list[str], prepared=None) -> tuple[Callable[[], Any], Any, int]:
    """``(one training step, the prepared data, batch size)`` of a recipe built as it trains."""
    step, prepared, batch_size, _ = built_trainer_step(recipe_name, overrides, prepared)
    return step, prepared, batch_size


def built_trainer_step(
    recipe_name: str, overrides: list[str], prepared=None
) -> tuple[Callable[[], Any], Any, int, Any]:
    """:func:`trainer_step` and the trainer it steps."""
    recipe = load_recipe(recipe_name, [*overrides, "train.progress=false"])
    built = build_run(recipe, prepared)
    trainer = built.trainer(None)
    trainer.model.train()
    source = endless_batches(trainer.batches)  # pinned on CUDA, as the trainer itself reads them
    step = lambda: trainer._train_step(next(source), 0)  # noqa: E731, SLF001
    return step, built.prepared, recipe.train.batch_size, trainer


def random_encoder_checkpoint(config_dir: Path, out_dir: Path) -> Path:
    """A checkpoint with the architecture and tokenizer of ``config_dir`` and random weights (seed 0)."""
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(0)
    model = AutoModel.from_config(AutoConfig.from_pretrained(str(config_dir), local_files_only=True))
    model.save_pretrained(str(out_dir))
    for path in config_dir.iterdir():
        if path.name.startswith(("tokenizer", "special_tokens", "vocab")):
            shutil.copy(path, out_dir / path.name)
    return out_dir


def families(accelerator: torch.device, cpu_threads: int, rounds: int, steps: int, encoder: Path | None) -> dict:
    """Median step time of every model family on the CPU and on the accelerator (fp32, bf16)."""
    out = {}
    device = f"{accelerator.type}:{accelerator.index or 0}" if accelerator.type == "cuda" else "cpu"
    for model in REGISTRY.names("model"):
        name = plainest_recipe(model)
        if name is None:
            raise SystemExit(f"model {model!r} has no shipped recipe to build it from")
        extra = [f"train.threads={cpu_threads}"]
        if "pretrained" in REGISTRY.get("model", model).provides and encoder is not None:
            extra.append(f"model.pretrained={encoder}")
        variants = {"host fp32": ["train.device=cpu", "train.precision=fp32"]}
        for precision in ("fp32", "bf16"):
            variants[f"{accelerator.type} {precision}"] = [f"train.device={device}", f"train.precision={precision}"]
        runs, prepared, batch = {}, None, 0
        try:
            for label, overrides in variants.items():
                one_step, prepared, batch = trainer_step(name, extra + overrides, prepared)
                runs[label] = (one_step, torch.device("cpu") if label.startswith("host") else accelerator)
        except DataError as exc:  # e.g. a dataset not cached on a GPU machine without network
            print(f"families: {model} skipped: {exc}", flush=True)
            out[model] = {"recipe": name, "skipped": str(exc)}
            continue
        print(f"families: {model} ({name}, batch {batch})", flush=True)
        times = interleaved_times(runs, rounds, steps)
        gpu_fp32, gpu_bf16 = f"{accelerator.type} fp32", f"{accelerator.type} bf16"
        out[model] = {
            "recipe": name,
            "batch_size": batch,
            "median_ms": {label: 1e3 * statistics.median(t) for label, t in times.items()},
            "cpu_over_gpu_fp32": paired_ratio(times["host fp32"], times[gpu_fp32], None),
            "gpu_fp32_over_bf16": paired_ratio(times[gpu_fp32], times[gpu_bf16], None),
            "times_s": times,
        }
    return out


def sse_pairs(batch_sizes: list[int]) -> dict[str, tuple[str, list[str], str, list[str]]]:
    """:data:`SSE_PAIRS`, then the MF and BPR pairs again at each of ``batch_sizes`` (``train.batch_size``)."""
    pairs = dict(SSE_PAIRS)
    for label in [name for name in SSE_PAIRS if name.startswith(("MF", "BPR"))]:
        recipe, overrides, base, base_overrides = SSE_PAIRS[label]
        for size in batch_sizes:
            batch = [f"train.batch_size={size}"]
            pairs[f"{label}, batch {size}"] = (recipe, overrides + batch, base, base_overrides + batch)
    return pairs


def with_environment(step: Callable[[], Any], name: str, value: str) -> Callable[[], Any]:
    """``step`` run with the environment variable ``name`` set to ``value`` (restored afterwards)."""

    def run() -> Any:
        previous = os.environ.get(name)
        os.environ[name] = value
        try:
            return step()
        finally:
            if previous is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = previous

    return run


def sse_backend(accelerator: torch.device) -> str:
    """The SSE-SE backend the accelerator's ids take here: ``triton``, ``c++`` (CPU) or ``tensor ops``."""
    if accelerator.type == "cpu":
        return "c++" if backend_name() == "cpp" else "tensor ops"
    ids = torch.zeros(1, dtype=torch.long, device=accelerator)
    return "triton" if cuda_sampler(ids) is not None else "tensor ops"


def sse_costs(accelerator: torch.device, rounds: int, steps: int, batch_sizes: list[int]) -> dict:
    """SSE recipes against their p = 0 (or SASRec) baselines, fp32: as the trainer places the draws by default, and
    with the transforms in the forward pass (each placement against its own baseline)."""
    device = [f"train.device={accelerator}", "train.precision=fp32", "train.threads=1"]
    in_forward = ["train.index_transforms_on=device"]
    backend = sse_backend(accelerator)
    out = {}
    for label, (recipe, overrides, base, base_overrides) in sse_pairs(batch_sizes).items():
        with_sse, prepared, batch, trainer = built_trainer_step(recipe, device + overrides)
        baseline, _, _ = trainer_step(base, device + base_overrides, prepared)
        forward_sse, _, _ = trainer_step(recipe, device + overrides + in_forward, prepared)
        forward_base, _, _ = trainer_step(base, device + base_overrides + in_forward, prepared)
        print(f"sse: {label}", flush=True)
        runs = {
            "sse": (with_sse, accelerator),
            "base": (baseline, accelerator),
            "sse in forward": (forward_sse, accelerator),
            "base in forward": (forward_base, accelerator),
        }
        times = interleaved_times(runs, rounds, steps)
        out[label] = {
            "batch_size": batch,
            "draws": "host" if trainer._host_draws is not None else "in forward",  # noqa: SLF001
            "backend": backend,
            "median_ms": {k: 1e3 * statistics.median(t) for k, t in times.items()},
            "ratio": paired_ratio(times["sse"], times["base"], SSE_TARGET),
            "in_forward_ratio": paired_ratio(times["sse in forward"], times["base in forward"], SSE_TARGET),
            "times_s": times,
        }
    return out


def md_against_budget(
    accelerator: torch.device, rows: list[int], dim: int, batch: int, rounds: int, steps: int
) -> list[dict]:
    """MD against projected@p and uniform@D on the accelerator, dense and sparse tables, with Adam."""
    out = []
    upstream: dict[tuple[int, ...], torch.Tensor] = {}

    def loss(vectors: torch.Tensor) -> torch.Tensor:  # (out * W).sum(), W fixed (seed 0): a dense upstream gradient
        if vectors.shape not in upstream:
            upstream[vectors.shape] = torch.randn(vectors.shape, generator=torch.Generator().manual_seed(0))
            upstream[vectors.shape] = upstream[vectors.shape].to(vectors.device)
        return (vectors * upstream[vectors.shape]).sum()

    for n in rows:
        counts = zipf_counts(n, 1.05)
        batches = [sample_ids(counts, batch, seed).to(accelerator) for seed in range(8)]
        for sparse in (False, True):
            torch.manual_seed(0)
            md = md_embedding(counts, num_blocks=8, alpha=0.3, base_dim=dim, sparse=sparse)
            p_dim = max(1, round(md.num_parameters / (n + dim)))
            modules = {
                "md": md,
                f"projected@{p_dim}": MixedDimensionEmbedding([n], [p_dim], dim, sparse=sparse),
                f"uniform@{dim}": torch.nn.Embedding(n, dim, sparse=sparse),
            }
            runs = {}
            for label, module in modules.items():
                module.to(accelerator)
                opts, params, cursor = optimizers(module, "adam"), list(module.parameters()), iter(range(10**12))

                def one_step(module=module, opts=opts, params=params, cursor=cursor, batches=batches) -> None:
                    loss(module(batches[next(cursor) % len(batches)])).backward()
                    for optimizer in opts:
                        optimizer.step()
                    for p in params:
                        p.grad = None

                runs[label] = (one_step, accelerator)
            print(f"md: rows {n:,}, sparse={sparse}", flush=True)
            times = interleaved_times(runs, rounds, steps)
            out.append(
                {
                    "rows": n,
                    "base_dim": dim,
                    "batch": batch,
                    "sparse": sparse,
                    "block_dims": list(md.block_dims),
                    "parameters": {k: sum(p.numel() for p in m.parameters()) for k, m in modules.items()},
                    "median_ms": {k: 1e3 * statistics.median(t) for k, t in times.items()},
                    "md_over_projected": paired_ratio(times["md"], times[f"projected@{p_dim}"], MD_TARGET),
                    "md_over_uniform_base_dim": paired_ratio(times["md"], times[f"uniform@{dim}"], None),
                    "times_s": times,
                }
            )
            for module in modules.values():
                module.cpu()
    return out


def _ratio_cell(r: dict[str, Any]) -> str:
    return f"{r['median']:.2f}x [{r['low']:.2f}, {r['high']:.2f}]"


def table(record: dict) -> str:
    """The markdown tables of a record (the page's numbers)."""
    acc = record["machine"]["accelerator_type"]
    lines = []
    if "families" in record:
        families_machine = record.get("runs", {}).get("families", record)["machine"]
        lines += [
            f"| family (recipe, batch) | CPU fp32, {families_machine['cpu_threads']} threads (ms) | {acc} fp32 (ms) "
            f"| {acc} bf16 (ms) | CPU / {acc} fp32 | {acc} fp32 / bf16 |",
            "|---|---|---|---|---|---|",
        ]
        for model, r in record["families"].items():
            if "skipped" in r:
                lines.append(f"| {model} ({r['recipe']}) | skipped: {r['skipped']} | | | | |")
                continue
            ms = r["median_ms"]
            lines.append(
                f"| {model} ({r['recipe']}, {r['batch_size']}) | {ms['host fp32']:.2f} | {ms[f'{acc} fp32']:.2f} "
                f"| {ms[f'{acc} bf16']:.2f} | {_ratio_cell(r['cpu_over_gpu_fp32'])} "
                f"| {_ratio_cell(r['gpu_fp32_over_bf16'])} |"
            )
        lines.append("")
    if "sse" in record:
        lines += [
            "| SSE step / baseline step (fp32) | batch | draws | SSE (ms) | baseline (ms) | ratio [95% CI] | target "
            "| verdict | in forward: SSE / baseline (ms) | in forward: ratio (backend) |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for label, r in record["sse"].items():
            ratio, ms, forward = r["ratio"], r["median_ms"], r.get("in_forward_ratio")
            tail = (
                f"{ms['sse in forward']:.2f} / {ms['base in forward']:.2f} | {_ratio_cell(forward)} ({r['backend']})"
                if forward
                else "|"  # a record of the placement in the forward pass alone
            )
            lines.append(
                f"| {label} | {r['batch_size']} | {r.get('draws', 'in forward')} | {ms['sse']:.2f} | {ms['base']:.2f} "
                f"| {_ratio_cell(ratio)} | <= {ratio['target']} | {ratio['verdict']} | {tail} |"
            )
        lines.append("")
    if "md" in record:
        lines += [
            "| rows | grads | MD dims | MD (ms) | projected@p (ms) | uniform@D (ms) | MD / projected [95% CI] | "
            "verdict (<= 1.0x) | MD / uniform@D |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in record["md"]:
            ms = list(r["median_ms"].values())
            projected = next(k for k in r["median_ms"] if k.startswith("projected"))
            lines.append(
                f"| {r['rows']:,} | {'sparse' if r['sparse'] else 'dense'} | {r['block_dims']} | {ms[0]:.3f} "
                f"| {r['median_ms'][projected]:.3f} ({projected}) | {ms[2]:.3f} | {_ratio_cell(r['md_over_projected'])} "
                f"| {r['md_over_projected']['verdict']} | {_ratio_cell(r['md_over_uniform_base_dim'])} |"
            )
        lines.append("")
    return "\n".join(lines)


def _claim_verdict(ratio: dict[str, Any]) -> str:
    """The hub's verdict of a cost ratio: its 95% interval under the target (met), above it, or across it."""
    return {"met": "met", "missed": "not met"}.get(ratio["verdict"], "untested (interval across the target)")


def write_summary(out: Path, record: dict) -> None:
    """``summary.json``: SSE's cost in a GPU step (every pair) and MD against the same budget (every size)."""
    claims = [
        {
            "claim": f"GPU step: {label} <= {SSE_TARGET}x",
            "reading": _ratio_cell(r["ratio"]),
            "verdict": _claim_verdict(r["ratio"]),
            "p": None,
        }
        for label, r in record.get("sse", {}).items()
    ]
    for r in record.get("md", []):
        claims.append(
            {
                "claim": f"GPU step: MD at least as fast as one table at its budget projected to D "
                f"({r['rows']:,} rows, {'sparse' if r['sparse'] else 'dense'})",
                "reading": _ratio_cell(r["md_over_projected"]),
                "verdict": _claim_verdict(r["md_over_projected"]),
                "p": None,
            }
        )
    write_benchmark_summary(
        out,
        "gpu-step-cost",
        "Training steps on a GPU: every family against the CPU, SSE's cost, MD against the same budget",
        "sse-stochastic-shared-embeddings.txt",
        claims,
        record["machine"],
        record["command"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", nargs="+", choices=["families", "sse", "md"], default=["families", "sse", "md"])
    parser.add_argument("--rounds", type=int, default=10, help="timed rounds per comparison (after one warm-up)")
    parser.add_argument("--steps", type=int, default=5, help="steps per variant per round")
    parser.add_argument("--cpu-threads", type=int, default=os.cpu_count() or 1, help="threads of the CPU variant")
    parser.add_argument("--random-encoder", type=Path, help="checkpoint dir whose architecture the encoder runs")
    parser.add_argument(
        "--sse-batch-sizes", type=int, nargs="*", default=[4096, 32768], help="MF and BPR SSE pairs again at these"
    )
    parser.add_argument("--md-rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--md-dim", type=int, default=64)
    parser.add_argument("--md-batch", type=int, default=4096)
    parser.add_argument("--accelerator", default="cuda", help="cuda (default) or cpu: a quick check of the script")
    parser.add_argument("--out", default=str(RESULTS), help="results folder (default: %(default)s)")
    parser.add_argument("--summary-only", action="store_true", help="rebuild summary.json from the stored record")
    parser.add_argument(
        "--update", action="store_true", help="keep the stored record's parts this run does not measure"
    )
    args = parser.parse_args()
    out = Path(args.out)
    if args.summary_only:
        write_summary(out, json.loads((out / "gpu-step-cost.json").read_text()))
        return
    if args.accelerator.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("this benchmark needs CUDA (torch sees no CUDA device); --accelerator cpu checks the script")
    accelerator = torch.device(args.accelerator)
    if accelerator.type == "cuda":
        accelerator = torch.device("cuda", accelerator.index or 0)
    torch.set_num_threads(args.cpu_threads)
    run = {
        "command": " ".join(["python benchmarks/gpu_step_cost.py", *sys.argv[1:]]),
        "machine": {
            "gpu": torch.cuda.get_device_name(accelerator) if accelerator.type == "cuda" else None,
            "accelerator_type": accelerator.type,
            "cpus": os.cpu_count(),
            "cpu_threads": args.cpu_threads,
            "platform": platform.platform(),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
        },
        "rounds": args.rounds,
        "steps_per_round": args.steps,
    }
    stored = out / "gpu-step-cost.json"
    record: dict[str, Any] = json.loads(stored.read_text()) if args.update and stored.exists() else {}
    earlier = {key: record[key] for key in run if key in record}  # a record written before ``runs`` existed
    runs = record.get("runs") or {part: earlier for part in ("families", "sse", "md") if part in record}
    record.update(run)
    record["runs"] = {**runs, **dict.fromkeys(args.parts, run)}
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        encoder = random_encoder_checkpoint(args.random_encoder, Path(tmp)) if args.random_encoder else None
        record["encoder"] = f"random weights, architecture of {args.random_encoder.name}" if encoder else "pretrained"
        if "families" in args.parts:
            record["families"] = families(accelerator, args.cpu_threads, args.rounds, args.steps, encoder)
            _save(out, record)
    if "sse" in args.parts:
        record["sse"] = sse_costs(accelerator, args.rounds * 2, args.steps, args.sse_batch_sizes)
        _save(out, record)
    if "md" in args.parts:
        record["md"] = md_against_budget(
            accelerator, args.md_rows, args.md_dim, args.md_batch, args.rounds * 2, args.steps
        )
        _save(out, record)
    print(table(record))
    print(f"wrote {out / 'gpu-step-cost.json'}, {out / 'table.md'} and {out / 'summary.json'}")


def _save(out: Path, record: dict) -> None:
    """Writes the record, its tables and summary after every part (a part that fails keeps the ones before)."""
    (out / "gpu-step-cost.json").write_text(json.dumps(record, indent=1) + "\n")
    (out / "table.md").write_text(table(record) + "\n")
    write_summary(out, record)


if __name__ == "__main__":
    main()
