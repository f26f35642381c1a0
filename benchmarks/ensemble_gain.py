"""Single model against ensembles on the clothing reviews (nlp-best-practices.txt, "Ensembling").

The document's ensembling practices, each against the single model it is built from, on the CNN text classifier of
the recipe ``cls-cnn-reviews`` (1,000 training reviews, "recommended?", MiniLM token embeddings):

* **independently seeded models**: ``--replicates`` ensembles of ``--members`` CNNs each (seeds ``0 ..
  replicates * members - 1``, every member a run of the recipe as shipped, its best-validation checkpoint kept),
  probabilities averaged (``embreg.serving.load_ensemble``). Compared with the single CNNs they are made of.
* **snapshot ensembles** (Huang et al. 2017): for each ``--snapshots EPOCHS:CYCLE`` schedule, ``--replicates`` runs
  (seeds ``1000 ..``) of ``EPOCHS`` epochs under cosine warm restarts every ``CYCLE`` epochs
  (``train.schedule=cosine-restarts``, ``train.snapshot_ensemble=true``), each evaluated as its best-validation
  single model and as the ensemble of the weights at the end of its cycles: compared within the same runs, so at
  the same training cost, and with the seeded ensembles (the document prefers independent models for diversity).
* **distillation** (Hinton et al. 2015): per seeded ensemble one CNN (seeds ``2000 ..``) trained on the ensemble's
  soft targets beside the labels (``objective: distill``), against the single CNNs.

Runs need their checkpoints, so this is a benchmark (it trains its runs into ``--work``; a finished run there is read
back, not retrained), not a study log analysis. Verdicts as the studies give them (Welch's t-test at 0.05); the
paired t-test over replicates is printed beside it.

    python benchmarks/ensemble_gain.py --replicates 5 --members 3 --snapshots 6:2 --snapshots 12:3 --jobs 2

writes ``docs/results/ensemble-gain/{README.md,ensemble-gain.json,ensemble-gain.png,summary.json}``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from embreg.studies.hub import write_benchmark_summary
from embreg.studies.report import judge
from embreg.studies.runlog import machine_record

OUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "ensemble-gain"
RECIPE = "cls-cnn-reviews"
METRICS = ("mcc", "accuracy", "f1")
SNAPSHOT_SEED = 1000
STUDENT_SEED = 2000


def _train(job: tuple[str, list[str]]) -> dict[str, Any]:
    """Trains (or reads back) one run; returns its final metrics."""
    from embreg.recipes import load_recipe
    from embreg.recipes.run import run_single

    directory, overrides = job
    recipe = load_recipe(RECIPE, [*overrides, "train.progress=false", "train.keep_checkpoints=best"])
    return dict(run_single(recipe, directory, resume=True).metrics)


def _train_all(jobs: list[tuple[str, list[str]]], workers: int) -> list[dict[str, Any]]:
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_train, jobs))


def _mean_std(values: list[float]) -> str:
    return f"{np.mean(values):.4f} ± {np.std(values, ddof=1):.4f}"


def _paired_p(a: list[float], b: list[float]) -> float:
    return float(stats.ttest_rel(a, b).pvalue) if len(a) > 1 else float("nan")


def _schedule(text: str) -> tuple[int, int]:
    """``"EPOCHS:CYCLE"`` -> ``(epochs, cycle)``, at least two cycles."""
    try:
        epochs, cycle = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not EPOCHS:CYCLE (e.g. 12:3)") from None
    if cycle < 1 or epochs < 2 * cycle:
        raise argparse.ArgumentTypeError(f"{text!r}: EPOCHS must hold at least two cycles of CYCLE >= 1 epochs")
    return epochs, cycle


class Comparisons:
    """The page's rows and the hub's claims (MCC only), one comparison at a time."""

    def __init__(self) -> None:
        self.rows: list[str] = []
        self.claims: list[dict[str, Any]] = []

    def add(
        self,
        label: str,
        claim: str,
        variant: dict[str, list[float]],
        baseline: dict[str, list[float]],
        paired_with: dict[str, list[float]] | None,
        baseline_note: str = "",
    ) -> None:
        for m in METRICS:
            verdict, p = judge(variant[m], baseline[m], "max")
            paired = _paired_p(variant[m], paired_with[m]) if paired_with is not None else float("nan")
            paired_text = f"{paired:.3g}" if paired_with is not None else "—"
            self.rows.append(
                f"| {label} | test {m} | {_mean_std(variant[m])} (n={len(variant[m])}) | {_mean_std(baseline[m])} "
                f"({baseline_note}n={len(baseline[m])}) | {p:.3g} | {paired_text} | **{verdict}** |"
            )
            if m == "mcc":
                self.claims.append(
                    {
                        "claim": claim,
                        "reading": f"{_mean_std(variant[m])} vs {_mean_std(baseline[m])} "
                        f"(n={len(variant[m])}/{len(baseline[m])}), Welch p={p:.3g}, paired p={paired_text}",
                        "verdict": verdict,
                        "p": p,
                    }
                )


def _plot(groups: dict[str, list[float]], path: Path) -> None:
    """One dot per model (test MCC) and each group's mean as a bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.4))
    for i, values in enumerate(groups.values()):
        ax.scatter([i] * len(values), values, s=18, alpha=0.7)
        ax.hlines(np.mean(values), i - 0.25, i + 0.25, color="black")
    ax.set_xticks(range(len(groups)), list(groups), rotation=15, fontsize=7)
    ax.set_ylabel("test MCC (recommended?)")
    ax.set_title("CNN on 1,000 clothing reviews: single models and ensembles", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicates", type=int, default=5, help="ensembles of each kind (the n of the tests)")
    parser.add_argument("--members", type=int, default=3, help="independently seeded models per ensemble")
    parser.add_argument(
        "--snapshots",
        type=_schedule,
        action="append",
        metavar="EPOCHS:CYCLE",
        help="a snapshot-ensemble schedule (repeatable; default 6:2 and 12:3)",
    )
    parser.add_argument("--temperature", type=float, default=2.0, help="distillation temperature T")
    parser.add_argument("--alpha", type=float, default=0.5, help="weight of the distillation (soft) term")
    parser.add_argument("--jobs", type=int, default=2, help="runs trained at once (processes, one thread each)")
    parser.add_argument("--work", type=Path, default=Path("runs/ensemble-gain"), help="where the runs are kept")
    parser.add_argument("--out-dir", type=Path, default=OUT)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override of every run")
    args = parser.parse_args()
    if args.replicates < 2 or args.members < 2:
        parser.error("--replicates and --members must both be >= 2 (a test needs two values, an ensemble two models)")
    schedules = args.snapshots or [(6, 2), (12, 3)]
    from embreg.serving.ensemble import load_ensemble

    replicates = range(args.replicates)
    seeds = list(range(args.replicates * args.members))
    member_dirs = [args.work / f"member-seed-{s}" for s in seeds]
    groups = [member_dirs[r * args.members : (r + 1) * args.members] for r in replicates]
    jobs = [(str(d), [*args.set, f"train.seed={s}"]) for d, s in zip(member_dirs, seeds)]
    for epochs, cycle in schedules:
        snapshot_set = [
            "train.schedule=cosine-restarts",
            f"train.restart_epochs={cycle}",
            "train.snapshot_ensemble=true",
            f"train.epochs={epochs}",
        ]
        jobs += [
            (str(args.work / f"snapshots-{epochs}x{cycle}-seed-{SNAPSHOT_SEED + r}"),
             [*args.set, *snapshot_set, f"train.seed={SNAPSHOT_SEED + r}"])
            for r in replicates
        ]  # fmt: skip
    finished = _train_all(jobs, args.jobs)
    members_metrics = finished[: len(member_dirs)]
    snapshot_metrics = [
        finished[len(member_dirs) + i * args.replicates : len(member_dirs) + (i + 1) * args.replicates]
        for i in range(len(schedules))
    ]
    student_jobs = [
        (
            str(args.work / f"student-seed-{STUDENT_SEED + r}"),
            [
                *args.set,
                f"train.seed={STUDENT_SEED + r}",
                f"objective={{name: distill, teachers: [{', '.join(map(str, groups[r]))}], "
                f"temperature: {args.temperature}, alpha: {args.alpha}}}",
            ],
        )
        for r in replicates
    ]
    student_metrics = _train_all(student_jobs, args.jobs)

    single = {m: [f[f"test_{m}"] for f in members_metrics] for m in METRICS}
    ensembles: dict[str, list[float]] = {m: [] for m in METRICS}
    member_means: dict[str, list[float]] = {m: [] for m in METRICS}
    for r, group in enumerate(groups):
        scored = load_ensemble(group).evaluate("test")
        for m in METRICS:
            ensembles[m].append(float(scored[m]))
            member_means[m].append(float(np.mean(single[m][r * args.members : (r + 1) * args.members])))
    students = {m: [f[f"test_{m}"] for f in student_metrics] for m in METRICS}

    table = Comparisons()
    table.add(
        f"seeded ensemble of {args.members} vs the single CNNs",
        f"Averaging {args.members} independently seeded CNNs beats a single CNN (test MCC, recommended?) (Ensembling)",
        ensembles,
        single,
        member_means,
    )
    snapshots: list[dict[str, Any]] = []
    for (epochs, cycle), metrics in zip(schedules, snapshot_metrics):
        entry = {
            "epochs": epochs,
            "cycle": cycle,
            "counts": sorted({int(f["snapshots_count"]) for f in metrics}),
            "single": {m: [f[f"test_{m}"] for f in metrics] for m in METRICS},
            "ensemble": {m: [f[f"snapshots_test_{m}"] for f in metrics] for m in METRICS},
            "train_seconds": [f["train_seconds"] for f in metrics],
        }
        snapshots.append(entry)
        name = f"{epochs} epochs, cycles of {cycle}"
        table.add(
            f"snapshot ensemble ({name}) vs the best single epoch of the same run",
            f"A snapshot ensemble ({name}) beats the best single model of the same run (test MCC, recommended?) "
            "(Ensembling: cyclical learning rates)",
            entry["ensemble"],
            entry["single"],
            entry["single"],
        )
        table.add(
            f"seeded ensemble of {args.members} vs the snapshot ensemble ({name})",
            f"Independently trained models make a better ensemble than the snapshots of one run ({name}) (test MCC, "
            "recommended?) (Ensembling: model diversity)",
            ensembles,
            entry["ensemble"],
            None,
            "snapshots, ",
        )
    table.add(
        f"student distilled from an ensemble of {args.members} vs the single CNNs",
        "A single CNN distilled from an ensemble beats a CNN trained alone (test MCC, recommended?) "
        "(Ensembling: distillation)",
        students,
        single,
        member_means,
    )

    seconds = [f["train_seconds"] for f in members_metrics]
    student_seconds = [f["train_seconds"] for f in student_metrics]
    machine = machine_record()
    command = "python benchmarks/ensemble_gain.py " + " ".join(sys.argv[1:])
    record = {
        "command": command,
        "machine": machine,
        "recipe": RECIPE,
        "overrides": args.set,
        "members": args.members,
        "replicates": args.replicates,
        "single": single,
        "ensembles": ensembles,
        "member_means": member_means,
        "train_seconds_single": seconds,
        "snapshots": snapshots,
        "students": students,
        "train_seconds_student": student_seconds,
        "distillation": {"temperature": args.temperature, "alpha": args.alpha},
    }
    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "ensemble-gain.json").write_text(json.dumps(record, indent=1) + "\n")
    schedules_text = "; ".join(
        f"{s['epochs']} epochs with warm restarts every {s['cycle']} epochs ({', '.join(map(str, s['counts']))} "
        f"snapshots, {np.median(s['train_seconds']):.0f} s median)"
        for s in snapshots
    )
    page = [
        "# Single model against ensembles (clothing reviews, CNN)",
        "",
        f"`{command}` (record: [`ensemble-gain.json`](ensemble-gain.json)); machine: {machine['processor']}, "
        f"{machine['cpus']} CPUs, torch {machine['torch']}, one thread per run. Recipe `{RECIPE}` "
        + (f"with `{' '.join(args.set)}` " if args.set else "as shipped ")
        + "(Kim's CNN from MiniLM's token embeddings; 1,000 training, 500 validation and 1,000 test reviews, "
        '"recommended?"; 5 epochs at a constant learning rate, the best-validation-MCC epoch kept).',
        "",
        f"* **Seeded ensembles**: {args.replicates} ensembles of {args.members} CNNs (seeds 0-{len(seeds) - 1}, "
        "disjoint), class probabilities averaged; against the single CNNs they are made of. Training cost: "
        f"{args.members}x a single model (a single CNN: {np.median(seconds):.0f} s median to train here); "
        f"inference {args.members}x.",
        f"* **Snapshot ensembles**: per schedule, {args.replicates} runs (seeds {SNAPSHOT_SEED}-"
        f"{SNAPSHOT_SEED + args.replicates - 1}) of {schedules_text}; the ensemble of a run's snapshots against "
        "the same run's best-validation single model, so at one training cost; inference as many times the single "
        "model as there are snapshots.",
        f"* **Distillation** (Hinton et al. 2015): per seeded ensemble, one CNN (seeds {STUDENT_SEED}-"
        f"{STUDENT_SEED + args.replicates - 1}) trained on its teachers' soft targets (`objective: distill`, "
        f"T = {args.temperature}, alpha = {args.alpha}) beside the labels; one model at inference, training "
        f"{np.median(student_seconds) / max(np.median(seconds), 1e-9):.1f}x a single CNN's time (the teachers' "
        "forward passes), after the teachers.",
        "",
        "Verdict: Welch's t-test at 0.05, as in the studies; the paired p compares each ensemble (or student) with "
        "the mean of its own members (seeded, distilled) or with its own run's single model (snapshots). The "
        "seeded-against-snapshot rows compare more than diversity: the snapshot runs train longer and under the "
        "cosine schedule, the seeded members for the recipe's 5 epochs at a constant rate; the snapshot runs' own "
        "best epoch is the single model trained alike.",
        "",
        "| comparison | metric | ensemble mean ± std | single mean ± std | Welch p | paired p | verdict |",
        "|---|---|---|---|---|---|---|",
        *table.rows,
        "",
    ]
    groups_plot = {"single CNN": single["mcc"], f"seeded ensemble ({args.members})": ensembles["mcc"]}
    for s in snapshots:
        groups_plot[f"{s['epochs']}x{s['cycle']}: best epoch"] = s["single"]["mcc"]
        groups_plot[f"{s['epochs']}x{s['cycle']}: snapshots"] = s["ensemble"]["mcc"]
    groups_plot["distilled student"] = students["mcc"]
    _plot(groups_plot, out / "ensemble-gain.png")
    page += ["![test MCC of every run and ensemble](ensemble-gain.png)", ""]
    (out / "README.md").write_text("\n".join(page))
    write_benchmark_summary(
        out,
        "ensemble-gain",
        "Single model against seeded and snapshot ensembles and a distilled student (clothing reviews, CNN)",
        "nlp-best-practices.txt",
        table.claims,
        machine,
        command,
    )
    print("\n".join(page))


if __name__ == "__main__":
    main()
