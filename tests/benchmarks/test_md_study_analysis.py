"""The analysis behind the mixed-dimension study tables (benchmarks/md_study_sweep.py, md_ctr_study.py): the
parameter-efficiency readings, the advantage in standard errors, and the CTR time-to-target columns, on
hand-computed summaries."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import md_ctr_study  # noqa: E402
from md_study_sweep import (  # noqa: E402
    advantage_in_se,
    efficiency,
    efficiency_markdown,
    output_path,
    tune_point,
    tuning_markdown,
)


def entry(budget: float, alpha: float, test: float, val: float, size: int) -> dict:
    return {"budget": budget, "alpha": alpha, "seeds": [0, 1, 2, 3], "test_mse": test, "test_mse_std": 0.01,
            "val_mse": val, "embedding_parameters": size}


@pytest.fixture
def summary() -> list[dict]:
    return [entry(100, 0.0, 0.95, 0.96, 100), entry(200, 0.0, 0.90, 0.91, 200),
            entry(400, 0.0, 0.85, 0.87, 400), entry(800, 0.0, 0.86, 0.86, 800),
            entry(100, 0.1, 0.92, 0.93, 110), entry(100, 0.3, 0.91, 0.94, 120),
            entry(200, 0.1, 0.86, 0.88, 220), entry(200, 0.3, 0.849, 0.87, 230)]


def test_on_test_reading_takes_best_uniform_test_and_smallest_md_as_good(summary):
    eff = efficiency(summary, "mse")
    assert eff["on_test"]["best_uniform"]["budget"] == 400
    assert eff["on_test"]["smallest_md_matching"]["alpha"] == 0.3
    assert eff["on_test"]["parameter_ratio"] == pytest.approx(230 / 400)


def test_on_validation_reading_chooses_everything_on_validation(summary):
    eff = efficiency(summary, "mse")
    assert eff["on_validation"]["best_uniform"]["budget"] == 800
    assert eff["on_validation"]["parameter_ratio"] == pytest.approx(230 / 800)


def test_per_budget_separates_best_alpha_on_test_from_alpha_chosen_on_validation(summary):
    first = efficiency(summary, "mse")["per_budget"][0]
    assert (first["budget"], first["best_alpha"], first["val_alpha"]) == (100, 0.3, 0.1)
    assert first["val_md_test_mse"] == 0.92
    assert first["val_md_advantage_se"] == pytest.approx(0.03 / math.sqrt(2 * 0.01 ** 2 / 4))


def test_no_md_as_good_gives_no_ratio(summary):
    eff = efficiency([e for e in summary if not (e["alpha"] > 0 and e["test_mse"] < 0.9)], "mse")
    assert eff["on_test"]["smallest_md_matching"] is None and eff["on_test"]["parameter_ratio"] is None
    assert "no MD configuration reached it" in efficiency_markdown(eff, "MSE")


def test_no_uniform_configuration_gives_an_empty_reading(summary):
    assert efficiency([e for e in summary if e["alpha"] > 0], "mse") == {}
    assert "no parameter-efficiency reading" in efficiency_markdown({}, "MSE")


def test_advantage_needs_two_seeds_and_some_spread():
    one = {"seeds": [0], "test_mse": 0.9, "test_mse_std": 0.0}
    two = {"seeds": [0, 1], "test_mse": 0.8, "test_mse_std": 0.0}
    assert advantage_in_se(one, two, "mse") is None
    assert advantage_in_se(two, two, "mse") is None
    worse = {"seeds": [0, 1], "test_mse": 0.85, "test_mse_std": 0.01}
    assert advantage_in_se({**two, "test_mse_std": 0.01}, worse, "mse") < 0


def test_markdown_states_ratios_and_advantages(summary):
    text = efficiency_markdown(efficiency(summary, "mse"), "MSE")
    assert "(0.57x)" in text and "(0.29x)" in text and "| +4.2 |" in text


def ctr_row(budget: float, alpha: float, seed: int, loss: float, epoch_losses: list[float], best: int) -> dict:
    return {"budget": budget, "alpha": alpha, "seed": seed, "field_dims": [2, 2], "base_dim": 2,
            "test_logloss": loss, "test_accuracy": 0.8, "test_auc": 0.9, "val_logloss": loss,
            "embedding_parameters": int(budget), "model_parameters": int(budget) + 50, "seconds": 9.0,
            "best_epoch": best, "history": [{"epoch": i, "seconds": 1.5, "val_logloss": v}
                                            for i, v in enumerate(epoch_losses)]}


def test_ctr_times_count_epochs_up_to_the_target_and_the_best_epoch():
    row = ctr_row(10, 0.0, 0, 0.4, [0.5, 0.42, 0.41, 0.45], best=2)
    assert md_ctr_study.time_to_target(row["history"], 0.42) == pytest.approx(3.0)
    assert md_ctr_study.time_to_target(row["history"], 0.3) is None
    assert md_ctr_study.seconds_to_best(row) == pytest.approx(4.5)
    assert md_ctr_study.reached_text([None, 2.0, 4.0]) == "2/3, median 3.0 s"
    assert md_ctr_study.reached_text([None]) == "0/1"


def test_ctr_tables_and_plot_render(tmp_path):
    rows = [ctr_row(10, 0.0, s, 0.45 + 0.01 * s, [0.5, 0.45], best=1) for s in range(2)]
    rows += [ctr_row(10, 0.3, s, 0.43 + 0.01 * s, [0.5, 0.43, 0.44], best=1) for s in range(2)]
    summary = md_ctr_study.summarise(rows, target=0.44)
    eff = efficiency(summary, "logloss", "model_parameters")
    assert eff["per_budget"][0]["val_alpha"] == 0.3
    table = md_ctr_study.markdown(summary, "t", 0.44)
    assert "| 10 | 0.3 |" in table and "2/2, median 3.0 s" in table and "0/2" in table
    assert "| 10 | 0/2 | 3.0 ± 0.0 | 0.3 | 2/2, median 3.0 s | 3.0 ± 0.0 |" in md_ctr_study.time_markdown(summary, eff)
    md_ctr_study.plot(summary, tmp_path / "p.png", "t")
    assert (tmp_path / "p.png").stat().st_size > 0


def test_output_paths_keep_dots_in_the_study_prefix():
    a, b = output_path(Path("d/study-lr0.01"), ".json"), output_path(Path("d/study-lr0.001"), ".json")
    assert (a, b) == (Path("d/study-lr0.01.json"), Path("d/study-lr0.001.json"))


def test_tuning_chooses_by_the_mean_validation_score_of_the_tuning_seeds():
    scores = {(0, 0.1): 0.80, (1, 0.1): 0.90, (2, 0.1): 0.88, (0, 0.2): 0.82, (1, 0.2): 0.84, (2, 0.2): 0.85}
    calls = []

    def train(seed, value):
        calls.append((seed, value))
        return {"val_mse": scores[seed, value]}

    chosen, record = tune_point(train, [0.1, 0.2], 0, "val_mse", "model.l2")
    assert chosen == 0.1 and "tune_seeds" not in record  # seed 0 alone prefers 0.1
    chosen, record = tune_point(train, [0.1, 0.2], 0, "val_mse", "model.l2", tune_seeds=3)
    assert chosen == 0.2 and record["tune_seeds"] == [0, 1, 2]  # the mean of seeds 0-2 prefers 0.2
    assert record["val_mse"] == {"0.1": pytest.approx(0.86), "0.2": pytest.approx(0.83667, abs=1e-5)}
    assert set(calls) == set(scores)
    assert "mean validation MSE of the 3 tuning seeds" in tuning_markdown(
        [{"budget": 10.0, "alpha": 0.0, **record}], "model.l2", "val_mse", "validation MSE")
    with pytest.raises(ValueError, match="tune_seeds=0 must be >= 1"):
        tune_point(train, [0.1], 0, "val_mse", "model.l2", tune_seeds=0)


def test_cf_study_refuses_a_fixed_budget_outside_its_budgets(capsys):
    import md_cf_study

    with pytest.raises(SystemExit) as raised:
        md_cf_study.main(["--budget-dims", "12", "16", "--fixed-budget-dim", "4", "--out", "unused"])
    assert raised.value.code == 2
    message = capsys.readouterr().err
    assert "--fixed-budget-dim 4 is not one of --budget-dims 12 16" in message
