"""Where a study keeps its final runs (``keep_runs``): one ordinary run directory per final run.

With ``keep_runs: <folder>`` in the study file, each final run is trained into
``<folder>/<variant slug>/seed-<s>`` (with a grid: ``<folder>/<variant slug>/<point slug>/seed-<s>``) with
``resume=True`` (:func:`embreg.recipes.run.run_single`): a finished run there is read back instead of trained again,
an unfinished one continues, and one of another config is refused (:func:`check_kept_run`, before any training of
that run). The directories are what ``embreg run --out`` makes (``config.yaml``, ``metrics.json``, ``report.md``, the
checkpoints ``train.keep_checkpoints`` keeps), so a later study can start from them (``model.pretrained=<run dir>``)
and ``embreg predict`` can use them. A relative folder is relative to the current directory the study runs from.
Tuning runs stay temporary: only the final seeds of the chosen setting are kept. Runs already in the study's run
log are not run again (:mod:`embreg.studies.runner`), so only a fresh log (or runs missing from it) fills the folder.

A slug is the label lower-cased, every run of characters other than ``[a-z0-9]`` turned into one ``-``, stripped
of ``-`` at both ends (:func:`slug`); a point's label is ``key=value, ...`` as the study page shows it.

Example:
    >>> slug("MLM+SSE"), slug("No CPT"), point_slug({"data.task": "binary"})
    ('mlm-sse', 'no-cpt', 'data-task-binary')
    >>> kept_run_dir("runs/study", "MLM+SSE", {}, 1).as_posix()
    'runs/study/mlm-sse/seed-1'
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from embreg.errors import ConfigError

__all__ = ["slug", "point_slug", "check_slugs", "kept_run_dir", "check_kept_run", "metrics_stamp"]


def slug(label: str) -> str:
    """``label`` lower-cased, each run of characters other than ``[a-z0-9]`` one ``-``, stripped of ``-``.

    Example:
        >>> slug("SSE-SE + BPR"), slug("  MD (alpha 0.3) ")
        ('sse-se-bpr', 'md-alpha-0-3')
    """
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


def point_slug(point: dict[str, Any]) -> str:
    """The slug of a grid point's label ``key=value, ...`` (``""`` for the point of a study without a grid).

    Example:
        >>> point_slug({"embeddings.budget": 2625, "model.alpha": 0.3})
        'embeddings-budget-2625-model-alpha-0-3'
    """
    return slug(", ".join(f"{key}={value}" for key, value in point.items()))


def _check_unique(kind: str, labels: Iterable[str]) -> None:
    seen: dict[str, str] = {}
    for label in labels:
        name = slug(label)
        if not name:
            raise ConfigError(
                f"keep_runs: {kind} {label!r} has no letter or digit to name its folder (slug {name!r}); "
                "give it a label with letters or digits"
            )
        if name in seen:
            raise ConfigError(
                f"keep_runs: {kind}s {seen[name]!r} and {label!r} would share the folder {name!r} (their slugs "
                "collide: lower-cased, runs of characters other than a-z and 0-9 turned into '-'); rename one"
            )
        seen[name] = label


def check_slugs(variants: Iterable[str], points: list[dict[str, Any]]) -> None:
    """Refuses variants (or grid points) whose slugs collide or are empty, naming both labels.

    Raises:
        ConfigError: naming the two labels and their shared folder, or the label without a slug.

    Example:
        >>> check_slugs(["MLM+SSE", "MLM SSE"], [{}])
        Traceback (most recent call last):
        ...
        embreg.errors.ConfigError: keep_runs: variants 'MLM+SSE' and 'MLM SSE' would share the folder 'mlm-sse' ...
    """
    _check_unique("variant", variants)
    if points != [{}]:
        _check_unique("grid point", [", ".join(f"{key}={value}" for key, value in p.items()) for p in points])


def kept_run_dir(keep_runs: str | Path, variant: str, point: dict[str, Any], seed: int) -> Path:
    """``<keep_runs>/<variant slug>[/<point slug>]/seed-<seed>``: the run directory of one kept final run."""
    folder = Path(keep_runs) / slug(variant)
    if point:
        folder = folder / point_slug(point)
    return folder / f"seed-{seed}"


def check_kept_run(recipe: Any, run_dir: str | Path) -> None:
    """Refuses, before training, a kept run directory that holds a run of another config.

    The same check ``run_single(..., resume=True)`` makes (:func:`embreg.recipes.resume_check.check_resume`); made
    here in the study's own process so the error reaches the user as it is, not from a worker.

    Raises:
        ConfigError: naming the directory and each differing key with both values.
    """
    from embreg.recipes.resume_check import check_resume
    from embreg.runs.run_dir import RunDirectory

    if Path(run_dir).is_dir():
        check_resume(RunDirectory(run_dir), recipe, layout="single", world_size=1)


def metrics_stamp(run_dir: str | Path) -> tuple[int, int] | None:
    """Identity of ``<run_dir>/metrics.json`` (inode, modification time; ``None``: none): unchanged across
    ``run_single`` means the finished run was read back, not trained."""
    from embreg.runs.run_dir import METRICS

    try:
        stat = os.stat(Path(run_dir) / METRICS)
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_mtime_ns
