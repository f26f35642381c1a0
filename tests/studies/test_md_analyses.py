"""The mixed-dimension analyses (md-efficiency, md-popularity, md-time-to-target) on hand-made run logs, and the
MD study files with their converted run logs (every record a variant, point and seed of its study)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from embreg.config import from_dict
from embreg.recipes import load_recipe
from embreg.registry import REGISTRY, load_builtins
from embreg.studies import AnalysisContext, RunLog, RunRecord, StudySpec, load_study
from embreg.studies.analyses import md_time_to_target
from embreg.studies.analyses._md_sweep import advantage_in_se, chosen_on_validation, sweep_points
from embreg.studies.analyses.md_efficiency import efficiency_readings
from embreg.studies.spec import point_overrides

ROOT = Path(__file__).resolve().parents[2]
MD_STUDIES = sorted((ROOT / "studies").glob("md-*.yaml"))


def records(points: list[tuple[float, float, float, float, int]], seeds: int = 4, spread: float = 0.01) -> list:
    """Final runs of (budget, alpha, test mean, val mean, size) points; seed s adds +-spread around the means."""
    out = []
    offsets = [spread * (1 if s % 2 else -1) * math.sqrt((seeds - 1) / seeds) for s in range(seeds)]
    for budget, alpha, test, val, size in points:
        label = "uniform" if alpha == 0 else f"MD alpha {alpha:g}"
        for seed, off in enumerate(offsets):
            out.append(
                RunRecord(
                    "demo",
                    label,
                    {"embeddings.budget": budget},
                    "final",
                    {"model.l2": 0.1},
                    seed,
                    [f"embeddings.alpha={alpha}", f"train.seed={seed}"],
                    "md-mf",
                    {
                        "test_mse": test + off,
                        "val_mse": val,
                        "embedding_parameters": size,
                        "test_mse_popular": test - 0.05 * alpha + off,
                        "test_mse_rare": test + off,
                        "train_mse_popular": test - 0.1,
                        "train_mse_rare": test - 0.1,
                    },
                )
            )
    return out


SWEEP = [
    (100, 0.0, 0.95, 0.96, 100),
    (200, 0.0, 0.90, 0.91, 200),
    (400, 0.0, 0.85, 0.87, 400),
    (800, 0.0, 0.86, 0.86, 800),
    (100, 0.1, 0.92, 0.93, 110),
    (100, 0.3, 0.91, 0.94, 120),
    (200, 0.1, 0.86, 0.88, 220),
    (200, 0.3, 0.849, 0.87, 230),
]


def test_points_carry_seed_std_and_the_alpha_from_the_overrides():
    points = sweep_points(records(SWEEP))
    assert [(p.budget, p.alpha) for p in points][:3] == [(100, 0.0), (100, 0.1), (100, 0.3)]
    assert points[0].mean("test_mse") == pytest.approx(0.95) and points[0].std("test_mse") == pytest.approx(0.01)


def test_on_test_reading_takes_best_uniform_test_and_smallest_md_as_good():
    reading = efficiency_readings(sweep_points(records(SWEEP)), "mse", "embedding_parameters")["on_test"]
    assert reading["best_uniform"].budget == 400 and reading["smallest_md"].alpha == 0.3
    assert reading["ratio"] == pytest.approx(230 / 400)


def test_on_validation_reading_chooses_everything_on_validation():
    reading = efficiency_readings(sweep_points(records(SWEEP)), "mse", "embedding_parameters")["on_validation"]
    assert reading["best_uniform"].budget == 800 and reading["ratio"] == pytest.approx(230 / 800)


def test_alpha_chosen_on_validation_and_its_advantage_in_standard_errors():
    points = sweep_points(records(SWEEP))
    first = chosen_on_validation(points, "mse")[0]
    assert (first.budget, first.alpha) == (100, 0.1)
    assert advantage_in_se(points[0], first, "mse") == pytest.approx(0.03 / math.sqrt(2 * 0.01**2 / 4))
    one = sweep_points(records([(1, 0.0, 0.9, 0.9, 1)], seeds=2, spread=0.0))[0]
    assert math.isnan(advantage_in_se(one, one, "mse"))


def test_no_uniform_point_gives_no_reading():
    assert efficiency_readings(sweep_points(records([p for p in SWEEP if p[1] > 0])), "mse", "x") == {}


def spec(analyses: list[dict]) -> StudySpec:
    return StudySpec.from_mapping(
        {
            "name": "demo",
            "title": "t",
            "paper": "p.txt",
            "metrics": ["test_mse"],
            "variants": {"uniform": {"recipe": "md-mf"}},
            "analyses": analyses,
        }
    )


def build(name: str, args: dict, runs: list, tmp_path: Path):
    load_builtins()
    entry = REGISTRY.get("analysis", name)
    return entry.build(from_dict(entry.config, args), AnalysisContext(spec([]), runs, tmp_path))


def test_efficiency_section_states_ratios_advantages_and_the_claim_verdicts(tmp_path):
    section = build("md-efficiency", {"rows": 100}, records(SWEEP), tmp_path)
    assert "**0.57x**" in section.markdown and "**0.29x**" in section.markdown and "| +4.2 |" in section.markdown
    assert (tmp_path / section.figures[0]).stat().st_size > 0
    efficiency, per_budget = section.claims
    assert efficiency.verdict == "not reproduced"  # 0.29x on validation, above the 1/4 target
    assert per_budget.verdict == "reproduced" and per_budget.p < 0.05  # MD ahead at both budgets
    section = build("md-efficiency", {"rows": 100, "target_ratio": 0.3}, records(SWEEP), tmp_path)
    assert section.claims[0].verdict == "reproduced"


def test_no_md_as_good_is_said_in_words(tmp_path):
    runs = records([p for p in SWEEP if not (p[1] > 0 and p[2] < 0.9)])
    section = build("md-efficiency", {}, runs, tmp_path)
    assert "no MD configuration reaches it" in section.markdown
    assert "smallest MD as good (alpha picked on test): none" in section.claims[0].reading


def test_popularity_section_reads_popular_and_rare_thirds(tmp_path):
    section = build("md-popularity", {"rows": 100, "fixed_budget": 100}, records(SWEEP), tmp_path)
    assert "| 1 per row |" in section.markdown
    assert section.claims[0].verdict == "reproduced"  # popular better at both budgets, rare never significantly worse


def ctr_run(budget: float, alpha: float, seed: int, losses: list[float], best: int) -> RunRecord:
    return RunRecord(
        "demo",
        "uniform" if alpha == 0 else f"MD alpha {alpha:g}",
        {"embeddings.budget": budget},
        "final",
        {},
        seed,
        [f"embeddings.alpha={alpha}"],
        "md-ctr-adult",
        {
            "val_logloss": losses[best],
            "test_logloss": losses[best],
            "best_epoch": best,
            "history": {"seconds": [1.5] * len(losses), "val_logloss": losses},
        },
    )


def test_time_to_target_counts_epochs_up_to_the_target_and_the_best_epoch(tmp_path):
    run = ctr_run(10, 0.0, 0, [0.5, 0.42, 0.41, 0.45], best=2)
    assert md_time_to_target.time_to_target(run, 0.42) == pytest.approx(3.0)
    assert md_time_to_target.time_to_target(run, 0.3) is None
    assert md_time_to_target.seconds_to_best(run) == pytest.approx(4.5)
    assert md_time_to_target.reached_text([None, 2.0, 4.0]) == "2/3, median 3.0 s"
    runs = [ctr_run(10, 0.0, s, [0.5, 0.45], best=1) for s in range(2)]
    runs += [ctr_run(10, 0.3, s, [0.5, 0.43, 0.44], best=1) for s in range(2)]
    section = build("md-time-to-target", {"slack": -0.01}, runs, tmp_path)  # target 0.44: only MD reaches it
    assert "| 10 | 0/2 | 3.0 ± 0.0 | 0.3 | 2/2, median 3.0 s | 3.0 ± 0.0 |" in section.markdown
    assert section.claims[0].verdict == "not reproduced"


@pytest.mark.parametrize("path", MD_STUDIES, ids=lambda p: p.stem)
def test_md_study_loads_and_its_recipes_take_its_overrides(path):
    study = load_study(path)
    point = study.points()[1]
    for label, variant in study.variants.items():
        setting = [f"{k}={v[0]}" for k, v in (study.tune.space_for(label) if study.tune else {}).items()]
        recipe = load_recipe(
            variant.recipe, [*study.common, *variant.set, *point_overrides(point), *setting, "train.seed=0"]
        )
        assert recipe.model is not None and recipe.model.name in ("mf", "ncf", "dlrm")
    load_builtins()
    for analysis in study.analyses:
        entry = REGISTRY.get("analysis", analysis.name)
        from_dict(entry.config, analysis.args)


@pytest.mark.parametrize("path", MD_STUDIES, ids=lambda p: p.stem)
def test_md_log_matches_its_study(path):
    study = load_study(path)
    log = RunLog(ROOT / "studies" / "logs" / f"{study.name}.jsonl").read()
    assert log, f"no run log for {study.name}"
    points = study.points()
    tuned = set(study.tune.space) if study.tune else set()
    by_cell: dict[tuple[str, str], set[int]] = {}
    for record in log:
        assert record.study == study.name and record.variant in study.variants and record.point in points
        assert record.phase == "final" and set(record.setting) == tuned
        for key, value in record.setting.items():
            assert value in study.tune.space[key]
        variant = study.variants[record.variant]
        assert all(o in record.overrides for o in [*study.common, *variant.set] if not o.startswith("train.lr="))
        load_recipe(record.recipe, record.overrides)  # the stored overrides are the new grammar
        by_cell.setdefault((record.variant, str(record.point)), set()).add(record.seed)
    assert all(seeds == set(study.final_seeds) for seeds in by_cell.values())
    assert len({r.key for r in log}) == len(log)
    assert ("uniform", str(points[0])) in by_cell
