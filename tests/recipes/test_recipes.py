"""Recipe loading, the one grammar's strict sections, overrides and suggestions (no data needed)."""

import pytest

from embreg.config import to_dict
from embreg.errors import ConfigError
from embreg.recipes import list_recipes, load_recipe, recipe_from_mapping, recipe_path
from embreg.recipes.recipe import TransformSpec

PAPER_RECIPES = ["mf", "mf-dropout", "mf-sse-se", "mf-sse-graph", "bpr", "bpr-dropout", "bpr-sse-se", "bpr-sse-graph"]


def test_every_paper_recipe_is_shipped_and_loads():
    shipped = list_recipes()
    for name in PAPER_RECIPES:
        assert name in shipped and shipped[name], name
        cfg = load_recipe(name)
        assert cfg.name == name
        assert cfg.search, f"{name} has no tuning search space"


def test_variants_share_the_base_search_space():
    for family in ("mf", "bpr"):
        base = set(load_recipe(family).search)
        for suffix in ("-dropout", "-sse-se", "-sse-graph"):
            assert base <= set(load_recipe(family + suffix).search)


def test_sse_recipes_name_their_transforms_per_id_kind():
    graph = load_recipe("mf-sse-graph")
    assert set(graph.index_transforms) == {"user", "item"}
    user, item = graph.index_transforms["user"], graph.index_transforms["item"]
    assert isinstance(item, TransformSpec)
    assert (user.name, user.p) == ("sse-se", 0.005)
    assert (item.name, item.p, item.rho, item.graph) == ("sse-graph", 0.005, 200.0, "kg")
    se = load_recipe("mf-sse-se")
    assert {kind: spec.name for kind, spec in se.index_transforms.items()} == {"user": "sse-se", "item": "sse-se"}
    assert load_recipe("mf").index_transforms == {}
    # every search key of a shipped recipe names a value the recipe has
    for name in list_recipes():
        recipe = load_recipe(name)
        for key in recipe.search:
            load_recipe(name, [f"{key}={_value(recipe, key)}"])


def _value(recipe, key):
    node = to_dict(recipe)
    for part in key.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def test_override_changes_value_and_misspelt_key_suggests():
    cfg = load_recipe("mf", ["train.lr=0.01", "index_transforms.item={name: sse-se, p: 0.05}"])
    assert cfg.train.lr == 0.01 and cfg.index_transforms["item"].p == 0.05
    assert load_recipe("mf-sse-graph", ["index_transforms.item.rho=3"]).index_transforms["item"].rho == 3.0
    with pytest.raises(ConfigError, match="did you mean 'train.lr'"):
        load_recipe("mf", ["train.lrr=0.01"])


def test_unknown_recipe_suggests_closest():
    with pytest.raises(ConfigError, match="mf-sse-se"):
        load_recipe("mf-sse-see")
    with pytest.raises(ConfigError, match="does not exist"):
        recipe_path("missing.yaml")


@pytest.mark.parametrize(
    "recipe, override, match",
    [
        ("mf-sse-se", "index_transforms.item.p=1.5", r"index_transforms.item: p=1.5 is outside \[0, 1\]"),
        ("mf-sse-graph", "index_transforms.item.rho=0.5", "index_transforms.item: rho=0.5 must be >= 1"),
        ("mf", "model.dropout=1.0", r"model.dropout=1.0 is outside \[0, 1\)"),
        ("mf", "train.lr=0", r"train.lr=0 must be in \(0, 1000\]"),
        ("mf", "train.lr=1e38", r"train.lr=1e\+38 must be in \(0, 1000\]"),
        ("mf", "train.lr=1e3000", "'train.lr' must be a finite number, got '1e3000'"),
        ("mf", "train.lr=nan", "'train.lr' must be a finite number, got 'nan'"),
        ("mf", "train.lr=-inf", "'train.lr' must be a finite number, got '-inf'"),
        ("mf", "train.clip_norm=nan", "'train.clip_norm' must be a finite number, got 'nan'"),
        ("mf", "model.l2=nan", "'model.l2' must be a finite number, got 'nan'"),
        ("mf", "train.weight_decay=.nan", "'train.weight_decay' must be a finite number, got nan"),
        ("mf", "data.split=[0.5,0.5]", "must be three positive fractions"),
        ("mf", "model.name=bpr", "model 'bpr' does not serve task 'rating'; models for it: mf, ncf"),
        (
            "mf-sse-graph",
            "index_transforms.item.name=sse-graphs",
            "unknown index transform 'sse-graphs'; did you mean 'sse-graph'",
        ),
        ("mf", "index_transforms.itme={name: sse-se}", "unknown id kind; did you mean 'item'"),
        ("mf", "embeddings.name=mdd", "unknown embedding 'mdd'; did you mean 'md'"),
        ("mf", "objective.name=dropout-kk", "unknown objective 'dropout-kk'; did you mean 'dropout-k'"),
        ("mf", "train.optimizer=adamm", "did you mean 'adam'"),
    ],
)
def test_bad_values_are_config_errors(recipe, override, match):
    with pytest.raises(ConfigError, match=match):
        load_recipe(recipe, [override])


# -- unknown keys and names: each names the closest valid one, before anything trains -------------------------------


def test_misspelt_train_key_names_the_valid_one():
    with pytest.raises(ConfigError, match=r"unknown config key 'train.lrr'; did you mean 'train.lr'\?"):
        load_recipe("mf", ["train.lrr=1"])


def test_misspelt_regularizer_name_suggests_the_registered_one():
    with pytest.raises(ConfigError, match=r"regularizers\[0\].name: unknown regularizer 'r3ff'; did you mean 'r3f'\?"):
        load_recipe("ncf", ["regularizers=[{name: r3ff}]"])


def test_misspelt_regularizer_argument_suggests_the_valid_one():
    with pytest.raises(
        ConfigError,
        match=r"unknown config key 'regularizers\[0\].sigmaa'; did you mean "
        r"'regularizers\[0\].sigma'\?",
    ):
        load_recipe("ncf", ["regularizers=[{name: r3f, sigmaa: 1}]"])
    assert load_recipe("ncf", ["regularizers=[{name: r3f, sigma: 1}]"]).regularizers[0].sigma == 1.0


def test_misspelt_model_name_suggests_the_registered_one():
    with pytest.raises(ConfigError, match=r"model.name: unknown model 'ncff'; did you mean 'ncf'\?"):
        load_recipe("mf", ["model.name=ncff"])


def test_a_section_without_a_name_lists_the_registered_names():
    with pytest.raises(ConfigError, match=r"'regularizers\[0\]' needs a 'name' \(registered regularizers: .*r3f"):
        load_recipe("ncf", ["regularizers=[{sigma: 1}]"])


def test_index_transform_on_an_id_kind_the_task_lacks():
    with pytest.raises(
        ConfigError, match="index_transforms.token: task 'rating' has no 'token' ids; it has user, item"
    ):
        load_recipe("mf", ["index_transforms.token={name: sse-se, p: 0.1}"])
    with pytest.raises(ConfigError, match="task 'ctr' has no 'item' ids; it has field"):
        load_recipe("ctr-adult", ["index_transforms.item={name: sse-se}"])


def test_technique_needing_a_capability_the_model_lacks_names_it():
    with pytest.raises(
        ConfigError,
        match=r"regularizers\[0\]: regularizer 'lnsr' needs layer_stack, which model 'mf' "
        "does not provide",
    ):
        load_recipe("mf", ["regularizers=[{name: lnsr}]"])
    with pytest.raises(ConfigError, match="'r-approx' needs dropout_sites, which model 'ncf' does not provide"):
        load_recipe("ncf", ["regularizers=[{name: r-approx}]"])
    assert load_recipe("ncf", ["regularizers=[{name: lnsr}]"]).regularizers[0].name == "lnsr"


def test_label_transform_only_on_label_ids():
    with pytest.raises(ConfigError, match="index_transforms.item: 'label-sse' acts on label ids only"):
        load_recipe("mf", ["index_transforms.item={name: label-sse, p: 0.1}"])
    with pytest.raises(ConfigError, match="index_transforms.token: 'label-sse' acts on label ids only"):
        load_recipe("lm-dropout", ["index_transforms.token={name: label-sse, p: 0.1}"])
    assert (
        load_recipe("lm-dropout", ["index_transforms.label={name: label-sse, p: 0.1}"]).index_transforms["label"].p
        == 0.1
    )


def test_misspelt_top_level_key_suggests():
    with pytest.raises(ConfigError, match="unknown config key 'regularisers'; did you mean 'regularizers'"):
        load_recipe("mf", ["regularisers=[]"])


# -- files ------------------------------------------------------------------------------------------------------------


def test_recipe_file_path(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\ntask: rating\nmodel: {name: mf, dim: 8}\n")
    cfg = load_recipe(str(path))
    assert cfg.model.dim == 8 and cfg.name == "mine" and cfg.model.name == "mf"
    assert cfg.train.epochs == 100 and cfg.embeddings.name == "uniform" and cfg.objective.name == "standard"


def test_a_model_section_needs_its_name(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\ntask: rating\nmodel: {dim: 8}\n")
    with pytest.raises(ConfigError, match=r"config key 'model' needs a 'name' \(registered models: .*mf"):
        load_recipe(path)


def test_every_shipped_recipe_round_trips_through_plain_data():
    for name in list_recipes():
        recipe = load_recipe(name)
        again = recipe_from_mapping(to_dict(recipe))
        assert to_dict(again) == to_dict(recipe) and again == recipe, name
