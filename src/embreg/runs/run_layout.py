"""The names of a run directory's entries: the layout :mod:`embreg.runs.run_dir` writes and describes.

A module of names only, so that what checks paths against a run's files (:mod:`embreg.runs.output_paths`) reads
them without importing the run directory's writer. Import them from :mod:`embreg.runs.run_dir`, which re-exports
them.

Example:
    >>> "best.safetensors" in RUN_ENTRIES, LOCK in RUN_ENTRIES
    (True, False)
"""

from __future__ import annotations

__all__ = [
    "CONFIG",
    "HISTORY",
    "METRICS",
    "REPORT",
    "SUMMARY",
    "LAST_CHECKPOINT",
    "BEST_CHECKPOINT",
    "LEGACY_LAST_CHECKPOINT",
    "LOCK",
    "METRICS_CSV",
    "TENSORBOARD_DIR",
    "RUN_RECORD",
    "RUN_ENTRIES",
    "FINISHED_KEY",
]

CONFIG = "config.yaml"
HISTORY = "history.jsonl"
METRICS = "metrics.json"
REPORT = "report.md"
SUMMARY = "summary.json"
LAST_CHECKPOINT = "last.safetensors"
BEST_CHECKPOINT = "best.safetensors"
LOCK = ".lock"
METRICS_CSV = "metrics.csv"
TENSORBOARD_DIR = "tensorboard"
LEGACY_LAST_CHECKPOINT = "last.pt"
"""Pickle checkpoints of older versions: recognised so a resume can refuse them clearly, never loaded."""
RUN_RECORD = "run.json"
RUN_ENTRIES = frozenset(
    {
        CONFIG,
        HISTORY,
        METRICS,
        REPORT,
        SUMMARY,
        LAST_CHECKPOINT,
        BEST_CHECKPOINT,
        LEGACY_LAST_CHECKPOINT,
        METRICS_CSV,
        TENSORBOARD_DIR,
        RUN_RECORD,
        "split.json",
        "corpus.json",
        "wandb",
        "wandb.json",
        "backends.json",
        "steps.csv",
        "snapshots",
        "averaged.safetensors",
    }
)
"""The names a run writes into its directory (besides ``seed-<s>/`` and ``.lock``): what makes a directory a run's."""

FINISHED_KEY = "wall_seconds"
"""The key of ``metrics.json`` that only the runner's final write holds: a run of a version whose ``run.json`` has
no ``status`` is finished when its metrics hold it."""
