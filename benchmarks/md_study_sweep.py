"""What the mixed-dimension studies (``md_cf_study.py``, ``md_ctr_study.py``) share: the resumable run log, the
order of the alphas, tuning one regularisation setting per (budget, alpha) point on the validation split, and the
parameter-efficiency reading of a finished sweep (mixed-dimension-embeddings.txt, Sec. V: the fewest parameters
at which MD matches the best uniform model, and MD against uniform at each budget).

Each finished run is one JSON line in ``runs/md-studies/<name>.runs.jsonl``; a run is identified by
``(budget, alpha, seed, tuned value)``, where the tuned value is the last recipe override when it sets the tuned
key (``None`` for runs at the recipe's own value, e.g. those of the studies before tuning existed).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path

RunKey = tuple[float, float, int, float | None]


def output_path(out: Path, suffix: str) -> Path:
    """``out`` + ``suffix`` (``.json``, ``.md``, ``.png``): the study's prefix may hold dots (e.g. ``...-lr0.01``),
    which ``Path.with_suffix`` would cut off, making two studies write the same files."""
    return out.with_name(out.name + suffix)


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


def add_tuning_arguments(parser: argparse.ArgumentParser, default_key: str, scored_on: str,
                         grid_aliases: tuple[str, ...] = ()) -> None:
    """The options :func:`tune_point` reads: ``--tune-grid`` (and ``grid_aliases``), ``--tune-key`` (default
    ``default_key``), ``--tune-seed``, ``--tune-seeds``; ``scored_on`` names the validation score in the help.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_tuning_arguments(parser, "model.l2", "validation MSE", ("--l2-grid",))
        >>> parser.parse_args(["--l2-grid", "0.1", "0.2", "--tune-seeds", "3"]).tune_grid
        [0.1, 0.2]
    """
    parser.add_argument("--tune-grid", *grid_aliases, dest="tune_grid", type=float, nargs="+", default=None,
                        help=f"tune --tune-key per (budget, alpha) on the {scored_on} of --tune-seed "
                             "(the mean over --tune-seeds seeds)")
    parser.add_argument("--tune-key", default=default_key, help="the recipe setting --tune-grid tunes")
    parser.add_argument("--tune-seed", type=int, default=0)
    parser.add_argument("--tune-seeds", type=int, default=1,
                        help="choose the --tune-grid value by the mean validation score of this many seeds, "
                             "from --tune-seed on (default 1: that seed alone)")


def tune_point(train: Callable[[int, float | None], dict], grid: list[float] | None, tune_seed: int,
               score: str, key: str, tune_seeds: int = 1) -> tuple[float | None, dict | None]:
    """Trains seeds ``tune_seed, ..., tune_seed + tune_seeds - 1`` at every grid value and keeps the value with
    the lowest mean validation ``score`` over them (one seed: that seed's score).

    ``train(seed, value)`` returns a finished run. Returns ``(chosen value, tuning record)``, or
    ``(None, None)`` without a grid. The record holds the mean score per value and the seeds.

    Example:
        >>> runs = {(0, 1.0): 0.5, (1, 1.0): 0.9, (0, 2.0): 0.6, (1, 2.0): 0.6}
        >>> tune_point(lambda seed, v: {"val": runs[seed, v]}, [1.0, 2.0], 0, "val", "k", tune_seeds=2)[0]
        2.0
    """
    if not grid:
        return None, None
    if tune_seeds < 1:
        raise ValueError(f"tune_seeds={tune_seeds} must be >= 1")
    seeds = list(range(tune_seed, tune_seed + tune_seeds))
    means = {value: sum(train(seed, value)[score] for seed in seeds) / len(seeds) for value in grid}
    chosen = min(means, key=means.__getitem__)
    record = {"key": key, "chosen": chosen, score: {str(v): m for v, m in means.items()}}
    if tune_seeds > 1:
        record["tune_seeds"] = seeds
    return chosen, record


def tuning_markdown(tuning: list[dict], key: str, score: str, label: str) -> str:
    """The tuning seeds' mean validation ``score`` at every grid value, per (budget, alpha); the chosen value in
    bold."""
    if not tuning:
        return ""
    grid = sorted({float(v) for t in tuning for v in t[score]})
    n = len(tuning[0].get("tune_seeds", [0]))
    who = f"{label} of the tuning seed" if n == 1 else f"mean {label} of the {n} tuning seeds"
    lines = ["", f"Tuning ({who} at each value of {key}; chosen in bold):", "",
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


def _matching(reference: dict, candidates: list[dict], metric: str, size: str) -> dict | None:
    """The candidate with the fewest ``size`` parameters whose mean test ``metric`` is at most ``reference``'s."""
    matching = [e for e in candidates if e[f"test_{metric}"] <= reference[f"test_{metric}"]]
    return min(matching, key=lambda e: e[size]) if matching else None


def _point(entry: dict, metric: str, size: str) -> dict:
    keys = ("budget", "alpha", f"test_{metric}", f"test_{metric}_std", f"val_{metric}", size)
    return {k: entry[k] for k in keys}


def advantage_in_se(baseline: dict, other: dict, metric: str) -> float | None:
    """How far ``other``'s mean test ``metric`` is below ``baseline``'s, in standard errors of the difference.

    ``(mean_b - mean_o) / sqrt(std_b^2 / n_b + std_o^2 / n_o)`` over the seeds of each summary entry (positive:
    ``other`` is better for a loss). None with fewer than two seeds on either side or no spread at all.

    Example:
        >>> a = {"seeds": [0, 1], "test_mse": 0.9, "test_mse_std": 0.03}
        >>> b = {"seeds": [0, 1], "test_mse": 0.8, "test_mse_std": 0.04}
        >>> round(advantage_in_se(a, b, "mse"), 3)
        2.828
    """
    n_b, n_o = len(baseline["seeds"]), len(other["seeds"])
    if n_b < 2 or n_o < 2:
        return None
    se = math.sqrt(baseline[f"test_{metric}_std"] ** 2 / n_b + other[f"test_{metric}_std"] ** 2 / n_o)
    return (baseline[f"test_{metric}"] - other[f"test_{metric}"]) / se if se > 0 else None


def efficiency(summary: list[dict], metric: str, size: str = "embedding_parameters") -> dict:
    """The paper's parameter-efficiency reading of a sweep, two ways (lower ``metric`` is better).

    ``summary`` holds one entry per (budget, alpha) with the means ``test_<metric>`` / ``val_<metric>``, their
    ``_std`` over ``seeds``, and the parameter count ``size``; alpha 0 is the uniform table.

    * ``on_test`` (the issue's wording): the uniform configuration with the best mean test ``metric``, and the
      smallest mixed-dimension configuration (any alpha > 0, any budget) whose mean test ``metric`` is at least
      as good.
    * ``on_validation``: the same question with every choice made on the validation split, so the test split
      only scores: the uniform configuration with the best mean validation ``metric`` is the reference, and at
      each budget MD takes the alpha with the best mean validation ``metric``.

    Each reading gives the parameter ratio (``size`` of MD over the uniform reference's). ``per_budget`` compares
    MD with the uniform table of the same budget: the best alpha on test, and the alpha chosen on validation
    with its advantage in standard errors (:func:`advantage_in_se`). ``metric`` and ``size`` are kept in the
    result. Empty when there is no uniform configuration.
    """
    test, val = f"test_{metric}", f"val_{metric}"
    uniform = [e for e in summary if e["alpha"] == 0]
    md = [e for e in summary if e["alpha"] > 0]
    if not uniform:
        return {}
    md_on_validation = [min((e for e in md if e["budget"] == b), key=lambda e: e[val])
                        for b in sorted({e["budget"] for e in md})]
    out = {"metric": metric, "size": size}
    for reading, reference, candidates in (
            ("on_test", min(uniform, key=lambda e: e[test]), md),
            ("on_validation", min(uniform, key=lambda e: e[val]), md_on_validation)):
        smallest = _matching(reference, candidates, metric, size)
        out[reading] = {"best_uniform": _point(reference, metric, size),
                        "smallest_md_matching": _point(smallest, metric, size) if smallest else None,
                        "parameter_ratio": smallest[size] / reference[size] if smallest else None}
    per_budget = []
    for entry in md_on_validation:
        base = [e for e in uniform if e["budget"] == entry["budget"]]
        top = min((e for e in md if e["budget"] == entry["budget"]), key=lambda e: e[test])
        if base:
            per_budget.append({"budget": entry["budget"], f"uniform_{test}": base[0][test],
                               "uniform_std": base[0][f"{test}_std"], "best_alpha": top["alpha"],
                               f"md_{test}": top[test], "md_std": top[f"{test}_std"],
                               "val_alpha": entry["alpha"], f"val_md_{test}": entry[test],
                               "val_md_std": entry[f"{test}_std"],
                               "val_md_advantage_se": advantage_in_se(base[0], entry, metric)})
    out["per_budget"] = per_budget
    return out


def efficiency_markdown(eff: dict, label: str, size_label: str = "embedding parameters") -> str:
    """:func:`efficiency`'s two readings as sentences and its per-budget comparison as a table; ``label`` names
    the metric (e.g. "MSE"), ``size_label`` the parameters counted."""
    if not eff:
        return "No uniform (alpha 0) configuration in this run: no parameter-efficiency reading.\n"
    test, count = f"test_{eff['metric']}", eff["size"]
    lines = []
    for reading, how in (("on_test", f"best mean test {label}; MD: any alpha"),
                         ("on_validation", f"best mean validation {label}; MD: the alpha chosen on validation")):
        b, m = eff[reading]["best_uniform"], eff[reading]["smallest_md_matching"]
        lines.append(f"* Chosen {reading.replace('_', ' ')} (uniform: {how}): best uniform budget {b['budget']:.0f}, "
                     f"{b[count]:.0f} {size_label}, test {label} {b[test]:.5f} ± {b[test + '_std']:.5f}; " + (
                         f"smallest MD at least as good: alpha {m['alpha']:.1f}, budget {m['budget']:.0f}, "
                         f"{m[count]:.0f} {size_label} ({eff[reading]['parameter_ratio']:.2f}x), test {label} "
                         f"{m[test]:.5f} ± {m[test + '_std']:.5f}." if m else "no MD configuration reached it."))
    lines += ["", f"| budget | uniform test {label} | best alpha (on test) | MD test {label} | alpha chosen on val. "
                  f"| MD test {label} | MD ahead of uniform (standard errors) |", "|---|---|---|---|---|---|---|"]
    for r in eff["per_budget"]:
        ahead = r.get("val_md_advantage_se")
        lines.append(f"| {r['budget']:.0f} | {r['uniform_' + test]:.4f} ± {r['uniform_std']:.4f} | "
                     f"{r['best_alpha']:.1f} | {r['md_' + test]:.4f} ± {r['md_std']:.4f} | {r['val_alpha']:.1f} | "
                     f"{r['val_md_' + test]:.4f} ± {r['val_md_std']:.4f} | "
                     f"{'' if ahead is None else f'{ahead:+.1f}'} |")
    return "\n".join(lines) + "\n"
