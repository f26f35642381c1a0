"""embreg's SASRec beside RecBole 1.2.1's SASRec on the same leave-one-out split, epochs and hyper-parameters.

Both libraries train on embreg's split of MovieLens-100k (exported to RecBole's atomic files by
``benchmarks/recbole_peer/export.py``; RecBole's loaders are checked example by example against the export), with
RecBole's training regime on both sides: every prefix of a training sequence is one example predicting its next
item, full softmax cross-entropy, the 50 most recent items, hidden width 50, 2 blocks, 1 head, dropout 0.2, Adam
lr 1e-3, batch 128, ``--epochs`` epochs, one thread each. Both are scored by the same rules (full ranking over
every item but the user's history, pessimistic ties; RecBole's own scores are re-ranked by
``run_recbole_sasrec.py``). For each of the ``--seeds`` seeds (0 .. N-1) the two trainings run at the same time,
one process each, so they share the machine's load; seeds run one after another. The seconds per epoch are those of
the training passes (no evaluation). Both sides are pinned to ``--device`` (embreg's recipe default ``auto`` would
take a GPU where there is one).

``--device cuda`` trains both on the GPU (embreg: ``train.device=cuda``; RecBole: ``--device cuda``), one library
after the other (embreg, then RecBole) so neither shares the GPU. The epoch times are then synchronised with the
GPU: RecBole's by ``torch.cuda.synchronize`` around each epoch, embreg's because every step ends by reading its
loss (``loss.item()`` after the optimiser step waits for the queued work). The results go to
``docs/results/sasrec-vs-recbole-cuda/`` (study ``sasrec-vs-recbole-cuda``), beside, not over, the CPU reading;
the JSON records the GPU (``torch.cuda.get_device_name``).

Quality claim: test NDCG@10, mean and standard deviation over the seeds for each library, and the two-sided Welch
t-test p-value between them (``met`` when embreg's mean is at least RecBole's or p >= 0.05; ``untested``
with one seed). Speed claim: the median over every epoch of every seed, embreg over RecBole.

RecBole runs in its own virtual environment (``benchmarks/recbole_peer/README.md``); embreg never imports it.

    python benchmarks/sasrec_vs_recbole.py --epochs 3 --seeds 3 --recbole-python /work/recbole-venv/bin/python

writes ``docs/results/sasrec-vs-recbole/sasrec-vs-recbole.json`` and ``summary.json``.
``--recbole-python`` may be a command on ``PATH`` (``python3``, with RecBole on its ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import torch

from embreg.recipes import load_recipe
from embreg.recipes.run import run_single
from embreg.studies.hub import write_benchmark_summary
from embreg.train.stats import welch_t_test

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "docs" / "results" / "sasrec-vs-recbole"
RESULTS_CUDA = HERE.parent / "docs" / "results" / "sasrec-vs-recbole-cuda"
METRICS = ("ndcg@10", "hit@10", "mrr")
ALPHA = 0.05


def _export_atomic(split, out_dir: Path) -> None:
    """``export_atomic`` of ``recbole_peer/export.py`` (loaded by path: ``benchmarks`` is no package)."""
    spec = importlib.util.spec_from_file_location("recbole_peer_export", HERE / "recbole_peer" / "export.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.export_atomic(split, out_dir)


MATCHED = {"max_len": 50, "hidden": 50, "layers": 2, "heads": 1, "dropout": 0.2, "lr": 1e-3, "batch_size": 128}


def embreg_overrides(epochs: int, seed: int = 0, device: str = "cpu") -> list[str]:
    m = MATCHED
    return [
        f"data.max_len={m['max_len']}",
        "data.train_examples=prefixes",
        f"model.dim={m['hidden']}",
        f"model.blocks={m['layers']}",
        f"model.heads={m['heads']}",
        f"model.dropout={m['dropout']}",
        "model.loss=ce",
        f"train.lr={m['lr']}",
        f"train.batch_size={m['batch_size']}",
        "train.weight_decay=0.0",
        f"train.epochs={epochs}",
        "train.patience=null",
        "train.threads=1",
        "train.progress=false",
        f"train.seed={seed}",
        f"train.device={device}",
    ]


def recbole_command(
    recbole_python: Path, data: Path, out: Path, epochs: int, seed: int, device: str = "cpu"
) -> list[str]:
    m = MATCHED
    return [
        str(recbole_python),
        str(HERE / "recbole_peer" / "run_recbole_sasrec.py"),
        *("--data", str(data), "--out", str(out), "--epochs", str(epochs)),
        *("--max-len", str(m["max_len"]), "--hidden", str(m["hidden"]), "--layers", str(m["layers"])),
        *("--heads", str(m["heads"]), "--dropout", str(m["dropout"]), "--lr", str(m["lr"])),
        *("--batch-size", str(m["batch_size"]), "--loss", "CE", "--seed", str(seed), "--threads", "1"),
        *("--device", device),
    ]


def run_seed(
    seed: int, epochs: int, prepared: Any, data: Path, work: Path, recbole_python: Path, device: str = "cpu"
) -> dict[str, Any]:
    """One seed: embreg (this process) and RecBole (a subprocess); at the same time on the CPU, one after the other
    on the GPU."""
    recipe = load_recipe("sasrec", embreg_overrides(epochs, seed, device))
    command = recbole_command(recbole_python, data, work / f"recbole-seed{seed}.json", epochs, seed, device)
    env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    load_before = os.getloadavg()
    if device == "cuda":
        print(f"seed {seed}: training embreg, then RecBole, on {device}", flush=True)
        result = run_single(recipe, work / f"embreg-seed{seed}", prepared=prepared)
        torch.cuda.empty_cache()  # hand embreg's cached GPU memory back before RecBole's process starts
        peer_returncode = subprocess.run(command, env=env).returncode
    else:
        print(f"seed {seed}: training embreg and RecBole side by side", flush=True)
        peer = subprocess.Popen(command, env=env)  # trains while embreg trains below
        try:
            result = run_single(recipe, work / f"embreg-seed{seed}", prepared=prepared)
        except BaseException:
            peer.kill()
            peer.wait()
            raise
        peer_returncode = peer.wait()
    if peer_returncode != 0:
        raise SystemExit(f"RecBole's run failed (exit {peer_returncode}): {' '.join(command)}")
    recbole = json.loads((work / f"recbole-seed{seed}.json").read_text())
    record = {
        "seed": seed,
        "loadavg_1min": {"start": load_before[0], "end": os.getloadavg()[0]},
        "embreg": {
            "test": {k[5:]: v for k, v in result.metrics.items() if k[5:] in METRICS and k.startswith("test_")},
            "best_epoch": result.metrics["best_epoch"],
            "train_seconds_per_epoch": [r["seconds"] for r in result.history],
        },
        "recbole": {
            "test": recbole["test"],
            "train_seconds_per_epoch": recbole["train_seconds_per_epoch"],
            "native_test": recbole.get("recbole_native", {}).get("test"),
            "device": recbole.get("device"),
            "device_name": recbole.get("device_name"),
        },
    }
    print(json.dumps(record), flush=True)
    return record | {"_recbole_version": recbole["recbole_version"]}


def _mean_std(values: list[float]) -> tuple[float, float | None]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def library_summary(runs: list[dict[str, Any]], library: str) -> dict[str, Any]:
    """Top-level summary of one library over the seeds (``test`` holds the means, as one seed's values did)."""
    per_seed = [run[library] for run in runs]
    stats = {m: _mean_std([r["test"][m] for r in per_seed]) for m in METRICS}
    seconds = [s for r in per_seed for s in r["train_seconds_per_epoch"]]
    return {
        "test": {m: mean for m, (mean, _) in stats.items()},
        "test_std": {m: std for m, (_, std) in stats.items()},
        "test_per_seed": {m: [r["test"][m] for r in per_seed] for m in METRICS},
        "train_seconds_per_epoch": seconds,
        "median_seconds_per_epoch": statistics.median(seconds),
    }


def quality_verdict(ours: list[float], theirs: list[float], p: float) -> str:
    if len(ours) < 2 or len(theirs) < 2 or math.isnan(p):
        return "untested"
    if statistics.fmean(ours) >= statistics.fmean(theirs) or p >= ALPHA:
        return "met"
    return "not met"


def seedwise_note(ours: list[float], theirs: list[float]) -> str:
    """``"lower than RecBole's at every seed"`` (or ``higher``) when the paired seeds all fall one way, else ``""``.

    Both libraries train the same seeds on the same split, so seed i of one is paired with seed i of the other; a
    Welch test without a significant difference can still hide a difference of the same sign at every seed.
    """
    if len(ours) < 2 or len(ours) != len(theirs):
        return ""
    if all(a < b for a, b in zip(ours, theirs)):
        return "lower than RecBole's at every seed"
    if all(a > b for a, b in zip(ours, theirs)):
        return "higher than RecBole's at every seed"
    return ""


def _pm(mean: float, std: float | None) -> str:
    return f"{mean:.4f}" if std is None else f"{mean:.4f} ± {std:.4f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=1, help="training seeds 0 .. N-1, per library")
    parser.add_argument(
        "--recbole-python", default="/work/recbole-venv/bin/python", help="a path, or a command on PATH (python3)"
    )
    parser.add_argument(
        "--device", choices=("cpu", "cuda"), default="cpu", help="both libraries' device (cuda: one after the other)"
    )
    parser.add_argument("--out", default=None, help=f"results folder (default {RESULTS}, with cuda {RESULTS_CUDA})")
    args = parser.parse_args()
    if args.seeds < 1 or args.epochs < 1:
        parser.error("need --seeds >= 1 and --epochs >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device cuda, but torch {torch.__version__} sees no CUDA device")
    cuda = args.device == "cuda"
    found = args.recbole_python if os.sep in args.recbole_python else shutil.which(args.recbole_python)
    recbole_python = Path(found or args.recbole_python)
    if not recbole_python.exists():
        raise SystemExit(f"{recbole_python} not found: set up RecBole's venv (benchmarks/recbole_peer/README.md)")
    recipe = load_recipe("sasrec", embreg_overrides(args.epochs, device=args.device))
    prepared = recipe.adapter.prepare(recipe)  # the split does not depend on train.seed: shared by every seed
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        _export_atomic(prepared.split, work / "data")
        runs = [
            run_seed(s, args.epochs, prepared, work / "data", work, recbole_python, args.device)
            for s in range(args.seeds)
        ]
    version = runs[0].pop("_recbole_version")
    for run in runs[1:]:
        run.pop("_recbole_version")
    ours, theirs = library_summary(runs, "embreg"), library_summary(runs, "recbole")
    ours_ndcg, theirs_ndcg = ours["test_per_seed"]["ndcg@10"], theirs["test_per_seed"]["ndcg@10"]
    p = welch_t_test(ours_ndcg, theirs_ndcg)
    p_json = None if math.isnan(p) else p
    ratio = ours["median_seconds_per_epoch"] / theirs["median_seconds_per_epoch"]
    command = f"python benchmarks/sasrec_vs_recbole.py --epochs {args.epochs} --seeds {args.seeds}"
    machine = {"cpus": os.cpu_count(), "threads": 1, "platform": platform.platform(), "torch": torch.__version__}
    if cuda:
        command += " --device cuda"
        machine |= {"device": "cuda", "gpu": torch.cuda.get_device_name(), "cuda": torch.version.cuda}
    record = {
        "command": command,
        "matched": MATCHED
        | {"epochs": args.epochs, "loss": "full softmax cross-entropy", "examples": "prefixes", "seeds": args.seeds},
        "machine": machine,
        "order": "one after the other on the GPU: embreg, then RecBole" if cuda else "side by side on the CPU",
        "seeds": runs,
        "embreg": ours | {"best_epoch": [run["embreg"]["best_epoch"] for run in runs]},
        "recbole": theirs | {"version": version, "native_test": runs[0]["recbole"]["native_test"]},
        "ndcg@10_welch_p": p_json,
        "seconds_per_epoch_ratio_embreg_over_recbole": ratio,
    }
    out = Path(args.out) if args.out else (RESULTS_CUDA if cuda else RESULTS)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sasrec-vs-recbole.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    n = args.seeds
    mean_std = {
        lib: {m: _pm(s["test"][m], s["test_std"][m]) for m in METRICS} for lib, s in (("o", ours), ("t", theirs))
    }
    reading = (
        f"test NDCG@10 {mean_std['o']['ndcg@10']} vs {mean_std['t']['ndcg@10']}, "
        f"Hit@10 {mean_std['o']['hit@10']} vs {mean_std['t']['hit@10']}"
    )
    if p_json is not None:
        note = seedwise_note(ours_ndcg, theirs_ndcg)
        reading += (
            f" ({n} seeds each; Welch p = {p:.3g} on NDCG@10{': no significant difference, ' + note if note else ''})"
        )
    seeds_text = "one seed each" if n == 1 else f"{n} seeds each"
    title = "SASRec: embreg beside RecBole 1.2.1 on the same split" + (f", one GPU ({machine['gpu']})" if cuda else "")
    digits = 2 if cuda else 1  # GPU epochs take seconds, not minutes
    claims = [
        {
            "claim": "embreg's SASRec full-ranking NDCG@10 is within noise of, or above, RecBole's on the same split "
            f"and epochs ({seeds_text}, {args.epochs} epochs{', on the GPU' if cuda else ''})",
            "reading": reading,
            "verdict": quality_verdict(ours_ndcg, theirs_ndcg, p),
            "p": p_json,
        },
        {
            "claim": "embreg's SASRec seconds per epoch <= RecBole's on the same machine (moonshot 0.5x)"
            if not cuda
            else "embreg's SASRec seconds per epoch <= RecBole's on the same GPU, trained one after the other",
            "reading": f"median {ours['median_seconds_per_epoch']:.{digits}f} s vs "
            f"{theirs['median_seconds_per_epoch']:.{digits}f} s "
            f"per epoch over {n * args.epochs} epochs each: {ratio:.2f}x",
            "verdict": "met" if ratio <= 1.0 else "not met",
            "p": None,
        },
    ]
    summary = write_benchmark_summary(
        out,
        "sasrec-vs-recbole-cuda" if cuda else "sasrec-vs-recbole",
        title,
        "sse-stochastic-shared-embeddings.txt",
        claims,
        record["machine"],
        record["command"],
    )
    if n > 1:  # the hub's seeds column (write_benchmark_summary leaves it empty)
        data = json.loads(summary.read_text())
        data["seeds"] = f"{n} per library"
        summary.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
