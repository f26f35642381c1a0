"""A study's metric names, analyses and tuning are checked before its first run trains."""

from __future__ import annotations

from pathlib import Path

import pytest

import embreg.recipes.run as run_module
from embreg.errors import ConfigError
from embreg.recipes import load_recipe
from embreg.registry import REGISTRY
from embreg.studies import RunLog
from embreg.studies.checks import check_method_metrics, check_study_metrics
from embreg.studies.runner import run_overrides, run_study
from embreg.studies.spec import StudySpec, load_study
from tests.studies.study_helpers import TINY, write_study


@pytest.fixture
def no_training(monkeypatch) -> list:
    calls: list = []
    monkeypatch.setattr(run_module, "run_single", lambda *args, **kwargs: calls.append(args))
    return calls


def _run(tmp_path, text: str, no_training: list) -> None:
    spec = load_study(write_study(tmp_path, text))
    run_study(spec, tmp_path / "logs" / "tiny.jsonl", progress=False)


@pytest.mark.parametrize(
    ("old", "new", "closest"),
    [
        ("metric: test_rmse, variant", "metric: test_rmes, variant", "test_rmse"),  # a claim's metric
        ("metrics: [test_rmse, test_mae]", "metrics: [test_rmse, tset_mae]", "test_mae"),
        ("  seeds: 1\n", "  seeds: 1\n  metric: val_rsme\n", "val_rmse"),  # tune.metric
    ],
)
def test_a_misspelt_metric_is_refused_before_training(tmp_path, no_training, old, new, closest):
    assert old in TINY
    with pytest.raises(ConfigError, match=f"did you mean '{closest}'") as caught:
        _run(tmp_path, TINY.replace(old, new), no_training)
    assert "task rating" in str(caught.value)
    assert no_training == [] and not (tmp_path / "logs" / "tiny.jsonl").exists()


def test_a_metric_of_another_task_is_refused(tmp_path, no_training):
    with pytest.raises(ConfigError, match="'test_ndcg@10' is not a metric of variant 'MF'"):
        _run(tmp_path, TINY.replace("metrics: [test_rmse, test_mae]", "metrics: [test_ndcg@10]"), no_training)


def test_a_claim_metric_is_checked_for_its_baseline_too(tmp_path, no_training):
    text = TINY.replace("  MF-dropout: {recipe: mf, set: [model.dropout=0.2]}", "  BPR: {recipe: bpr}")
    text = text.replace("metrics: [test_rmse, test_mae]", "metrics: [best_epoch]")
    text = text.replace("metric: test_rmse, variant: MF-dropout", "metric: test_ndcg@10, variant: BPR")
    text = text.replace("  space: {model.l2: [0.0, 0.05]}\n", "  space: {train.lr: [0.001, 0.002]}\n")
    with pytest.raises(ConfigError, match=r"claims\[0\].*'test_ndcg@10' is not a metric of variant 'MF'"):
        _run(tmp_path, text, no_training)


def test_the_shipped_tiny_study_passes_the_checks(tmp_path, monkeypatch):
    from embreg.studies import runner

    seen: list = []
    monkeypatch.setattr(runner, "_Cell", lambda *args: seen.append(args) or _NoSteps())
    spec = load_study(write_study(tmp_path))
    run_study(spec, tmp_path / "logs" / "tiny.jsonl", progress=False)
    assert len(seen) == 2


class _NoSteps:
    pending: set = set()
    steps = iter(())


BASE = {"name": "d", "title": "t", "paper": "p", "variants": {"MF": {"recipe": "mf"}}, "metrics": ["test_rmse"]}


@pytest.mark.parametrize(
    ("tune", "message"),
    [
        ({"space": {"model.l2": [0.0, 0.1]}}, "method is missing"),
        ({"seeds": 2}, "method is missing"),
        ({"trials": 20}, "method is missing"),
        ({"method": "grid"}, "tunes nothing"),
        ({"method": "grid", "space": {}, "per_variant": {"MF": {}}}, "tunes nothing"),
    ],
)
def test_a_tune_section_that_tunes_nothing_is_refused(tune, message):
    with pytest.raises(ConfigError, match=message):
        StudySpec.from_mapping({**BASE, "tune": tune})


def test_a_tune_section_with_a_method_is_accepted():
    grid = StudySpec.from_mapping({**BASE, "tune": {"method": "grid", "space": {"model.l2": [0.0, 0.1]}}})
    optuna = StudySpec.from_mapping({**BASE, "tune": {"method": "optuna", "trials": 3}})
    assert grid.tune is not None and optuna.tune is not None and optuna.tune.space == {}


def test_an_unknown_analysis_is_refused_with_the_closest_name():
    with pytest.raises(
        ConfigError, match=r"analyses\[0\]: unknown analysis 'md-popularty'; did you mean 'md-popularity'"
    ):
        StudySpec.from_mapping({**BASE, "analyses": [{"name": "md-popularty"}]})


def test_an_analysis_argument_its_config_lacks_is_refused():
    with pytest.raises(ConfigError, match=r"analyses\[0\]\.args"):
        StudySpec.from_mapping({**BASE, "analyses": [{"name": "md-popularity", "args": {"nope": 1}}]})


# --------------------------------------------------------------------------------------------- shipped studies
ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(path.stem for path in (ROOT / "studies").glob("*.yaml"))


def _first_recipes(spec: StudySpec) -> dict:
    """Each trained variant's recipe at its first point (on the CPU: a GPU study's names are checked here too)."""
    recipes = {}
    for variant, point in spec.cells():
        if variant not in recipes and spec.variants[variant].method is None:
            recipes[variant] = load_recipe(
                spec.variants[variant].recipe,
                run_overrides(spec, variant, point, {}, spec.seed_start, ["train.device=cpu"]),
            )
    return recipes


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_study_names_only_reported_metrics(name):
    spec = load_study(ROOT / "studies" / f"{name}.yaml")
    check_study_metrics(spec, _first_recipes(spec))
    for variant, vspec in spec.variants.items():
        if vspec.method is not None:
            check_method_metrics(spec, variant)


@pytest.mark.parametrize("name", SHIPPED)
def test_the_logged_runs_report_only_declared_metrics(name):
    """The study logs hold real full-size runs: each run's keys are among its task's declared metric names."""
    spec = load_study(ROOT / "studies" / f"{name}.yaml")
    recipes = _first_recipes(spec)
    log = ROOT / "studies" / "logs" / f"{name}.jsonl"
    if not log.exists():
        pytest.skip(f"{name} has no run log")
    for record in RunLog(log).read():
        method = spec.variants[record.variant].method
        if method is not None:
            declared = set(REGISTRY.get("baseline", method).extra["metrics"])
        else:
            declared = set(recipes[record.variant].adapter.metric_names(recipes[record.variant]))
        assert set(record.metrics) - {"history"} - declared == set(), (record.variant, record.seed)


def test_study_runs_train_without_their_own_progress_bars(tmp_path, monkeypatch):
    from embreg.train.trainer import FitResult

    progress: list[bool] = []

    def fake(recipe, out_dir, **kwargs):
        progress.append(recipe.train.progress)
        return FitResult(metrics={"val_rmse": 1.0, "test_rmse": 1.0, "test_mae": 1.0}, history=[])

    monkeypatch.setattr(run_module, "run_single", fake)
    text = TINY.replace("train.progress=false, ", "")
    assert "progress" not in text
    records = run_study(load_study(write_study(tmp_path, text)), tmp_path / "logs" / "tiny.jsonl", progress=False)
    assert progress and not any(progress)
    assert all("train.progress=false" not in r.overrides for r in records)  # the log's overrides are the study's
