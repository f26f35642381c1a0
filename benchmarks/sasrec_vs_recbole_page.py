"""The record and results page of ``sasrec_vs_recbole.py``: budgets read from per-epoch curves, claims, plot.

``write_report(runs, out)`` gathers the per-seed JSONs that ``sasrec_vs_recbole.py`` keeps under ``runs`` into
``out/sasrec-vs-recbole.json`` (every seed's numbers and per-epoch curves), then writes the page from that record.
Run as a script, it writes the page again from an existing record:

    python benchmarks/sasrec_vs_recbole_page.py [--out docs/results/sasrec-vs-recbole]

A budget of ``E`` epochs is the test metrics of the epoch with the best validation NDCG@10 among a run's first
``E`` epochs (the first of equals, as embreg's trainer picks); the converged budget is the whole run (early
stopping). The quality claims ask for embreg's default mean test NDCG@10 at or above RecBole's (the two-sided
Welch p-value is reported beside it); the speed claim asks for embreg's median training epoch <= ``SPEED_TARGET``
times RecBole's, from the dedicated timing run.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from embreg.analysis.stats import welch_t_test
from embreg.runs.checkpoint import atomic_write_text
from embreg.studies.hub import write_benchmark_summary

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "docs" / "results" / "sasrec-vs-recbole"
METRICS = ("ndcg@10", "hit@10", "mrr")
SPEED_TARGET = 0.6
PLOT = "valid-ndcg-curves.png"
NAME = "sasrec-vs-recbole"
DESIGN_KEYS = ("norm", "embedding_norm", "embedding_scale", "positions", "init_std")
"""The model settings in which RecBole's SASRec and the original SASRec differ."""
TITLE = "SASRec: embreg beside RecBole 1.2.1 on the same split, 3 epochs and to convergence"


# ----------------------------------------------------------------------------------------------- readings
def budget_reading(run: dict[str, Any], budget: int | None) -> dict[str, Any]:
    """The test metrics of the best validation epoch among the first ``budget`` epochs (``None``: all).

    Example:
        >>> curve = [{"epoch": e, "valid": {"ndcg@10": v}, "test": {"ndcg@10": t}}
        ...          for e, v, t in [(1, 0.1, 0.2), (2, 0.3, 0.1), (3, 0.3, 0.5), (4, 0.4, 0.6)]]
        >>> budget_reading({"curve": curve}, 3)
        {'epoch': 2, 'valid': {'ndcg@10': 0.3}, 'test': {'ndcg@10': 0.1}}
    """
    curve = run["curve"] if budget is None else run["curve"][:budget]
    best = curve[0]
    for record in curve[1:]:
        if record["valid"]["ndcg@10"] > best["valid"]["ndcg@10"]:
            best = record
    return {"epoch": best["epoch"], "valid": best["valid"], "test": best["test"]}


def group_reading(runs: list[dict[str, Any]], budget: int | None) -> dict[str, Any]:
    """Per-seed budget readings of one library or variant and their means and sample standard deviations."""
    readings = [budget_reading(run, budget) for run in runs]
    per_seed = {m: [r["test"][m] for r in readings] for m in METRICS}
    valid = [r["valid"]["ndcg@10"] for r in readings]
    return {
        "seeds": [run["seed"] for run in runs],
        "valid_ndcg@10_per_seed": valid,
        "valid_ndcg@10": statistics.fmean(valid),
        "valid_ndcg@10_std": statistics.stdev(valid) if len(valid) > 1 else None,
        "epoch": [r["epoch"] for r in readings],
        "epochs_run": [len(run["curve"]) if budget is None else min(budget, len(run["curve"])) for run in runs],
        "test_per_seed": per_seed,
        "test": {m: statistics.fmean(v) for m, v in per_seed.items()},
        "test_std": {m: statistics.stdev(v) if len(v) > 1 else None for m, v in per_seed.items()},
    }


def compare(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    a, b = ours["test_per_seed"]["ndcg@10"], theirs["test_per_seed"]["ndcg@10"]
    p = welch_t_test(a, b)
    return {"difference": statistics.fmean(a) - statistics.fmean(b), "welch_p": None if p != p else p}


# ----------------------------------------------------------------------------------------------- gathering
def _load_runs(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("seed-*.json"), key=lambda p: int(p.stem[5:]))]


def _max_epoch_folders(folder: Path) -> dict[int, Path]:
    return {int(p.name[1:]): p for p in folder.glob("e*") if p.is_dir() and p.name[1:].isdigit()}


def _trim(run: dict[str, Any]) -> dict[str, Any]:
    """A RecBole run without what every run shares (the split manifest, paths), with its seed at the top."""
    drop = {"args", "split", "data", "python", "verification"}
    return {"seed": run["args"]["seed"]} | {k: v for k, v in run.items() if k not in drop}


def gather(runs: Path, max_epochs: int, short: int) -> dict[str, Any]:
    """Every kept run, by library, variant and maximum epochs (``e<max>``)."""
    recbole = {e: [_trim(r) for r in _load_runs(f)] for e, f in _max_epoch_folders(runs / "recbole").items()}
    embreg: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for variant in sorted(p for p in (runs / "embreg").glob("*") if p.is_dir()):
        found = {e: _load_runs(f) for e, f in _max_epoch_folders(variant).items()}
        embreg[variant.name] = {e: runs_ for e, runs_ in found.items() if runs_}
    return {"recbole": {e: r for e, r in recbole.items() if r}, "embreg": embreg}


def runs_for_budget(by_max: dict[int, list[dict[str, Any]]], budget: int | None, max_epochs: int) -> list[dict]:
    """The runs that read ``budget``: a ``budget``-epoch run where there is one, else the longest runs' first
    ``budget`` epochs; the converged budget (``None``) only from runs of ``max_epochs``."""
    if budget is None:
        return by_max.get(max_epochs, [])
    if budget in by_max:
        return by_max[budget]
    longer = [e for e in by_max if e > budget]
    return by_max[max(longer)] if longer else []


def _same_first_epochs(short_run: dict[str, Any], long_run: dict[str, Any], epochs: int) -> bool:
    return all(
        a["valid"] == b["valid"] and a["test"] == b["test"] and a["train_loss"] == b["train_loss"]
        for a, b in zip(short_run["curve"][:epochs], long_run["curve"][:epochs], strict=True)
    )


def determinism(kept: dict[str, Any], short: int) -> list[dict[str, Any]]:
    """Seeds run both as a ``short``-epoch run and as a longer run: are the first ``short`` epochs identical?

    Pairs: each library or variant with itself, and any variant's short runs with the ``default`` long runs where
    that variant's model is the default model (the same config: ``original+init-normal`` is the default design).
    """
    pairs = [("recbole", kept["recbole"], kept["recbole"])]
    pairs += [(f"embreg {v}", runs, runs) for v, runs in kept["embreg"].items()]
    default = kept["embreg"].get("default", {})
    for variant, runs in kept["embreg"].items():
        if variant != "default" and short in runs and default and _model_of(runs) == _model_of(default):
            pairs.append((f"embreg {variant} / default", runs, default))
    checks = []
    for name, shorts, longs in pairs:
        if short not in shorts:
            continue
        for longer in sorted(e for e in longs if e > short):
            long_by_seed = {r["seed"]: r for r in longs[longer]}
            for run in shorts[short]:
                if run["seed"] in long_by_seed:
                    same = _same_first_epochs(run, long_by_seed[run["seed"]], short)
                    checks.append({"runs": name, "seed": run["seed"], "max_epochs": [short, longer], "identical": same})
    return checks


def _model_of(by_max: dict[Any, list[dict[str, Any]]]) -> dict[str, Any]:
    """The model config of a variant's runs (the same for every run of a variant)."""
    return next(iter(by_max.values()))[0]["model"]


def build_record(runs: Path, max_epochs: int, patience: int, short: int, matched: dict[str, Any]) -> dict[str, Any]:
    kept = gather(runs, max_epochs, short)
    budgets: dict[str, int | None] = {f"{short} epochs": short, "converged": None}
    readings: dict[str, Any] = {}
    for label, budget in budgets.items():
        theirs_runs = runs_for_budget(kept["recbole"], budget, max_epochs)
        entry: dict[str, Any] = {"recbole": group_reading(theirs_runs, budget) if theirs_runs else None}
        for variant, by_max in kept["embreg"].items():
            ours_runs = runs_for_budget(by_max, budget, max_epochs)
            if ours_runs:
                entry[variant] = group_reading(ours_runs, budget)
                if entry["recbole"] is not None:
                    entry[variant]["vs_recbole"] = compare(entry[variant], entry["recbole"])
                if variant.startswith("original+") and "original" in entry:
                    entry[variant]["vs_original"] = compare(entry[variant], entry["original"])
        readings[label] = entry
    timing_path = runs / "timing.json"
    timing = json.loads(timing_path.read_text()) if timing_path.is_file() else None
    if timing is not None:
        ours = statistics.median(timing["embreg"]["train_seconds_per_epoch"])
        theirs = statistics.median(timing["recbole"]["train_seconds_per_epoch"])
        timing["median_seconds_per_epoch"] = {"embreg": ours, "recbole": theirs}
        timing["ratio_embreg_over_recbole"] = ours / theirs
    recbole_any: dict[str, Any] = next(iter(kept["recbole"].values()), [{}])[0]
    return {
        "commands": [
            f"python benchmarks/sasrec_vs_recbole.py recbole --seeds 5 --max-epochs {max_epochs} --patience {patience}",
            f"python benchmarks/sasrec_vs_recbole.py embreg --variant default --seeds 5 --max-epochs {max_epochs} "
            f"--patience {patience}",
            f"python benchmarks/sasrec_vs_recbole.py embreg --variant VARIANT --seeds 5 --max-epochs {short}",
            f"python benchmarks/sasrec_vs_recbole.py timing --epochs {short}",
            "python benchmarks/sasrec_vs_recbole.py report",
        ],
        "matched": matched | {"loss": "full softmax cross-entropy", "examples": "prefixes"},
        "budgets": {"short_epochs": short, "max_epochs": max_epochs, "patience": patience},
        "recbole_version": recbole_any.get("recbole_version"),
        "readings": readings,
        "determinism": determinism(kept, short),
        "timing": timing,
        "runs": {
            "recbole": {f"e{e}": r for e, r in kept["recbole"].items()},
            "embreg": {v: {f"e{e}": r for e, r in by_max.items()} for v, by_max in kept["embreg"].items()},
        },
    }


# ----------------------------------------------------------------------------------------------- the page
def _pm(mean: float, std: float | None) -> str:
    return f"{mean:.4f}" if std is None else f"{mean:.4f} ± {std:.4f}"


def _p(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.2g}"


def quality_claim(record: dict[str, Any], label: str) -> dict[str, Any]:
    entry = record["readings"][label]
    ours, theirs = entry.get("default"), entry.get("recbole")
    claim = f"embreg's default SASRec: mean test NDCG@10 at or above RecBole's on the same split ({label})"
    if ours is None or theirs is None or len(ours["seeds"]) < 2 or len(theirs["seeds"]) < 2:
        return {"claim": claim, "reading": "not run yet", "verdict": "untested", "p": None}
    n = f"{len(ours['seeds'])} / {len(theirs['seeds'])} seeds"
    o, t = ours["test"]["ndcg@10"], theirs["test"]["ndcg@10"]
    reading = (
        f"test NDCG@10 {_pm(o, ours['test_std']['ndcg@10'])} vs {_pm(t, theirs['test_std']['ndcg@10'])} "
        f"({n}; Welch p = {_p(ours['vs_recbole']['welch_p'])})"
    )
    return {
        "claim": claim,
        "reading": reading,
        "verdict": "met" if o >= t else "not met",
        "p": ours["vs_recbole"]["welch_p"],
    }


def speed_claim(record: dict[str, Any]) -> dict[str, Any]:
    claim = f"embreg's SASRec training epoch <= {SPEED_TARGET}x RecBole's on the same machine"
    timing = record["timing"]
    if timing is None:
        return {"claim": claim, "reading": "not timed yet", "verdict": "untested", "p": None}
    med, ratio = timing["median_seconds_per_epoch"], timing["ratio_embreg_over_recbole"]
    reading = (
        f"median {med['embreg']:.1f} s vs {med['recbole']:.1f} s per epoch ({timing['epochs']} epochs each, side "
        f"by side, seed 0): {ratio:.2f}x"
    )
    return {"claim": claim, "reading": reading, "verdict": "met" if ratio <= SPEED_TARGET else "not met", "p": None}


def _seed_table(entry: dict[str, Any], label: str) -> list[str]:
    seeds = entry["seeds"]
    lines = [
        f"| {label} | " + " | ".join(f"seed {s}" for s in seeds) + " | mean ± std |",
        "|---" * (len(seeds) + 2) + "|",
    ]
    for m, name in zip(METRICS, ("test NDCG@10", "test Hit@10", "test MRR")):
        values = " | ".join(f"{v:.4f}" for v in entry["test_per_seed"][m])
        lines.append(f"| {name} | {values} | {_pm(entry['test'][m], entry['test_std'][m])} |")
    lines.append("| tested epoch (best validation) | " + " | ".join(str(e) for e in entry["epoch"]) + " | |")
    lines.append("| epochs trained | " + " | ".join(str(e) for e in entry["epochs_run"]) + " | |")
    return lines


def _ablation_table(record: dict[str, Any], label: str, descriptions: dict[str, str]) -> list[str]:
    entry = record["readings"][label]
    rows = [
        v for v in ["original", *sorted(v for v in entry if v.startswith("original+")), "sasrec-recbole"] if v in entry
    ]
    if not rows:
        return []
    lines = [
        "| embreg variant | seeds | validation NDCG@10 | test NDCG@10 | test vs the original design (p) | "
        "test vs RecBole (p) |",
        "|---|---|---|---|---|---|",
    ]
    for v in rows:
        e = entry[v]
        vs_o = e.get("vs_original")
        vs_r = e.get("vs_recbole")
        lines.append(
            f"| `{v}`: {descriptions.get(v, '')} | {len(e['seeds'])} | "
            f"{_pm(e['valid_ndcg@10'], e['valid_ndcg@10_std'])} | "
            f"{_pm(e['test']['ndcg@10'], e['test_std']['ndcg@10'])} | "
            + (f"{vs_o['difference']:+.4f} ({_p(vs_o['welch_p'])})" if vs_o else "")
            + " | "
            + (f"{vs_r['difference']:+.4f} ({_p(vs_r['welch_p'])})" if vs_r else "")
            + " |"
        )
    if entry.get("recbole"):
        r = entry["recbole"]
        lines.append(
            f"| RecBole 1.2.1 | {len(r['seeds'])} | {_pm(r['valid_ndcg@10'], r['valid_ndcg@10_std'])} | "
            f"{_pm(r['test']['ndcg@10'], r['test_std']['ndcg@10'])} | | |"
        )
    return lines


def default_choice(record: dict[str, Any], label: str) -> str | None:
    """A sentence naming the embreg variant with the highest mean validation NDCG@10 at budget ``label`` and
    whether the default model is that variant's model (the default is chosen on validation, never on test)."""
    entry, runs = record["readings"][label], record["runs"]["embreg"]
    candidates = [v for v in entry if v == "original" or v.startswith("original+")]
    if not candidates:
        return None
    best = max(candidates, key=lambda v: entry[v]["valid_ndcg@10"])
    reading = f"`{best}` has the highest mean validation NDCG@10 ({entry[best]['valid_ndcg@10']:.4f})"
    default = runs.get("default")
    if not default:
        return reading + "."
    same = _model_of(runs[best]) == _model_of(default)
    return reading + (", and embreg's default model is that design." if same else "; the default is another design.")


def plot_curves(record: dict[str, Any], path: Path) -> bool:
    """Validation NDCG@10 per epoch, every seed of RecBole, embreg's default and ``sasrec-recbole`` (converged runs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = record["runs"]
    max_key = f"e{record['budgets']['max_epochs']}"
    groups = [("RecBole 1.2.1", "tab:red", runs["recbole"].get(max_key, []))]
    for variant, colour in (("default", "tab:blue"), ("sasrec-recbole", "tab:green")):
        groups.append((f"embreg {variant}", colour, runs["embreg"].get(variant, {}).get(max_key, [])))
    if not any(g[2] for g in groups):
        return False
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, colour, group in groups:
        for i, run in enumerate(group):
            epochs = [r["epoch"] for r in run["curve"]]
            values = [r["valid"]["ndcg@10"] for r in run["curve"]]
            ax.plot(epochs, values, color=colour, alpha=0.6, lw=1, label=name if i == 0 else None)
            best = budget_reading(run, None)
            ax.scatter([best["epoch"]], [best["valid"]["ndcg@10"]], color=colour, s=14)
    ax.axvline(record["budgets"]["short_epochs"], color="grey", lw=0.8, ls="--")
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation NDCG@10 (full ranking)")
    ax.set_title("ML-100k leave-one-out, one line per seed; dots: best validation epoch (tested)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _machine_line(machine: dict[str, Any]) -> str:
    return f"{machine['platform']}, {machine['cpus']} cores, torch {machine['torch']} on both sides"


def write_page(record: dict[str, Any], out: Path, descriptions: dict[str, str]) -> None:
    short, b = record["budgets"]["short_epochs"], record["budgets"]
    m = record["matched"]
    claims = [quality_claim(record, f"{short} epochs"), quality_claim(record, "converged"), speed_claim(record)]
    lines = [
        f"# {TITLE}",
        "",
        "Commands (RecBole in its own virtual environment, set up as in "
        "[`benchmarks/recbole_peer/README.md`](../../../benchmarks/recbole_peer/README.md)); every seed's numbers "
        "and per-epoch curves are in the record [`sasrec-vs-recbole.json`](sasrec-vs-recbole.json):",
        "",
        "```",
        *record["commands"],
        "```",
        "",
        f"**Matched:** embreg's leave-one-out split of MovieLens-100k (943 users, 1,682 items; RecBole's loaders "
        "checked example by example against the export on every run), RecBole's training regime on both sides "
        "(every prefix of a training sequence is one example predicting its next item, full softmax "
        f"cross-entropy), the {m['max_len']} most recent items, hidden width {m['hidden']}, {m['layers']} blocks, "
        f"{m['heads']} head, ReLU feed-forward of width {m['hidden']}, dropout {m['dropout']}, Adam lr {m['lr']}, "
        f"batch {m['batch_size']}, no weight decay, one thread each. Both are scored by the same rules (full "
        "ranking over every item except the user's history, pessimistic ties; RecBole's own scores re-ranked).",
        "",
        f"**Budgets:** each run trains at most {b['max_epochs']} epochs and stops after {b['patience']} epochs in a "
        "row without a better validation NDCG@10 (the same rule on both sides: embreg's trainer, and the peer "
        "script's copy of it; RecBole's own `stopping_step` is not used). Valid and test are scored after every "
        f"epoch. The {short}-epoch reading is the test score of the best validation epoch among the first {short}; "
        "the converged reading that of the best validation epoch of the whole run. Both sides test their best "
        "validation epoch. Nothing in an epoch depends on the maximum number of epochs (Adam at a constant "
        "learning rate), so the first epochs of a long run are the short run; the record's `determinism` list "
        "compares the seeds run both ways.",
        "",
        "## Claims",
        "",
        "| claim | reading | verdict |",
        "|---|---|---|",
        *[f"| {c['claim']} | {c['reading']} | **{c['verdict']}** |" for c in claims],
        "",
    ]
    default_runs: list[dict[str, Any]] = next(iter(record["runs"]["embreg"].get("default", {}).values()), [])
    if default_runs:
        design = {k: v for k, v in default_runs[0]["model"].items() if k in DESIGN_KEYS}
        lines += [
            "**embreg's default model** (the `sasrec` model's defaults under the matched settings): "
            + ", ".join(f"`{k}: {json.dumps(v)}`" for k, v in design.items())
            + ".",
            "",
        ]
    for label in (f"{short} epochs", "converged"):
        entry = record["readings"][label]
        lines += [f"## {label[0].upper() + label[1:]}", ""]
        for key, name in (("default", "embreg default"), ("recbole", "RecBole 1.2.1")):
            if entry.get(key):
                lines += [f"**{name}**", "", *_seed_table(entry[key], name), ""]
            else:
                lines += [f"**{name}**: not run yet.", ""]
    ablation = _ablation_table(record, f"{short} epochs", descriptions)
    if ablation:
        lines += [
            f"## Ablation: RecBole's design choices one at a time ({short} epochs)",
            "",
            "Each row starts from the original SASRec design (pre-LN blocks with the query normalised and a final "
            "layer norm, item vectors scaled by sqrt(d), positions counted from the newest item, Xavier "
            "initialisation) and makes one of RecBole's choices; `sasrec-recbole` makes all of them. p: two-sided "
            "Welch t-test over the seeds.",
            "",
            *ablation,
            "",
        ]
        choice = default_choice(record, f"{short} epochs")
        if choice:
            lines += [f"**Choosing the default on validation:** {choice}", ""]
    converged_ablation = [v for v in record["readings"]["converged"] if v not in ("recbole", "default")]
    if converged_ablation:
        lines += [
            f"Converged runs of other variants: {', '.join(f'`{v}`' for v in converged_ablation)} (in the record)."
        ]
        lines.append("")
    if (out / PLOT).is_file():
        lines += ["## Validation curves", "", f"![validation NDCG@10 per epoch]({PLOT})", ""]
    checks = record["determinism"]
    if checks:
        same = sum(c["identical"] for c in checks)
        lines += [
            f"**Short runs against long runs:** {same} of {len(checks)} seeds run both with {short} and with more "
            f"epochs give identical first {short} epochs (valid, test and training loss): "
            + ", ".join(f"{c['runs']} seed {c['seed']}" + ("" if c["identical"] else " (differs)") for c in checks)
            + ".",
            "",
        ]
    timing = record["timing"]
    if timing is not None:
        lines += [
            "## Speed",
            "",
            f"`{timing['command']}`, started {timing['started']}: both libraries train seed 0 of the default model "
            f"for {timing['epochs']} epochs at the same time, one process and one thread each ({timing['host_note']}; "
            f"1-minute load average {timing['loadavg_1min']['start']:.2f} at the start, "
            f"{timing['loadavg_1min']['end']:.2f} at the end). "
            "Seconds per training epoch (no evaluation): embreg "
            + ", ".join(f"{s:.1f}" for s in timing["embreg"]["train_seconds_per_epoch"])
            + "; RecBole "
            + ", ".join(f"{s:.1f}" for s in timing["recbole"]["train_seconds_per_epoch"])
            + ". The long runs' own epoch times (in the record) are not used: they ran beside other jobs.",
            "",
        ]
    lines += [
        "## What is not matched",
        "",
        "- RecBole's cross-entropy also covers its padding row (one extra logit out of 1,683; the padding row is "
        "trained only as a wrong answer). embreg's softmax covers the 1,682 items.",
        "- RecBole pads on the right and embreg on the left. Padding never reaches a real position on either side "
        "(causal mask, padded keys masked), so what remains of the padding side is which learned position an item "
        "gets: the `positions` option (`start` is RecBole's).",
        "- Layer-norm epsilon 1e-12 (RecBole) vs 1e-8; RecBole's attention mask adds -10000 where embreg's "
        "excludes; RecBole's key and value projections are two layers where embreg's are one of twice the width "
        "(the same function; Xavier's scale differs with the shape, N(0, 0.02) does not).",
        "- A seed number means a different random stream in each library: seed *s* of embreg and seed *s* of "
        "RecBole are independent runs, not a pair.",
        "",
        f"Machine: {_machine_line(record['machine'])}, one thread per library; the machine is shared with other "
        "jobs, which changes the epoch times of the long runs but not their metrics.",
    ]
    atomic_write_text(out / "README.md", "\n".join(lines) + "\n")
    write_benchmark_summary(
        out, NAME, TITLE, "sse-stochastic-shared-embeddings.txt", claims, record.get("machine"), record["commands"][0]
    )
    summary = json.loads((out / "summary.json").read_text())
    ours = record["readings"]["converged"].get("default")
    theirs = record["readings"]["converged"].get("recbole")
    if ours and theirs:
        summary["seeds"] = f"{len(ours['seeds'])} (embreg) / {len(theirs['seeds'])} (RecBole)"
        atomic_write_text(out / "summary.json", json.dumps(summary, indent=1) + "\n")


def write_report(
    runs: Path,
    out: Path,
    *,
    max_epochs: int,
    patience: int,
    short: int,
    matched: dict[str, Any],
    machine: dict[str, Any],
    descriptions: dict[str, str],
) -> Path:
    record = build_record(runs, max_epochs, patience, short, matched)
    record["machine"] = machine
    record["descriptions"] = descriptions
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "sasrec-vs-recbole.json", json.dumps(record, indent=1) + "\n")
    if not plot_curves(record, out / PLOT):
        (out / PLOT).unlink(missing_ok=True)
    write_page(record, out, descriptions)
    return out / "README.md"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(RESULTS), help="the results folder holding sasrec-vs-recbole.json")
    args = parser.parse_args(argv)
    out = Path(args.out)
    record = json.loads((out / "sasrec-vs-recbole.json").read_text())
    write_page(record, out, record.get("descriptions", {}))
    print(out / "README.md")


if __name__ == "__main__":
    main()
