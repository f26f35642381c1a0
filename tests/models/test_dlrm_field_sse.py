"""SSE on DLRM's categorical fields: ``index_transforms.field`` (one transform per field, each over its own field's
ids) or ``field:<name>`` (one field), through the recipe path; bag fields keep their padding."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest
import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.recipes import load_recipe
from embreg.recipes.run import build_run, run_single
from embreg.sse import SSE

QUICK = ["data.max_rows=2000", "train.epochs=1", "train.progress=false", "model.dim=4", "train.batch_size=256"]
ALL = "index_transforms={field: {name: sse-se, p: 0.5}}"


def _built(*sets: str):
    return build_run(load_recipe("ctr-ml100k", [*QUICK, *sets]))


def test_field_builds_one_transform_per_field_over_its_own_ids() -> None:
    built = _built(ALL)
    model, table = built.model, built.prepared.table
    singles, bags = list(model.field_transforms), list(model.bag_transforms)
    assert all(isinstance(t, SSE) for t in singles + bags)
    assert [t.num_embeddings for t in singles] == list(table.cardinalities)
    assert [t.num_embeddings for t in bags] == [table.bag_padding(g) for g in range(len(table.bag_names))]
    assert len({t.seed for t in singles + bags}) == len(singles + bags)  # independent streams
    assert sorted(built.context.transforms) == sorted(f"field:{n}" for n in (*table.field_names, *table.bag_names))


def test_a_named_field_gets_the_only_transform() -> None:
    built = _built("index_transforms={field:occupation: {name: sse-se, p: 0.5}}")
    model, table = built.model, built.prepared.table
    j = table.field_names.index("occupation")
    assert isinstance(model.field_transforms[j], SSE)
    assert model.field_transforms[j].num_embeddings == table.cardinalities[j]
    others = [t for i, t in enumerate(model.field_transforms) if i != j] + list(model.bag_transforms)
    assert all(isinstance(t, nn.Identity) for t in others)


def test_swaps_stay_in_each_field_and_leave_padding_in_training_only() -> None:
    built = _built(ALL)
    model, table = built.model, built.prepared.table
    batch = built.prepared.tensors("train")
    model.train()
    drawn = model.draw_index_transforms(batch)
    categorical = drawn["categorical"]
    assert bool((categorical != batch["categorical"]).any())
    for j, cardinality in enumerate(table.cardinalities):
        assert 0 <= int(categorical[:, j].min()) and int(categorical[:, j].max()) < cardinality
    pad = table.bag_padding(0)
    assert torch.equal(drawn["bags"] == pad, batch["bags"] == pad)  # padding stays, ids stay ids
    assert bool((drawn["bags"] != batch["bags"]).any())
    model.eval()
    eval_drawn = model.draw_index_transforms(batch)
    assert torch.equal(eval_drawn["categorical"], batch["categorical"]) and torch.equal(
        eval_drawn["bags"], batch["bags"]
    )


def test_forward_reads_the_swapped_ids() -> None:
    built = _built("index_transforms={field:item: {name: sse-se, p: 1.0}}")
    model = built.model.train()
    batch = {k: v[:64] for k, v in built.prepared.tensors("train").items()}
    clean = built.model.eval()(batch).predictions
    swapped = model.train()(batch).predictions
    assert not torch.equal(clean, swapped)


@pytest.mark.parametrize(
    "sets, match",
    [
        (["index_transforms={field: {name: sse-se}, field:item: {name: sse-se}}"], "would act twice"),
        (["index_transforms={'field:': {name: sse-se}}"], "name a field after 'field:'"),
        (["index_transforms={fields: {name: sse-se}}"], "did you mean 'field'"),
        (["index_transforms={field: {name: sse-graph}}"], "acts on user, item ids only"),
    ],
)
def test_bad_field_kinds_are_refused_when_the_recipe_loads(sets, match) -> None:
    with pytest.raises(ConfigError, match=match):
        load_recipe("ctr-ml100k", [*QUICK, *sets])


def test_field_ids_are_refused_on_other_tasks_and_unknown_fields_at_build() -> None:
    with pytest.raises(ConfigError, match="task 'rating' has no 'field' ids"):
        load_recipe("mf", ["index_transforms={field: {name: sse-se}}"])
    with pytest.raises(ConfigError, match=r"no field 'user_id'; did you mean 'field:user'\?"):
        _built("index_transforms={field:user_id: {name: sse-se}}")


def test_sse_on_every_field_trains(tmp_path) -> None:
    metrics = run_single(load_recipe("ctr-ml100k", [*QUICK, ALL]), tmp_path / "run").metrics
    assert np.isfinite(metrics["test_logloss"])


@pytest.mark.parametrize("name", ["embreg.id_kinds", "embreg.sse.base"])
def test_docstring_examples_run(name) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0, result


def test_field_sse_composes_with_mixed_dimension_fields() -> None:
    built = _built(ALL, "embeddings={name: md, alpha: 0.3}")
    model = built.model.train()
    assert all(isinstance(t, SSE) for t in model.field_transforms)
    batch = {k: v[:32] for k, v in built.prepared.tensors("train").items()}
    model.loss(batch, model(batch)).backward()
    assert all(p.grad is not None for p in model.embeddings[0].parameters())
