"""Mixed-dimension, NCF and CTR recipes: grammar checks, builds through build_run, unchanged uniform MF builds."""

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from embreg.embeddings import MixedDimensionEmbedding
from embreg.errors import ConfigError
from embreg.models import NCF, BiasedMF
from embreg.recipes import list_recipes, load_recipe
from embreg.recipes.run import build_run
from embreg.train.seeding import seed_everything

MD_RECIPES = ["md-mf", "md-ncf", "ncf", "ctr-adult", "md-ctr-adult", "ctr-ml100k", "md-ctr-ml100k", "ctr-synthetic"]


def _ratings_file(tmp_path: Path) -> str:
    g = np.random.default_rng(0)
    users, items = g.integers(0, 40, 3000), (g.zipf(1.5, 3000) % 60)
    lines = ["u,i,r"] + [f"{u},{i},{1 + (u + i) % 5}" for u, i in zip(users, items)]
    path = tmp_path / "r.csv"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _file_recipe(name: str, tmp_path: Path, *extra: str):
    return load_recipe(
        name,
        [
            f"data.path={_ratings_file(tmp_path)}",
            "data.user_col=u",
            "data.item_col=i",
            "data.rating_col=r",
            "data.duplicates=first",  # the drawn pairs repeat, with the same rating
            *extra,
        ],
    )


def test_new_recipes_ship_and_load_with_search_spaces():
    shipped = list_recipes()
    for name in MD_RECIPES:
        assert name in shipped and shipped[name], name
        cfg = load_recipe(name)
        assert cfg.name == name and cfg.search
    assert load_recipe("md-mf").embeddings.name == "md" and load_recipe("ctr-adult").embeddings.name == "uniform"
    assert load_recipe("ctr-adult").monitor == ("val_logloss", "min")
    assert "SYNTHETIC" in shipped["ctr-synthetic"]


@pytest.mark.parametrize(
    "override, match",
    [
        ("embeddings.alpha=1.5", r"alpha=1.5 is outside the valid range \[0, 1\]"),
        ("embeddings.budget=-10", "budget=-10"),
        ("embeddings.num_blocks=0", "num_blocks=0"),
        ("embedding.name=md", "did you mean 'embeddings'"),
        ("embeddings.kind=md", "unknown config key 'embeddings.kind'"),
        ("model={name: dlrm}", "model 'dlrm' does not serve task 'rating'; models for it: mf, ncf"),
    ],
)
def test_bad_embedding_settings_are_config_errors(override, match):
    with pytest.raises(ConfigError, match=match):
        load_recipe("md-mf", [override])


def test_ctr_needs_dlrm():
    with pytest.raises(ConfigError, match="model 'mf' does not serve task 'ctr'; models for it: dlrm"):
        load_recipe("ctr-adult", ["model={name: mf}"])


def test_uniform_mf_build_is_unchanged(tmp_path):
    cfg = _file_recipe("mf", tmp_path, "model.dim=8")
    built = build_run(cfg)
    data = built.prepared
    seed_everything(0)
    reference = BiasedMF.build(
        data.ratings.num_users,
        data.ratings.num_items,
        8,
        init_std=cfg.model.init_std,
        global_mean=float(data.part("train").ratings.mean()),
        l2=cfg.model.l2,
    )
    model = built.model
    assert type(model.user_embedding) is nn.Embedding and isinstance(model, BiasedMF)
    assert list(model.state_dict()) == list(reference.state_dict())
    for (name, a), (_, b) in zip(model.state_dict().items(), reference.state_dict().items()):
        assert torch.equal(a, b), name


def test_md_mf_from_budget_meets_it_and_blocks_by_training_frequency(tmp_path):
    cfg = _file_recipe("md-mf", tmp_path, "embeddings.budget=1000", "embeddings.num_blocks=4", "embeddings.alpha=0.4")
    built = build_run(cfg)
    data, model = built.prepared, built.model
    users, items = model.user_embedding, model.item_embedding
    assert isinstance(users, MixedDimensionEmbedding) and isinstance(items, MixedDimensionEmbedding)
    rows = sum(n * d for t in (users, items) for n, d in zip(t.block_rows, t.block_dims))
    assert abs(rows - 1000) <= 0.5 * (users.num_embeddings + items.num_embeddings)
    train_counts = np.bincount(data.part("train").items, minlength=data.ratings.num_items)
    most_popular = int(train_counts.argmax())
    assert int(items.index_map[most_popular]) == 0  # the most frequent training item opens the first block
    assert items.block_dims[0] == max(items.block_dims)


def test_md_mf_from_base_dim_and_alpha_zero_is_uniform(tmp_path):
    cfg = _file_recipe("md-mf", tmp_path, "model.dim=16", "embeddings.alpha=0.0", "embeddings.num_blocks=3")
    model = build_run(cfg).model
    assert model.item_embedding.block_dims == (16, 16, 16)
    assert all(block.projection is None for block in model.item_embedding.blocks)


def test_ncf_recipe_builds_ncf_and_refuses_l2(tmp_path):
    cfg = _file_recipe("md-ncf", tmp_path, "embeddings.num_blocks=2")
    model = build_run(cfg).model
    assert isinstance(model, NCF) and isinstance(model.item_embedding, MixedDimensionEmbedding)
    with pytest.raises(ConfigError, match="unknown config key 'model.l2'"):
        _file_recipe("ncf", tmp_path, "model.l2=0.1")


def test_md_budget_below_one_dim_per_row_is_a_config_error(tmp_path):
    cfg = _file_recipe("md-mf", tmp_path, "embeddings.budget=10", "embeddings.num_blocks=2")
    with pytest.raises(ConfigError, match=r"budget=10(\.0)? is outside the valid range"):
        build_run(cfg)


def test_md_tables_compose_with_sse_in_a_recipe(tmp_path):
    cfg = _file_recipe("md-mf", tmp_path, "embeddings.num_blocks=2", "index_transforms.item={name: sse-se, p: 0.5}")
    model = build_run(cfg).model
    batch = {"user": torch.tensor([0, 1]), "item": torch.tensor([0, 1]), "rating": torch.tensor([3.0, 4.0])}
    model.loss(batch, model(batch)).backward()
    assert isinstance(model.item_embedding, MixedDimensionEmbedding) and model.item_transform.p == 0.5
    assert isinstance(model.user_transform, nn.Identity)


@pytest.mark.parametrize(
    "recipe, extra",
    [
        ("mf", ("model.init_std=0.1",)),  # mf.yaml's init_std 0.01 scales init: normal only (else refused)
        ("md-mf", ("embeddings.num_blocks=2",)),
        ("md-ncf", ("embeddings.num_blocks=2",)),
    ],
)
def test_model_init_xavier_uniform_starts_every_table_matrix_in_its_bound(tmp_path, recipe, extra):
    cfg = _file_recipe(recipe, tmp_path, "model.init=xavier_uniform", *extra)
    model = build_run(cfg).model
    for table in (model.user_embedding, model.item_embedding):
        blocks = table.blocks if isinstance(table, MixedDimensionEmbedding) else []
        rows = [b.weight for b in blocks] or [table.weight]
        for weight in rows:  # rows of the whole table at their own width
            assert weight.abs().max() <= (6.0 / (table.num_embeddings + weight.shape[1])) ** 0.5
        for projection in (b.projection for b in blocks if b.projection is not None):
            assert projection.abs().max() <= (6.0 / sum(projection.shape)) ** 0.5


def test_model_init_normal_is_the_default_and_unknown_inits_are_config_errors():
    assert load_recipe("md-mf").model.init == "normal"
    with pytest.raises(ConfigError, match="model.init"):
        load_recipe("md-mf", ["model.init=kaiming"])


@pytest.mark.parametrize("kind", ["md", "uniform"])
def test_ctr_tables_take_model_init(kind):
    cfg = load_recipe(
        "ctr-synthetic", ["model.init=xavier_uniform", "data.max_rows=2000", f"embeddings={{name: {kind}}}"]
    )
    tables = build_run(cfg).model.embeddings
    assert len(tables) > 0
    for table in tables:
        assert isinstance(table, MixedDimensionEmbedding) == (kind == "md")
        weights = [b.weight for b in table.blocks] if kind == "md" else [table.weight]
        for weight in weights:
            assert weight.abs().max() <= (6.0 / (table.num_embeddings + weight.shape[1])) ** 0.5
