"""Multi-task text classification (``data.task: multi``): loss weights take effect, a weight-0 head is the
single-task run bit for bit, per-head metrics, the best-epoch score, and bad settings refused."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from embreg.errors import ConfigError
from embreg.models.text_heads import MultiTaskHeads, Target
from embreg.recipes import load_recipe
from embreg.recipes.run import build_run
from tests.helpers.pretrained_stub import tiny_pretrained
from tests.helpers.threads import one_thread  # noqa: F401 (autouse)

TINY = [
    "data.train_size=24",
    "data.valid_size=16",
    "data.test_size=16",
    "data.max_length=16",
    "train.batch_size=8",
    "train.eval_batch_size=16",
    "train.epochs=2",
    "train.progress=false",
    "train.device=cpu",
]
MODELS = {
    "text-cnn": ["model={name: text-cnn, init_embeddings: random, embedding_dim: 8, num_filters: 4}"],
    "bilstm-attn": [
        "model={name: bilstm-attn, init_embeddings: random, embedding_dim: 8, hidden_dim: 4, attn_dim: 4, hops: 2, "
        "mlp_dim: 8}"
    ],
    "encoder-classifier": ["model={name: encoder-classifier, dropout: 0.1}"],
}
SINGLE = {"recommended": "binary", "rating": "rating"}


@pytest.fixture(scope="module")
def stub(tmp_path_factory: pytest.TempPathFactory):
    yield from tiny_pretrained(tmp_path_factory)


_PREPARED: dict[str, Any] = {}


def _fit(overrides: list[str]) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    recipe = load_recipe("ft-reviews-multitask", [*overrides, *TINY])
    key = f"{recipe.data.task}:{recipe.data.targets}"
    built = build_run(recipe, prepared=_PREPARED.get(key))
    _PREPARED.setdefault(key, built.prepared)
    result = built.trainer(None).fit()
    return result.metrics, {n: p.detach().clone() for n, p in built.model.named_parameters()}


def _single(target: str, model: list[str]) -> list[str]:
    return [f"data={{dataset: reviews, task: {SINGLE[target]}}}", *model]


def _multi(targets: list[str], weights: list[float], model: list[str]) -> list[str]:
    return [
        f"data={{dataset: reviews, task: multi, targets: [{', '.join(targets)}], loss_weights: {weights}}}",
        *model,
    ]


@pytest.mark.integration
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("targets", [["recommended", "rating"], ["rating", "recommended"]])
def test_a_head_of_weight_zero_leaves_the_single_task_run_bit_for_bit(model: str, targets: list[str], stub) -> None:
    single_metrics, single = _fit(_single(targets[0], MODELS[model]))
    multi_metrics, multi = _fit(_multi(targets, [1.0, 0.0], MODELS[model]))
    # the shared part and the first head are the single-task model's parameters, exactly
    renamed = {n.replace("head.heads.0.", "head."): p for n, p in multi.items() if not n.startswith("head.heads.1.")}
    assert renamed.keys() == single.keys()
    assert all(torch.equal(renamed[n], single[n]) for n in single), [
        n for n in single if not torch.equal(renamed[n], single[n])
    ]
    metric = "mcc" if targets[0] == "recommended" else "accuracy"
    assert multi_metrics["best_epoch"] == single_metrics["best_epoch"]
    assert multi_metrics[f"val_{metric}_{targets[0]}"] == single_metrics[f"val_{metric}"]
    assert multi_metrics["val_multitask_score"] == single_metrics[f"val_{metric}"]
    assert multi_metrics[f"test_accuracy_{targets[0]}"] == single_metrics["test_accuracy"]
    assert f"test_accuracy_{targets[1]}" in multi_metrics


@pytest.mark.integration
def test_each_heads_weight_takes_effect(stub) -> None:
    model = MODELS["text-cnn"]
    _, both = _fit(_multi(["recommended", "rating"], [1.0, 1.0], model))
    _, half = _fit(_multi(["recommended", "rating"], [1.0, 0.5], model))
    _, other = _fit(_multi(["recommended", "rating"], [0.5, 1.0], model))
    for a, b in ((both, half), (both, other), (half, other)):
        assert not torch.equal(a["convs.0.weight"], b["convs.0.weight"])
    zero_first = _multi(["recommended", "rating"], [0.0, 1.0], model)
    _, trained = _fit(zero_first)
    initial = build_run(
        load_recipe("ft-reviews-multitask", [*TINY, *zero_first]),
        prepared=_PREPARED.get("multi:['recommended', 'rating']"),
    ).model
    assert torch.equal(trained["head.heads.0.weight"], initial.head.heads[0].weight)  # weight 0: never trained
    assert not torch.equal(trained["head.heads.1.weight"], initial.head.heads[1].weight)


def test_the_loss_is_the_weighted_sum_of_the_heads_losses() -> None:
    torch.manual_seed(0)
    heads = MultiTaskHeads(6, [Target("a", 2, 0.5), Target("b", 3, 2.0)])
    features, labels = torch.randn(5, 6), torch.tensor([[0, 2], [1, 1], [1, 0], [0, 0], [1, 2]])
    logits = heads(features)
    a, b = heads.split(logits)
    ce = torch.nn.functional.cross_entropy
    torch.testing.assert_close(heads.loss(logits, labels), 0.5 * ce(a, labels[:, 0]) + 2.0 * ce(b, labels[:, 1]))
    heads.loss(logits, labels).backward()
    assert all(p.grad is not None for p in heads.parameters())
    zero = MultiTaskHeads(6, [Target("a", 2, 1.0), Target("b", 3, 0.0)])
    zero.loss(zero(features), labels).backward()
    assert zero.heads[1].weight.grad is None and zero.heads[0].weight.grad is not None


def test_metric_names_and_best_epoch_score_are_declared() -> None:
    recipe = load_recipe("ft-reviews-multitask")
    names = recipe.adapter.metric_names(recipe)
    for name in ("test_accuracy_rating", "test_macro_f1_rating", "test_mcc_recommended", "test_f1_recommended"):
        assert name in names
    assert "test_mcc" not in names
    assert recipe.monitor == ("val_multitask_score", "max")
    for model in ("text-cnn", "bilstm-attn"):
        assert load_recipe("ft-reviews-multitask", [f"model={{name: {model}}}"]).monitor[0] == "val_multitask_score"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data.loss_weights=[1.0, -0.5]"], r"-0.5 for target 'rating' must be a finite number >= 0"),
        (["data.loss_weights=[0, 0]"], r"are all 0: at least one target must count"),
        (["data.loss_weights=[1.0]"], r"must be a list of 2 numbers, one per target"),
        (["data.loss_weights=[1.0, .nan]"], r"must be a finite number"),
        (["data.loss_weights=[1.0, true]"], r"expects float, got bool"),
        (["data.targets=[recommended, stars]"], r"data.targets=\['recommended', 'stars'\] must be a list of"),
        (["data.targets=[rating, rating]", "data.loss_weights=null"], r"two or more distinct targets"),
        (["data.targets=[rating]", "data.loss_weights=null"], r"two or more distinct targets"),
        (["data.task=binary"], r"data.targets=.* is read by data.task='multi' only"),
        (["data.task=binary", "data.targets=null"], r"data.loss_weights=\[1.0, 1.0\] is read by data.task='multi'"),
        (["data.dataset=polarity"], r"polarity dataset has only the 'binary' task"),
    ],
)
def test_bad_multitask_settings_are_refused(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_recipe("ft-reviews-multitask", overrides)


@pytest.mark.parametrize("name", ["r3f", "smart"])
def test_regularisers_comparing_one_class_distribution_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match=rf"regularizers\[0\]: '{name}' compares one predicted class distribution"):
        load_recipe("ft-reviews-multitask", [f"regularizers=[{{name: {name}}}]"])
    assert load_recipe("ft-reviews-multitask", ["regularizers=[{name: lnsr}]"]).regularizers[0].name == "lnsr"


def test_a_file_dataset_cannot_be_multi_task(tmp_path) -> None:
    data = tmp_path / "texts.csv"
    data.write_text("text,label\n" + "".join(f"t{i},{i % 2}\n" for i in range(40)))
    with pytest.raises(ConfigError, match="data.task='multi' needs data.dataset='reviews'"):
        load_recipe("ft-reviews-multitask", [f"data.path={data}", "data.dataset=file"])
