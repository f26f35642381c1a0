"""embreg's SASRec beside RecBole 1.2.1's SASRec on the same leave-one-out split, hyper-parameters and budgets.

Both libraries train on embreg's split of MovieLens-100k (exported to RecBole's atomic files by
``benchmarks/recbole_peer/export.py``; RecBole's loaders are checked example by example against the export), with
RecBole's training regime on both sides: every prefix of a training sequence is one example predicting its next
item, full softmax cross-entropy, the 50 most recent items, hidden width 50, 2 blocks, 1 head, dropout 0.2, Adam
lr 1e-3, batch 128, no weight decay, one thread each. Both are scored by the same rules (full ranking over every
item but the user's history, pessimistic ties; RecBole's own scores are re-ranked by ``run_recbole_sasrec.py``).

Budgets. Every run trains at most ``--max-epochs`` epochs and stops after ``--patience`` epochs in a row without a
better validation NDCG@10 (the same rule on both sides: embreg's trainer, and the peer script's copy of it); after
every epoch both valid AND test are scored, so each run keeps its per-epoch curve. A budget of ``E`` epochs is read
from a run's curve: the test metrics of the epoch with the best validation NDCG@10 among its first ``E`` epochs
(the first of equals). Nothing in an epoch depends on the maximum (Adam at a constant learning rate), so the first
``E`` epochs of a longer run are the ``E``-epoch run. Two budgets are reported: ``SHORT_BUDGET`` (3) epochs, and
converged (the whole run: early stopping with patience ``PATIENCE`` within ``MAX_EPOCHS`` epochs).

Runs are kept one JSON per seed under ``--runs`` (default ``$EMBREG_HOME/benchmarks/sasrec-vs-recbole``) and are
resumable per seed: a finished seed's JSON is kept and skipped when the command runs again. Subcommands:

    python benchmarks/sasrec_vs_recbole.py recbole --seeds 5                       # RecBole's seeds, one by one
    python benchmarks/sasrec_vs_recbole.py embreg --variant default --seeds 5      # embreg's, converged budget
    python benchmarks/sasrec_vs_recbole.py embreg --variant original+post-ln --seeds 5 --max-epochs 3   # ablation
    python benchmarks/sasrec_vs_recbole.py timing --epochs 3                       # epoch times, both at once
    python benchmarks/sasrec_vs_recbole.py report                                  # record, page, summary, plot

``embreg`` variants (:data:`VARIANTS`): ``default`` (the ``sasrec`` model's defaults), ``original`` (the original
SASRec design, spelt out), ``sasrec-recbole`` (the shipped recipe that makes each RecBole design choice), and one
RecBole choice at a time from the original design (``original+post-ln``, ``original+embedding-norm``,
``original+no-scale``, ``original+positions-start``, ``original+init-normal``). ``timing`` trains both
libraries' matched model for ``--epochs`` epochs at the same time, one process each, for the speed claim; time it
on an otherwise quiet machine (the long runs' own epoch times are recorded but not used). ``report`` writes
``docs/results/sasrec-vs-recbole/``: ``sasrec-vs-recbole.json`` (every seed's numbers and curves),
``README.md``, ``summary.json`` and ``valid-ndcg-curves.png``, and needs the RecBole seeds, the ``default``
seeds and the timing run; ablation rows are shown for the variants that have runs.

RecBole runs in its own virtual environment (``benchmarks/recbole_peer/README.md``); embreg never imports it.
``--recbole-python`` may be a command on ``PATH`` (``python3``, with RecBole on its ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from embreg.config import to_dict
from embreg.data.cache import embreg_home
from embreg.recipes import load_recipe
from embreg.recipes.run import build_run
from embreg.runs.checkpoint import atomic_write_text

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "docs" / "results" / "sasrec-vs-recbole"
METRICS = ("ndcg@10", "hit@10", "mrr")
MAX_EPOCHS = 50
PATIENCE = 10
SHORT_BUDGET = 3
MATCHED = {"max_len": 50, "hidden": 50, "layers": 2, "heads": 1, "dropout": 0.2, "lr": 1e-3, "batch_size": 128}

ORIGINAL = [
    "model.norm=pre",
    "model.embedding_norm=false",
    "model.embedding_scale=sqrt_dim",
    "model.positions=end",
    "model.init_std=null",
]
"""The original SASRec's design (Kang & McAuley 2018), spelt out so that it stays put when defaults change."""
RECBOLE_CHOICES = {
    "post-ln": ("model.norm=post", "post-LN blocks (a LayerNorm after each residual sum, none at the end)"),
    "embedding-norm": ("model.embedding_norm=true", "a LayerNorm on the embedded input"),
    "no-scale": ("model.embedding_scale=none", "item vectors not scaled by sqrt(d)"),
    "positions-start": ("model.positions=start", "positions counted from the oldest item"),
    "init-normal": ("model.init_std=0.02", "N(0, 0.02) initialisation instead of Xavier"),
}
"""RecBole's design choices where they differ from the original SASRec: name -> (override, what it is)."""

VARIANTS: dict[str, tuple[str, list[str], str]] = {
    "default": ("sasrec", [], "embreg's default SASRec"),
    "original": ("sasrec", ORIGINAL, "the original SASRec design (pre-LN, sqrt(d), positions from the end, Xavier)"),
    **{
        f"original+{name}": ("sasrec", [*ORIGINAL, override], f"the original design with {what}")
        for name, (override, what) in RECBOLE_CHOICES.items()
    },
    "original+no-scale+init-normal": (
        "sasrec",
        [*ORIGINAL, RECBOLE_CHOICES["no-scale"][0], RECBOLE_CHOICES["init-normal"][0]],
        "the original design with the two RecBole choices that raise NDCG@10 alone: no sqrt(d) scaling and "
        "N(0, 0.02) initialisation",
    ),
    "sasrec-recbole": ("sasrec-recbole", [], "recipe sasrec-recbole: every RecBole design choice"),
}
"""name -> (recipe, overrides, what it is): embreg's variants, each trained with :func:`embreg_overrides`."""


def default_runs() -> Path:
    return embreg_home() / "benchmarks" / "sasrec-vs-recbole"


def embreg_overrides(max_epochs: int, patience: int | None, seed: int = 0, device: str = "cpu") -> list[str]:
    """The matched settings (RecBole's regime) as overrides of an embreg ``next-item`` recipe."""
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
        f"train.epochs={max_epochs}",
        f"train.patience={'null' if patience is None else patience}",
        "train.threads=1",
        "train.progress=false",
        f"train.seed={seed}",
        f"train.device={device}",
    ]


def recbole_command(
    recbole_python: Path, data: Path, out: Path, max_epochs: int, patience: int | None, seed: int, device: str
) -> list[str]:
    m = MATCHED
    return [
        str(recbole_python),
        str(HERE / "recbole_peer" / "run_recbole_sasrec.py"),
        *("--data", str(data), "--out", str(out), "--epochs", str(max_epochs), "--patience", str(patience or 0)),
        *("--max-len", str(m["max_len"]), "--hidden", str(m["hidden"]), "--layers", str(m["layers"])),
        *("--heads", str(m["heads"]), "--dropout", str(m["dropout"]), "--lr", str(m["lr"])),
        *("--batch-size", str(m["batch_size"]), "--loss", "CE", "--seed", str(seed), "--threads", "1"),
        *("--device", device),
    ]


# ------------------------------------------------------------------------------------------------- the split
def _export_module() -> Any:
    """``recbole_peer/export.py`` (loaded by path: ``benchmarks`` is no package)."""
    spec = importlib.util.spec_from_file_location("recbole_peer_export", HERE / "recbole_peer" / "export.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prepared_split(device: str = "cpu") -> Any:
    """The ``next-item`` task's prepared data under the matched settings (the split does not depend on the seed)."""
    recipe = load_recipe("sasrec", embreg_overrides(1, None, device=device))
    return recipe.adapter.prepare(recipe)


def exported_split(runs: Path, prepared: Any) -> Path:
    """``runs/data``: the split as RecBole atomic files, written once (its ``split.json`` marks it complete)."""
    data = runs / "data"
    if not (data / "split.json").is_file():
        _export_module().export_atomic(prepared.split, data)
    return data


# ----------------------------------------------------------------------------------------------------- runs
def run_path(runs: Path, library: str, seed: int, variant: str | None = None, max_epochs: int = MAX_EPOCHS) -> Path:
    """Where one seed's JSON lives: ``recbole/e<max>/seed-<s>.json`` or ``embreg/<variant>/e<max>/seed-<s>.json``."""
    folder = runs / library if variant is None else runs / library / variant
    return folder / f"e{max_epochs}" / f"seed-{seed}.json"


def run_seeds(seeds: list[int], path_of: Callable[[int], Path], run_one: Callable[[int, Path], None]) -> None:
    """Runs each seed whose JSON is missing, one after another; a finished seed is skipped."""
    for seed in seeds:
        path = path_of(seed)
        if path.is_file():
            print(f"seed {seed}: kept {path}", flush=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        print(f"seed {seed}: -> {path}", flush=True)
        run_one(seed, path)


def run_recbole(args: argparse.Namespace) -> None:
    recbole_python = _recbole_python(args.recbole_python)
    runs = Path(args.runs)
    data = exported_split(runs, prepared_split(args.device))
    env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")

    def run_one(seed: int, path: Path) -> None:
        partial = path.with_suffix(".partial.json")
        command = recbole_command(recbole_python, data, partial, args.max_epochs, args.patience, seed, args.device)
        load = os.getloadavg()[0]
        if subprocess.run(command, env=env).returncode != 0:
            raise SystemExit(f"RecBole's run failed: {' '.join(command)}")
        result = json.loads(partial.read_text())
        result["loadavg_1min_start"] = load
        atomic_write_text(path, json.dumps(result, indent=1) + "\n")
        partial.unlink()

    run_seeds(args.seed_list, lambda s: run_path(runs, "recbole", s, max_epochs=args.max_epochs), run_one)


def _metrics_of(record: dict[str, Any], prefix: str) -> dict[str, float]:
    return {m: float(record[f"{prefix}_{m}"]) for m in METRICS}


def train_embreg(
    variant: str, seed: int, max_epochs: int, patience: int | None, prepared: Any, device: str = "cpu"
) -> dict[str, Any]:
    """One seed of an embreg variant, with valid AND test scored after every epoch (the test curve).

    The test scores come from an epoch callback that runs the run's own evaluator on the test split; the
    evaluation draws no random numbers, so the training is the one ``embreg run`` would do.
    """
    recipe_name, overrides, _ = VARIANTS[variant]
    recipe = load_recipe(recipe_name, [*overrides, *embreg_overrides(max_epochs, patience, seed, device)])
    built = build_run(recipe, prepared)
    curve: list[dict[str, Any]] = []

    def test_curve(trainer: Any, record: dict[str, Any]) -> None:
        test = {f"test_{k}": v for k, v in built.evaluator(trainer.model, "test").items()}
        curve.append(
            {
                "epoch": record["epoch"] + 1,
                "seconds": record["seconds"],
                "train_loss": record["train_loss"],
                "valid": _metrics_of(record, "val"),
                "test": _metrics_of(test, "test"),
            }
        )

    load = os.getloadavg()[0]
    trainer = built.trainer(None, [test_curve])
    result = trainer.fit()
    best = int(result.metrics["best_epoch"]) + 1
    if _metrics_of(result.metrics, "test") != curve[best - 1]["test"]:
        raise RuntimeError(f"the trainer's test metrics of epoch {best} differ from the curve's")
    return {
        "library": "embreg",
        "variant": variant,
        "recipe": recipe_name,
        "overrides": overrides,
        "model": to_dict(recipe)["model"],
        "seed": seed,
        "max_epochs": max_epochs,
        "patience": patience,
        "epochs_run": len(curve),
        "stopped_early": len(curve) < max_epochs,
        "best_epoch": best,
        "curve": curve,
        "train_seconds_per_epoch": [r["seconds"] for r in curve],
        "valid": curve[best - 1]["valid"],
        "test": curve[best - 1]["test"],
        "parameters": sum(p.numel() for p in built.model.parameters()),
        "torch_version": torch.__version__,
        "loadavg_1min_start": load,
    }


def run_embreg(args: argparse.Namespace) -> None:
    runs = Path(args.runs)
    prepared = prepared_split(args.device)

    def run_one(seed: int, path: Path) -> None:
        result = train_embreg(args.variant, seed, args.max_epochs, args.patience, prepared, args.device)
        atomic_write_text(path, json.dumps(result, indent=1) + "\n")
        print(f"seed {seed}: test {result['test']} at epoch {result['best_epoch']}", flush=True)

    path_of = lambda s: run_path(runs, "embreg", s, args.variant, args.max_epochs)  # noqa: E731
    run_seeds(args.seed_list, path_of, run_one)


def run_timing(args: argparse.Namespace) -> None:
    """Both libraries' matched model, ``--epochs`` epochs, side by side (one process each), seed 0."""
    recbole_python = _recbole_python(args.recbole_python)
    runs = Path(args.runs)
    prepared = prepared_split("cpu")
    data = exported_split(runs, prepared)
    peer_out = runs / "timing-recbole.json"
    command = recbole_command(recbole_python, data, peer_out, args.epochs, None, 0, "cpu")
    env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    load_before, started = os.getloadavg(), time.time()
    peer = subprocess.Popen(command, env=env)  # trains while embreg trains below
    try:
        ours = train_embreg("default", 0, args.epochs, None, prepared)
    except BaseException:
        peer.kill()
        peer.wait()
        raise
    if peer.wait() != 0:
        raise SystemExit(f"RecBole's run failed: {' '.join(command)}")
    theirs = json.loads(peer_out.read_text())
    record = {
        "command": f"python benchmarks/sasrec_vs_recbole.py timing --epochs {args.epochs}",
        "epochs": args.epochs,
        "order": "side by side: one process per library, one thread each",
        "host_note": args.host_note or "no note on the host's state",
        "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        "loadavg_1min": {"start": load_before[0], "end": os.getloadavg()[0]},
        "loadavg_before": list(load_before),
        "embreg": {"train_seconds_per_epoch": ours["train_seconds_per_epoch"], "model": ours["model"]},
        "recbole": {"train_seconds_per_epoch": theirs["train_seconds_per_epoch"]},
        "machine": machine(),
    }
    atomic_write_text(runs / "timing.json", json.dumps(record, indent=1) + "\n")
    peer_out.unlink()
    print(json.dumps(record, indent=1))


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "threads": 1, "platform": platform.platform(), "torch": torch.__version__}


def _recbole_python(given: str) -> Path:
    found = given if os.sep in given else shutil.which(given)
    path = Path(found or given)
    if not path.exists():
        raise SystemExit(f"{path} not found: set up RecBole's venv (benchmarks/recbole_peer/README.md)")
    return path


def _seed_list(text: str) -> list[int]:
    """``5`` -> seeds 0..4; ``3,4`` -> seeds 3 and 4."""
    if "," in text:
        return [int(s) for s in text.split(",") if s]
    return list(range(int(text)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--runs", default=None, help="folder of the per-seed JSONs (default: $EMBREG_HOME/benchmarks/...)"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("recbole", "RecBole's seeds"), ("embreg", "one embreg variant's seeds")):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--seeds", type=_seed_list, default=[0], dest="seed_list", help="N (0..N-1) or a list 3,4")
        sub.add_argument("--max-epochs", type=int, default=MAX_EPOCHS)
        sub.add_argument("--patience", type=int, default=PATIENCE, help="0: train every epoch")
        sub.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
        if name == "embreg":
            sub.add_argument("--variant", choices=sorted(VARIANTS), default="default")
        else:
            sub.add_argument("--recbole-python", default="/work/recbole-venv/bin/python")
    timing = commands.add_parser("timing", help="epoch times of both libraries, side by side")
    timing.add_argument("--epochs", type=int, default=SHORT_BUDGET)
    timing.add_argument("--recbole-python", default="/work/recbole-venv/bin/python")
    timing.add_argument(
        "--host-note", default="", help="the host's state, written beside the times (e.g. 'other long jobs paused')"
    )
    report = commands.add_parser("report", help="the record, the page, summary.json and the plot")
    report.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    args.runs = args.runs or str(default_runs())
    if getattr(args, "device", "cpu") == "cuda":
        args.runs = str(Path(args.runs) / "cuda")  # GPU runs never mix with the CPU page's runs
    if args.command in ("recbole", "embreg"):
        if args.max_epochs < 1 or args.patience < 0:
            parser.error("need --max-epochs >= 1 and --patience >= 0")
        args.patience = args.patience or None
        if args.device == "cuda" and not torch.cuda.is_available():
            parser.error(f"--device cuda, but torch {torch.__version__} sees no CUDA device")
    if args.command == "recbole":
        run_recbole(args)
    elif args.command == "embreg":
        run_embreg(args)
    elif args.command == "timing":
        run_timing(args)
    else:
        from sasrec_vs_recbole_page import write_report  # benchmarks/ is on sys.path when run as a script

        descriptions = {name: what for name, (_, _, what) in VARIANTS.items()}
        page = write_report(
            Path(args.runs),
            Path(args.out),
            max_epochs=MAX_EPOCHS,
            patience=PATIENCE,
            short=SHORT_BUDGET,
            matched=MATCHED,
            machine=machine(),
            descriptions=descriptions,
        )
        print(page)


if __name__ == "__main__":
    sys.exit(main())
