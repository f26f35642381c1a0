"""Language-model recipes: loading, the one-line technique swap, config errors, and quick runs on real text."""

import json

import pytest

from embreg.cli import main
from embreg.errors import ConfigError, EmbregError
from embreg.recipes import list_recipes, load_recipe
from embreg.recipes.run import build_run, run_single
from embreg.regularizers.dropout import (
    DropoutK,
    ExplicitDropoutRegularizer,
    ImplicitDropoutNoise,
    TwoMaskDropoutNoise,
    dropout_k_noise_scale,
)
from embreg.sse import SSE, LabelSSE

LM_RECIPES = [
    "lm-none",
    "lm-l2",
    "lm-dropout",
    "lm-dropout-k",
    "lm-r-approx",
    "lm-r-approx-xi",
    "lm-dropout-k-xi",
    "lm-dropout-k-two-mask",
    "lm-r-identity",
    "lm-r-tilde",
]


@pytest.fixture
def text_files(tmp_path):
    """Three tiny text files (12 word types): ``data.paths`` overrides and a small model, for builds without the
    Wikipedia dump."""
    text = "\n".join(f"the {w} sat on the mat and the {w} ran away" for w in ("cat", "dog", "fox", "owl") * 30)
    paths = []
    for name in ("train", "valid", "test"):
        path = tmp_path / f"{name}.txt"
        path.write_text(text)
        paths.append(str(path))
    return [
        f"data.paths={paths}",
        "data.max_train_tokens=null",
        "data.max_eval_tokens=null",
        "data.min_count=1",
        "model.emb_dim=8",
        "model.hidden_dim=8",
        "train.batch_size=4",
        "data.bptt=10",
        "train.progress=false",
    ]


def test_every_lm_recipe_is_shipped_and_loads():
    shipped = list_recipes()
    for name in LM_RECIPES:
        assert name in shipped and shipped[name], name
        recipe = load_recipe(name)
        assert recipe.name == name and recipe.task == "lm" and recipe.model.name == "lstm-lm"
    assert load_recipe("mf").task != "lm"
    assert load_recipe("lm-dropout").model.dropout.output == 0.4


# (objective, regularizers) -> built objective type, built regulariser types
SWAPS = [
    ("{name: standard}", "[]", None, []),
    ("{name: dropout-k, k: 4}", "[]", DropoutK, []),
    ("{name: standard}", "[{name: r-approx}]", None, [ExplicitDropoutRegularizer]),
    (
        "{name: standard}",
        "[{name: r-approx}, {name: xi-approx}]",
        None,
        [ExplicitDropoutRegularizer, ImplicitDropoutNoise],
    ),
    ("{name: dropout-k, k: 4}", "[{name: xi-approx}]", DropoutK, [ImplicitDropoutNoise]),
    ("{name: dropout-k, k: 4}", "[{name: two-mask-noise}]", DropoutK, [TwoMaskDropoutNoise]),
]


@pytest.mark.parametrize("objective, regularizers, objective_type, regularizer_types", SWAPS)
def test_one_line_swaps_the_technique(text_files, objective, regularizers, objective_type, regularizer_types):
    built = build_run(
        load_recipe("lm-dropout", text_files + [f"objective={objective}", f"regularizers={regularizers}"])
    )
    assert [type(r) for r in built.regularizers] == regularizer_types
    if objective_type is not None:
        assert isinstance(built.objective, objective_type) and built.objective.k == 4
    else:
        assert not isinstance(built.objective, DropoutK)
    analytic = "r-approx" in regularizers
    assert (built.model.output_dropout.q == 0.0) == analytic  # the analytic terms replace the model's dropout


def test_shipped_lm_recipes_build_their_techniques(text_files):
    expected = {
        "lm-none": (None, []),
        "lm-dropout-k": (DropoutK, []),
        "lm-r-approx": (None, [ExplicitDropoutRegularizer]),
        "lm-r-approx-xi": (None, [ExplicitDropoutRegularizer, ImplicitDropoutNoise]),
        "lm-dropout-k-xi": (DropoutK, [ImplicitDropoutNoise]),
        "lm-dropout-k-two-mask": (DropoutK, [TwoMaskDropoutNoise]),
    }
    for name, (objective_type, regularizer_types) in expected.items():
        built = build_run(load_recipe(name, text_files))
        assert [type(r) for r in built.regularizers] == regularizer_types, name
        assert isinstance(built.objective, DropoutK) == (objective_type is DropoutK), name
    forms = {
        name: build_run(load_recipe(name, text_files)).regularizers[0].form
        for name in ("lm-r-approx", "lm-r-identity", "lm-r-tilde")
    }
    assert forms == {"lm-r-approx": "hessian", "lm-r-identity": "identity", "lm-r-tilde": "loss_jacobian"}


def test_coefficients_follow_each_sites_dropout_probability(text_files):
    cfg = load_recipe("lm-r-approx-xi", text_files + ["model.dropout.output=0.5", "model.dropout.weight=0.0"])
    explicit, noise = build_run(cfg).regularizers
    assert explicit.coefficients["output"] == pytest.approx(1.0)
    assert explicit.coefficients["input"] == pytest.approx(0.4 / 0.6)
    assert explicit.coefficients["weight_hh"] == 0.0 and "hidden" not in explicit.coefficients  # one layer
    assert noise.coefficients["output"] == pytest.approx(1.0)
    fixed = build_run(load_recipe("lm-r-tilde", text_files + ["regularizers.0.lambda1=0.25"])).regularizers[0]
    assert fixed.coefficients.pop("embedding") == 0.0  # no word-level dropout in the recipe: not regularised
    assert set(fixed.coefficients.values()) == {0.25}


def test_dropout_k_scales_the_update_noise(text_files):
    cfg = load_recipe("lm-dropout-k-xi", text_files + ["model.dropout.output=0.5", "objective.k=4"])
    (noise,) = build_run(cfg).regularizers
    assert noise.coefficients["output"] == pytest.approx(dropout_k_noise_scale(4))  # sqrt(1 - 1/k) * 1.0


@pytest.mark.parametrize(
    "override, match",
    [
        ("model.dropout.output=1.0", r"outside \[0, 1\)"),
        ("objective={name: dropout-k, k: 0}", "k=0"),
        ("objective.name=dropout_x", "did you mean 'dropout-k'"),
        ("regularizers=[{name: r-approx, lambda1: -1}]", ">= 0"),
        ("regularizers=[{name: r-aprox}]", "did you mean 'r-approx'"),
        ("data.bptt=0", "bptt"),
        ("model.hiden_dim=4", "did you mean 'model.hidden_dim'"),
        ("data.batch_size=4", "unknown config key 'data.batch_size'"),  # it moved to train.batch_size
    ],
)
def test_bad_lm_config_values_are_config_errors(override, match):
    with pytest.raises(ConfigError, match=match):
        load_recipe("lm-dropout", [override])


def test_unknown_site_group_is_an_error(text_files):
    with pytest.raises(EmbregError, match="site groups"):
        build_run(load_recipe("lm-r-approx", text_files + ["regularizers.0.sites=[decoder]"]))


def test_two_mask_noise_needs_dropout_k(text_files):
    with pytest.raises(EmbregError, match="dropout-k"):
        build_run(load_recipe("lm-dropout", text_files + ["regularizers=[{name: two-mask-noise}]"]))


def test_sse_on_tokens_and_labels(text_files):
    built = build_run(
        load_recipe(
            "lm-dropout",
            text_files + ["index_transforms={token: {name: sse-se, p: 0.1}, label: {name: label-sse, p: 0.2}}"],
        )
    )
    token, label = built.context.transforms["token"], built.context.transforms["label"]
    vocab = len(built.prepared.vocab)
    assert isinstance(token, SSE) and (token.p, token.num_embeddings) == (0.1, vocab)
    assert isinstance(label, LabelSSE) and (label.p, label.num_classes) == (0.2, vocab)


QUICK = [
    "data.max_train_tokens=2400",
    "data.max_eval_tokens=1200",
    "data.max_vocab=400",
    "model.emb_dim=16",
    "model.hidden_dim=16",
    "train.batch_size=8",
    "data.bptt=12",
    "train.epochs=2",
    "train.progress=false",
    "train.threads=1",
]


@pytest.mark.integration
@pytest.mark.parametrize(
    "name, extra", [("lm-dropout", []), ("lm-r-approx-xi", []), ("lm-dropout-k-xi", ["objective.k=2"])]
)
def test_lm_recipes_train_on_a_slice_of_real_text(tmp_path, name, extra):
    result = run_single(load_recipe(name, QUICK + extra), tmp_path)
    m = result.metrics
    assert 10 < m["val_ppl"] < 400 and 10 < m["test_ppl"] < 400, m  # a uniform guess over 400 words is 400
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"] + 0.5
    for f in (
        "config.yaml",
        "corpus.json",
        "history.jsonl",
        "metrics.json",
        "best.safetensors",
        "last.safetensors",
        "report.md",
    ):
        assert (tmp_path / f).exists(), f
    corpus = json.loads((tmp_path / "corpus.json").read_text())
    assert corpus["train"]["tokens"] == 2400 and not set(corpus["articles"]["train"]) & set(corpus["articles"]["test"])


@pytest.mark.integration
def test_lm_cli_resume_matches_an_uninterrupted_run(tmp_path):
    sets = [x for s in QUICK if not s.startswith("train.epochs") for x in ("--set", s)]
    # on the CPU: CUDA's atomic-add kernels make a resumed run equal an uninterrupted one only up to rounding
    args = [
        "run",
        "lm-dropout",
        "--set",
        "regularizers=[{name: r-approx}, {name: xi-approx}]",
        "--set",
        "train.device=cpu",
    ]
    args += sets
    assert main(args + ["--out", str(tmp_path / "full"), "--set", "train.epochs=3"]) == 0
    assert main(args + ["--out", str(tmp_path / "part"), "--set", "train.epochs=2"]) == 0
    # a finished run is returned as it is by --resume with its own budget; a larger one extends it from its last
    # checkpoint
    finished = json.loads((tmp_path / "part" / "metrics.json").read_text())
    assert main(args + ["--out", str(tmp_path / "part"), "--set", "train.epochs=2", "--resume"]) == 0
    assert json.loads((tmp_path / "part" / "metrics.json").read_text()) == finished
    assert main(args + ["--out", str(tmp_path / "part"), "--set", "train.epochs=3", "--resume"]) == 0
    full = json.loads((tmp_path / "full" / "metrics.json").read_text())
    resumed = json.loads((tmp_path / "part" / "metrics.json").read_text())
    assert resumed["val_ppl"] == pytest.approx(full["val_ppl"], abs=0) and resumed["epochs_run"] == 3


def test_own_text_files_train_end_to_end(tmp_path, text_files):
    cfg = load_recipe("lm-dropout", text_files + ["train.epochs=2", "train.lr=0.01"])
    result = run_single(cfg, tmp_path / "run")
    assert result.metrics["val_ppl"] < 12  # 12 word types: a uniform guess would score 12
    assert json.loads((tmp_path / "run" / "corpus.json").read_text())["source"] == "text files"
