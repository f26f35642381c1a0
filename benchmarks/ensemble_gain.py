"""Single model against ensembles on the clothing reviews (nlp-best-practices.txt, "Ensembling").

Two of the document's ensembling practices, each against the single model it is built from, on the CNN text
classifier of the recipe ``cls-cnn-reviews`` (1,000 training reviews, "recommended?", MiniLM token embeddings):

* **independently seeded models**: ``--replicates`` ensembles of ``--members`` CNNs each (seeds ``0 ..
  replicates * members - 1``, every member a run of the recipe as shipped, its best-validation checkpoint kept),
  probabilities averaged (``embreg.serving.load_ensemble``). Compared with the single CNNs they are made of.
* **snapshot ensembles** (Huang et al. 2017): ``--replicates`` runs (seeds ``1000 ..``) of ``--snapshot-epochs``
  epochs under cosine warm restarts every ``--cycle-epochs`` epochs (``train.schedule=cosine-restarts``,
  ``train.snapshot_ensemble=true``), each evaluated as its best-validation single model and as the ensemble of the
  weights at the end of its cycles. Compared within the same runs, so at the same training cost.

Runs need their checkpoints, so this is a benchmark (it trains its runs into ``--work``; a finished run there is read
back, not retrained), not a study log analysis. Verdicts as the studies give them (Welch's t-test at 0.05); the
paired t-test over replicates is printed beside it.

    python benchmarks/ensemble_gain.py --replicates 5 --members 3 --jobs 2

writes ``docs/results/ensemble-gain/{README.md,ensemble-gain.json,summary.json}``.
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


def _mean_std(values: list[float]) -> str:
    return f"{np.mean(values):.4f} ± {np.std(values, ddof=1):.4f}"


def _paired_p(a: list[float], b: list[float]) -> float:
    return float(stats.ttest_rel(a, b).pvalue) if len(a) > 1 else float("nan")


def _plot(groups: dict[str, list[float]], path: Path) -> None:
    """One dot per model (test MCC) and each group's mean as a bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.2))
    for i, values in enumerate(groups.values()):
        ax.scatter([i] * len(values), values, s=18, alpha=0.7)
        ax.hlines(np.mean(values), i - 0.25, i + 0.25, color="black")
    ax.set_xticks(range(len(groups)), list(groups), rotation=15, fontsize=8)
    ax.set_ylabel("test MCC (recommended?)")
    ax.set_title("CNN on 1,000 clothing reviews: single models and ensembles", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicates", type=int, default=5, help="ensembles of each kind (the n of the tests)")
    parser.add_argument("--members", type=int, default=3, help="independently seeded models per ensemble")
    parser.add_argument("--snapshot-epochs", type=int, default=6)
    parser.add_argument("--cycle-epochs", type=int, default=2, help="epochs per cosine cycle (one snapshot each)")
    parser.add_argument("--temperature", type=float, default=2.0, help="distillation temperature T")
    parser.add_argument("--alpha", type=float, default=0.5, help="weight of the distillation (soft) term")
    parser.add_argument("--jobs", type=int, default=2, help="runs trained at once (processes, one thread each)")
    parser.add_argument("--work", type=Path, default=Path("runs/ensemble-gain"), help="where the runs are kept")
    parser.add_argument("--out-dir", type=Path, default=OUT)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override of every run")
    args = parser.parse_args()
    if args.replicates < 2 or args.members < 2:
        parser.error("--replicates and --members must both be >= 2 (a test needs two values, an ensemble two models)")
    if args.snapshot_epochs < 2 * args.cycle_epochs:
        parser.error("--snapshot-epochs must hold at least two cycles of --cycle-epochs")
    from embreg.serving.ensemble import load_ensemble

    seeds = list(range(args.replicates * args.members))
    member_dirs = [args.work / f"member-seed-{s}" for s in seeds]
    snapshot_dirs = [args.work / f"snapshots-seed-{SNAPSHOT_SEED + r}" for r in range(args.replicates)]
    snapshot_set = [
        "train.schedule=cosine-restarts",
        f"train.restart_epochs={args.cycle_epochs}",
        "train.snapshot_ensemble=true",
        f"train.epochs={args.snapshot_epochs}",
    ]
    jobs = [(str(d), [*args.set, f"train.seed={s}"]) for d, s in zip(member_dirs, seeds)]
    jobs += [
        (str(d), [*args.set, *snapshot_set, f"train.seed={SNAPSHOT_SEED + r}"]) for r, d in enumerate(snapshot_dirs)
    ]
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        finished = list(pool.map(_train, jobs))
    members_metrics = finished[: len(member_dirs)]
    snapshot_metrics = finished[len(member_dirs) :]
    groups = [member_dirs[r * args.members : (r + 1) * args.members] for r in range(args.replicates)]
    student_dirs = [args.work / f"student-seed-{STUDENT_SEED + r}" for r in range(args.replicates)]
    student_jobs = [
        (
            str(d),
            [
                *args.set,
                f"train.seed={STUDENT_SEED + r}",
                f"objective={{name: distill, teachers: [{', '.join(map(str, group))}], "
                f"temperature: {args.temperature}, alpha: {args.alpha}}}",
            ],
        )
        for r, (d, group) in enumerate(zip(student_dirs, groups))
    ]
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        student_metrics = list(pool.map(_train, student_jobs))

    single: dict[str, list[float]] = {m: [f[f"test_{m}"] for f in members_metrics] for m in METRICS}
    ensembles: dict[str, list[float]] = {m: [] for m in METRICS}
    member_means: dict[str, list[float]] = {m: [] for m in METRICS}
    for r, group in enumerate(groups):
        scored = load_ensemble(group).evaluate("test")
        for m in METRICS:
            ensembles[m].append(float(scored[m]))
            member_means[m].append(float(np.mean(single[m][r * args.members : (r + 1) * args.members])))
    snap_single = {m: [f[f"test_{m}"] for f in snapshot_metrics] for m in METRICS}
    snap_ensemble = {m: [f[f"snapshots_test_{m}"] for f in snapshot_metrics] for m in METRICS}
    counts = sorted({int(f["snapshots_count"]) for f in snapshot_metrics})

    rows, claims = [], []
    for m in METRICS:
        verdict, p = judge(ensembles[m], single[m], "max")
        paired = _paired_p(ensembles[m], member_means[m])
        rows.append(
            f"| seeded ensemble of {args.members} vs its single CNNs | test {m} | {_mean_std(ensembles[m])} "
            f"(n={args.replicates}) | {_mean_std(single[m])} (n={len(single[m])}) | {p:.3g} | {paired:.3g} | "
            f"**{verdict}** |"
        )
        if m == "mcc":
            claims.append(
                {
                    "claim": f"Averaging {args.members} independently seeded CNNs beats a single CNN (test MCC, "
                    "recommended?) (Ensembling)",
                    "reading": f"ensemble {_mean_std(ensembles[m])} (n={args.replicates}) vs single "
                    f"{_mean_std(single[m])} (n={len(single[m])}), Welch p={p:.3g}, paired p={paired:.3g}",
                    "verdict": verdict,
                    "p": p,
                }
            )
    for m in METRICS:
        verdict, p = judge(snap_ensemble[m], snap_single[m], "max")
        paired = _paired_p(snap_ensemble[m], snap_single[m])
        rows.append(
            f"| snapshot ensemble vs the best single epoch of the same run | test {m} | "
            f"{_mean_std(snap_ensemble[m])} (n={args.replicates}) | {_mean_std(snap_single[m])} "
            f"(n={args.replicates}) | {p:.3g} | {paired:.3g} | **{verdict}** |"
        )
        if m == "mcc":
            claims.append(
                {
                    "claim": "A snapshot ensemble (cosine warm restarts) beats the single best model of the same run "
                    "(test MCC, recommended?) (Ensembling)",
                    "reading": f"snapshots {_mean_std(snap_ensemble[m])} vs single {_mean_std(snap_single[m])} "
                    f"(n={args.replicates}/{args.replicates}), Welch p={p:.3g}, paired p={paired:.3g}",
                    "verdict": verdict,
                    "p": p,
                }
            )
    students = {m: [f[f"test_{m}"] for f in student_metrics] for m in METRICS}
    for m in METRICS:
        verdict, p = judge(students[m], single[m], "max")
        paired = _paired_p(students[m], member_means[m])
        rows.append(
            f"| student distilled from an ensemble of {args.members} vs the single CNNs | test {m} | "
            f"{_mean_std(students[m])} (n={args.replicates}) | {_mean_std(single[m])} (n={len(single[m])}) | "
            f"{p:.3g} | {paired:.3g} | **{verdict}** |"
        )
        if m == "mcc":
            claims.append(
                {
                    "claim": "A single CNN distilled from an ensemble beats a CNN trained alone (test MCC, "
                    "recommended?) (Ensembling: distillation)",
                    "reading": f"student {_mean_std(students[m])} (n={args.replicates}) vs single "
                    f"{_mean_std(single[m])} (n={len(single[m])}), Welch p={p:.3g}, paired p={paired:.3g}",
                    "verdict": verdict,
                    "p": p,
                }
            )
    for m in METRICS:
        verdict, p = judge(ensembles[m], snap_ensemble[m], "max")
        rows.append(
            f"| seeded ensemble vs snapshot ensemble | test {m} | {_mean_std(ensembles[m])} (n={args.replicates}) | "
            f"{_mean_std(snap_ensemble[m])} (snapshots, n={args.replicates}) | {p:.3g} | — | **{verdict}** |"
        )
        if m == "mcc":
            claims.append(
                {
                    "claim": "Independently trained models make a better ensemble than the checkpoints of one run "
                    "(test MCC, recommended?) (Ensembling: model diversity)",
                    "reading": f"seeded {_mean_std(ensembles[m])} vs snapshots {_mean_std(snap_ensemble[m])} "
                    f"(n={args.replicates}/{args.replicates}), Welch p={p:.3g}",
                    "verdict": verdict,
                    "p": p,
                }
            )
    seconds = [f["train_seconds"] for f in members_metrics]
    student_seconds = [f["train_seconds"] for f in student_metrics]
    snap_seconds = [f["train_seconds"] for f in snapshot_metrics]
    machine = machine_record()
    command = "python benchmarks/ensemble_gain.py " + " ".join(sys.argv[1:])
    record = {
        "command": command,
        "machine": machine,
        "recipe": RECIPE,
        "members": args.members,
        "replicates": args.replicates,
        "single": single,
        "ensembles": ensembles,
        "member_means": member_means,
        "snapshot_single": snap_single,
        "snapshot_ensemble": snap_ensemble,
        "snapshot_counts": counts,
        "train_seconds_single": seconds,
        "train_seconds_snapshot_run": snap_seconds,
        "students": students,
        "train_seconds_student": student_seconds,
        "distillation": {"temperature": args.temperature, "alpha": args.alpha},
    }
    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "ensemble-gain.json").write_text(json.dumps(record, indent=1) + "\n")
    page = [
        "# Single model against ensembles (clothing reviews, CNN)",
        "",
        f"`{command}` (record: [`ensemble-gain.json`](ensemble-gain.json)); machine: {machine['processor']}, "
        f"{machine['cpus']} CPUs, torch {machine['torch']}, one thread per run. Recipe `{RECIPE}` "
        + (f"with `{' '.join(args.set)}` " if args.set else "as shipped ")
        + "(Kim's CNN from MiniLM's token embeddings; 1,000 training, 500 validation and 1,000 test reviews, "
        '"recommended?"; 5 epochs, the best-validation-MCC epoch kept).',
        "",
        f"* **Seeded ensembles**: {args.replicates} ensembles of {args.members} CNNs (seeds 0-{len(seeds) - 1}, "
        "disjoint), class probabilities averaged; against the single CNNs they are made of. Training cost: "
        f"{args.members}x a single model (a single CNN: {np.median(seconds):.0f} s median to train here); "
        f"inference {args.members}x.",
        f"* **Snapshot ensembles**: {args.replicates} runs (seeds {SNAPSHOT_SEED}-{SNAPSHOT_SEED + args.replicates - 1})"
        f" of {args.snapshot_epochs} epochs with warm restarts every {args.cycle_epochs} epochs "
        f"({', '.join(map(str, counts))} snapshots each); the ensemble of the snapshots against the same run's "
        f"best-validation single model, so at one training cost ({np.median(snap_seconds):.0f} s median); "
        "inference as many times the single model as there are snapshots.",
        f"* **Distillation** (Hinton et al. 2015): per ensemble, one CNN (seeds {STUDENT_SEED}-"
        f"{STUDENT_SEED + args.replicates - 1}) trained on its teachers' soft targets (`objective: distill`, "
        f"T = {args.temperature}, alpha = {args.alpha}) beside the labels; one model at inference, training "
        f"{np.median(student_seconds) / max(np.median(seconds), 1e-9):.1f}x a single CNN's time (teachers' "
        "forward passes), after the teachers.",
        "",
        "Verdict: Welch's t-test at 0.05, as in the studies; the paired p compares each ensemble (or student) with "
        "the mean of its own members (seeded, distilled) or with its own run's single model (snapshots).",
        "",
        "| comparison | metric | ensemble mean ± std | single mean ± std | Welch p | paired p | verdict |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    _plot(
        {
            "single CNN": single["mcc"],
            f"seeded ensemble ({args.members})": ensembles["mcc"],
            "snapshot run: best epoch": snap_single["mcc"],
            "snapshot ensemble": snap_ensemble["mcc"],
            "distilled student": students["mcc"],
        },
        out / "ensemble-gain.png",
    )
    page += ["![test MCC of every run and ensemble](ensemble-gain.png)", ""]
    (out / "README.md").write_text("\n".join(page))
    write_benchmark_summary(
        out,
        "ensemble-gain",
        "Single model against seeded and snapshot ensembles (clothing reviews, CNN)",
        "nlp-best-practices.txt",
        claims,
        machine,
        command,
    )
    print("\n".join(page))


if __name__ == "__main__":
    main()
