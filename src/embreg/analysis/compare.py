"""Compare finished runs: a table of metrics (mean ± std over seeds) with significance tests against a baseline.

Each run directory holds ``summary.json`` (a multi-seed run: ``{metric: {"mean", "std", ..., "values"}}``,
as written from :func:`embreg.analysis.stats.summarize_runs`) or ``metrics.json`` (a single seed:
``{metric: value}``); ``summary.json`` wins when both exist. For every run but the baseline, each metric gets
Welch's t-test and the Mann-Whitney U test over the per-seed values (two-sided, NaN when either run has
fewer than two seeds).

Which metrics: the ``selection`` of :func:`compare_runs` (``embreg compare`` shows ``headline`` by default and
``test`` with ``--all``): ``every`` numeric metric; the ``headline`` test metrics of the runs' task (read from each
run's ``config.yaml``; each task adapter declares them, e.g. ``test_rmse``, ``test_mae`` for ``rating``); or every
``test_*`` metric. Runs of different tasks, or of different data (their ``config.yaml``'s ``data`` section or their
``split.json``/``corpus.json`` records), are compared all the same, with a line in :attr:`CompareResult.warnings`.

Example:
    >>> import tempfile, json, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     base, sse = pathlib.Path(d, "mf"), pathlib.Path(d, "mf-sse")
    ...     base.mkdir(); sse.mkdir()
    ...     _ = (base / "metrics.json").write_text(json.dumps({"test_rmse": 0.93}))
    ...     _ = (sse / "metrics.json").write_text(json.dumps({"test_rmse": 0.91}))
    ...     result = compare_runs([base, sse])
    >>> [row.name for row in result.rows], result.metrics
    (['mf', 'mf-sse'], ['test_rmse'])
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Real
from pathlib import Path
from typing import Any, Literal

from embreg.analysis.stats import mann_whitney_u, summarize, welch_t_test
from embreg.errors import ConfigError, DataError

__all__ = ["MetricSummary", "PValues", "RunRow", "CompareResult", "compare_runs", "format_markdown"]

SUMMARY_FILE = "summary.json"
METRICS_FILE = "metrics.json"
CONFIG_FILE = "config.yaml"
DATA_RECORDS = ("split.json", "corpus.json")
SELECTIONS = ("every", "headline", "test")


@dataclass(frozen=True)
class MetricSummary:
    """One metric of one run: mean and sample std over its ``n`` per-seed ``values``."""

    mean: float
    std: float
    n: int
    values: tuple[float, ...]


@dataclass(frozen=True)
class PValues:
    """Two-sided p-values of a run against the baseline for one metric (NaN where undefined)."""

    welch: float
    mann_whitney: float


@dataclass(frozen=True)
class RunRow:
    """One run in a comparison.

    Attributes:
        name: the run directory's name (its path as given if two runs share a name).
        path: the run directory.
        source: the file read, ``"summary.json"`` or ``"metrics.json"``.
        metrics: the compared metrics this run reports.
        p_values: per compared metric, the tests against the baseline; empty for the baseline itself.
    """

    name: str
    path: Path
    source: str
    metrics: dict[str, MetricSummary]
    p_values: dict[str, PValues]


@dataclass(frozen=True)
class CompareResult:
    """Rows in the order of the run directories given, the compared metric names, the baseline's index, and
    warnings (runs of different tasks or data)."""

    rows: list[RunRow]
    metrics: list[str]
    baseline: int
    warnings: tuple[str, ...] = ()

    @property
    def baseline_row(self) -> RunRow:
        return self.rows[self.baseline]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{str(path)!r} is not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {str(path)!r}: {exc}") from exc


def _is_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def _from_summary(path: Path, data: dict[str, Any]) -> dict[str, MetricSummary]:
    """Metric entries of a ``summary.json``: mappings with ``values``; other entries (e.g. seeds) are skipped."""
    found: dict[str, MetricSummary] = {}
    for name, entry in data.items():
        if not isinstance(entry, dict) or not ("values" in entry or "mean" in entry):
            continue
        values = entry.get("values")
        if not isinstance(values, list) or not values or not all(_is_number(v) for v in values):
            raise DataError(
                f"{str(path)!r}: metric {name!r} needs a non-empty list of numbers under 'values' "
                f"(the per-seed results), got {values!r}"
            )
        # Recomputed from the values, so mean, std and the tests always describe the same numbers.
        summary = summarize(values)
        found[name] = MetricSummary(summary["mean"], summary["std"], summary["n"], tuple(summary["values"]))
    return found


def _from_metrics(data: dict[str, Any]) -> dict[str, MetricSummary]:
    """Numeric entries of a single seed's ``metrics.json``; non-numeric entries are skipped."""
    return {name: MetricSummary(float(v), 0.0, 1, (float(v),)) for name, v in data.items() if _is_number(v)}


def _load_run(directory: Path) -> tuple[str, dict[str, MetricSummary]]:
    if not directory.is_dir():
        raise DataError(f"run directory not found: {str(directory)!r}")
    for filename in (SUMMARY_FILE, METRICS_FILE):
        path = directory / filename
        if path.is_file():
            data = _read_json(path)
            if not isinstance(data, dict):
                raise DataError(f"{str(path)!r} must hold a JSON object of metrics, got {type(data).__name__}")
            metrics = _from_summary(path, data) if filename == SUMMARY_FILE else _from_metrics(data)
            return filename, metrics
    raise DataError(
        f"run directory {str(directory)!r} has neither {SUMMARY_FILE} (multi-seed run) nor {METRICS_FILE} "
        "(single-seed run); is it a finished embreg run?"
    )


def _run_names(paths: list[Path]) -> list[str]:
    names = [p.name or p.resolve().name for p in paths]
    return [str(p) if names.count(name) > 1 else name for p, name in zip(paths, names)]


def _run_record(directory: Path) -> tuple[Any, Any, Any]:
    """``(task, data section, data record)`` of a run directory (a multi-seed run's: its first seed's record);
    ``None`` for what it does not hold."""
    import yaml

    config: Any = None
    if (directory / CONFIG_FILE).is_file():
        try:
            config = yaml.safe_load((directory / CONFIG_FILE).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            config = None
    config = config if isinstance(config, dict) else {}
    record = None
    for folder in [directory, *sorted(directory.glob("seed-*"))]:
        found = [folder / name for name in DATA_RECORDS if (folder / name).is_file()]
        if found:
            record = _read_json(found[0])
            break
    return config.get("task"), config.get("data"), record


def _headline(tasks: Sequence[Any]) -> list[str]:
    """The headline test metrics of the tasks named (in order, each once); unknown tasks add none."""
    from embreg.registry import REGISTRY

    names: list[str] = []
    for task in tasks:
        if isinstance(task, str) and task in REGISTRY.names("task"):
            adapter = REGISTRY.get("task", task).extra["adapter"]
            names += [name for name in adapter.headline_metrics() if name not in names]
    return names


def _mismatches(names: list[str], records: list[tuple[Any, Any, Any]], baseline: int) -> tuple[str, ...]:
    """Warnings for runs whose task, data section or data record differ from the baseline's."""
    base_task, base_data, base_record = records[baseline]
    warnings = []
    for index, (task, data, record) in enumerate(records):
        if index == baseline:
            continue
        if task != base_task and task is not None and base_task is not None:
            warnings.append(
                f"runs of different tasks: {names[index]} is {task!r}, the baseline {names[baseline]} is {base_task!r}"
            )
        elif isinstance(data, dict) and isinstance(base_data, dict) and data != base_data:
            keys = sorted(k for k in {*data, *base_data} if data.get(k) != base_data.get(k))
            warnings.append(
                f"runs of different data: {names[index]} and the baseline {names[baseline]} differ in "
                + ", ".join(f"data.{k}" for k in keys)
            )
        elif record is not None and base_record is not None and record != base_record:
            warnings.append(
                f"runs of different data: {names[index]}'s split record differs from the baseline {names[baseline]}'s"
            )
    return tuple(warnings)


def _select_metrics(
    loaded: list[dict[str, MetricSummary]],
    baseline: int,
    wanted: Sequence[str] | None,
    selection: str = "every",
    headline: Sequence[str] = (),
) -> list[str]:
    available: list[str] = []
    for metrics in [loaded[baseline], *loaded]:
        available.extend(name for name in metrics if name not in available)
    if wanted is None:
        if not available:
            raise DataError("none of the runs reports a numeric metric")
        tests = [name for name in available if name.startswith("test_")]
        if selection == "headline":
            shown = [name for name in headline if name in available]
            return shown or tests or available
        if selection == "test":
            return tests or available
        return available
    if isinstance(wanted, str):
        wanted = [wanted]
    for name in wanted:
        if name not in available:
            close = difflib.get_close_matches(name, available, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"no run reports metric {name!r}{hint} Available: {', '.join(available) or '(none)'}")
    return list(dict.fromkeys(wanted))


def compare_runs(
    run_dirs: Sequence[Path | str],
    *,
    baseline: int = 0,
    metrics: Sequence[str] | None = None,
    selection: Literal["every", "headline", "test"] = "every",
) -> CompareResult:
    """Read run directories and test every run against the baseline, metric by metric.

    Args:
        run_dirs: run directories, each with ``summary.json`` or ``metrics.json``.
        baseline: index into ``run_dirs`` of the run the others are tested against.
        metrics: metric names to compare (``selection`` then does not apply).
        selection: without ``metrics``: ``every`` metric any run reports (baseline's first); the ``headline``
            test metrics of the runs' tasks (their ``config.yaml``; runs without one: every ``test_*`` metric);
            or every ``test_*`` metric (``test``).

    Returns:
        A :class:`CompareResult`; render it with :func:`format_markdown`.

    Raises:
        DataError: a directory is missing, has neither file, or a file is malformed.
        ConfigError: no run directories, ``baseline`` out of range, an unknown ``selection``, or a requested
            metric no run reports.

    Example:
        >>> compare_runs([])
        Traceback (most recent call last):
        ...
        embreg.errors.ConfigError: compare_runs needs at least one run directory
    """
    paths = [Path(p) for p in run_dirs]
    if not paths:
        raise ConfigError("compare_runs needs at least one run directory")
    if isinstance(baseline, bool) or not isinstance(baseline, int) or not 0 <= baseline < len(paths):
        raise ConfigError(
            f"baseline must be an index in [0, {len(paths) - 1}] into the run directories, got {baseline!r}"
        )
    if selection not in SELECTIONS:
        raise ConfigError(f"selection={selection!r} must be one of {', '.join(SELECTIONS)}")
    loaded = [_load_run(p) for p in paths]
    records = [_run_record(p) for p in paths]
    headline = _headline([records[baseline][0], *(task for task, _, _ in records)])
    selected = _select_metrics([m for _, m in loaded], baseline, metrics, selection, headline)
    base_metrics = loaded[baseline][1]
    rows = []
    for index, (path, name, (source, found)) in enumerate(zip(paths, _run_names(paths), loaded)):
        kept = {m: found[m] for m in selected if m in found}
        tests: dict[str, PValues] = {}
        if index != baseline:
            for metric in selected:
                if metric in kept and metric in base_metrics:
                    run_values, base_values = kept[metric].values, base_metrics[metric].values
                    tests[metric] = PValues(
                        welch_t_test(run_values, base_values), mann_whitney_u(run_values, base_values)
                    )
                else:
                    tests[metric] = PValues(math.nan, math.nan)
        rows.append(RunRow(name, path, source, kept, tests))
    return CompareResult(rows, selected, baseline, _mismatches(_run_names(paths), records, baseline))


def _format_value(summary: MetricSummary | None, digits: int) -> str:
    if summary is None:
        return "—"
    if summary.n < 2:
        return f"{summary.mean:.{digits}f}"
    return f"{summary.mean:.{digits}f} ± {summary.std:.{digits}f}"


def _format_p(p: float) -> str:
    if math.isnan(p):
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _format_n(row: RunRow) -> str:
    counts = sorted({m.n for m in row.metrics.values()})
    if not counts:
        return "0"
    return str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def format_markdown(result: CompareResult, *, digits: int = 4) -> str:
    """Render a comparison as a markdown table, one row per run, with a note on the tests.

    Each metric gets three columns: ``mean ± std`` over seeds (just the value for a single seed), then the
    Welch and Mann-Whitney p-values against the baseline (``n/a`` with fewer than two seeds, ``—`` on the
    baseline's own row and for a metric a run does not report).

    Args:
        result: from :func:`compare_runs`.
        digits: decimals for means and standard deviations.

    Returns:
        The table and note, ending in a newline.

    Example:
        >>> row = RunRow("mf", Path("mf"), "summary.json", {"test_rmse": MetricSummary(0.91234, 0.0041, 3, ())}, {})
        >>> print(format_markdown(CompareResult([row], ["test_rmse"], 0)).splitlines()[2])
        | mf (baseline) | 0.9123 ± 0.0041 | — | — | 3 |
    """
    header = ["run"]
    for metric in result.metrics:
        header += [_cell(metric), "p (Welch)", "p (Mann-Whitney)"]
    header.append("n")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" + "---:|" * (len(header) - 1)]
    for index, row in enumerate(result.rows):
        name = f"{row.name} (baseline)" if index == result.baseline else row.name
        cells = [_cell(name)]
        for metric in result.metrics:
            cells.append(_format_value(row.metrics.get(metric), digits))
            tests = row.p_values.get(metric)
            if tests is None or metric not in row.metrics:
                cells += ["—", "—"]
            else:
                cells += [_format_p(tests.welch), _format_p(tests.mann_whitney)]
        cells.append(_format_n(row))
        lines.append("| " + " | ".join(cells) + " |")
    baseline_name = _cell(result.baseline_row.name)
    lines += [
        "",
        f"p-values: two-sided tests of each run's per-seed values against the baseline `{baseline_name}`; "
        "n/a where either run has fewer than two seeds.",
    ]
    return "\n".join(lines) + "\n"
