"""embreg's SASRec beside RecBole 1.2.1's SASRec on the same leave-one-out split, epochs and hyper-parameters.

Both libraries train on embreg's split of MovieLens-100k (exported to RecBole's atomic files by
``benchmarks/recbole_peer/export.py``; RecBole's loaders are checked example by example against the export), with
RecBole's training regime on both sides: every prefix of a training sequence is one example predicting its next
item, full softmax cross-entropy, the 50 most recent items, hidden width 50, 2 blocks, 1 head, dropout 0.2, Adam
lr 1e-3, batch 128, ``--epochs`` epochs, one thread each. Both are scored by the same rules (full ranking over
every item but the user's history, pessimistic ties; RecBole's own scores are re-ranked by
``run_recbole_sasrec.py``). The two trainings run at the same time, one process each, so they share the machine's
load; the seconds per epoch are those of the training passes (no evaluation).

RecBole runs in its own virtual environment (``benchmarks/recbole_peer/README.md``); embreg never imports it.

    python benchmarks/sasrec_vs_recbole.py --epochs 3 --recbole-python /work/recbole-venv/bin/python

writes ``docs/results/sasrec-vs-recbole/sasrec-vs-recbole.json`` and ``summary.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import tempfile
from pathlib import Path

import torch

from embreg.recipes import load_recipe
from embreg.recipes.run import run_single
from embreg.studies.hub import write_benchmark_summary

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "docs" / "results" / "sasrec-vs-recbole"


def _export_atomic(split, out_dir: Path) -> None:
    """``export_atomic`` of ``recbole_peer/export.py`` (loaded by path: ``benchmarks`` is no package)."""
    spec = importlib.util.spec_from_file_location("recbole_peer_export", HERE / "recbole_peer" / "export.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.export_atomic(split, out_dir)


MATCHED = {"max_len": 50, "hidden": 50, "layers": 2, "heads": 1, "dropout": 0.2, "lr": 1e-3, "batch_size": 128}


def embreg_overrides(epochs: int) -> list[str]:
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
        "train.seed=0",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--recbole-python", default="/work/recbole-venv/bin/python")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    recbole_python = Path(args.recbole_python)
    if not recbole_python.exists():
        raise SystemExit(f"{recbole_python} not found: set up RecBole's venv (benchmarks/recbole_peer/README.md)")
    recipe = load_recipe("sasrec", embreg_overrides(args.epochs))
    prepared = recipe.adapter.prepare(recipe)
    with tempfile.TemporaryDirectory() as work:
        data = Path(work) / "data"
        _export_atomic(prepared.split, data)
        m = MATCHED
        command = [
            str(recbole_python),
            str(HERE / "recbole_peer" / "run_recbole_sasrec.py"),
            *("--data", str(data), "--out", str(Path(work) / "recbole.json"), "--epochs", str(args.epochs)),
            *("--max-len", str(m["max_len"]), "--hidden", str(m["hidden"]), "--layers", str(m["layers"])),
            *("--heads", str(m["heads"]), "--dropout", str(m["dropout"]), "--lr", str(m["lr"])),
            *("--batch-size", str(m["batch_size"]), "--loss", "CE", "--seed", "0", "--threads", "1"),
        ]
        env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
        peer = subprocess.Popen(command, env=env)  # trains while embreg trains below
        result = run_single(recipe, Path(work) / "embreg", prepared=prepared)
        if peer.wait() != 0:
            raise SystemExit(f"RecBole's run failed (exit {peer.returncode}): {' '.join(command)}")
        recbole = json.loads((Path(work) / "recbole.json").read_text())
    ours_epoch = statistics.median(r["seconds"] for r in result.history)
    theirs_epoch = statistics.median(recbole["train_seconds_per_epoch"])
    record = {
        "command": f"python benchmarks/sasrec_vs_recbole.py --epochs {args.epochs}",
        "matched": MATCHED | {"epochs": args.epochs, "loss": "full softmax cross-entropy", "examples": "prefixes"},
        "machine": {"cpus": os.cpu_count(), "threads": 1, "platform": platform.platform(), "torch": torch.__version__},
        "embreg": {
            "test": {k[5:]: v for k, v in result.metrics.items() if k in ("test_ndcg@10", "test_hit@10", "test_mrr")},
            "best_epoch": result.metrics["best_epoch"],
            "train_seconds_per_epoch": [r["seconds"] for r in result.history],
        },
        "recbole": {
            "test": recbole["test"],
            "train_seconds_per_epoch": recbole["train_seconds_per_epoch"],
            "version": recbole["recbole_version"],
            "native_test": recbole.get("recbole_native", {}).get("test"),
        },
        "seconds_per_epoch_ratio_embreg_over_recbole": ours_epoch / theirs_epoch,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sasrec-vs-recbole.json").write_text(json.dumps(record, indent=2) + "\n")
    ours, theirs = record["embreg"]["test"], record["recbole"]["test"]
    print(json.dumps(record, indent=2))
    ratio = record["seconds_per_epoch_ratio_embreg_over_recbole"]
    claims = [
        {
            "claim": "embreg's SASRec full-ranking NDCG@10 is within noise of, or above, RecBole's on the same split "
            f"and epochs (issue 24; one seed each, {args.epochs} epochs)",
            "reading": f"test NDCG@10 {ours['ndcg@10']:.4f} vs {theirs['ndcg@10']:.4f}, "
            f"Hit@10 {ours['hit@10']:.4f} vs {theirs['hit@10']:.4f}",
            "verdict": "reproduced" if ours["ndcg@10"] >= theirs["ndcg@10"] else "untested",
            "p": None,
        },
        {
            "claim": "embreg's SASRec seconds per epoch <= RecBole's on the same machine (issue 24; moonshot 0.5x)",
            "reading": f"{ours_epoch:.1f} s vs {theirs_epoch:.1f} s per epoch: {ratio:.2f}x",
            "verdict": "reproduced" if ratio <= 1.0 else "not reproduced",
            "p": None,
        },
    ]
    write_benchmark_summary(
        out,
        "sasrec-vs-recbole",
        "SASRec: embreg beside RecBole 1.2.1 on the same split",
        "sse-stochastic-shared-embeddings.txt",
        claims,
        record["machine"],
        record["command"],
    )


if __name__ == "__main__":
    main()
