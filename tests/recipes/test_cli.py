"""The command line: list, show, run of a user's file (and the issue's acceptance path), errors, sweep."""

import json
from pathlib import Path

import pytest
import yaml

from embreg.cli import main
from embreg.config import apply_overrides, to_dict
from embreg.data import list_datasets
from embreg.recipes import list_recipes, load_recipe, recipe_from_mapping
from embreg.registry import REGISTRY, SLOTS
from tests.helpers.recipes import set_args

QUICK_RATING = ["data.max_rows=2000", "train.epochs=1", "train.progress=false"]
QUICK_CTR = ["data.max_rows=3000", "train.epochs=1", "train.progress=false"]
QUICK_LM = ["data.max_train_tokens=2000", "data.max_eval_tokens=1000", "train.epochs=1", "train.progress=false"]
LR_SEARCH = "search={train.lr: {type: log_float, low: 0.001, high: 0.01}}"


# -- list -------------------------------------------------------------------------------------------------------------


def test_list_shows_recipes_datasets_and_every_registered_entry(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    plural = {"analysis": "analyses"}
    for heading in ("recipes:", "datasets:", *(f"{plural.get(slot, slot.replace('_', ' ') + 's')}:" for slot in SLOTS)):
        assert heading in lines, heading
    names = {line.split()[0] for line in lines if line.startswith("  ")}
    assert set(list_recipes()) <= names
    assert {info.name for info in list_datasets()} <= names
    for slot in SLOTS:
        entries = REGISTRY.entries(slot)
        assert entries, slot
        for name, entry in entries.items():
            assert name in names, (slot, name)
            assert any(line.split()[0] == name and entry.summary in line for line in lines if line.strip()), name
    assert "[needs layer_stack]" in out and "[needs dropout_sites]" in out  # requirements are shown


def test_list_json_has_recipes_datasets_and_every_slot(capsys):
    assert main(["list", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert set(listing) >= {"recipes", "datasets", "registry"}
    assert listing["recipes"] == list_recipes()
    assert set(listing["datasets"]) == {info.name for info in list_datasets()}
    assert set(listing["registry"]) == set(SLOTS)
    for slot in SLOTS:
        described = {entry["name"]: entry for entry in listing["registry"][slot]}
        assert list(described) == REGISTRY.names(slot), slot
        for name, entry in described.items():
            assert entry["slot"] == slot and entry["summary"] == REGISTRY.get(slot, name).summary
            assert entry["requires"] == list(REGISTRY.get(slot, name).requires)
    r3f = {e["name"]: e for e in listing["registry"]["regularizer"]}["r3f"]
    assert "sigma" in r3f["arguments"] and r3f["requires"] == ["layer_stack"]


# -- show ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["mf", "ncf", "mf-sse-graph", "md-ncf", "ctr-adult", "lm-r-approx-xi", "ft-reviews-lnsr"]
)
def test_show_prints_yaml_that_loads_back(capsys, name):
    assert main(["show", name]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert to_dict(recipe_from_mapping(shown)) == to_dict(load_recipe(name))
    assert shown["train"]["lr"] == load_recipe(name).train.lr  # defaults are filled in
    assert {"task", "data", "model", "embeddings", "objective", "train"} <= set(shown)


def test_show_prints_commented_stubs_for_the_empty_sections(capsys):
    assert main(["show", "ncf"]) == 0
    out = capsys.readouterr().out
    stubs = [line for line in out.splitlines() if line.startswith(("# index_transforms", "# regularizers"))]
    assert len(stubs) == 2, out
    assert "{item: {name: sse-se, p: 0.01}}" in stubs[0] and "(user, item)" in stubs[0]
    assert "lnsr" in stubs[1] and "l2sp" not in stubs[1]  # only what NCF offers the hooks for
    shown = yaml.safe_load(out)
    assert "index_transforms" not in shown and "regularizers" not in shown  # comments: the recipe is unchanged
    assert main(["show", "mf-sse-se"]) == 0  # a filled section is shown as itself, with no stub
    out = capsys.readouterr().out
    assert "# index_transforms" not in out and yaml.safe_load(out)["index_transforms"]["item"]["p"] > 0


def test_version_flag_prints_the_installed_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"embreg {version('embreg')}"


def test_show_applies_overrides_and_reports_errors(capsys):
    assert main(["show", "mf", "--set", "train.lr=0.05", "--set", "regularizers=[]"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["train"]["lr"] == 0.05
    assert main(["show", "mf", "--set", "train.lrr=1"]) == 2
    assert "did you mean 'train.lr'" in capsys.readouterr().err
    assert main(["show", "mf-sse-see"]) == 2
    assert "did you mean 'mf-sse-se'" in capsys.readouterr().err.lower()


def test_show_and_run_a_users_yaml_file(tmp_path, capsys):
    path = tmp_path / "my.yaml"
    path.write_text(
        "name: my\ndescription: my own MF\ntask: rating\nmodel: {name: mf, dim: 8}\n"
        "index_transforms:\n  item: {name: sse-se, p: 0.05}\n"
    )
    assert main(["show", str(path)]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert to_dict(recipe_from_mapping(shown)) == to_dict(load_recipe(path))
    assert shown["model"]["dim"] == 8 and shown["index_transforms"]["item"]["p"] == 0.05
    assert shown["train"]["epochs"] == 100  # the rating task's default, filled in

    out = tmp_path / "run"
    assert main(["run", str(path), *set_args(QUICK_RATING), "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["epochs_run"] == 1 and 0 < metrics["test_rmse"] < 5
    saved = load_recipe(out / "config.yaml")
    assert saved.name == "my" and saved.data.max_rows == 2000 and saved.index_transforms["item"].p == 0.05
    assert "my -> " in capsys.readouterr().out


# -- the acceptance path: show a recipe, add a technique, run the file ----------------------------------------


def _show_to_file(capsys, name: str, path: Path) -> str:
    assert main(["show", name]) == 0
    text = capsys.readouterr().out
    path.write_text(text)
    return text


def _run_file(capsys, path: Path, out: Path, overrides) -> dict:
    assert main(["run", str(path), *set_args(overrides), "--out", str(out)]) == 0, capsys.readouterr().err
    return json.loads((out / "metrics.json").read_text())


DUPLICATE_KEY_BUG = (
    "src bug: `embreg show` (src/embreg/cli.py, cmd_show) prints empty `index_transforms: {}` and "
    "`regularizers: []`, and load_yaml (src/embreg/config.py) refuses the appended section as a "
    "duplicate key"
)


def test_acceptance_ncf_with_r3f_appended(tmp_path, capsys):
    path = tmp_path / "my.yaml"
    _show_to_file(capsys, "ncf", path)
    with path.open("a") as f:
        f.write("regularizers: [{name: r3f}]\n")
    metrics = _run_file(capsys, path, tmp_path / "D", QUICK_RATING)
    assert "test_rmse" in metrics
    assert [spec.name for spec in load_recipe(tmp_path / "D" / "config.yaml").regularizers] == ["r3f"]


def test_acceptance_ctr_adult_with_smart_appended(tmp_path, capsys):
    path = tmp_path / "my.yaml"
    _show_to_file(capsys, "ctr-adult", path)
    with path.open("a") as f:
        f.write("regularizers: [{name: smart}]\n")
    metrics = _run_file(capsys, path, tmp_path / "D", QUICK_CTR)
    assert "test_logloss" in metrics
    assert [spec.name for spec in load_recipe(tmp_path / "D" / "config.yaml").regularizers] == ["smart"]


def test_acceptance_lm_dropout_with_sse_appended(tmp_path, capsys):
    path = tmp_path / "my.yaml"
    _show_to_file(capsys, "lm-dropout", path)
    with path.open("a") as f:
        f.write("index_transforms: {token: {name: sse-se, p: 0.1}, label: {name: label-sse, p: 0.1}}\n")
    metrics = _run_file(capsys, path, tmp_path / "D", QUICK_LM)
    assert "test_ppl" in metrics
    saved = load_recipe(tmp_path / "D" / "config.yaml")
    assert {k: v.name for k, v in saved.index_transforms.items()} == {"token": "sse-se", "label": "label-sse"}


@pytest.mark.parametrize(
    "name, section, value, overrides, metric",
    [
        ("ncf", "regularizers", [{"name": "r3f"}], QUICK_RATING, "test_rmse"),
        ("ctr-adult", "regularizers", [{"name": "smart"}], QUICK_CTR, "test_logloss"),
        (
            "lm-dropout",
            "index_transforms",
            {"token": {"name": "sse-se", "p": 0.1}, "label": {"name": "label-sse", "p": 0.1}},
            QUICK_LM,
            "test_ppl",
        ),
    ],
)
def test_acceptance_with_the_section_edited_in_the_shown_file(
    tmp_path, capsys, restore_threads, name, section, value, overrides, metric
):
    """The acceptance path with the technique written into the shown section (not appended as a second one)."""
    path = tmp_path / "my.yaml"
    shown = yaml.safe_load(_show_to_file(capsys, name, path))
    shown[section] = value
    path.write_text(yaml.safe_dump(shown, sort_keys=False))
    metrics = _run_file(capsys, path, tmp_path / "D", overrides)
    assert metrics["epochs_run"] == 1 and metric in metrics
    saved = load_recipe(tmp_path / "D" / "config.yaml")
    assert to_dict(saved)[section] == to_dict(load_recipe(path))[section]
    report = (tmp_path / "D" / "report.md").read_text()
    for item in value if isinstance(value, list) else value.values():
        assert item["name"] in report


# -- errors -------------------------------------------------------------------------------------------------------------


def test_bad_override_is_a_clean_error(capsys):
    assert main(["run", "mf", "--set", "train.lrr=0.1", "--out", "unused"]) == 2
    assert "did you mean 'train.lr'" in capsys.readouterr().err
    assert not Path("unused").exists()


@pytest.mark.parametrize("seeds", ["0", "-1", "two"])
def test_seeds_below_one_are_refused_by_argparse(tmp_path, capsys, seeds):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "mf", "--seeds", seeds, "--out", str(tmp_path / "run")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--seeds" in err and "error" in err
    assert not (tmp_path / "run").exists()


def test_compare_prints_table(tmp_path, capsys):
    for name, values in (("a", [0.9, 0.91, 0.92]), ("b", [0.88, 0.885, 0.89])):
        run = tmp_path / name
        run.mkdir()
        summary = {
            "test_rmse": {
                "mean": sum(values) / 3,
                "std": 0.01,
                "median": values[1],
                "min": min(values),
                "max": max(values),
                "values": values,
            }
        }
        (run / "summary.json").write_text(json.dumps(summary))
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "test_rmse" in out and "0.8850" in out


def test_unknown_command_exits_nonzero():
    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == 2


# -- sweep: two trials on a recipe of every task family -----------------------------------------------------------------


def test_search_override_syntax():
    assert apply_overrides({}, [LR_SEARCH]) == {
        "search": {"train.lr": {"type": "log_float", "low": 0.001, "high": 0.01}}
    }
    recipe = load_recipe("lm-dropout", [LR_SEARCH])
    assert list(recipe.search) == ["train.lr"] and recipe.search["train.lr"].type == "log_float"


def _sweep(tmp_path, capsys, recipe, overrides):
    out = tmp_path / "sweep"
    assert main(["sweep", recipe, "--trials", "2", *set_args(overrides), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    rows = (out / "trials.csv").read_text().splitlines()
    assert len(rows) == 3  # header + 2 trials
    tuned = load_recipe(out / "best.yaml")
    assert tuned.tuned.startswith(f"embreg sweep {recipe} --trials 2")
    monitor = tuned.monitor[0]
    assert f"best {monitor} = " in printed and monitor in rows[0]
    return tuned


@pytest.mark.parametrize(
    "recipe, overrides",
    [
        ("mf", QUICK_RATING),
        ("bpr", QUICK_RATING),
        ("ctr-adult", QUICK_CTR),
        ("lm-dropout", QUICK_LM + ["model.emb_dim=16", "model.hidden_dim=16", LR_SEARCH]),
    ],
)
def test_sweep_runs_two_trials_on_every_family(tmp_path, capsys, restore_threads, recipe, overrides):
    pytest.importorskip("optuna")
    base = load_recipe(recipe, overrides)
    assert base.search, "a sweep needs a search section"
    tuned = _sweep(tmp_path, capsys, recipe, overrides)
    assert tuned.task == base.task and set(tuned.search) == set(base.search)
    low, high = base.search["train.lr"].low, base.search["train.lr"].high
    assert low <= tuned.train.lr <= high


@pytest.mark.integration
def test_sweep_runs_two_trials_on_finetuning(tmp_path, capsys, restore_threads):
    pytest.importorskip("optuna")
    pytest.importorskip("transformers")
    from tests.helpers.finetune_tiny import tiny_checkpoint

    checkpoint = tiny_checkpoint(tmp_path / "ckpt")
    overrides = [f"model.pretrained={checkpoint}", "train.epochs=1", "train.batch_size=32", LR_SEARCH]
    tuned = _sweep(tmp_path, capsys, "ft-polarity", overrides)
    assert tuned.task == "classification" and 0.001 <= tuned.train.lr <= 0.01


def test_sweep_needs_a_search_section(tmp_path, capsys):
    pytest.importorskip("optuna")
    assert main(["sweep", "lm-dropout", "--set", "search={}", "--trials", "2", "--out", str(tmp_path / "s")]) == 2
    assert "has no 'search' section" in capsys.readouterr().err
