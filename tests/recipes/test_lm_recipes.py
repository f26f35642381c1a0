"""Language-model recipes: loading, the one-line technique swap, config errors, and quick runs on real text."""

import json

import pytest

from embreg.cli import main
from embreg.errors import ConfigError
from embreg.recipes import list_recipes
from embreg.recipes.lm_builders import build_lm, build_update_rule
from embreg.recipes.lm_run import is_lm_recipe, load_lm_recipe, run_lm_single
from embreg.regularizers.dropout import DropoutK, ExplicitDropoutRegularizer, ImplicitDropoutNoise, TwoMaskDropoutNoise

LM_RECIPES = ["lm-none", "lm-l2", "lm-dropout", "lm-dropout-k", "lm-r-approx", "lm-r-approx-xi", "lm-dropout-k-xi",
              "lm-dropout-k-two-mask", "lm-r-identity", "lm-r-tilde"]


def test_every_lm_recipe_is_shipped_and_loads():
    shipped = list_recipes()
    for name in LM_RECIPES:
        assert name in shipped and shipped[name], name
        assert is_lm_recipe(name)
        assert load_lm_recipe(name).name == name
    assert not is_lm_recipe("mf")


@pytest.mark.parametrize("technique, objective, regs", [
    ("standard", None, []),
    ("dropout_k", DropoutK, []),
    ("explicit", None, [ExplicitDropoutRegularizer]),
    ("explicit_xi", None, [ExplicitDropoutRegularizer, ImplicitDropoutNoise]),
    ("dropout_k_xi", DropoutK, [ImplicitDropoutNoise]),
    ("dropout_k_two_mask", DropoutK, [TwoMaskDropoutNoise]),
])
def test_one_line_swaps_the_technique(technique, objective, regs):
    cfg = load_lm_recipe("lm-dropout", [f"technique.name={technique}", "technique.k=4"])
    rule = build_update_rule(cfg)
    assert [type(r) for r in rule.regularizers] == regs
    if objective is not None:
        assert isinstance(rule.objective, objective) and rule.objective.k == 4
    model = build_lm(cfg, 50)
    analytic = technique.startswith("explicit")
    assert (model.output_dropout.q == 0.0) == analytic  # the analytic terms replace the model's dropout


def test_coefficients_follow_each_sites_dropout_probability():
    cfg = load_lm_recipe("lm-r-approx-xi", ["dropout.output=0.5", "dropout.weight=0.0"])
    explicit, noise = build_update_rule(cfg).regularizers
    assert explicit.coefficients["output"] == pytest.approx(1.0)
    assert explicit.coefficients["input"] == pytest.approx(0.4 / 0.6)
    assert explicit.coefficients["weight_hh"] == 0.0 and "hidden" not in explicit.coefficients  # one layer
    assert noise.coefficients["output"] == pytest.approx(1.0)
    fixed = build_update_rule(load_lm_recipe("lm-r-tilde", ["technique.lambda1=0.25"])).regularizers[0]
    assert fixed.coefficients.pop("embedding") == 0.0  # no word-level dropout in the recipe: not regularised
    assert set(fixed.coefficients.values()) == {0.25}


@pytest.mark.parametrize("override, match", [
    ("dropout.output=1.0", r"outside \[0, 1\)"),
    ("technique.k=0", "k=0"),
    ("technique.name=dropout_x", "did you mean"),
    ("technique.lambda1=-1", ">= 0"),
    ("data.bptt=0", "bptt"),
    ("model.hiden_dim=4", "did you mean 'model.hidden_dim'"),
])
def test_bad_lm_config_values_are_config_errors(override, match):
    with pytest.raises(ConfigError, match=match):
        load_lm_recipe("lm-dropout", [override])


def test_unknown_site_group_is_a_config_error():
    with pytest.raises(ConfigError, match="site groups"):
        build_update_rule(load_lm_recipe("lm-r-approx", ["technique.sites=[decoder]"]))


QUICK = ["data.max_train_tokens=2400", "data.max_eval_tokens=1200", "data.max_vocab=400", "model.emb_dim=16",
         "model.hidden_dim=16", "data.batch_size=8", "data.bptt=12", "train.epochs=2", "train.progress=false",
         "train.threads=1"]


@pytest.mark.integration
@pytest.mark.parametrize("name, extra", [("lm-dropout", []), ("lm-r-approx-xi", []),
                                         ("lm-dropout-k-xi", ["technique.k=2"])])
def test_lm_recipes_train_on_a_slice_of_real_text(tmp_path, name, extra):
    result = run_lm_single(load_lm_recipe(name, QUICK + extra), tmp_path)
    m = result.metrics
    assert 10 < m["val_ppl"] < 400 and 10 < m["test_ppl"] < 400, m  # a uniform guess over 400 words is 400
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"] + 0.5
    for f in ("config.yaml", "corpus.json", "history.jsonl", "metrics.json", "best.safetensors", "last.safetensors",
              "report.md"):
        assert (tmp_path / f).exists(), f
    corpus = json.loads((tmp_path / "corpus.json").read_text())
    assert corpus["train"]["tokens"] == 2400 and not set(corpus["articles"]["train"]) & set(corpus["articles"]["test"])


@pytest.mark.integration
def test_lm_cli_resume_matches_an_uninterrupted_run(tmp_path):
    sets = [x for s in QUICK if not s.startswith("train.epochs") for x in ("--set", s)]
    args = ["run", "lm-dropout", "--set", "technique.name=explicit_xi"] + sets
    assert main(args + ["--out", str(tmp_path / "full"), "--set", "train.epochs=3"]) == 0
    assert main(args + ["--out", str(tmp_path / "part"), "--set", "train.epochs=2"]) == 0
    assert main(args + ["--out", str(tmp_path / "part"), "--set", "train.epochs=3", "--resume"]) == 0
    full = json.loads((tmp_path / "full" / "metrics.json").read_text())
    resumed = json.loads((tmp_path / "part" / "metrics.json").read_text())
    assert resumed["val_ppl"] == pytest.approx(full["val_ppl"], abs=0) and resumed["epochs_run"] == 3


def test_own_text_files_train_end_to_end(tmp_path):
    text = "\n".join(f"the {w} sat on the mat and the {w} ran away" for w in ("cat", "dog", "fox", "owl") * 30)
    paths = []
    for name in ("train", "valid", "test"):
        path = tmp_path / f"{name}.txt"
        path.write_text(text)
        paths.append(str(path))
    cfg = load_lm_recipe("lm-dropout", [f"data.paths={paths}", "data.max_train_tokens=null",
                                        "data.max_eval_tokens=null", "data.min_count=1", "model.emb_dim=8",
                                        "model.hidden_dim=8", "data.batch_size=4", "data.bptt=10", "train.epochs=2",
                                        "train.progress=false", "train.lr=0.01"])
    result = run_lm_single(cfg, tmp_path / "run")
    assert result.metrics["val_ppl"] < 12  # 12 word types: a uniform guess would score 12
    assert json.loads((tmp_path / "run" / "corpus.json").read_text())["source"] == "text files"
