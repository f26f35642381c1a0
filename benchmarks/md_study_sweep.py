"""What the mixed-dimension studies (``md_cf_study.py``, ``md_ctr_study.py``) share: the resumable run log, the
order of the alphas, and tuning one regularisation setting per (budget, alpha) point on the validation split.

Each finished run is one JSON line in ``runs/md-studies/<name>.runs.jsonl``; a run is identified by
``(budget, alpha, seed, tuned value)``, where the tuned value is the last recipe override when it sets the tuned
key (``None`` for runs at the recipe's own value, e.g. those of the studies before tuning existed).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

RunKey = tuple[float, float, int, float | None]


def ordered_alphas(alphas: list[float]) -> list[float]:
    """0 and the paper's recommended 0.3 first, so interrupted sweeps still hold complete curves to compare."""
    first = [a for a in (0.0, 0.3) if a in alphas]
    return first + [a for a in alphas if a not in first]


def tuned_value(row: dict, key: str) -> float | None:
    """The value of ``key`` a tuning run set (its last override), or None for a run at the recipe's (or --set)
    value."""
    last = row["overrides"][-1] if row.get("overrides") else ""
    return float(last.split("=", 1)[1]) if last.startswith(f"{key}=") else None


def load_done(path: Path, key: str) -> dict[RunKey, dict]:
    """Runs already finished by an earlier, interrupted invocation (one JSON object per line)."""
    done = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                done[(row["budget"], row["alpha"], row["seed"], tuned_value(row, key))] = row
    return done


class RunLog:
    """The finished runs of one study (``runs/md-studies/<out name>.runs.jsonl``), read back to resume.

    Args:
        out: the study's output prefix (its name names the log).
        key: the tuned recipe setting (part of every run's identity).
    """

    def __init__(self, out: Path, key: str) -> None:
        self.path = Path("runs") / "md-studies" / (out.name + ".runs.jsonl")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.key = key
        self.done = load_done(self.path, key)

    def get(self, budget: float, alpha: float, seed: int, value: float | None,
            run: Callable[[list[str]], dict], overrides: list[str]) -> tuple[dict, bool]:
        """``(row, fresh)``: the logged run, or ``run(overrides + [key=value])`` trained now and appended."""
        self.done.update(load_done(self.path, self.key))  # another process may have finished it meanwhile
        ident = (budget, alpha, seed, value)
        if ident in self.done:
            return self.done[ident], False
        row = run(overrides + ([f"{self.key}={value}"] if value is not None else []))
        row["tuned"] = value
        self.done[ident] = row
        with self.path.open("a") as handle:
            handle.write(json.dumps(row) + "\n")
        return row, True


def tune_point(train: Callable[[int, float | None], dict], grid: list[float] | None, tune_seed: int,
               score: str, key: str) -> tuple[float | None, dict | None]:
    """Trains ``tune_seed`` at every grid value and keeps the one with the lowest validation ``score``.

    ``train(seed, value)`` returns a finished run. Returns ``(chosen value, tuning record)``, or
    ``(None, None)`` without a grid.
    """
    if not grid:
        return None, None
    trials = {value: train(tune_seed, value) for value in grid}
    chosen = min(trials, key=lambda value: trials[value][score])
    return chosen, {"key": key, "chosen": chosen, score: {str(v): r[score] for v, r in trials.items()}}


def tuning_markdown(tuning: list[dict], key: str, score: str, label: str) -> str:
    """The tuning seed's validation ``score`` at every grid value, per (budget, alpha); the chosen value in bold."""
    if not tuning:
        return ""
    grid = sorted({float(v) for t in tuning for v in t[score]})
    lines = ["", f"Tuning ({label} of the tuning seed at each value of {key}; chosen in bold):", "",
             "| budget | alpha | " + " | ".join(f"{key} {v:g}" for v in grid) + " |",
             "|---|---|" + "---|" * len(grid)]
    for t in sorted(tuning, key=lambda t: (t["budget"], t["alpha"])):
        cells = []
        for v in grid:
            value = t[score].get(str(v))
            text = "" if value is None else f"{value:.4f}"
            cells.append(f"**{text}**" if value is not None and v == t["chosen"] else text)
        lines.append(f"| {t['budget']:.0f} | {t['alpha']:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
