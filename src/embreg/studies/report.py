"""A study's page, made from its run log alone: ``README.md``, ``summary.json`` and figures in one folder.

The page (``docs/results/<name>/README.md``) shows, in order: the title, paper, dataset and description; the
**claims** table (claim | reading | verdict); per point of the grid a **comparison** table (variant | n | mean ±
std of each metric | Welch and Mann-Whitney p against the baseline); the **tuning** tables (each setting tried,
its mean validation value and n, the chosen one marked); the sections of the study's analyses; and **how it was
run** (seeds, machines, run count, the command, when the runs finished, where the runs were kept, notes). A box
plot of the first metric per variant goes beside it. The page stays under 300 lines: long tuning tables keep their best 10 settings, and
when the page is still too long the tuning (then the comparison) tables move to ``tuning.md``
(``comparison.md``) beside it.

Verdict of a claim (:func:`judge`): ``reproduced`` when the variant is better than the baseline in the claim's
direction with a two-sided Welch p < 0.05 over the final seeds, ``opposite`` when it is worse with p < 0.05,
else ``not reproduced (no significant difference)``. Against a deterministic non-neural row (a ``method`` variant:
one value, no seed variance) the test is the one-sample t-test of the other side's seeds against that value. A claim without a point is read at every point: all
reproduced -> ``reproduced``, some -> ``partly``, all opposite -> ``opposite``. A reading with no significant
difference says so when the seeds do not overlap (:func:`one_sided_note`): "every seed of the variant is better
(worse) than every seed of the baseline", since such a split is itself evidence of a direction that the t-test at
this number of seeds does not confirm.

``summary.json`` is what the results hub (:mod:`embreg.studies.hub`) reads: ``{"name", "title", "paper", "kind":
"study", "page": "README.md", "claims": [{"claim", "reading", "verdict", "p"}], "seeds", "machine",
"command"}`` (``p`` is ``null`` where undefined).

Example:
    >>> a, b = [0.90, 0.91, 0.92], [0.95, 0.96, 0.97]
    >>> judge(a, b, "min")[0], judge(a, b, "max")[0], judge(a, a, "min")[0]
    ('reproduced', 'opposite', 'not reproduced (no significant difference)')
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from embreg.analysis.stats import mann_whitney_u, one_sample_t_test, summarize, welch_t_test
from embreg.errors import DataError
from embreg.runs.checkpoint import atomic_write_json, atomic_write_text
from embreg.studies.runlog import RunRecord
from embreg.studies.runner import TuningRow, choose, final_records, same_point, tune_metric, tune_seeds, tuning_rows
from embreg.studies.sections import AnalysisContext, ClaimRow, Section
from embreg.studies.spec import ClaimSpec, StudySpec

__all__ = [
    "write_report",
    "judge",
    "one_sided_note",
    "claim_row",
    "format_number",
    "format_p",
    "machine_short",
    "REPRODUCED",
    "OPPOSITE",
    "NOT_REPRODUCED",
    "MAX_LINES",
]

REPRODUCED = "reproduced"
OPPOSITE = "opposite"
NOT_REPRODUCED = "not reproduced (no significant difference)"
NOT_TESTED = "untested"
"""Fewer than two seeds on a side: no test is possible; the reading still gives the direction of the two numbers."""
NOT_RUN = "not run"
ALPHA = 0.05
MAX_LINES = 299
TOP_SETTINGS = 10
MAX_BOX_POINTS = 6


def format_number(value: float) -> str:
    """Four decimals in the usual range, four significant digits outside it.

    Example:
        >>> format_number(0.912345), format_number(123456.0), format_number(0.0000123), format_number(float("nan"))
        ('0.9123', '1.235e+05', '1.23e-05', 'nan')
    """
    if math.isnan(value) or value == 0:
        return "0" if value == 0 else "nan"
    return f"{value:.4f}" if 1e-3 <= abs(value) < 1e3 else f"{value:.4g}"


def format_p(p: float) -> str:
    """``<0.001``, three decimals, or ``n/a`` (NaN).

    Example:
        >>> format_p(0.0001), format_p(0.0312), format_p(float("nan"))
        ('<0.001', '0.031', 'n/a')
    """
    if math.isnan(p):
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _mean_std(values: Sequence[float]) -> str:
    if not values:
        return "—"
    s = summarize(values)
    if s["n"] < 2:
        return format_number(s["mean"])
    std = f"{s['std']:.4f}" if 1e-3 <= abs(s["mean"]) < 1e3 else format_number(s["std"])
    return f"{format_number(s['mean'])} ± {std}"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _point_label(point: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items()) or "—"


def _setting_label(setting: dict[str, Any]) -> str:
    parts = [f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in setting.items()]
    return "`" + ", ".join(parts) + "`" if parts else "(recipe as shipped)"


def p_value(a: Sequence[float], b: Sequence[float], fixed: bool = False) -> float:
    """Welch's p of ``a`` against ``b``; with ``fixed`` (one side a deterministic row: a non-neural ``method``
    variant, one value without seed variance), the one-sample t-test of the other side against that value.

    Example:
        >>> round(p_value([12.1, 12.4, 12.3], [11.0], fixed=True), 4), p_value([12.1, 12.4], [11.0])
        (0.0048, nan)
    """
    if fixed and len(b) == 1:
        return one_sample_t_test(a, b[0])
    if fixed and len(a) == 1:
        return one_sample_t_test(b, a[0])
    return welch_t_test(a, b)


def judge(variant: Sequence[float], baseline: Sequence[float], better: str, fixed: bool = False) -> tuple[str, float]:
    """The verdict of ``variant`` against ``baseline`` (``better``: ``min`` or ``max``) and the p-value
    (:func:`p_value`: Welch's, or the one-sample test against a ``fixed`` deterministic side).

    No runs on a side: ``not run``; fewer than two seeds on a side (both sides, when one is ``fixed``): ``untested``
    (with the direction in the word: ``untested (direction holds)`` or ``untested (direction opposite)``), since no
    test can be made.

    Example:
        >>> judge([1.0], [2.0], "min"), judge([1.0, 1.1, 1.2], [2.0], "min", fixed=True)[0]
        (('untested (direction holds)', nan), 'reproduced')
    """
    if not variant or not baseline:
        return NOT_RUN, float("nan")
    diff = summarize(variant)["mean"] - summarize(baseline)["mean"]
    wins = diff < 0 if better == "min" else diff > 0
    seeds = max(len(variant), len(baseline)) if fixed else min(len(variant), len(baseline))
    if seeds < 2:
        return f"{NOT_TESTED} (direction {'holds' if wins else 'opposite'})", float("nan")
    p = p_value(variant, baseline, fixed)
    if math.isnan(p) or p >= ALPHA:
        return NOT_REPRODUCED, p
    return (REPRODUCED if wins else OPPOSITE), p


def one_sided_note(variant: Sequence[float], baseline: Sequence[float], better: str) -> str:
    """``"every seed of the variant is better than every seed of the baseline"`` (or ``worse``), else ``""``.

    Said when the two sets of seeds do not overlap: the variant's worst seed beats the baseline's best (``better``:
    ``min`` or ``max``), or its best seed loses to the baseline's worst. Ties count as overlap. Both sides need at
    least two seeds, as for a test.

    Example:
        >>> one_sided_note([0.90, 0.91], [0.92, 0.95], "min"), one_sided_note([0.90, 0.93], [0.92, 0.95], "min")
        ('every seed of the variant is better than every seed of the baseline', '')
    """
    if min(len(variant), len(baseline)) < 2:
        return ""
    sign = -1.0 if better == "min" else 1.0  # larger signed value = better
    ours, theirs = [sign * v for v in variant], [sign * v for v in baseline]
    if min(ours) > max(theirs):
        return "every seed of the variant is better than every seed of the baseline"
    if max(ours) < min(theirs):
        return "every seed of the variant is worse than every seed of the baseline"
    return ""


def _values(
    spec: StudySpec,
    records: Sequence[RunRecord],
    variant: str,
    point: dict[str, Any],
    metric: str,
    chosen: dict[tuple[str, str], dict[str, Any] | None],
) -> list[float]:
    setting = chosen.get((variant, json.dumps(point, sort_keys=True, default=str)))
    out = []
    for record in final_records(spec, records, variant, point, setting):
        value = record.metrics.get(metric)
        if value is not None:
            out.append(float(value))
    return out


def _is_method(spec: StudySpec, variant: str) -> bool:
    """Whether ``variant`` is a deterministic non-neural row (``method``), read once, without seed variance."""
    return variant in spec.variants and spec.variants[variant].method is not None


def _claim_points(spec: StudySpec, claim: ClaimSpec) -> list[dict[str, Any]]:
    points = [p for p in spec.points() if spec.includes(claim.variant, p)]
    if claim.point is None:
        return points
    return [p for p in points if all(same_point({k: p.get(k)}, {k: v}) for k, v in claim.point.items())]


def claim_row(
    spec: StudySpec,
    records: Sequence[RunRecord],
    claim: ClaimSpec,
    chosen: dict[tuple[str, str], dict[str, Any] | None] | None = None,
) -> ClaimRow:
    """Reads ``claim`` from the final runs (see the module docstring for the verdict)."""
    chosen = chosen if chosen is not None else _chosen_settings(spec, records)
    baseline = str(claim.baseline or spec.baseline)
    points = _claim_points(spec, claim)
    if not points:
        return ClaimRow(claim.text, f"no grid point matches {claim.point}", "not run")
    readings, verdicts, ps = [], [], []
    for point in points:
        a = _values(spec, records, claim.variant, point, claim.metric, chosen)
        b = _values(spec, records, baseline, point, claim.metric, chosen)
        fixed = _is_method(spec, claim.variant) or _is_method(spec, baseline)
        verdict, p = judge(a, b, claim.better, fixed)
        where = f"{_point_label(point)}: " if len(points) > 1 else ""
        note = one_sided_note(a, b, claim.better) if verdict == NOT_REPRODUCED else ""
        test = "one-sample t-test p" if fixed else "Welch p"
        readings.append(
            f"{where}{claim.variant} {_mean_std(a)} vs {baseline} {_mean_std(b)} "
            f"(n={len(a)}/{len(b)}, {test}={format_p(p)}{'; ' + note if note else ''})"
        )
        verdicts.append(verdict)
        ps.append(p)
    if len(points) == 1:
        return ClaimRow(claim.text, readings[0], verdicts[0], ps[0])
    if all(v == REPRODUCED for v in verdicts):
        verdict, p = REPRODUCED, max(ps)
    elif any(v == REPRODUCED for v in verdicts):
        verdict, p = "partly", float("nan")
    elif all(v == OPPOSITE for v in verdicts):
        verdict, p = OPPOSITE, max(ps)
    else:
        verdict, p = NOT_REPRODUCED, float("nan")
    return ClaimRow(claim.text, "; ".join(readings), verdict, p)


def _point_key(point: dict[str, Any]) -> str:
    return json.dumps(point, sort_keys=True, default=str)


def _tuning(
    spec: StudySpec, records: Sequence[RunRecord]
) -> dict[tuple[str, str], tuple[str, str, list[TuningRow], int]]:
    """(variant, point) -> (metric, mode, rows in the order tried, index of the chosen row)."""
    out: dict[tuple[str, str], tuple[str, str, list[TuningRow], int]] = {}
    if spec.tune is None:
        return out
    for variant in spec.variants:
        for point in spec.points():
            metric, mode = tune_metric(spec, variant, point)
            rows = [r for r in tuning_rows(spec, records, variant, point, metric) if r.n == spec.tune.seeds]
            if rows:
                out[(variant, _point_key(point))] = (metric, mode, rows, choose(rows, mode))
    return out


def _chosen_settings(
    spec: StudySpec, records: Sequence[RunRecord], tuning: dict | None = None
) -> dict[tuple[str, str], dict[str, Any] | None]:
    if spec.tune is None:
        return {(v, _point_key(p)): {} for v in spec.variants for p in spec.points()}
    tuning = tuning if tuning is not None else _tuning(spec, records)
    return {key: rows[index].setting for key, (_, _, rows, index) in tuning.items()}


def machine_short(machine: dict[str, Any]) -> str:
    """A machine record in a few words (the GPU, else the CPU count and architecture).

    Example:
        >>> machine_short({"gpu": None, "cpus": 16, "processor": "x86_64", "torch": "2.4.0"})
        '16-core x86_64, torch 2.4.0'
    """
    if not machine:
        return "unknown"
    torch = f", torch {machine['torch']}" if machine.get("torch") else ""
    if machine.get("gpu"):
        return f"{machine['gpu']}{torch}"
    if "cpus" in machine or "processor" in machine:
        arch = machine.get("processor") or str(machine.get("platform", "")).split("-")[-3:-2] or ["CPU"]
        arch = arch[0] if isinstance(arch, list) else arch
        cpus = f"{machine['cpus']}-core " if machine.get("cpus") else ""
        return f"{cpus}{arch}{torch}"
    text = str(machine.get("description") or machine.get("note") or "unknown").strip()
    return text.split(" (")[0] if len(text) > 60 else text


def _machine_long(machine: dict[str, Any]) -> str:
    words = [str(machine[k]).strip() for k in ("description", "note", "source") if machine.get(k)]
    if not ("cpus" in machine or "processor" in machine or machine.get("gpu")):
        return "; ".join(words) or "unknown"
    details = [str(machine[k]) for k in ("platform",) if machine.get(k)]
    if machine.get("cpus"):
        details.append(f"{machine['cpus']} CPUs")
    if machine.get("threads"):
        details.append(f"{machine['threads']} torch thread(s)")
    details += words
    return machine_short(machine) + (f" ({'; '.join(details)})" if details else "")


def _distinct(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _comparison(spec: StudySpec, records: Sequence[RunRecord], point: dict[str, Any], chosen: dict) -> list[str]:
    header = ["variant", "n"]
    for metric in spec.metrics:
        header += [_cell(metric), "Welch p", "Mann-Whitney p"]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    base = {m: _values(spec, records, spec.baseline, point, m, chosen) for m in spec.metrics}  # type: ignore[arg-type]
    left_out = 0
    for variant in spec.variants:
        values = {m: _values(spec, records, variant, point, m, chosen) for m in spec.metrics}
        if variant != spec.baseline and spec.metrics and not any(values.values()):
            left_out += 1
            continue
        counts = sorted({len(v) for v in values.values() if v}) or [0]  # metrics a variant never reports: "—"
        n = str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
        name = f"{variant} (baseline)" if variant == spec.baseline else variant
        cells = [_cell(name), n]
        for metric in spec.metrics:
            cells.append(_mean_std(values[metric]))
            if variant == spec.baseline:
                cells += ["—", "—"]
            elif values[metric] and base[metric]:
                fixed = _is_method(spec, variant) or _is_method(spec, str(spec.baseline))
                cells += [
                    format_p(p_value(values[metric], base[metric], fixed)),
                    "n/a" if fixed else format_p(mann_whitney_u(values[metric], base[metric])),
                ]
            else:
                cells += ["n/a", "n/a"]
        lines.append("| " + " | ".join(cells) + " |")
    if left_out:
        lines += ["", f"({left_out} variant(s) without runs at this point left out.)"]
    return lines


def _tuning_table(metric: str, mode: str, rows: list[TuningRow], index: int, top: int | None) -> list[str]:
    order = list(range(len(rows)))
    note = f"{len(rows)} settings tried, in the order tried"
    if top is not None and len(rows) > top:
        ranked = sorted(
            order, key=lambda i: (math.isnan(rows[i].mean), rows[i].mean if mode == "min" else -rows[i].mean, i)
        )
        order = ranked[:top]
        note = f"{len(rows)} settings tried; the best {top} shown"
    better = "lower" if mode == "min" else "higher"
    lines = [
        f"{note}; mean `{metric}` over the tuning seeds ({better} is better).",
        "",
        f"| setting | mean {_cell(metric)} | n | |",
        "|---|---:|---:|---|",
    ]
    for i in order:
        mark = "**chosen**" if i == index else ""
        lines.append(
            f"| {_cell(_setting_label(rows[i].setting))} | {format_number(rows[i].mean)} | {rows[i].n} | {mark} |"
        )
    return lines


def _tuning_compact(spec: StudySpec, tuning: dict) -> list[str]:
    lines = ["| variant | point | settings tried | chosen | mean (n) |", "|---|---|---:|---|---:|"]
    for variant in spec.variants:
        for point in spec.points():
            entry = tuning.get((variant, _point_key(point)))
            if entry is None:
                continue
            metric, _, rows, index = entry
            row = rows[index]
            lines.append(
                f"| {_cell(variant)} | {_cell(_point_label(point))} | {len(rows)} | "
                f"{_cell(_setting_label(row.setting))} | {format_number(row.mean)} ({row.n}) |"
            )
    return lines


def _box_plot(spec: StudySpec, records: Sequence[RunRecord], chosen: dict, path: Path) -> bool:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    metric = spec.metrics[0]
    points = spec.points()
    points = points if len(points) <= MAX_BOX_POINTS else points[:1]
    labels = list(spec.variants)
    data = [[_values(spec, records, v, p, metric, chosen) for v in labels] for p in points]
    if not any(values for per_point in data for values in per_point):
        return False
    fig = Figure(figsize=(max(3.0, 1.1 * len(labels) + 1.5) * len(points), 3.8))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(points), squeeze=False)[0]
    for ax, point, per_point in zip(axes, points, data):
        ax.boxplot([v if v else [float("nan")] for v in per_point], showmeans=True)
        ax.set_xticks(range(1, len(labels) + 1), labels, rotation=20, ha="right", fontsize=8)
        for position, values in enumerate(per_point, 1):
            ax.scatter([position] * len(values), values, s=10, alpha=0.6, color="tab:blue", zorder=3)
        ax.set_ylabel(metric)
        ax.grid(axis="y", alpha=0.3)
        if point:
            ax.set_title(_point_label(point), fontsize=9)
    fig.suptitle(f"{spec.title}: {metric} per final seed", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def _how_it_was_run(spec: StudySpec, records: Sequence[RunRecord], command: str) -> list[str]:
    final = [r for r in records if r.phase == "final"]
    tuned = [r for r in records if r.phase == "tune"]
    seeds = spec.final_seeds
    lines = [f"- seeds: {spec.seeds} final seeds per variant and point ({seeds[0]}–{seeds[-1]})"]
    if spec.tune is not None:
        t = spec.tune
        budget = "every combination of the space" if t.method == "grid" else f"{t.trials} TPE trials (sampler seed 0)"
        lines.append(
            f"- tuning: {t.method}, {budget}, {t.seeds} seed(s) each ({', '.join(map(str, tune_seeds(spec)))}), "
            "on the validation split; the same budget for every variant"
        )
    machines = _distinct([_machine_long(r.machine) for r in records if r.machine])
    lines += [f"- machine: {text}" for text in machines[:5]]
    if len(machines) > 5:
        lines.append(f"- ... and {len(machines) - 5} more machine records (see the run log)")
    hours = sum(r.seconds for r in records) / 3600
    lines.append(f"- runs: {len(records)} ({len(tuned)} tuning, {len(final)} final), {hours:.2f} h of training in all")
    lines.append(
        f"- command: `{command}` (resumes from the run log; every run's overrides are in the log, so any "
        "run can be repeated alone with `embreg run RECIPE --set ...`)"
    )
    lines += _kept_runs(spec, final)
    finished = sorted(r.finished for r in records if r.finished)
    if finished:
        span = f"at {finished[0]}" if finished[0] == finished[-1] else f"between {finished[0]} and {finished[-1]}"
        lines.append(f"- runs finished {span}")
    lines += ["- " + " ".join(note.split()) for note in spec.notes if note.strip()]
    return lines


def _kept_runs(spec: StudySpec, final: Sequence[RunRecord]) -> list[str]:
    """Where the final runs were kept as run directories (``keep_runs``), when they were."""
    kept = [r.run_dir for r in final if r.run_dir]
    if not kept:
        return []
    folder = spec.keep_runs or os.path.commonpath(kept)
    layout = "<variant>/<point>/seed-<s>" if spec.grid else "<variant>/seed-<s>"
    where = "" if Path(folder).is_absolute() else " (relative to the directory the study ran from)"
    return [
        f"- kept runs: {len(kept)} of the {len(final)} final runs are run directories under `{folder}`{where}, "
        f"as `{layout}` with the labels' slugs (config, metrics.json, report.md, checkpoints); the run log names "
        "each one (`run_dir`), for `model.pretrained=<run dir>` or `embreg predict`"
    ]


def _analyses(spec: StudySpec, records: Sequence[RunRecord], out_dir: Path) -> list[Section]:
    from embreg.config import from_dict
    from embreg.registry import REGISTRY

    sections = []
    context = AnalysisContext(spec, list(records), out_dir)
    for analysis in spec.analyses:
        entry = REGISTRY.get("analysis", analysis.name)
        sections.append(entry.build(from_dict(entry.config, analysis.args), context))
    return sections


def _shown_points(spec: StudySpec, limit: int = 3) -> list[dict[str, Any]]:
    """The grid points the claims are read at (at most ``limit``; the first point when no claim names one)."""
    shown: list[dict[str, Any]] = []
    for claim in spec.claims:
        if claim.point is None:
            continue
        for point in _claim_points(spec, claim):
            if not any(same_point(point, p) for p in shown):
                shown.append(point)
    return shown[:limit] or spec.points()[:1]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "metric"


def write_report(spec: StudySpec, records: Sequence[RunRecord], out_dir: str | Path, *, command: str) -> dict[str, Any]:
    """Writes ``README.md``, ``summary.json`` and the figures of ``spec``'s page into ``out_dir``.

    Args:
        spec: the study.
        records: its run log's records (tuning and final).
        out_dir: the page's folder (``docs/results/<name>``), created if missing.
        command: the command that reproduces the study (shown on the page and in ``summary.json``).

    Returns:
        The summary written to ``summary.json``.

    Raises:
        DataError: the records hold no final run of this study.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    records = [r for r in records if r.study == spec.name and r.variant in spec.variants]
    if not any(r.phase == "final" for r in records):
        raise DataError(f"study {spec.name}: the run log has no final runs to report; run it first (embreg study run)")
    tuning = _tuning(spec, records)
    chosen = _chosen_settings(spec, records, tuning)

    rows = [claim_row(spec, records, claim, chosen) for claim in spec.claims]
    sections = _analyses(spec, records, out)
    for section in sections:
        rows.extend(section.claims)

    figure = f"box-{_slug(spec.metrics[0])}.png" if spec.metrics else ""
    has_figure = bool(figure) and _box_plot(spec, records, chosen, out / figure)

    head = [
        f"# {spec.title}",
        "",
        f"Paper: `{spec.paper}`" + (f" · Dataset: {spec.dataset}" if spec.dataset else ""),
        "",
    ]
    if spec.description:
        head += [spec.description.strip(), ""]
    head += ["Generated by `embreg study report` from the run log; do not edit.", ""]
    claims = ["## Claims", ""]
    if rows:
        claims += ["| claim | reading | verdict |", "|---|---|---|"]
        claims += [f"| {_cell(r.claim)} | {_cell(r.reading)} | **{_cell(r.verdict)}** |" for r in rows]
        claims += [
            "",
            "Verdict: two-sided Welch t-test over the final seeds against the baseline (one-sample t-test against a "
            "deterministic non-neural row), 5% level; "
            "`reproduced` = better in the paper's direction, `opposite` = significantly worse. A reading without a "
            "significant difference says so when every seed of the variant is better (or worse) than every seed "
            "of the baseline.",
        ]
    else:
        claims += ["No claims are checked by this study."]
    claims.append("")

    points = spec.points()
    comparison_full: list[str] = []
    for point in points:
        if len(points) > 1:
            comparison_full += [f"### {_point_label(point)}", ""]
        comparison_full += _comparison(spec, records, point, chosen) + [""]
    comparison_full += [
        "p-values: two-sided tests of each variant's final seeds against the baseline "
        f"`{spec.baseline}` (test metrics at the best validation epoch); n/a below two seeds."
        + (
            " A non-neural row (one deterministic value) is compared by the one-sample t-test of the other side's "
            "seeds against its value (no Mann-Whitney test)."
            if any(v.method is not None for v in spec.variants.values())
            else ""
        ),
        "",
    ]
    if has_figure:
        comparison_full += [f"![{spec.metrics[0]} per variant]({figure})", ""]

    def tuning_detail(top: int | None) -> list[str]:
        lines: list[str] = []
        for variant in spec.variants:
            for point in points:
                entry = tuning.get((variant, _point_key(point)))
                if entry is None:
                    continue
                lines += [f"### {variant}" + (f" at {_point_label(point)}" if len(points) > 1 else ""), ""]
                lines += _tuning_table(*entry, top=top) + [""]
        return lines

    analyses: list[str] = []
    for section in sections:
        analyses += [f"## {section.title}", "", section.markdown.rstrip(), ""]
        unshown = [f for f in section.figures if f"({f})" not in section.markdown]  # not already in the text
        analyses += [f"![{Path(f).stem}]({f})" for f in unshown]
        analyses += [""] if unshown else []
    how = ["## How it was run", ""] + _how_it_was_run(spec, records, command) + [""]

    def page(comparison: list[str], tuned: list[str]) -> list[str]:
        tuned_block = ["## Tuning", ""] + tuned if tuning else []
        return head + claims + ["## Comparison", ""] + comparison + tuned_block + analyses + how

    extra_files: dict[str, list[str]] = {}
    tuned = tuning_detail(TOP_SETTINGS)
    lines = page(comparison_full, tuned)
    compact = _tuning_compact(spec, tuning) if tuning else []
    link = ["", "Every setting tried: [tuning.md](tuning.md)", ""]
    if len(lines) > MAX_LINES and tuning:
        extra_files["tuning.md"] = [f"# {spec.title}: tuning", ""] + tuning_detail(None)
        tuned = compact + link
        lines = page(comparison_full, tuned)
    comparison = comparison_full
    if len(lines) > MAX_LINES:
        extra_files["comparison.md"] = [f"# {spec.title}: comparison", ""] + comparison_full
        comparison = [
            f"{len(points)} grid points; every table: [comparison.md](comparison.md). The points the "
            "claims are read at:",
            "",
        ]
        for point in _shown_points(spec):
            comparison += [f"### {_point_label(point)}", ""] + _comparison(spec, records, point, chosen) + [""]
        comparison += [f"![{spec.metrics[0]} per variant]({figure})", ""] if has_figure else []
        lines = page(comparison, tuned)
    if len(lines) > MAX_LINES and tuning:  # cut the compact tuning table to fit
        if "tuning.md" not in extra_files:
            extra_files["tuning.md"] = [f"# {spec.title}: tuning", ""] + tuning_detail(None)
        body = compact[2:]
        keep = max(0, len(body) - (len(page(comparison, compact + link)) - MAX_LINES))
        tuned = compact[:2] + body[:keep] + ["", f"... {len(body) - keep} more rows: [tuning.md](tuning.md)", ""]
        lines = page(comparison, tuned)
    for name, content in extra_files.items():
        atomic_write_text(out / name, "\n".join(content).rstrip() + "\n")
    for stale in {"tuning.md", "comparison.md"} - set(extra_files):
        (out / stale).unlink(missing_ok=True)
    atomic_write_text(out / "README.md", "\n".join(lines).rstrip() + "\n")

    machines = _distinct([machine_short(r.machine) for r in records if r.machine]) or ["unknown"]
    summary = {
        "name": spec.name,
        "title": spec.title,
        "paper": spec.paper,
        "kind": "study",
        "page": "README.md",
        "claims": [
            {
                "claim": r.claim,
                "reading": r.reading,
                "verdict": r.verdict,
                "p": None if r.p is None or math.isnan(r.p) else float(r.p),
            }
            for r in rows
        ],
        "seeds": f"{spec.seeds} per variant and point",
        "machine": "; ".join(machines),
        "command": command,
    }
    atomic_write_json(out / "summary.json", summary)
    return summary
