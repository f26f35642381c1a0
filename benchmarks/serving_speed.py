"""Speed of using a trained run against the evaluation path that computes the same thing: ratios in one run.

Targets:

* ``recommend --all --k 10`` on MovieLens-100k for SASRec and BPR runs in <= 1.2x the time of the evaluation pass
  over the same users (the full-ranking top-k of every user; the evaluation also scores its metrics);
* ``predict`` on 10^6 rows for MF and DLRM at >= 0.8x the throughput of the evaluation path (the model's
  predictions over the same rows as tensors), the rows given as a table of original ids (file reading excluded).

Each model is trained for one epoch (the speed of a forward pass does not depend on how well it was trained) into
a temporary run directory and loaded with ``embreg.load``; the two sides of each ratio take turns for ``--rounds``
rounds, and the ratio of their medians is reported.

    python benchmarks/serving_speed.py --rounds 5

writes ``docs/results/serving-speed/serving-speed.json`` and ``README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "serving-speed"
QUICK = ["train.epochs=1", "train.progress=false", "train.device=cpu"]


def _median_pair(a: Callable[[], object], b: Callable[[], object], rounds: int) -> tuple[float, float]:
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for side, fn in enumerate((a, b)):
            start = time.perf_counter()
            fn()
            times[side].append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def _train(recipe: str, overrides: list[str], root: Path) -> Path:
    from embreg.recipes import load_recipe
    from embreg.recipes.run import run_single

    out = root / recipe
    run_single(load_recipe(recipe, [*overrides, *QUICK]), out)
    return out


def recommend_ratio(recipe: str, overrides: list[str], root: Path, rounds: int) -> dict:
    import embreg

    run = embreg.load(_train(recipe, overrides, root))
    users = len(run.recommend(None, k=10)["user"].unique())
    evaluation, serving = _median_pair(
        lambda: run.evaluator(run.model, "test"), lambda: run.recommend(None, k=10), rounds
    )
    return {"users": users, "evaluation_s": evaluation, "recommend_s": serving, "ratio": serving / evaluation}


def predict_ratio(kind: str, root: Path, rows: int, rounds: int) -> dict:
    import embreg
    from embreg.tasks.ctr.evaluation import CTREvaluator
    from embreg.tasks.ratings.evaluation import RatingEvaluator

    rng = np.random.default_rng(0)
    if kind == "mf":
        run = embreg.load(_train("mf", [], root))
        users = rng.integers(0, len(run.vocabularies["user"]), rows)
        items = rng.integers(0, len(run.vocabularies["item"]), rows)
        table = pd.DataFrame(
            {"user_id": run.vocabularies["user"].labels_of(users), "item_id": run.vocabularies["item"].labels_of(items)}
        )
        tensors = {"user": torch.from_numpy(users), "item": torch.from_numpy(items), "rating": torch.zeros(rows)}
        evaluator = RatingEvaluator({"bench": tensors}, rating_range=run.evaluator.rating_range)
        evaluate = lambda: evaluator.predict(run.model, "bench")  # noqa: E731
    else:
        path = root / "clicks.csv"
        fields = {f"c{j}": [f"v{v}" for v in range(100 * (j + 1))] for j in range(8)}
        n = 20_000
        frame = pd.DataFrame({name: rng.choice(values, n) for name, values in fields.items()})
        frame["x0"] = rng.normal(size=n).round(3)
        frame["label"] = (rng.random(n) < 0.3).astype(int)
        frame.to_csv(path, index=False)
        run = embreg.load(_train("ctr-adult", [f"data.path={path}", "data.dense_cols=[x0]"], root))
        index = rng.integers(0, n, rows)
        table = frame.drop(columns="label").iloc[index].reset_index(drop=True)
        prepared = run.prepared
        codes = torch.from_numpy(prepared.table.categorical[index])
        dense = (prepared.table.dense[index] - prepared.dense_mean) / prepared.dense_std
        tensors = {
            "categorical": codes,
            "dense": torch.from_numpy(dense.astype(np.float32)),
            "label": torch.zeros(rows),
        }
        evaluator = CTREvaluator({"bench": tensors})
        evaluate = lambda: torch.sigmoid(evaluator.logits(run.model, "bench"))  # noqa: E731
    evaluation, serving = _median_pair(evaluate, lambda: run.predict(table), rounds)
    return {
        "rows": rows,
        "evaluation_rows_per_s": rows / evaluation,
        "predict_rows_per_s": rows / serving,
        "ratio": evaluation / serving,
    }


def write_page(out: Path, record: dict) -> None:
    lines = [
        "# Using a trained run: recommend and predict against the evaluation path",
        "",
        "Each model trained one epoch on its data, loaded with `embreg.load`; the two sides of each ratio took turns "
        f"for {record['rounds']} rounds (medians). CPU, {record['machine']['threads']} thread(s).",
        "",
        "| recommend --all --k 10 | users | evaluation pass (s) | recommend (s) | ratio | target |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in record["recommend"].items():
        verdict = "met" if r["ratio"] <= 1.2 else "not met"
        lines.append(
            f"| {name} | {r['users']} | {r['evaluation_s']:.3f} | {r['recommend_s']:.3f} | {r['ratio']:.2f}x | "
            f"<= 1.2x ({verdict}) |"
        )
    lines += [
        "",
        "| predict on 10^6 rows | evaluation (rows/s) | predict (rows/s) | throughput ratio | target |",
        "|---|---|---|---|---|",
    ]
    for name, r in record["predict"].items():
        verdict = "met" if r["ratio"] >= 0.8 else "not met"
        lines.append(
            f"| {name} | {r['evaluation_rows_per_s']:,.0f} | {r['predict_rows_per_s']:,.0f} | {r['ratio']:.2f}x | "
            f">= 0.8x ({verdict}) |"
        )
    lines += [
        "",
        "The recommend side builds the output table (original ids, rank, score) besides the top-k; the evaluation side "
        "computes its ranking metrics. The predict side looks every original id up in the run's vocabularies, applies "
        "the unknown-id policy and builds the output table; the evaluation side gets index tensors.",
        "",
        f"Machine: {record['machine']['cpus']} CPU cores ({record['machine']['platform']}), torch "
        f"{record['machine']['torch']}; a shared machine. Command: `{record['command']}` (raw numbers: "
        "`serving-speed.json`).",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per ratio")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows for predict")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--out", default=str(RESULTS), help="results folder (default: %(default)s)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        record = {
            "command": f"python benchmarks/serving_speed.py --rounds {args.rounds} --rows {args.rows} "
            f"--threads {args.threads}",
            "rounds": args.rounds,
            "machine": {
                "cpus": os.cpu_count(),
                "threads": args.threads,
                "platform": platform.platform(),
                "torch": torch.__version__,
            },
            "recommend": {
                "BPR (ML-100k)": recommend_ratio("bpr", [], root, args.rounds),
                "SASRec (ML-100k)": recommend_ratio("sasrec", [], root, args.rounds),
            },
            "predict": {
                "MF (ML-100k ids)": predict_ratio("mf", root, args.rows, args.rounds),
                "DLRM (click file, 8 fields + 1 dense)": predict_ratio("dlrm", root, args.rows, args.rounds),
            },
        }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "serving-speed.json").write_text(json.dumps(record, indent=2) + "\n")
    write_page(out, record)
    print((out / "README.md").read_text())


if __name__ == "__main__":
    main()
